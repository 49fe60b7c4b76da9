package docs

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/durable-llm/durable-llm/workflows"
)

// TestSearchAttributesInDocs: operating.md names every search attribute
// the worker registers, and a page that counts them ("all 10 registered",
// as starter doctor prints it) counts what the code registers.
func TestSearchAttributesInDocs(t *testing.T) {
	for _, p := range searchAttributeDrift(repo, sortedKeys(workflows.SearchAttributes)) {
		t.Error(p)
	}
}

// TestSearchAttributeDriftIsFound: a name left out of operating.md and a
// stale count are each reported, so TestSearchAttributesInDocs can fail.
func TestSearchAttributeDriftIsFound(t *testing.T) {
	fsys := fstest.MapFS{
		"docs/operating.md":       {Data: []byte("`LlmOutcome`, `LlmSource`\n")},
		"docs/troubleshooting.md": {Data: []byte("search attributes   ok   all 8 registered\n")},
	}
	got := searchAttributeDrift(fsys, []string{"LlmOutcome", "LlmSource", "LlmReview"})
	want := []string{
		"docs/operating.md does not name the search attribute LlmReview",
		"docs/troubleshooting.md:1: says all 8 search attributes are registered; the worker registers 3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

var registeredCount = regexp.MustCompile(`all (\d+) registered`)

func searchAttributeDrift(fsys fs.FS, names []string) []string {
	var problems []string
	op, err := fs.ReadFile(fsys, "docs/operating.md")
	if err != nil {
		return []string{err.Error()}
	}
	for _, n := range names {
		if !strings.Contains(string(op), "`"+n+"`") {
			problems = append(problems, "docs/operating.md does not name the search attribute "+n)
		}
	}
	pages, _ := fs.Glob(fsys, "docs/*.md")
	for _, p := range pages {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for i, l := range strings.Split(string(b), "\n") {
			for _, m := range registeredCount.FindAllStringSubmatch(l, -1) {
				if n, _ := strconv.Atoi(m[1]); n != len(names) {
					problems = append(problems, fmt.Sprintf("%s:%d: says all %d search attributes are registered; the worker registers %d", p, i+1, n, len(names)))
				}
			}
		}
	}
	return problems
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// policySources are the files whose comments and messages point users at a
// section of the docs: the policy file users copy, and the code that
// reports its errors.
var policySources = []string{"policies/config/default_policy.yaml", "policies/config/validate.go", "policies/config/env.go"}

// TestPolicyFilePointsAtSections: every `page "Section"` the policy file
// and its error messages name (README "Quick start", docs/rules.md
// "Business rules") is a heading of that page.
func TestPolicyFilePointsAtSections(t *testing.T) {
	for _, p := range staleSections(repo, policySources) {
		t.Error(p)
	}
}

// TestStaleSectionsAreFound: a section README no longer has and a page
// that does not exist are reported, a heading's prefix is accepted.
func TestStaleSectionsAreFound(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md":            {Data: []byte("# durable-llm\n\n## Quick start\n")},
		"docs/how-it-works.md": {Data: []byte("# How a call works\n\n## Failure classes (defaults)\n")},
		"p.yaml": {Data: []byte("# see README \"Quick start\" and docs/how-it-works.md \"Failure classes\"\n" +
			"# see README \"Failure classes\"\n# see docs/gone.md \"Gone\"\n")},
	}
	got := staleSections(fsys, []string{"p.yaml"})
	want := []string{
		`p.yaml:2: README.md has no section "Failure classes"`,
		`p.yaml:3: docs/gone.md: open docs/gone.md: file does not exist`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("reported\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

var sectionRef = regexp.MustCompile(`(README(?:\.md)?|docs/[a-z-]+\.md) \\?"([^"\\]+)\\?"`)

// staleSections lists each reference to a page's section in files that
// names no heading of that page (a heading counts when it starts with the
// quoted words).
func staleSections(fsys fs.FS, files []string) []string {
	var problems []string
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for i, l := range strings.Split(string(b), "\n") {
			for _, m := range sectionRef.FindAllStringSubmatch(l, -1) {
				page, section := m[1], m[2]
				if page == "README" {
					page = "README.md"
				}
				text, err := fs.ReadFile(fsys, page)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: %v", f, i+1, page, err))
					continue
				}
				if !hasSection(string(text), section) {
					problems = append(problems, fmt.Sprintf("%s:%d: %s has no section %q", f, i+1, page, section))
				}
			}
		}
	}
	return problems
}

func hasSection(text, section string) bool {
	lines, _ := prose(text)
	for _, l := range lines {
		if m := heading.FindStringSubmatch(l); m != nil && strings.HasPrefix(m[2], section) {
			return true
		}
	}
	return false
}
