package testkit_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/durable-llm/durable-llm/"

// rigUsers are the folders whose non-test code may import testkit/: the
// rigs themselves, the benchmarks and `make cluster`'s command.
var rigUsers = []string{"testkit", "bench", "cluster"}

// TestProductDoesNotImportTheRigs: no package of the product imports
// testkit/ outside its tests, and internal/'s helpers import nothing but
// policies/ (they stay leaves under everything that imports them).
func TestProductDoesNotImportTheRigs(t *testing.T) {
	var bad []string
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
		top, _, _ := strings.Cut(rel, "/")
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			inner, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			switch {
			case strings.HasPrefix(inner, "testkit/") && !slices.Contains(rigUsers, top):
				bad = append(bad, rel+" imports "+inner+": the product must not import the rigs")
			case top == "internal" && !strings.HasPrefix(inner, "internal/") && !strings.HasPrefix(inner, "policies/"):
				bad = append(bad, rel+" imports "+inner+": internal/'s helpers must stay leaves")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
	if _, err := os.Stat("../internal/yamlnode"); err != nil {
		t.Fatalf("the layout this test checks is gone: %v", err)
	}
}
