package activities

import (
	"github.com/durable-llm/durable-llm/policies/guard"

	"sync"
	"time"
)

// queues knows, per endpoint, the streamed attempts of this process that
// wait for their first token, the latest start of a request there that
// got its first token within its first-token timeout, and the recent
// requests and how many of them did. Safe for concurrent use. It only
// counts: where an overdue attempt may be raced is rule overdue's
// (guard.RaceTo, docs/how-it-works.md "The guard on one page").
type queues struct {
	mu      sync.Mutex
	waiting map[string]map[*queued]struct{}
	// prompt: the latest start of a request given its first token within
	// its first-token timeout, by endpoint.
	prompt map[string]time.Time
	// recent: the streamed requests sent to each endpoint, in the order
	// they were sent (oldest first), for guard.AcceptsKeep, for accepted.
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

// accepted counts this process's streamed requests sent to endpoint in the
// last window before now, and those given their first token in time (a
// request still waiting counts as not accepted yet): the share rule
// overdue reads (guard.RaceTo).
func (q *queues) accepted(endpoint string, now time.Time, window time.Duration) (sent, answered int) {
	q.mu.Lock()
	defer q.mu.Unlock()
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
	return sent, answered
}

// since reports whether endpoint e gave a first token in time to a
// request sent after sent, and whether a request open there is past its
// first-token time at now.
func (q *queues) since(e string, sent, now time.Time) (answered, overdue bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for w := range q.waiting[e] {
		if now.Sub(w.since) > w.ftt {
			overdue = true
			break
		}
	}
	return q.prompt[e].After(sent), overdue
}
