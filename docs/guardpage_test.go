package docs

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/guard"
)

// TestGuardPageStatesTheOutlierRule: the guard's page states outlier
// ejection with the constants the code uses, so a reader predicts it.
func TestGuardPageStatesTheOutlierRule(t *testing.T) {
	b, err := fs.ReadFile(repo, "docs/how-it-works.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	i := strings.Index(page, "## The guard on one page")
	j := strings.Index(page, "## Context refiner")
	if i < 0 || j < i {
		t.Fatal("docs/how-it-works.md has no section \"The guard on one page\"")
	}
	// The page wraps lines: compare with single spaces.
	section := strings.Join(strings.Fields(page[i:j]), " ")
	for _, want := range []string{
		fmt.Sprintf("%d refusals in a row", guard.OutlierRefusals),
		fmt.Sprintf("nor %.0f s", guard.OutlierMaxEjection.Seconds()),
		fmt.Sprintf("up to %.0f %% of it drawn as jitter", guard.ReleaseJitter*100),
	} {
		if !strings.Contains(section, want) {
			t.Errorf("the guard's page does not say %q", want)
		}
	}
}
