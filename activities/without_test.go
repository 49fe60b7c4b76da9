package activities

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/guard"
)

// TestEveryMeasuredRuleCanBeRemoved keeps bench -without honest: each
// rule whose removal docs/benchmarks.md reports (guard.Rule.Unmeasured
// empty) is one the activities stop applying when Options.Without names
// it, and no rule said to be unmeasured is gated as if it could be.
func TestEveryMeasuredRuleCanBeRemoved(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	for _, r := range guard.Rules {
		name := "without[guard.Rule" + goName(r.Name) + "]"
		gated := strings.Contains(src.String(), name)
		switch {
		case r.Unmeasured == "" && !gated:
			t.Errorf("rule %s: bench -without accepts it, but no activity checks %s", r.Name, name)
		case r.Unmeasured != "" && gated:
			t.Errorf("rule %s is said to be unmeasured (%s), yet the activities check %s", r.Name, r.Unmeasured, name)
		}
	}
}

// goName is the Go constant's suffix of a rule name: last-chance → LastChance.
func goName(n guard.RuleName) string {
	special := map[guard.RuleName]string{guard.RuleWaitTrials: "WaitTrials"}
	if s, ok := special[n]; ok {
		return s
	}
	var b strings.Builder
	for part := range strings.SplitSeq(string(n), "-") {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}
