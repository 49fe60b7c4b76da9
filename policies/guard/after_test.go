package guard

import (
	"testing"
	"time"

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
