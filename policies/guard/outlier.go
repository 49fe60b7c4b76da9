package guard

import (
	"sync"
	"time"
)

// Signal is what one request told of its endpoint's health.
type Signal int

const (
	// Answered: a reply, or any answer the server worked out (an error
	// about the request): it answers. A 429 is Busy.
	Answered Signal = iota
	// Started: a first token. The endpoint is not silent, but a stream
	// that started may still be cut: it ends a Silent ejection only.
	Started
	// Busy: the server refused the request as full (503 busy, 529
	// overloaded, queue_full): it says it cannot take work now.
	Busy
	// Unreachable: the connection was refused or reset before the
	// request was sent.
	Unreachable
	// ServerFailed: a 5xx that is not a busy refusal, or a timeout
	// before the first token.
	ServerFailed
	// Cut: a stream cut after it started. A failure as ServerFailed is,
	// but not a fast one: it leaves a Silent ejection Silent.
	Cut
)

// Sickness says how an ejected endpoint shows that it is not answering.
type Sickness int

const (
	// Healthy: not ejected.
	Healthy Sickness = iota
	// Refusing: it fails requests it does not hang on (busy,
	// unreachable, 5xx, streams cut): a call with no other rung waits for
	// its probe, sending nothing until its last chance.
	Refusing
	// Silent: a request is past its first-token timeout and the endpoint
	// has answered nothing since that request started. A call with no
	// other rung waits for the probe while it keeps the request's
	// first-token time, then sends (a plain client would; it may answer
	// late).
	Silent
)

func (s Sickness) String() string {
	switch s {
	case Refusing:
		return "refusing"
	case Silent:
		return "silent"
	}
	return "healthy"
}

// Admission is the outlier rule's answer for one request to an endpoint.
type Admission int

const (
	// Send: the endpoint is not ejected.
	Send Admission = iota
	// SendProbe: the endpoint is ejected and its ejection has passed:
	// this request is its probe, and no other goes until the probe's
	// outcome (or its first-token timeout).
	SendProbe
	// Eject: the endpoint is ejected; go to another rung, else wait.
	Eject
)

// OutlierRefusals is how many refusals in a row, with no answer between,
// eject an endpoint (Envoy's consecutive_5xx, made small because a call
// here has seconds, not minutes, to find a server that answers).
const OutlierRefusals = 3

// OutlierMaxEjection caps one ejection period.
const OutlierMaxEjection = 30 * time.Second

// Outliers is outlier ejection per endpoint, one process's view (Envoy's
// outlier detection; docs/how-it-works.md "The guard on one page"). An
// endpoint that shows it is not answering is ejected: OutlierRefusals
// refusals in a row (busy, unreachable, 5xx, a stream cut), or a request
// past its first-token timeout while the endpoint has answered nothing
// since that request started. While it is ejected, new requests go to a
// rung on an endpoint that answers; a call with no such rung waits for the
// probe (Silent: only while it keeps the request's first-token time, as
// Envoy's panic threshold routes to every host when none is healthy).
// Once the ejection passes, one request is its probe: its whole answer
// ends the ejection (its first token ends only a Silent one); a failed
// probe ejects it again for twice as long, but never longer than half the
// time since the endpoint stopped answering (it is probed again within a
// third of the outage's length), nor OutlierMaxEjection — the breaker's
// open period, applied to an endpoint. Each period ends with up to
// ReleaseJitter of it drawn, so the probes of several workers do not
// coincide.
//
// An Outliers is safe for concurrent use.
type Outliers struct {
	mu   sync.Mutex
	base time.Duration
	by   map[string]*outlier
}

type outlier struct {
	sick      Sickness
	refusals  int       // in a row, since the last answer
	since     time.Time // when it stopped answering (the first ejection of the run)
	period    time.Duration
	ejectedAt time.Time // when the current period began
	until     time.Time // no probe before this instant
	probeOut  time.Time // a probe is out until then
	answered  time.Time // the last answer
	heardFrom bool      // answered at least once
}

// NewOutliers returns outlier ejection whose first period is base (the
// policy's rate_limit.hold, else a refusal's Retry-After).
func NewOutliers(base time.Duration) *Outliers {
	if base <= 0 {
		base = time.Second
	}
	return &Outliers{base: base, by: map[string]*outlier{}}
}

