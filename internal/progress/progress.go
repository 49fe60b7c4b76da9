// Package progress shows long work as it goes: a bar per phase with its
// count, elapsed time and an estimate of the time left when the output is
// a terminal (github.com/vbauerster/mpb), a line when a phase starts and
// one when it ends otherwise (a CI log). `make bench` and `make
// histories` use it.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// Display draws the phases; its Writer prints lines above the bars.
type Display struct {
	out  io.Writer
	bars *mpb.Progress // nil: line mode
	mu   sync.Mutex
}

// New draws on f: bars when it is a terminal, lines otherwise.
func New(f *os.File) *Display {
	d := &Display{out: f}
	if term.IsTerminal(int(f.Fd())) {
		d.bars = mpb.New(mpb.WithOutput(f), mpb.WithWidth(32), mpb.WithRefreshRate(200*time.Millisecond))
	}
	return d
}

// Write prints a line (above the bars).
func (d *Display) Write(b []byte) (int, error) {
	if d.bars != nil {
		return d.bars.Write(b)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.Write(b)
}

// Wait lets the bars finish drawing (at most a few seconds: a phase left
// running on an error path does not hold the exit); call it before exiting.
func (d *Display) Wait() {
	if d.bars == nil {
		return
	}
	done := make(chan struct{})
	go func() { d.bars.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		d.bars.Shutdown()
	}
}

// Step is one phase in progress.
type Step struct {
	d     *Display
	bar   *mpb.Bar
	name  string
	total int
	start time.Time
	mu    sync.Mutex
	done  int
	ended bool
}

// Phase starts a phase of total steps (0: not known ahead); on a nil
// Display it is nil, and a nil Step counts nothing.
func (d *Display) Phase(name string, total int) *Step {
	if d == nil {
		return nil
	}
	s := &Step{d: d, name: name, total: total, start: time.Now()}
	if d.bars != nil {
		s.bar = d.bars.AddBar(int64(max(total, 0)),
			mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncSpace)),
			mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO, decor.WCSyncSpace), decor.Name(" · about "),
				decor.OnComplete(decor.AverageETA(decor.ET_STYLE_GO), "done"), decor.Name(" left")),
			mpb.BarRemoveOnComplete(),
		)
		return s
	}
	if total > 0 {
		fmt.Fprintf(d, "%s: %d to go\n", name, total)
	} else {
		fmt.Fprintf(d, "%s…\n", name)
	}
	return s
}

// Add counts n steps done.
func (s *Step) Add(n int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.done += n
	s.mu.Unlock()
	if s.bar != nil {
		s.bar.IncrBy(n)
	}
}

// Done ends the phase, with a line saying how long it took.
func (s *Step) Done() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	done := s.done
	s.mu.Unlock()
	if s.bar != nil {
		s.bar.SetTotal(-1, true) // complete (and removed) whatever the count
	}
	fmt.Fprintf(s.d, "%s: %d done in %s\n", s.name, done, time.Since(s.start).Round(100*time.Millisecond))
}
