package llmsim

import (
	"testing"
	"time"
)

// TestPoolIsFIFO submits jobs from one goroutine, so their order is
// known: each starts only when the one before it has finished.
func TestPoolIsFIFO(t *testing.T) {
	var gauges [][2]int
	p := &pool{closed: make(chan struct{}), onGauge: func(in, q int) { gauges = append(gauges, [2]int{in, q}) }, onDone: func() {}}
	p.configure(1, 2, 0)
	const service = 40 * time.Millisecond
	jobs := make([]*job, 4)
	for i := range jobs {
		jobs[i] = newJob(service, 0, 0, false)
		if ok := p.submit(jobs[i]); ok != (i < 3) {
			t.Fatalf("job %d accepted = %v", i, ok)
		}
	}
	for i := range 3 {
		<-jobs[i].done
	}
	for i := 1; i < 3; i++ {
		if gap := jobs[i].startAt.Sub(jobs[i-1].startAt); gap < service {
			t.Errorf("job %d started %v after job %d, want >= %v", i, gap, i-1, service)
		}
		if jobs[i].waited <= 0 {
			t.Errorf("job %d did not wait", i)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy != 0 || len(p.waiting) != 0 {
		t.Errorf("busy %d waiting %d", p.busy, len(p.waiting))
	}
	// configure, +1 running, +1 queued, +1 queued, then drain.
	want := [][2]int{{0, 0}, {1, 0}, {1, 1}, {1, 2}, {1, 1}, {1, 0}, {0, 0}}
	if len(gauges) != len(want) {
		t.Fatalf("gauges %v, want %v", gauges, want)
	}
	for i := range want {
		if gauges[i] != want[i] {
			t.Errorf("gauges %v, want %v", gauges, want)
			break
		}
	}
}

func TestPoolLoadFactor(t *testing.T) {
	p := &pool{closed: make(chan struct{}), onGauge: func(int, int) {}, onDone: func() {}}
	p.configure(4, 0, 1)
	var got []time.Duration
	for range 4 {
		j := newJob(40*time.Millisecond, 0, 0, false)
		p.submit(j)
		<-j.started
		got = append(got, j.service)
	}
	want := []time.Duration{40, 50, 60, 70}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Errorf("services %v, want 40, 50, 60, 70 ms", got)
			break
		}
	}
}
