package guard

import (
	"testing"
	"time"
)

// TestOutlierEjectionStepByStep steps one endpoint through an outage at
// fixed instants (u = 0: no jitter): refusals eject it after
// OutlierRefusals in a row, requests are refused while it is ejected, one
// probe goes once the period passes, a failed probe ejects it for twice as
// long (never more than half the outage so far), and an answer ends it.
func TestOutlierEjectionStepByStep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	o := NewOutliers(time.Second)
	const ep, probe = "http://a", 8 * time.Second
	type step struct {
		name  string
		do    func()
		at    int // ms: Admit's instant
		want  Admission
		sick  Sickness
		until int // ms: the next probe's instant State reports (-1: not checked)
	}
	refuse := func(start, ms int) func() {
		return func() { o.Record(ep, Busy, at(start), at(ms), 0, 0) }
	}
	steps := []step{
		{"healthy", func() {}, 0, Send, Healthy, -1},
		{"one refusal is not an ejection", refuse(0, 10), 20, Send, Healthy, -1},
		{"two in a row", refuse(20, 30), 40, Send, Healthy, -1},
		{"the third in a row ejects for the base period", refuse(40, 50), 60, Eject, Refusing, 1050},
		{"a refusal of a request sent before the ejection changes nothing", refuse(45, 900), 1000, Eject, Refusing, 1050},
		{"the period passed: one probe", func() {}, 1100, SendProbe, Refusing, -1},
		{"while the probe is out, nothing else", func() {}, 1200, Eject, Refusing, -1},
		{"a probe given back (not sent) goes to the next request", func() { o.Unclaim(ep, at(1200)) }, 1200, SendProbe, Refusing, -1},
		{"the probe refused: ejected again, twice as long but at most half the outage (1 s)", refuse(1100, 1150), 1200, Eject, Refusing, 2150},
		{"probe", func() {}, 2200, SendProbe, Refusing, -1},
		{"refused again: min(2 s, max(1 s, 2.24 s since the first refusal / 2)) = 1.12 s", refuse(2200, 2250), 2300, Eject, Refusing, 3370},
		{"probe", func() {}, 3400, SendProbe, Refusing, -1},
		{"its answer ends the ejection", func() { o.Record(ep, Answered, at(3400), at(3500), 0, 0) }, 3600, Send, Healthy, -1},
	}
	for _, s := range steps {
		s.do()
		if got := o.Admit(ep, at(s.at), probe); got != s.want {
			t.Fatalf("%s: Admit at %d ms = %d, want %d", s.name, s.at, got, s.want)
		}
		sick, until := o.State(ep, at(s.at))
		if sick != s.sick {
			t.Fatalf("%s: sickness %s, want %s", s.name, sick, s.sick)
		}
		if s.until >= 0 && s.want == Eject && !until.Equal(at(s.until)) && !until.Equal(at(s.at).Add(probe)) {
			t.Fatalf("%s: next probe at %v, want %d ms", s.name, until.Sub(t0), s.until)
		}
	}
}

// TestOutlierSilentEndpoint: a request past its first-token timeout ejects
// its endpoint as Silent only while the endpoint has answered nothing since
// that request started; a probe that stays silent ejects it again.
func TestOutlierSilentEndpoint(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const ep = "http://a"
	o := NewOutliers(time.Second)
	o.Record(ep, Answered, t0, t0.Add(2*time.Second), 0, 0)
	o.Overdue(ep, t0.Add(time.Second), t0.Add(9*time.Second), 0)
	if sick, _ := o.State(ep, t0.Add(9*time.Second)); sick != Healthy {
		t.Fatalf("overdue request started before the endpoint's last answer: %s, want healthy (it was passed over)", sick)
	}
	o.Overdue(ep, t0.Add(3*time.Second), t0.Add(11*time.Second), 0)
	if sick, _ := o.State(ep, t0.Add(11*time.Second)); sick != Silent {
		t.Fatalf("nothing answered since the overdue request started: %s, want silent", sick)
	}
	if got := o.Admit(ep, t0.Add(12100*time.Millisecond), 8*time.Second); got != SendProbe {
		t.Fatalf("after the period: %d, want a probe", got)
	}
	o.Overdue(ep, t0.Add(12100*time.Millisecond), t0.Add(20100*time.Millisecond), 0)
	sick, next := o.State(ep, t0.Add(20100*time.Millisecond))
	// Period min(2 × 1 s, max(1 s, (20.1 − 3) / 2 s)) = 2 s.
	if sick != Silent || !next.Equal(t0.Add(22100*time.Millisecond)) {
		t.Fatalf("silent probe: %s until %v, want silent until 22.1 s", sick, next.Sub(t0))
	}
	// A fast refusal now: the endpoint refuses rather than holds.
	o.Record(ep, Busy, t0.Add(20200*time.Millisecond), t0.Add(20300*time.Millisecond), 0, 0)
	if sick, _ := o.State(ep, t0.Add(20300*time.Millisecond)); sick != Refusing {
		t.Fatalf("a refusal while ejected as silent: %s, want refusing", sick)
	}
}

