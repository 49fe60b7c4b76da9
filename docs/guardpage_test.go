package docs

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/guard"
)

var update = flag.Bool("update", false, "rewrite the generated parts of the docs (the guard's page) from the code")

// The generated part of "The guard on one page".
const (
	guardBegin = "<!-- guard rules: made from policies/guard.Rules by `go test ./docs -run TestGuardPageIsTheTable -update`; edit the table, not this text -->\n"
	guardEnd   = "<!-- end of guard rules -->\n"
)

// TestGuardPageIsTheTable: docs/how-it-works.md "The guard on one page" is
// the guard's rule table as guard.Page writes it, so the page names every
// rule, constant and setting the code has, and none it does not.
func TestGuardPageIsTheTable(t *testing.T) {
	b, err := fs.ReadFile(repo, "docs/how-it-works.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := guard.Page(config.DefaultSetting)
	if err != nil {
		t.Fatal(err)
	}
	got, spliced, err := spliceGuardPage(string(b), want)
	if err != nil {
		t.Fatal(err)
	}
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile("how-it-works.md", []byte(spliced), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/how-it-works.md \"The guard on one page\" is not the rule table: run go test ./docs -run TestGuardPageIsTheTable -update")
}

// spliceGuardPage returns the generated part of page, and page with it
// replaced by rules.
func spliceGuardPage(page, rules string) (got, spliced string, err error) {
	i := strings.Index(page, guardBegin)
	j := strings.Index(page, guardEnd)
	if i < 0 || j < i {
		return "", "", errNoGuardPage
	}
	i += len(guardBegin)
	return page[i:j], page[:i] + rules + page[j:], nil
}

var errNoGuardPage = errors.New("docs/how-it-works.md has no generated guard rules (the markers " + strings.TrimSpace(guardBegin) + " … " + strings.TrimSpace(guardEnd) + ")")

// TestGuardPageDriftIsFound: a page whose rules differ from the table, or
// that lost its markers, is reported, so TestGuardPageIsTheTable can fail.
func TestGuardPageDriftIsFound(t *testing.T) {
	page := "# x\n\n" + guardBegin + "1. **`old`** — gone\n" + guardEnd + "after\n"
	got, spliced, err := spliceGuardPage(page, "1. **`new`** — here\n")
	if err != nil || got != "1. **`old`** — gone\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	if want := "# x\n\n" + guardBegin + "1. **`new`** — here\n" + guardEnd + "after\n"; spliced != want {
		t.Errorf("spliced\n%s\nwant\n%s", spliced, want)
	}
	if _, _, err := spliceGuardPage("# x\n", "y"); err == nil {
		t.Error("a page without the markers was read")
	}
}
