package guard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// TestEndpointToldCountsEachRequestOnce: each class tells the endpoint's
// ejection what the page says, once, by how the request ended.
func TestEndpointToldCountsEachRequestOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Outcome
		want Told
	}{
		{"an answer", Outcome{}, Told{Signal: Answered, Tell: true}},
		{"an error the server worked out answers", Outcome{Class: failure.InvalidRequest}, Told{Signal: Answered, Tell: true}},
		{"nothing sent tells nothing", Outcome{Class: failure.InvalidRequest, NotSent: true}, Told{}},
		{"503 busy", Outcome{Class: failure.QueueFull}, Told{Signal: Busy, Tell: true}},
		{"429", Outcome{Class: failure.RateLimited}, Told{Signal: Busy, Tell: true}},
		{"a refused connection", Outcome{Class: failure.Connect}, Told{Signal: Unreachable, Tell: true}},
		{"a 5xx", Outcome{Class: failure.ServerError}, Told{Signal: ServerFailed, Tell: true}},
		{"a timeout before the first token", Outcome{Class: failure.Timeout}, Told{Signal: ServerFailed, Tell: true}},
		{"the attempt's own deadline after the first token", Outcome{Class: failure.Timeout, Started: true}, Told{}},
		{"a stream the connection cut", Outcome{Class: failure.StreamBroken, Cut: true}, Told{Signal: Cut, Tell: true}},
		{"an idle stream the worker ended", Outcome{Class: failure.StreamBroken}, Told{}},
		{"no first token, the prompt fitting: silent", Outcome{Class: failure.ReadTimeout, PromptFits: true}, Told{Overdue: true}},
		{"no first token for a prompt too large", Outcome{Class: failure.ReadTimeout}, Told{}},
		{"an error object", Outcome{Class: failure.BodyError}, Told{}},
		{"an open breaker", Outcome{Class: failure.BreakerOpen}, Told{}},
	} {
		if got := EndpointTold(c.o); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestModelLearnsBackpressureAndBlame: a 429 holds for its Retry-After
// (capped), else rate_limit.hold, and a refusal counts against the
// breaker only past breaker_after; a refused pooled key and a request too
// large to answer in time do not count; without rule backpressure a
// refusal holds nothing and counts at once.
func TestModelLearnsBackpressureAndBlame(t *testing.T) {
	p := Backpressure{Hold: time.Second, RetryAfterCap: 10 * time.Second, BreakerAfter: 30 * time.Second}
	for _, c := range []struct {
		name     string
		o        Outcome
		refusing time.Duration
		p        Backpressure
		want     Learned
	}{
		{"an answer counts", Outcome{}, 0, p, Learned{TellBreaker: true}},
		{"a 5xx counts", Outcome{Class: failure.ServerError}, 0, p, Learned{TellBreaker: true}},
		{"a 429 without Retry-After", Outcome{Class: failure.RateLimited}, 0, p, Learned{Hold: time.Second}},
		{"a 429 with Retry-After", Outcome{Class: failure.RateLimited, RetryAfter: 3 * time.Second, HasRetryAfter: true}, 0, p, Learned{Hold: 3 * time.Second}},
		{"a 429 with a long Retry-After: capped", Outcome{Class: failure.RateLimited, RetryAfter: time.Hour, HasRetryAfter: true}, 0, p, Learned{Hold: 10 * time.Second}},
		{"a 429 past breaker_after counts", Outcome{Class: failure.RateLimited}, 31 * time.Second, p, Learned{Hold: time.Second, TellBreaker: true}},
		{"503 busy holds nothing, counts nothing", Outcome{Class: failure.QueueFull}, 0, p, Learned{}},
		{"without backpressure a 429 counts at once",
			Outcome{Class: failure.RateLimited}, 0, Backpressure{Hold: time.Second, Without: RuleSet([]RuleName{RuleBackpressure})}, Learned{TellBreaker: true}},
		{"a refused key of a pool", Outcome{Class: failure.Auth, Pooled: true}, 0, p, Learned{}},
		{"a refused key alone counts", Outcome{Class: failure.Auth}, 0, p, Learned{TellBreaker: true}},
		{"a timeout of a prompt over half the window", Outcome{Class: failure.Timeout, PromptTokens: 5000, Window: 8000}, 0, p, Learned{}},
		{"a timeout asking over a quarter of the window", Outcome{Class: failure.ReadTimeout, MaxTokens: 3000, Window: 8000}, 0, p, Learned{}},
		{"a timeout of a small request counts", Outcome{Class: failure.Timeout, PromptTokens: 100, Window: 8000}, 0, p, Learned{TellBreaker: true}},
	} {
		if got := ModelLearns(c.o, c.refusing, c.p); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestWaitAfterWaitsForTrialsAndTheBudget: after a failed attempt with no
// model to switch to, the call waits for the rungs behind open breakers,
// and for those on a spent budget only when the budget refused its step,
// while MinWait is left.
func TestWaitAfterWaitsForTrialsAndTheBudget(t *testing.T) {
	open := WaitRung{Model: "big", Able: true, Open: true}
	spent := WaitRung{Model: "mid", Able: true, Spent: true}
	tried := WaitRung{Model: "old", Able: true, Spent: true, Tried: true}
	unable := WaitRung{Model: "text-only", Open: true, Spent: true}
	both := WaitRung{Model: "both", Able: true, Open: true, Spent: true, Tried: true}
	free := WaitRung{Model: "free", Able: true}
	long := time.Minute
	cases := []struct {
		name          string
		rungs         []WaitRung
		refused       bool
		left, canWait time.Duration
		want          WaitFor
		ok            bool
		decision      string
	}{
		{"an open breaker is waited for", []WaitRung{open, free}, false, long, long,
			WaitFor{On: []string{"big"}, Open: []string{"big"}}, true, "wait_for_trials"},
		{"a spent budget only when it refused the step", []WaitRung{spent}, false, long, long, WaitFor{}, false, ""},
		{"a spent budget that refused the step", []WaitRung{spent}, true, long, long,
			WaitFor{On: []string{"mid"}, Spent: []string{"mid"}}, true, "wait_for_budget"},
		{"not a rung given up on", []WaitRung{tried}, true, long, long, WaitFor{}, false, ""},
		{"not a rung that lacks what the request needs", []WaitRung{unable}, true, long, long, WaitFor{}, false, ""},
		{"an open breaker counts before a spent budget, tried or not", []WaitRung{spent, both}, true, long, long,
			WaitFor{On: []string{"mid", "both"}, Open: []string{"both"}, Spent: []string{"mid"}}, true, "wait_for_trials"},
		{"no wait under MinWait left in call.max_wait", []WaitRung{open}, false, MinWait - time.Millisecond, long, WaitFor{}, false, ""},
		{"no wait under MinWait before the deadline", []WaitRung{open}, false, long, MinWait - time.Millisecond, WaitFor{}, false, ""},
		{"MinWait is enough", []WaitRung{open}, false, MinWait, MinWait,
			WaitFor{On: []string{"big"}, Open: []string{"big"}}, true, "wait_for_trials"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, ok := WaitAfter(c.rungs, c.refused, c.left, c.canWait)
			require.Equal(t, c.ok, ok)
			require.Equal(t, c.want, w)
			if ok {
				require.Equal(t, c.decision, w.Decision())
			}
		})
	}
}
