package guard

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// FirstTokenSamples is how many recent times to first token a model keeps,
// in one worker and in the fleet.
const FirstTokenSamples = 200

// FirstTokens keeps each model's recent times to first token (the whole
// reply of a model that does not stream), for the adaptive hedge delay
// (docs/how-it-works.md "Hedged calls"). Safe for concurrent use.
type FirstTokens struct {
	mu  sync.Mutex
	per map[string][]time.Duration
}

// NewFirstTokens returns an empty record.
func NewFirstTokens() *FirstTokens { return &FirstTokens{per: map[string][]time.Duration{}} }

// Add records one time to first token of model; the oldest beyond
// FirstTokenSamples is dropped.
func (f *FirstTokens) Add(model string, d ...time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := append(f.per[model], d...)
	if len(s) > FirstTokenSamples {
		s = slices.Delete(s, 0, len(s)-FirstTokenSamples)
	}
	f.per[model] = s
}

// P90 is the 90th percentile of model's recent times and their number.
func (f *FirstTokens) P90(model string) (time.Duration, int) {
	f.mu.Lock()
	s := slices.Clone(f.per[model])
	f.mu.Unlock()
	if len(s) == 0 {
		return 0, 0
	}
	slices.Sort(s)
	return s[(len(s)*9-1)/10], len(s)
}

// summary is every model's p90 and sample count.
func (f *FirstTokens) summary() map[string]FirstTokenP90 {
	out := map[string]FirstTokenP90{}
	for _, m := range f.models() {
		p, n := f.P90(m)
		out[m] = FirstTokenP90{P90: p, N: n}
	}
	return out
}

// samples copies every model's recent times, oldest first.
func (f *FirstTokens) samples() map[string][]time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]time.Duration, len(f.per))
	for m, s := range f.per {
		out[m] = slices.Clone(s)
	}
	return out
}

func (f *FirstTokens) models() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.per))
}

// FirstTokenP90 is a model's p90 time to first token over its N recent
// times (the fleet's, in a View).
type FirstTokenP90 struct {
	P90 time.Duration `json:"p90"`
	N   int           `json:"n"`
}
