package activities

import (
	"github.com/durable-llm/durable-llm/policies/guard"

	"sync"
	"time"
)

// queues knows, per endpoint, the streamed attempts of this process that
// wait for their first token, and the latest start of a request there
// that got its first token within its first-token timeout. Safe for
// concurrent use.
//
// It answers one question (docs/how-it-works.md "The guard on one page"):
// could a hedge answer an overdue attempt sooner? Yes on the attempt's
// own endpoint when that endpoint gives requests sent after it their first
// token in time (it was passed over: lost, or left behind on a slow
// replica); yes on another endpoint unless an attempt of this process
// waits there past its own first-token timeout (that endpoint is as slow).
type queues struct {
	mu      sync.Mutex
	waiting map[string]map[*queued]struct{}
	// prompt: the latest start of a request given its first token within
	// its first-token timeout, by endpoint.
	prompt map[string]time.Time
	// recent: the streamed requests sent to each endpoint, in the order
	// they were sent (oldest first), for guard.AcceptsKeep, for accepts.
	recent map[string][]*queued
}

// queued is one attempt waiting for its first token.
type queued struct {
	since    time.Time
	ftt      time.Duration
	answered bool // it got its first token within ftt
}

func newQueues() *queues {
	return &queues{waiting: map[string]map[*queued]struct{}{}, prompt: map[string]time.Time{}, recent: map[string][]*queued{}}
}

// wait registers an attempt on endpoint that started at since under the
// first-token timeout ftt; done unregisters it (idempotent).
func (q *queues) wait(endpoint string, since time.Time, ftt time.Duration) (done func()) {
	w := &queued{since: since, ftt: ftt}
	q.mu.Lock()
	if q.waiting[endpoint] == nil {
		q.waiting[endpoint] = map[*queued]struct{}{}
	}
	q.waiting[endpoint][w] = struct{}{}
	r := q.recent[endpoint]
	for len(r) > 0 && since.Sub(r[0].since) > guard.AcceptsKeep {
		r = r[1:]
	}
	q.recent[endpoint] = append(r, w)
	q.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			delete(q.waiting[endpoint], w)
			q.mu.Unlock()
		})
	}
}

// firstToken records that a request to endpoint started at since got its
// first token (or, unstreamed, its whole reply) after ttft, under the
// first-token timeout ftt.
func (q *queues) firstToken(endpoint string, since time.Time, ttft, ftt time.Duration) {
	if ttft > ftt {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if since.After(q.prompt[endpoint]) {
		q.prompt[endpoint] = since
	}
	for _, w := range q.recent[endpoint] {
		if w.since.Equal(since) {
			w.answered = true
		}
	}
}

// accepts reports whether endpoint gave its first token in time to at
// least 1/guard.AcceptsK of this process's streamed requests sent there in the
// last window before now (a request still waiting counts as not accepted
// yet); with none sent in it, nothing says it loses them (as adaptive
// throttling rejects nothing without requests). A resend there is worth
// its retry only then: an endpoint that loses most of its requests loses
// most resends too, and the budget they spend is better kept for when it
// answers.
func (q *queues) accepts(endpoint string, now time.Time, window time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	sent, answered := 0, 0
	r := q.recent[endpoint]
	for i := len(r) - 1; i >= 0; i-- { // newest first: stop at the window's start
		w := r[i]
		if now.Sub(w.since) > window {
			break
		}
		if w.since.After(now) {
			continue
		}
		sent++
		if w.answered {
			answered++
		}
	}
	return guard.AcceptsK*answered >= sent
}

// sooner reports whether, at now, a hedge on endpoint e could answer
// sooner than an attempt on endpoint own that started at since and still
// waits for its first token, and says why.
func (q *queues) sooner(e, own string, since, now time.Time) (bool, string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.prompt[e].After(since) {
		if e == own {
			return true, "its endpoint answers requests sent after it in time"
		}
		return true, "that endpoint answers in time"
	}
	if e == own {
		return false, ""
	}
	for w := range q.waiting[e] {
		if now.Sub(w.since) > w.ftt {
			return false, ""
		}
	}
	return true, "another endpoint, none of whose requests is overdue"
}
