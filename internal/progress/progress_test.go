package progress

import (
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

// TestLineMode: written to a file (a CI log, not a terminal), a phase is a
// line when it starts and one when it ends with its count and time; steps
// counted from several goroutines all count; a nil display draws nothing.
func TestLineMode(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	d := New(f)
	s := d.Phase("storm spike: durable-llm", 300)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				s.Add(1)
			}
		}()
	}
	wg.Wait()
	s.Done()
	s.Done() // once only
	d.Phase("warm-up", 0).Done()
	d.Wait()
	f.Close()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^storm spike: durable-llm: 300 to go\nstorm spike: durable-llm: 300 done in [0-9.]+m?s\nwarm-up…\nwarm-up: 0 done in [0-9.]+m?s\n$`)
	if !want.Match(b) {
		t.Errorf("log:\n%s", b)
	}

	var none *Display
	none.Phase("x", 1).Add(1)
	none.Phase("x", 1).Done()
}
