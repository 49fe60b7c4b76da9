package guard

import (
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// Outcome is how one attempt ended, as the rules after an outcome read it.
type Outcome struct {
	Class failure.Class
	// Cut: a stream the connection cut or that ended without a
	// finish_reason (classify.Verdict.Cut).
	Cut bool
	// Started: a first token came.
	Started bool
	// NotSent: the attempt ended before its request was sent.
	NotSent bool
	// PromptFits: the prompt fitted the model's window (a request that
	// did not may be slow for its own sake).
	PromptFits bool
	// Pooled: the model has a pool of keys (a refused key is parked, not
	// the model's breaker tripped).
	Pooled bool
	// PromptTokens and MaxTokens are the request's, Window the model's
	// context window (0: unknown).
	PromptTokens, MaxTokens, Window int
	// RetryAfter is the refusal's own, when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// Backpressure is what rule backpressure reads of the policy.
type Backpressure struct {
	// Hold is rate_limit.hold, RetryAfterCap backoff.retry_after_cap,
	// BreakerAfter rate_limit.breaker_after.
	Hold, RetryAfterCap, BreakerAfter time.Duration
	Without                           map[RuleName]bool
}

// Told is what an outcome tells its endpoint's ejection (rule outlier):
// a Signal to record (Tell), that the endpoint was silent (Overdue), or
// nothing.
type Told struct {
	Signal  Signal
	Tell    bool
	Overdue bool
}

// EndpointTold is rule outlier after an outcome: each request counts once,
// by how it ended. A request a server worked out answers, whatever its
// class; a refusal, a refused connection, a 5xx, a timeout before the
// first token and a stream the connection cut count towards an ejection;
// no first token by the attempt's end (its prompt fitting) is a silent
// endpoint. A stream the worker itself ended (its deadline after the
// first token, idle_timeout), an error object, a malformed chunk, and
// the classes no request made tell nothing.
func EndpointTold(o Outcome) Told {
	switch o.Class {
	case failure.QueueFull, failure.RateLimited:
		return Told{Signal: Busy, Tell: true}
	case failure.Connect:
		return Told{Signal: Unreachable, Tell: true}
	case failure.ServerError:
		return Told{Signal: ServerFailed, Tell: true}
	case failure.Timeout:
		if o.Started {
			return Told{}
		}
		return Told{Signal: ServerFailed, Tell: true}
	case failure.StreamBroken:
		if !o.Cut {
			return Told{}
		}
		return Told{Signal: Cut, Tell: true}
	case failure.ReadTimeout:
		return Told{Overdue: !o.Started && o.PromptFits}
	case failure.BodyError, failure.WorkerLost, failure.BreakerOpen, failure.ServiceUnavailable:
		return Told{}
	}
	if o.NotSent {
		return Told{}
	}
	return Told{Signal: Answered, Tell: true}
}

// Learned is what the model learns of an outcome: a rate-limit hold on its
// scope (rule backpressure), and whether its breaker is told (it counts
// only the classes of upstream health, failure.Class.CountsForBreaker).
type Learned struct {
	Hold        time.Duration
	TellBreaker bool
}

// ModelLearns is rules backpressure and blame after an outcome, the
// endpoint refusing for refusing without an answer. A 429 holds the
// model's scope for its Retry-After (capped), else rate_limit.hold; a
// refusal (429, queue_full) is told the breaker only once the
// endpoint has refused for rate_limit.breaker_after; a refused key of a
// pool is parked, not counted; a timeout of a request too large to
// answer in time blames the request, not the model.
func ModelLearns(o Outcome, refusing time.Duration, p Backpressure) Learned {
	refusal := o.Class == failure.RateLimited || o.Class == failure.QueueFull
	var l Learned
	if refusal && !p.Without[RuleBackpressure] {
		if o.Class == failure.RateLimited {
			l.Hold = p.Hold
			if o.HasRetryAfter && o.RetryAfter > 0 {
				l.Hold = min(o.RetryAfter, p.RetryAfterCap)
			}
		}
		if refusing < p.BreakerAfter {
			return l
		}
	}
	l.TellBreaker = !(o.Pooled && o.Class == failure.Auth) && !Blames(o)
	return l
}

// Blames reports whether a failure says more about the request than
// about the model (rule blame): a timeout of an attempt whose prompt took
// more than half of the model's context window (a long prefill), or that
// asked for more than a quarter of it as max_tokens (a long generation).
func Blames(o Outcome) bool {
	switch o.Class {
	case failure.Timeout, failure.ReadTimeout:
		return o.Window > 0 && (o.PromptTokens*2 > o.Window || o.MaxTokens*4 > o.Window)
	}
	return false
}

// WaitRung is what rule wait reads of one rung after a failed attempt
// left the call no model to switch to.
type WaitRung struct {
	Model string
	// Able: it has what the request needs. Open: its breaker is open.
	// Spent: its endpoint's retry budget is spent. Tried: the call has
	// given up on it.
	Able, Open, Spent, Tried bool
}

// WaitFor is what a call waits for after a failed attempt (WaitAfter):
// On, the rungs in ladder order; Open, those behind open breakers; Spent,
// those on spent budgets.
type WaitFor struct{ On, Open, Spent []string }

// Decision names the wait in the call's path: wait_for_trials while a
// breaker's trial may heal a rung, else wait_for_budget.
func (w WaitFor) Decision() string {
	if len(w.Open) > 0 {
		return "wait_for_trials"
	}
	return "wait_for_budget"
}

// WaitAfter is rule wait after a failed attempt with no model left to
// switch to: the rungs the call waits for instead of the fallback — those
// behind open breakers (their trials may heal them) and, when the budget
// refused the step the attempt's class asked for (budgetRefused), those
// not given up on whose endpoint's budget is spent (the traffic earns it
// a retry). Nothing (ok false) when there is no such rung, or the call may
// not wait MinWait more (waitLeft under call.max_wait, canWait before its
// deadline less the fallback's reserve).
func WaitAfter(rungs []WaitRung, budgetRefused bool, waitLeft, canWait time.Duration) (w WaitFor, ok bool) {
	if min(waitLeft, canWait) < MinWait {
		return WaitFor{}, false
	}
	for _, r := range rungs {
		switch {
		case !r.Able:
			continue
		case r.Open:
			w.Open = append(w.Open, r.Model)
		case budgetRefused && r.Spent && !r.Tried:
			w.Spent = append(w.Spent, r.Model)
		default:
			continue
		}
		w.On = append(w.On, r.Model)
	}
	return w, len(w.On) > 0
}
