package activities

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// stallEvidence is how many other attempts on an endpoint must be waiting
// for their first token, none of them given one, before this process
// judges the endpoint stalled: one slow request says little about the
// endpoint, a queue of them says it is slow for everyone.
const stallEvidence = 3

// stallRecheck is how often an attempt kept open on a stalled endpoint
// asks again: once the endpoint gives first tokens to others, a request
// still waiting is cut (it may be lost, as in a hang) and the call moves on.
const stallRecheck = 250 * time.Millisecond

// cutSettle is how long a cut of this process counts against the retry
// budget unless the call's next attempt is prepared here first: the
// retry is paid when it is prepared, after the workflow's step and its
// backoff (full jitter, under a second for the first retries), and
// attempts cut in between all saw the same retry left (one of the
// slowdown's calls went to the FAQ that way, its request about to
// answer). A call whose next step is prepared by another worker, or is
// not a request at all, is forgotten after cutSettle.
const cutSettle = time.Second

// stalls knows, per endpoint, the streamed attempts of this process
// waiting for their first token and the latest start of a request there
// that got one.
//
// When the first-token timeout passes on an endpoint where no request
// that started well after this attempt has had its first token, while
// others wait there too, the endpoint is slow for everyone: cutting
// the attempt buys nothing, since the retry joins the back of the same
// queue (the models of one provider share it), pays from the retry budget
// and leaves the caller less of the deadline. The attempt keeps its place
// instead, for at most one more first-token timeout. Once the endpoint
// serves a request that started more than half of this attempt's wait
// after it, the attempt has been passed over (lost, as in a hang) and is
// cut (docs/how-it-works.md "Failure classes", read_timeout). A request
// started about when this one did and served a moment sooner says nothing:
// a slow server's latencies vary, and the one overtaking is as slow.
type stalls struct {
	mu      sync.Mutex
	waiting map[string]map[*stallWait]struct{}
	served  map[string]time.Time
	// byModel: the latest start of a request that got its first token,
	// by model.
	byModel map[string]time.Time
	// cuts: the waiting attempts this process cut within the last
	// cutSettle whose calls have not prepared their next attempt here
	// since, oldest first (their retries may not be paid yet).
	cuts []cut
}

type cut struct {
	at   time.Time
	call string
}

type stallWait struct {
	// call: the run of the call's workflow (its cut is paid when the
	// call prepares its next attempt).
	call            string
	endpoint, model string
	since           time.Time
	// passed: the wait ended because the endpoint passed this attempt
	// over; the attempt was cut as lost, and its retry is not judged by
	// retries that were lost the same way (the class breaker). byModel:
	// its own model served the later request, so the model works and the
	// lost request says nothing of its health (its breaker does not
	// count it).
	passed, byModel atomic.Bool
	// kept: a cut could only have led to the fallback when the attempt
	// was overdue, so it waits within its deadline until it is passed
	// over (Activities.patience).
	kept atomic.Bool
	// cut: counted among stalls.cuts (guarded by stalls.mu).
	cut bool
	// queued: the endpoints where this attempt has been seen waiting
	// among stallEvidence others. The queue drains as it is served, so
	// the count is the evidence once; from then on, only being passed
	// over ends the wait.
	queued map[string]bool
}

func newStalls() *stalls {
	return &stalls{waiting: map[string]map[*stallWait]struct{}{}, served: map[string]time.Time{}, byModel: map[string]time.Time{}}
}

// wait registers an attempt of call (its workflow run) and model on
// endpoint that started at since and waits for its first token; done
// unregisters it (idempotent).
func (s *stalls) wait(call, endpoint, model string, since time.Time) (w *stallWait, done func()) {
	w = &stallWait{call: call, endpoint: endpoint, model: model, since: since, queued: map[string]bool{}}
	s.mu.Lock()
	if s.waiting[endpoint] == nil {
		s.waiting[endpoint] = map[*stallWait]struct{}{}
	}
	s.waiting[endpoint][w] = struct{}{}
	s.mu.Unlock()
	var once sync.Once
	return w, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.waiting[endpoint], w)
			s.mu.Unlock()
		})
	}
}

