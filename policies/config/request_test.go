package config

import (
	"reflect"
	"testing"
)

func TestKnownScenarios(t *testing.T) {
	c := DefaultConfig()
	c.Rules = append(c.Rules, Rule{ID: "x", Scenario: " Shop ", Keywords: []string{"x"}, Action: RuleNoRetry},
		Rule{ID: "y", Scenario: "MEDICAL", Keywords: []string{"x"}, Action: RuleNoRetry})
	c.Hedge.Scenarios = []HedgeScenario{{Scenario: "support"}}
	want := []string{"customer_service", "medical", "finance", "education", "Shop", "support"}
	if got := c.KnownScenarios(); !reflect.DeepEqual(got, want) {
		t.Errorf("KnownScenarios = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		name, scenario string
		known          bool
	}{
		{"none", "", true},
		{"request.scenarios", "customer_service", true},
		{"a rule's", "finance", true},
		{"a rule's, case and spaces ignored as rules ignore them", "  shop", true},
		{"hedge.scenarios'", "Support", true},
		{"misspelt", "medcal", false},
		{"unknown", "billing", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.KnownScenario(tc.scenario); got != tc.known {
				t.Errorf("KnownScenario(%q) = %v, want %v", tc.scenario, got, tc.known)
			}
		})
	}
	c.Request.Scenarios = []string{AnyScenario}
	if !c.KnownScenario("billing") {
		t.Error(`"*" does not accept any scenario`)
	}
	if !(&Config{}).KnownScenario("billing") {
		t.Error("a policy that names no scenario refuses one")
	}
}
