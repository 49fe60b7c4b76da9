package activities

import (
	"context"

	"github.com/durable-llm/durable-llm/policies/rules"
)

// LearnerRules is the Learning of the rules that apply to calls of
// scenario under this worker's policy: which rules a scenario's learner
// keeps, their actions, thresholds and pins, and learn.min_feedback. The
// learner reads them through this local activity (recorded in its
// history), never from the policy in workflow code.
func (a *Activities) LearnerRules(_ context.Context, scenario string) (rules.Learning, error) {
	return rules.LearningFor(a.cfg, scenario), nil
}
