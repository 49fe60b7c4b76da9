package guard

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
)

// packageConstants parses the package's own files and returns its
// constants that are numbers a rule applies: not those of an enumeration
// (a block with iota) nor the rule names.
func packageConstants(t *testing.T) (tuning []string, ruleNames []string, files map[string]*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	files = map[string]*ast.File{}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = f
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			enum := false
			ast.Inspect(g, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && id.Name == "iota" {
					enum = true
				}
				return true
			})
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); ok && id.Name == "RuleName" {
					for _, n := range v.Names {
						ruleNames = append(ruleNames, n.Name)
					}
					continue
				}
				if enum {
					continue
				}
				for _, n := range v.Names {
					tuning = append(tuning, n.Name)
				}
			}
		}
	}
	return tuning, ruleNames, files
}

// TestEveryConstantIsARules: each constant that tunes the guard is named by
// a rule (so the page shows it), each constant a rule names exists, and
// the table writes each as {"Name", Name}, so the value shown is the code's.
func TestEveryConstantIsARules(t *testing.T) {
	tuning, _, files := packageConstants(t)
	named := map[string]bool{}
	for _, r := range Rules {
		for _, c := range r.Constants {
			named[c.Name] = true
		}
	}
	for _, c := range tuning {
		if !named[c] {
			t.Errorf("the constant %s is named by no rule in Rules: the guard's page would not show it", c)
		}
	}
	for c := range named {
		if !slices.Contains(tuning, c) {
			t.Errorf("a rule names the constant %s, which the package does not declare", c)
		}
	}
	checked := 0
	ast.Inspect(files["rules.go"], func(n ast.Node) bool {
		list, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if at, ok := list.Type.(*ast.ArrayType); !ok || at.Elt.(*ast.Ident).Name != "Constant" {
			return true
		}
		for _, e := range list.Elts {
			lit := e.(*ast.CompositeLit)
			name, _ := strconv.Unquote(lit.Elts[0].(*ast.BasicLit).Value)
			if v, ok := lit.Elts[1].(*ast.Ident); !ok || v.Name != name {
				t.Errorf("the table shows %s with a value other than the constant itself", name)
			}
			checked++
		}
		return true
	})
	if checked == 0 {
		t.Error("found no constant in the table to check")
	}
}

// TestEveryRuleIsInTheTableOnce: each declared rule name has one entry in
// Rules, in an order that keeps each moment together, and the table has
// no entry without a declared name.
func TestEveryRuleIsInTheTableOnce(t *testing.T) {
	_, declared, _ := packageConstants(t)
	if len(Rules) != len(declared) {
		t.Errorf("%d rules in the table, %d rule names declared", len(Rules), len(declared))
	}
	seen := map[RuleName]bool{}
	last := Moment(-1)
	for _, r := range Rules {
		if seen[r.Name] {
			t.Errorf("rule %s is in the table twice", r.Name)
		}
		seen[r.Name] = true
		if r.Moment < last {
			t.Errorf("rule %s (%s) comes after a rule of a later moment", r.Name, r.Moment)
		}
		last = r.Moment
		if r.Decides == "" || r.Principle == "" {
			t.Errorf("rule %s does not say what it decides and why", r.Name)
		}
	}
	if string(RuleBudget) != config.CacheOnBudget {
		t.Errorf("the retry budget's rule is %q, cache.on calls it %q", RuleBudget, config.CacheOnBudget)
	}
}

// TestPageShowsEveryRuleConstantAndSetting: the page names each rule, each
// constant with its value, and each setting with its default.
func TestPageShowsEveryRuleConstantAndSetting(t *testing.T) {
	page, err := Page(config.DefaultSetting)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**`outlier`**", "`OutlierRefusals` = 3", "`OutlierMaxEjection` = 30s", "`ReleaseJitter` = 0.5",
		"`budget.ratio` (0.1)", "`LastChance` = 4s", "### While a request is open",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
	for _, r := range Rules {
		if !strings.Contains(page, "**`"+string(r.Name)+"`**") {
			t.Errorf("the page does not name rule %s", r.Name)
		}
	}
	if _, err := Page(func(string) (string, bool) { return "", false }); err == nil {
		t.Error("a rule reading a setting the policy does not have made a page")
	}
}

func TestParseRulesRefusesWhatCannotBeRemoved(t *testing.T) {
	got, err := ParseRules("breaker, outlier")
	if err != nil || len(got) != 2 || got[0] != RuleBreaker || got[1] != RuleOutlier {
		t.Fatalf("ParseRules(breaker, outlier) = %v, %v", got, err)
	}
	for in, want := range map[string]string{
		"breakr":     `no guard rule "breakr" whose removal can be measured`,
		"capability": "rule capability is not removed for a measurement: correctness",
	} {
		if _, err := ParseRules(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRules(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}
