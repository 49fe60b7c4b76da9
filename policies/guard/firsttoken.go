package guard

import (
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
