package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHedgeRules(t *testing.T) {
	cfg, err := ParseConfig([]byte(`
hedge:
  after: adaptive
  model: llama-8b
  scenarios:
    - {scenario: support, after: 1.5s, model: qwen-14b}
    - {scenario: finance, after: "off"}
`), "hedge.yaml")
	require.NoError(t, err)

	d, adaptive, on := cfg.Hedge.Rule("education").Delay()
	require.True(t, on)
	require.True(t, adaptive, "a scenario without a rule of its own takes the default")
	require.Zero(t, d)

	r := cfg.Hedge.Rule("support")
	d, adaptive, on = r.Delay()
	require.Equal(t, "qwen-14b", r.Model)
	require.True(t, on)
	require.False(t, adaptive)
	require.Equal(t, 1500*time.Millisecond, d)

	_, _, on = cfg.Hedge.Rule("finance").Delay()
	require.False(t, on, "a scenario may turn hedging off")

	_, _, on = DefaultConfig().Hedge.Rule("support").Delay()
	require.False(t, on, "hedging is off by default")
}

func TestHedgeRefusesBadRules(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"hedge: {after: soon}", `hedge.after: must be "off", "adaptive" or a positive duration such as "1.5s", got "soon"`},
		{"hedge: {after: -1s}", `hedge.after: must be "off", "adaptive" or a positive duration`},
		{"hedge: {after: 1s, model: gpt-9}", `hedge.model: must name a model of the ladder ([qwen-72b qwen-14b llama-8b]) to hedge with, got "gpt-9"`},
		{"hedge: {budget: 1.5}", "hedge.budget: must be a fraction of calls in [0,1], got 1.5"},
		{"hedge: {initial: 0s}", "hedge.initial: must be a positive duration"},
		{"hedge: {scenarios: [{after: 1s}]}", `hedge.scenarios[0].scenario: must name the scenario the rule is for`},
		{"hedge: {scenarios: [{scenario: a, after: 1s}, {scenario: a}]}", `hedge.scenarios[1].scenario: names "a" a second time`},
		{"hedge: {scenarios: [{scenario: a, after: 1s, model: nope}]}", `hedge.scenarios[0].model: must name a model of the ladder`},
	} {
		_, err := ParseConfig([]byte(c.yaml), "bad.yaml")
		require.ErrorContains(t, err, c.want, c.yaml)
	}
}
