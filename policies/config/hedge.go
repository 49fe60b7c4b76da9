package config

import (
	"fmt"
	"time"
)

// HedgeConfig is seed 003 §5.1's "models cover for each other": when a
// call's first attempt has produced no first token after a delay, a fast
// model is asked the same question in parallel and the first complete
// answer (the first token, when the caller streams) answers the call; the
// other attempt is cancelled.
type HedgeConfig struct {
	// After and Model are the rule of every scenario without its own.
	After string `yaml:"after"`
	Model string `yaml:"model"`
	// Budget is the fraction of calls (over budget.window) that may start a
	// hedge, plus one hedge per window; 0 turns hedging off. Every hedge is
	// also a request paid from its endpoint's retry budget.
	Budget float64 `yaml:"budget"`
	// Initial is the delay an adaptive rule uses until the primary model
	// has MinSamples first-token times on record.
	Initial Duration `yaml:"initial"`
	// Replace keeps the primary attempt running when the hedge answers
	// first: the hedge's answer is delivered at once (the call's answer
	// update; a streamed call's text), and the primary's, when it
	// succeeds, replaces it as the call's result (docs/how-it-works.md "Hedged calls").
	Replace bool `yaml:"replace"`
	// Scenarios override the rule for calls of one scenario.
	Scenarios []HedgeScenario `yaml:"scenarios"`
}

// HedgeScenario is the hedge rule of one scenario.
type HedgeScenario struct {
	Scenario string `yaml:"scenario"`
	// After as HedgeConfig's; Model "" means the default's.
	After string `yaml:"after"`
	Model string `yaml:"model"`
	// Replace as HedgeConfig's; unset means the default's.
	Replace *bool `yaml:"replace"`
}

// rule is the scenario's rule; a rule that names no model takes the
// default's.
func (s HedgeScenario) rule(h HedgeConfig) HedgeRule {
	r := HedgeRule{After: s.After, Model: s.Model, Replace: h.Replace}
	if r.Model == "" {
		r.Model = h.Model
	}
	if s.Replace != nil {
		r.Replace = *s.Replace
	}
	return r
}

// HedgeRule says when and with which model a call is hedged.
type HedgeRule struct {
	// After is "off", "adaptive" (1.5 × the primary model's recent p90 time to
	// first token) or a duration such as "1.5s".
	After string
	// Model is the ladder rung that hedges; a call whose first model is
	// this one is not hedged.
	Model string
	// Replace: the primary's answer replaces the hedge's (HedgeConfig.Replace).
	Replace bool
}

// HedgeOff and HedgeAdaptive are the words HedgeRule.After accepts beside
// a duration.
const (
	HedgeOff      = "off"
	HedgeAdaptive = "adaptive"
)

// Rule returns the hedge rule of scenario: its own when the policy has
// one, else the default.
func (h HedgeConfig) Rule(scenario string) HedgeRule {
	for _, s := range h.Scenarios {
		if s.Scenario == scenario {
			return s.rule(h)
		}
	}
	return HedgeRule{After: h.After, Model: h.Model, Replace: h.Replace}
}

// Delay reads After: on is false for "off" (or empty), adaptive true for
// "adaptive", else d is the fixed delay.
func (r HedgeRule) Delay() (d time.Duration, adaptive, on bool) {
	switch r.After {
	case "", HedgeOff:
		return 0, false, false
	case HedgeAdaptive:
		return 0, true, true
	}
	d, err := time.ParseDuration(r.After)
	if err != nil || d <= 0 {
		return 0, false, false
	}
	return d, false, true
}

func (h HedgeConfig) validate(c *Config, bad func(path, format string, args ...any)) {
	rule := func(path string, r HedgeRule) {
		switch r.After {
		case "", HedgeOff, HedgeAdaptive:
		default:
			if d, err := time.ParseDuration(r.After); err != nil || d <= 0 {
				bad(path+".after", "must be %q, %q or a positive duration such as \"1.5s\", got %q", HedgeOff, HedgeAdaptive, r.After)
			}
		}
		if _, _, on := r.Delay(); !on {
			return
		}
		if _, ok := c.Model(r.Model); !ok {
			names := make([]string, len(c.Models))
			for i, m := range c.Models {
				names[i] = m.Name
			}
			bad(path+".model", "must name a model of the ladder (%v) to hedge with, got %q", names, r.Model)
		}
	}
	rule("hedge", HedgeRule{After: h.After, Model: h.Model})
	seen := map[string]bool{}
	for i, sc := range h.Scenarios {
		p := fmt.Sprintf("hedge.scenarios[%d]", i)
		switch {
		case sc.Scenario == "":
			bad(p+".scenario", "must name the scenario the rule is for, got \"\"")
		case seen[sc.Scenario]:
			bad(p+".scenario", "names %q a second time", sc.Scenario)
		}
		seen[sc.Scenario] = true
		rule(p, sc.rule(h))
	}
	if !(h.Budget >= 0 && h.Budget <= 1) {
		bad("hedge.budget", "must be a fraction of calls in [0,1], got %v", h.Budget)
	}
	if h.Initial <= 0 {
		bad("hedge.initial", "must be a positive duration such as \"2s\", got %s", h.Initial)
	}
}
