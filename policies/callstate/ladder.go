package callstate

import (
	"slices"

	"github.com/durable-llm/durable-llm/policies/config"
)

// NextModel chooses the model of the next attempt from the ladder: the
// preferred model first (when it is on the ladder), then the ladder in
// order, skipping models already tried in this call and models that
// allowed refuses (typically an open breaker, or
// a half-open one that did not pick this call as a probe). allowed is asked
// at most once per model, in that order, and not after a model is chosen,
// so its answer for the chosen model is the admission of the attempt;
// nil allows every model. It reports false when no model is left.
func NextModel(ladder []config.ModelConfig, preferred string, tried []string, allowed func(model string) bool) (config.ModelConfig, bool) {
	ok := func(m config.ModelConfig) bool {
		return !slices.Contains(tried, m.Name) && (allowed == nil || allowed(m.Name))
	}
	if preferred != "" {
		if i := slices.IndexFunc(ladder, func(m config.ModelConfig) bool { return m.Name == preferred }); i >= 0 && ok(ladder[i]) {
			return ladder[i], true
		}
	}
	for _, m := range ladder {
		if m.Name != preferred && ok(m) {
			return m, true
		}
	}
	return config.ModelConfig{}, false
}