func (o *Outliers) get(endpoint string) *outlier {
	x := o.by[endpoint]
	if x == nil {
		x = &outlier{}
		o.by[endpoint] = x
	}
	return x
}

// Record takes what a request to endpoint, sent at start, told at now:
// an answer ends its ejection, a first token a Silent one; a refusal
// counts towards one, and only an answer resets the count. retryAfter,
// when positive, is the refusal's own Retry-After: the first period is at
// least that. u in [0,1) draws the period's jitter. It returns how long
// the endpoint has been refusing without an answer (0 when it answers).
func (o *Outliers) Record(endpoint string, s Signal, start, now time.Time, retryAfter time.Duration, u float64) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	x := o.get(endpoint)
	switch {
	case s == Answered:
		*x = outlier{answered: now, heardFrom: true}
		return 0
	case s == Started && x.sick == Silent:
		*x = outlier{answered: now, heardFrom: true, refusals: x.refusals, since: x.since}
		return 0
	case s == Started:
		// Not silent; a stream cut after it still counts as failed.
		x.answered, x.heardFrom = now, true
		return 0
	}
	if x.refusals == 0 && x.sick == Healthy {
		x.since = now
	}
	x.refusals++
	if s == Cut && x.sick == Silent {
		return now.Sub(x.since) // an older stream's cut: still silent
	}
	if x.sick != Healthy || x.refusals >= OutlierRefusals {
		o.eject(x, Refusing, start, now, retryAfter, u)
	}
	return now.Sub(x.since)
}

// Overdue tells that a request to endpoint, started at start, has had no
// first token for longer than its first-token timeout at now: the endpoint
// is ejected as Silent unless it answered something since start (then
// that request was passed over, not the endpoint silent).
func (o *Outliers) Overdue(endpoint string, start, now time.Time, u float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	x := o.get(endpoint)
	if x.heardFrom && !x.answered.Before(start) {
		return
	}
	if x.sick == Healthy {
		x.since = start
	}
	o.eject(x, Silent, start, now, 0, u)
}

// eject ejects x at now for the failure of a request sent at start or,
// when the ejection had passed and that request was sent after it began
// (its probe, or one sent since), ejects it again for longer. A failure
// of a request sent before the ejection leaves it as it is.
func (o *Outliers) eject(x *outlier, why Sickness, start, now time.Time, retryAfter time.Duration, u float64) {
	switch {
	case x.sick == Healthy:
		x.period = min(max(o.base, retryAfter), OutlierMaxEjection)
	case now.Before(x.until) || start.Before(x.ejectedAt):
		if why == Refusing && x.sick == Silent {
			x.sick = why // it now refuses fast: calls may wait for it
		}
		return
	default:
		x.period = min(2*x.period, max(o.base, retryAfter, now.Sub(x.since)/2), OutlierMaxEjection)
	}
	x.sick, x.ejectedAt = why, now
	x.until = now.Add(x.period + time.Duration(min(max(u, 0), 1)*ReleaseJitter*float64(x.period)))
	x.probeOut = time.Time{}
}

// Admit is the rule for one request to endpoint at now: Send while it is
// not ejected; Eject while it is, or while its probe is out; SendProbe
// once its ejection has passed, and then no other request is admitted for
// probeFor (the request's first-token timeout: by then it has answered,
// refused or hung) or until its outcome.
func (o *Outliers) Admit(endpoint string, now time.Time, probeFor time.Duration) Admission {
	o.mu.Lock()
	defer o.mu.Unlock()
	x := o.by[endpoint]
	switch {
	case x == nil || x.sick == Healthy:
		return Send
	case now.Before(x.until) || now.Before(x.probeOut):
		return Eject
	}
	x.probeOut = now.Add(probeFor)
	return SendProbe
}

// Unclaim gives back a probe Admit granted at now for a request that was
// not sent after all (another guard refused it): the next request may
// probe.
func (o *Outliers) Unclaim(endpoint string, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if x := o.by[endpoint]; x != nil && x.probeOut.After(now) {
		x.probeOut = time.Time{}
	}
}

// State is endpoint's sickness at now (Healthy when it is not ejected)
// and when its next probe may go; it claims nothing.
func (o *Outliers) State(endpoint string, now time.Time) (Sickness, time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	x := o.by[endpoint]
	if x == nil {
		return Healthy, time.Time{}
	}
	return x.sick, later(x.until, x.probeOut)
}