// firstToken records that a request of model to endpoint started at since
// got its first token (or, unstreamed, its whole reply).
func (s *stalls) firstToken(endpoint, model string, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served[endpoint] = later(s.served[endpoint], since)
	s.byModel[model] = later(s.byModel[model], since)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// passedOver reports whether, at now, endpoint has served a request that
// started more than half of w's wait after w.
func (s *stalls) passedOver(endpoint string, w *stallWait, now time.Time) bool {
	return overtook(s.served[endpoint], w, now)
}

// overtook: a request started at t (zero: none) and served passed w over.
func overtook(t time.Time, w *stallWait, now time.Time) bool {
	return !t.IsZero() && t.Sub(w.since) > now.Sub(w.since)/2
}

// lost reports whether, at now, the endpoint w waits on has passed it
// over (its request is lost, as in a hang, or left behind on a slow
// replica while new requests are served), and whether to cut it: only
// when a retry is left for it (retryLeft), counting the attempts waiting
// there that have been passed over and started before it. A cut whose
// retry the budget refuses ends in the fallback, while the request kept
// may still answer (after a slowdown, requests sent in it are answered
// late). It marks w passed (and byModel when w's own model served the
// later one) when it is to be cut.
func (s *stalls) lost(w *stallWait, now time.Time, retries int) (lost, cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	served := s.served[w.endpoint]
	if !overtook(served, w, now) {
		return false, false
	}
	if !s.retryLeft(w, now, retries, func(o *stallWait) bool { return overtook(served, o, now) }) {
		return true, false
	}
	w.passed.Store(true)
	w.byModel.Store(overtook(s.byModel[w.model], w, now))
	return true, true
}

// overdue reports whether w, whose first token is overdue and whose
// endpoint has not passed it over, is to be cut at now: only when a retry
// is left for it (retryLeft), counting the attempts waiting on its
// endpoint that started before it and are not kept, since they are cut
// first.
func (s *stalls) overdue(w *stallWait, now time.Time, retries int) (cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retryLeft(w, now, retries, func(o *stallWait) bool { return !o.kept.Load() })
}

// retryLeft reports whether, of retries left in the budgets at now, one
// is left for w after the cuts of the last cutSettle (not yet paid) and
// the attempts waiting on w's endpoint that started before it and, by
// ahead, are cut before it; if so, w's cut is counted. s.mu is held.
func (s *stalls) retryLeft(w *stallWait, now time.Time, retries int, ahead func(*stallWait) bool) bool {
	s.cuts = slices.DeleteFunc(s.cuts, func(c cut) bool { return now.Sub(c.at) >= cutSettle })
	taken := len(s.cuts)
	for o := range s.waiting[w.endpoint] {
		if o != w && !o.cut && o.since.Before(w.since) && ahead(o) {
			taken++
		}
	}
	if taken >= retries {
		return false
	}
	s.cuts = append(s.cuts, cut{at: now, call: w.call})
	w.cut = true
	return true
}

// prepared: call (a workflow run) is preparing its next attempt, so the
// budget now shows the retry its cut took, or refuses it.
func (s *stalls) prepared(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cuts = slices.DeleteFunc(s.cuts, func(c cut) bool { return c.call == call })
}

// stalled reports whether, at now, endpoint has not passed w over (served
// a request that started more than half of w's wait after w) and w has
// been seen there among at least stallEvidence other waiting attempts.
func (s *stalls) stalled(endpoint string, w *stallWait, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.passedOver(endpoint, w, now) {
		return false
	}
	if w.queued[endpoint] {
		return true
	}
	others := 0
	for o := range s.waiting[endpoint] {
		if o != w {
			others++
		}
	}
	w.queued[endpoint] = others >= stallEvidence
	return w.queued[endpoint]
}

// everyStalled reports whether each of endpoints is stalled for w: the
// one w waits on and any other a cut could move the call to. An endpoint
// with nobody waiting there is not: a cut may go to it.
func (s *stalls) everyStalled(w *stallWait, endpoints []string, now time.Time) bool {
	for _, e := range endpoints {
		if !s.stalled(e, w, now) {
			return false
		}
	}
	return len(endpoints) > 0
}