// TestOutlierRetryAfterSetsTheFirstPeriod: a refusal's own Retry-After is
// the first period when it is longer than the base.
func TestOutlierRetryAfterSetsTheFirstPeriod(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	o := NewOutliers(time.Second)
	for i := range OutlierRefusals {
		o.Record("e", Busy, t0, t0.Add(time.Duration(i)*time.Millisecond), 5*time.Second, 0.5)
	}
	_, next := o.State("e", t0)
	// 5 s + ReleaseJitter × 0.5 × 5 s of jitter, from the third refusal (2 ms).
	if want := t0.Add(2*time.Millisecond + 5*time.Second + 1250*time.Millisecond); !next.Equal(want) {
		t.Fatalf("next probe at %v, want %v", next.Sub(t0), want.Sub(t0))
	}
}

// TestOutlierRetryAfterIsCappedByTheMaxEjection: a Retry-After of ten
// minutes ejects the endpoint for OutlierMaxEjection (and its jitter), not
// for ten minutes: no ejection period is longer, the first one included.
func TestOutlierRetryAfterIsCappedByTheMaxEjection(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	o := NewOutliers(time.Second)
	for range OutlierRefusals {
		o.Record("e", Busy, t0, t0, 10*time.Minute, 0)
	}
	if _, next := o.State("e", t0); !next.Equal(t0.Add(OutlierMaxEjection)) {
		t.Fatalf("next probe %v after the refusals, want %v", next.Sub(t0), OutlierMaxEjection)
	}
}

// TestOutlierAFirstTokenIsNotAnAnswer: streams that start and are then cut
// fail as a 5xx does: a first token between the failures neither resets
// their count nor ends the ejection they cause; a complete answer does. A
// first token ends a Silent ejection (the endpoint is not silent).
func TestOutlierAFirstTokenIsNotAnAnswer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	o := NewOutliers(time.Second)
	for i := range OutlierRefusals {
		o.Record("e", Started, at(100*i), at(100*i+10), 0, 0)
		o.Record("e", ServerFailed, at(100*i), at(100*i+50), 0, 0)
	}
	if sick, _ := o.State("e", at(300)); sick != Refusing {
		t.Fatalf("%d streams cut after their first token: %s, want refusing", OutlierRefusals, sick)
	}
	o.Record("e", Started, at(1500), at(1600), 0, 0)
	if sick, _ := o.State("e", at(1600)); sick != Refusing {
		t.Fatalf("the probe's first token ended the ejection: %s", sick)
	}
	o.Record("e", Answered, at(1500), at(2000), 0, 0)
	if sick, _ := o.State("e", at(2000)); sick != Healthy {
		t.Fatalf("the probe's whole answer left it %s, want healthy", sick)
	}
	o.Overdue("e", at(2100), at(10100), 0)
	if sick, _ := o.State("e", at(10100)); sick != Silent {
		t.Fatalf("a request overdue since the last answer: %s, want silent", sick)
	}
	o.Record("e", Started, at(2100), at(10200), 0, 0)
	if sick, _ := o.State("e", at(10200)); sick != Healthy {
		t.Fatalf("a first token left a silent endpoint %s, want healthy", sick)
	}
}

// TestOutlierAFirstTokenAfterSilenceKeepsTheOutagesStart: a first token
// that ends a Silent ejection keeps the refusals counted before it and
// when they began, so that how long the endpoint has been refusing (what
// rate_limit.breaker_after is measured against) stays the time since then;
// and an older stream's cut during a Silent ejection leaves it Silent.
func TestOutlierAFirstTokenAfterSilenceKeepsTheOutagesStart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	o := NewOutliers(time.Second)
	o.Record("e", ServerFailed, at(0), at(100), 0, 0)
	o.Overdue("e", at(200), at(8200), 0)
	o.Record("e", Cut, at(300), at(8300), 0, 0)
	if sick, _ := o.State("e", at(8300)); sick != Silent {
		t.Fatalf("an older stream's cut made a silent endpoint %s", sick)
	}
	o.Record("e", Started, at(8000), at(9000), 0, 0)
	if refusing := o.Record("e", Busy, at(9100), at(9200), 0, 0); refusing != 9*time.Second {
		t.Fatalf("refusing for %v after the first token, want 9s (since the overdue request began the outage)", refusing)
	}
}
