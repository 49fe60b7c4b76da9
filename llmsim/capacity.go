package llmsim

import (
	"math"
	"sync"
	"time"
)

// job is one request's simulated work on a model: generating tokens
// tokens, the first after first, each next one perToken later, all
// stretched by the load factor when the job gets its slot.
type job struct {
	first    time.Duration // time to first token before the load factor
	perToken time.Duration // inter-token latency before the load factor
	tokens   int           // tokens generated
	stream   bool          // ready at the first token (SSE), not at the end
	hold     time.Duration // extra slot time after the generation

	// Set when the job starts (before started closes).
	factor  float64       // the load factor's stretch
	ttft    time.Duration // first × factor
	itl     time.Duration // perToken × factor
	service time.Duration // ttft + tokens × itl: the generation time
	waited  time.Duration // time spent queued

	enqueued time.Time
	startAt  time.Time     // when the job got its slot
	started  chan struct{} // closed when the job got a slot
	ready    chan struct{} // closed when the first byte may be sent
	done     chan struct{} // closed when the slot is released
	cancel   chan struct{} // closed to give the slot back early

	state      int // jobQueued, jobRunning, jobDone
	cancelOnce sync.Once
}

const (
	jobQueued = iota
	jobRunning
	jobDone
)

// newJob returns the work of generating tokens tokens, the first after
// first, then one every perToken; stream makes the job ready at the first
// token instead of at the end.
func newJob(first, perToken time.Duration, tokens int, stream bool) *job {
	return &job{
		first: first, perToken: perToken, tokens: tokens, stream: stream,
		started: make(chan struct{}), ready: make(chan struct{}),
		done: make(chan struct{}), cancel: make(chan struct{}),
	}
}

// at returns the offset from the job's start at which generated token k
// (from 1) is ready; k = tokens+1 is the end of the generation.
func (j *job) at(k int) time.Duration {
	if k <= 1 {
		return j.ttft
	}
	return j.ttft + time.Duration(k-1)*j.itl
}

// pool is the capacity model of one model: slots served at once and a
// FIFO queue in front of them. Safe for concurrent use.
type pool struct {
	name   string
	closed <-chan struct{}
	// onGauge reports in-flight and queued after every change; onDone
	// reports finished work. Both are called with mu held.
	onGauge func(inFlight, queued int)
	onDone  func()

	mu         sync.Mutex
	slots      int // 0: unlimited
	queue      int // 0: unlimited, -1: none
	loadFactor float64
	busy       int
	waiting    []*job
}

// configure changes the limits; waiting jobs start if slots were added.
func (p *pool) configure(slots, queue int, loadFactor float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slots, p.queue, p.loadFactor = slots, queue, loadFactor
	p.dispatchLocked()
	p.onGauge(p.busy, len(p.waiting))
}

func (p *pool) free() bool { return p.slots == 0 || p.busy < p.slots }

// submit starts j, queues it, or refuses it (false) when the queue is full.
func (p *pool) submit(j *job) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	j.enqueued = time.Now()
	switch {
	case len(p.waiting) == 0 && p.free():
		p.startLocked(j)
	case p.queue < 0 || (p.queue > 0 && len(p.waiting) >= p.queue):
		return false
	default:
		p.waiting = append(p.waiting, j)
	}
	p.onGauge(p.busy, len(p.waiting))
	return true
}

func (p *pool) startLocked(j *job) {
	others := p.busy
	p.busy++
	j.state = jobRunning
	j.factor = 1
	if p.loadFactor > 0 && p.slots > 0 {
		j.factor = 1 + p.loadFactor*float64(others)/float64(p.slots)
	}
	j.ttft = time.Duration(float64(j.first) * j.factor)
	j.itl = time.Duration(float64(j.perToken) * j.factor)
	j.service = j.ttft + time.Duration(j.tokens)*j.itl
	j.startAt = time.Now()
	j.waited = j.startAt.Sub(j.enqueued)
	close(j.started)
	go p.run(j)
}

func (p *pool) dispatchLocked() {
	for len(p.waiting) > 0 && p.free() {
		j := p.waiting[0]
		p.waiting[0] = nil
		p.waiting = p.waiting[1:]
		p.startLocked(j)
	}
}

// run holds the slot for the generation time plus the hold time. A
// streamed job is ready at its first token, another one at the end.
//
// When nothing remains after the job is ready, the slot is released (and
// the completion recorded) before ready closes, so a client that got its
// answer sees consistent stats.
func (p *pool) run(j *job) {
	readyAt := j.service
	if j.stream {
		readyAt = j.ttft
	}
	rest := j.service - readyAt + j.hold
	finished := sleep(readyAt, j.cancel, p.closed)
	if finished && rest > 0 {
		close(j.ready)
		p.release(j, sleep(rest, j.cancel, p.closed))
		return
	}
	p.release(j, finished)
	if finished {
		close(j.ready)
	}
}

func (p *pool) release(j *job, finished bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy--
	j.state = jobDone
	if finished {
		p.onDone()
	}
	p.dispatchLocked()
	p.onGauge(p.busy, len(p.waiting))
	close(j.done)
}

// abandon gives up j: a queued job leaves the queue, a running one gives
// its slot back now.
func (p *pool) abandon(j *job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch j.state {
	case jobQueued:
		for i, w := range p.waiting {
			if w == j {
				p.waiting = append(p.waiting[:i], p.waiting[i+1:]...)
				break
			}
		}
		j.state = jobDone
		close(j.done)
		p.onGauge(p.busy, len(p.waiting))
	case jobRunning:
		j.cancelOnce.Do(func() { close(j.cancel) })
	}
}

// gauges returns in-flight and queued.
func (p *pool) gauges() (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy, len(p.waiting)
}

// sleep waits d; false when a stop channel closed first.
func sleep(d time.Duration, stop ...<-chan struct{}) bool {
	if d <= 0 {
		for _, s := range stop {
			select {
			case <-s:
				return false
			default:
			}
		}
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	var a, b <-chan struct{}
	if len(stop) > 0 {
		a = stop[0]
	}
	if len(stop) > 1 {
		b = stop[1]
	}
	select {
	case <-t.C:
		return true
	case <-a:
		return false
	case <-b:
		return false
	}
}

// tokenBucket is a request rate limiter on the simulator's clock. Not safe
// for concurrent use (the Sim's lock guards it).
type tokenBucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(rate float64, burst int, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// state is the bucket at now as rate-limit headers tell it: the limit per
// minute, the whole requests left and the time until it is full again.
func (b *tokenBucket) state(now time.Time) *limitState {
	tokens := b.tokens
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		tokens = min(b.burst, tokens+dt*b.rate)
	}
	return &limitState{
		perMinute: int(math.Round(b.rate * 60)),
		remaining: int(math.Floor(tokens)),
		reset:     time.Duration((b.burst - tokens) / b.rate * float64(time.Second)),
	}
}

// take takes one token at now; when none is left it returns false and the
// time until the next token.
func (b *tokenBucket) take(now time.Time) (bool, time.Duration) {
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(b.burst, b.tokens+dt*b.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}
