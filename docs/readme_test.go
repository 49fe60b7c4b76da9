package docs

import (
	"fmt"
	"io/fs"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/durable-llm/durable-llm/frontdoor"
)

// maxREADMELines is README's budget: what durable-llm is, the two
// commands, a first call from each kind of client, what happens when the
// upstream fails and a map of docs/; the rest lives in docs/.
const maxREADMELines = 320

func readme(t *testing.T) string {
	t.Helper()
	b, err := fs.ReadFile(repo, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestREADMEIsShort(t *testing.T) {
	if n := strings.Count(readme(t), "\n"); n > maxREADMELines {
		t.Fatalf("README.md has %d lines, more than %d: move the detail to a page of docs/", n, maxREADMELines)
	}
}

// TestREADMEReachesEveryDoc: every page of docs/ is linked from README's
// map, so every section moved out of README can be reached from it.
func TestREADMEReachesEveryDoc(t *testing.T) {
	text := readme(t)
	docs, err := fs.Glob(repo, "docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if !strings.Contains(text, "]("+d+")") && !strings.Contains(text, "]("+d+"#") {
			t.Errorf("README.md does not link to %s", d)
		}
	}
}

// TestQuickStartIsWhatTheTestsRun: each code block of README's "Quick
// start" and "A first call" (console transcripts aside) carries a marker
// that says how it is checked, and passes that check.
func TestQuickStartIsWhatTheTestsRun(t *testing.T) {
	blocks := quickStartBlocks(readme(t))
	if len(blocks) < 6 {
		t.Fatalf("README's quick start has %d checked blocks, want at least 6 (commands, Go, JSON, serve, openai-go, Nexus)", len(blocks))
	}
	for _, p := range checkQuickStart(repo, blocks) {
		t.Error(p)
	}
}

// TestQuickStartCheckFails: a README block that differs from its test by
// one word, an unknown make target, an unknown flag and a block without a
// marker are each reported, so TestQuickStartIsWhatTheTestsRun can fail.
func TestQuickStartCheckFails(t *testing.T) {
	fsys := fstest.MapFS{
		"Makefile":       {Data: []byte("run:\n\tgo run ./devstack\n")},
		"starter/x.go":   {Data: []byte(`fs.String("addr", "", "")` + "\n" + `case "serve":` + "\n")},
		"frontdoor/t.go": {Data: []byte(`const TokensEnv = "FRONTDOOR_TOKENS"` + "\n")},
		"x/a_test.go": {Data: []byte("func TestA(t *testing.T) {\n" +
			"\t// quick start: go\n" +
			"\t// connect: c := dial(\"localhost\")\n" +
			"\tc := dial(test)\n" +
			"\tc.Ask(\"Where is my order?\")\n" +
			"\t// end quick start\n}\n" +
			"const input = `\n{\"a\": 1}\n`\n")},
	}
	good := "## Quick start\n\n<!-- quick start: commands -->\n```sh\nmake run   # all of it\nexport TOKEN=$(openssl rand -hex 32)   # shown\n" +
		"FRONTDOOR_TOKENS=\"$(openssl rand -hex 32)=acme\" go run ./starter serve --addr 127.0.0.1:8080\n```\n\n" +
		"```console\n$ anything\n```\n\n## A first call\n\n" +
		"<!-- quick start: run by x/a_test.go as go -->\n```go\nc := dial(\"localhost\")\nc.Ask(\"Where is my order?\")\n```\n\n" +
		"<!-- quick start: run by x/a_test.go -->\n```json\n{\"a\": 1}\n```\n\n## Next\n\n```go\nunchecked()\n```\n"
	if p := checkQuickStart(fsys, quickStartBlocks(good)); len(p) != 0 {
		t.Fatalf("a good README reported: %v", p)
	}
	for name, c := range map[string]struct{ from, to, want string }{
		"a word changed":   {`c.Ask("Where is my order?")`, `c.Ask("Where is my parcel?")`, "differs from x/a_test.go"},
		"connection":       {`c := dial("localhost")`, `c := dial("elsewhere")`, "connects differently"},
		"JSON changed":     {`{"a": 1}`, `{"a": 2}`, "not in x/a_test.go"},
		"unknown target":   {"make run ", "make runn ", `no target "runn"`},
		"unknown flag":     {"--addr", "--address", `no flag "address"`},
		"unknown variable": {"FRONTDOOR_TOKENS=", "FRONTDOOR_TOKEN=", `"FRONTDOOR_TOKEN"`},
		"no marker":        {"<!-- quick start: run by x/a_test.go -->\n", "", "has no quick-start marker"},
		"no such region":   {"as go -->", "as py -->", `no region "py"`},
		"file not a test":  {"run by x/a_test.go as", "run by starter/x.go as", "not a test file"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := strings.Replace(good, c.from, c.to, 1)
			if bad == good {
				t.Fatalf("case does not change the README")
			}
			p := checkQuickStart(fsys, quickStartBlocks(bad))
			if !strings.Contains(strings.Join(p, "\n"), c.want) {
				t.Fatalf("reported %q, want one containing %q", p, c.want)
			}
		})
	}
}

// block is a fenced code block of README's quick start, with the marker
// comment before it (empty when none).
type block struct {
	line   int
	lang   string
	marker string
	body   []string
}

var marker = regexp.MustCompile(`^<!-- quick start: (.*?) -->$`)

// quickStartBlocks are the fenced blocks under README's "## Quick start"
// and "## A first call", console transcripts aside.
func quickStartBlocks(text string) []block {
	var out []block
	section, prev := "", ""
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			section = strings.TrimPrefix(l, "## ")
		}
		if strings.HasPrefix(l, "```") {
			b := block{line: i + 1, lang: strings.TrimPrefix(l, "```")}
			if m := marker.FindStringSubmatch(prev); m != nil {
				b.marker = m[1]
			}
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				b.body = append(b.body, lines[i])
			}
			if (section == "Quick start" || section == "A first call") && b.lang != "console" {
				out = append(out, b)
			}
			prev = ""
			continue
		}
		if strings.TrimSpace(l) != "" {
			prev = l
		}
	}
	return out
}

var runBy = regexp.MustCompile(`^run by (\S+?)(?: as (\S+))?$`)

// checkQuickStart checks each block by its marker:
//
//   - "commands": each line is `export NAME=value`,
//     `[VAR=value …] make TARGET` or
//     `[VAR=value …] go run ./PKG SUBCOMMAND --flag …`; the target is in
//     the Makefile, the package's source names the subcommand and every
//     flag, and the repository's Go source names every variable.
//   - "run by FILE as NAME": FILE is a test whose region "// quick start:
//     NAME" … "// end quick start" is the block, line for line (one tab of
//     indentation less); the block's first line may be the region's
//     "// connect:" comment, which the test replaces with a connection to
//     its own server on the next line.
//   - "run by FILE": the block appears in the test FILE as it is.
func checkQuickStart(fsys fs.FS, blocks []block) []string {
	var problems []string
	report := func(b block, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("README.md:%d: ", b.line)+fmt.Sprintf(format, args...))
	}
	for _, b := range blocks {
		switch m := runBy.FindStringSubmatch(b.marker); {
		case b.marker == "":
			report(b, "the %s block has no quick-start marker saying which test runs it", b.lang)
		case b.marker == "commands":
			for _, l := range b.body {
				for _, p := range checkCommand(fsys, l) {
					report(b, "%s", p)
				}
			}
		case m != nil:
			file, region := m[1], m[2]
			if !strings.HasSuffix(file, "_test.go") {
				report(b, "%s is not a test file", file)
				continue
			}
			src, err := fs.ReadFile(fsys, file)
			if err != nil {
				report(b, "%v", err)
				continue
			}
			if region == "" {
				if !strings.Contains(string(src), strings.Join(b.body, "\n")+"\n") {
					report(b, "the %s block is not in %s as README shows it", b.lang, file)
				}
				continue
			}
			want, connect, ok := regionOf(string(src), region)
			if !ok {
				report(b, "%s has no region %q (// quick start: %s … // end quick start)", file, region, region)
				continue
			}
			got := b.body
			if connect != "" {
				if len(got) == 0 || got[0] != connect {
					report(b, "the block connects differently from %s's // connect: line (%q)", file, connect)
					continue
				}
				got = got[1:]
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				report(b, "the %s block differs from %s's region %q:\nREADME:\n%s\ntest:\n%s",
					b.lang, file, region, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		default:
			report(b, "unknown quick-start marker %q", b.marker)
		}
	}
	return problems
}

// regionOf returns the lines of the region name of a test's source, one
// tab of indentation less, without its "// connect:" comment and the line
// after it, which it returns apart.
func regionOf(src, name string) (lines []string, connect string, ok bool) {
	in := false
	all := strings.Split(src, "\n")
	for i := 0; i < len(all); i++ {
		l := strings.TrimPrefix(all[i], "\t")
		switch {
		case !in && strings.TrimSpace(l) == "// quick start: "+name:
			in, ok = true, true
		case in && strings.TrimSpace(l) == "// end quick start":
			return lines, connect, ok
		case in && strings.HasPrefix(l, "// connect: "):
			connect = strings.TrimPrefix(l, "// connect: ")
			i++ // the test's own connection
		case in:
			lines = append(lines, l)
		}
	}
	return nil, "", false
}

// export is a line that only exports a shell variable: export NAME=value.
var export = regexp.MustCompile(`^export [A-Z][A-Z0-9_]*=(\$\([^)]*\)|\S+)$`)

var assignment = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=("[^"]*"|\S*)\s+`)

// checkCommand checks one line of a commands block.
func checkCommand(fsys fs.FS, line string) []string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSpace(line)
	if export.MatchString(line) {
		return nil // a shell variable the next lines (and the reader's client) use
	}
	var problems []string
	for {
		m := assignment.FindStringSubmatch(line)
		if m == nil {
			break
		}
		if !goSourceNames(fsys, ".", `"`+m[1]+`"`) {
			problems = append(problems, fmt.Sprintf("no Go source reads %q", m[1]))
		}
		line = line[len(m[0]):]
	}
	words := strings.Fields(line)
	switch {
	case len(words) == 2 && words[0] == "make":
		mk, err := fs.ReadFile(fsys, "Makefile")
		if err != nil || !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(words[1])+`:`).Match(mk) {
			problems = append(problems, fmt.Sprintf("the Makefile has no target %q", words[1]))
		}
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && strings.HasPrefix(words[2], "./"):
		pkg := path.Clean(words[2])
		if len(words) > 3 && !goSourceNames(fsys, pkg, `"`+words[3]+`"`) {
			problems = append(problems, fmt.Sprintf("%s has no subcommand %q", pkg, words[3]))
		}
		for _, w := range words[4:] {
			if f, ok := strings.CutPrefix(w, "--"); ok {
				f, _, _ = strings.Cut(f, "=")
				if !goSourceNames(fsys, pkg, `("`+f+`"`) {
					problems = append(problems, fmt.Sprintf("%s has no flag %q", pkg, f))
				}
			}
		}
	default:
		problems = append(problems, fmt.Sprintf("%q is neither make TARGET nor go run ./PKG", line))
	}
	return problems
}

// goSourceNames reports whether a non-test Go file under dir holds s.
func goSourceNames(fsys fs.FS, dir, s string) bool {
	found := false
	_ = fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return nil
		}
		if d.IsDir() && p != dir && (d.Name() == "bin" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return fs.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		if b, err := fs.ReadFile(fsys, p); err == nil && strings.Contains(string(b), s) {
			found = true
		}
		return nil
	})
	return found
}

// TestQuickStartTokenWorks runs README's front-door commands up to serve
// in a shell, as a reader does, and checks that the token the client
// reads (FRONTDOOR_TOKEN) is one serve accepts for acme: shown, long
// enough, and the one FRONTDOOR_TOKENS maps.
func TestQuickStartTokenWorks(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl here, which README's commands use")
	}
	var script []string
	for _, b := range quickStartBlocks(readme(t)) {
		if b.marker != "commands" || !strings.Contains(strings.Join(b.body, "\n"), frontdoor.TokensEnv+"=") {
			continue
		}
		for _, l := range b.body {
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			switch l = strings.TrimSpace(l); {
			case export.MatchString(l):
				script = append(script, l)
			case strings.HasPrefix(l, frontdoor.TokensEnv+"="):
				// serve's environment, printed instead of serving
				assign := assignment.FindStringSubmatch(l)
				script = append(script, "export "+assign[1]+"="+assign[2])
			}
		}
	}
	if len(script) < 2 {
		t.Fatalf("README's front-door commands set no token the client can read: %q", script)
	}
	script = append(script, `printf '%s\n%s\n' "$FRONTDOOR_TOKEN" "$`+frontdoor.TokensEnv+`"`)
	out, err := exec.Command("sh", "-c", strings.Join(script, "\n")).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(script, "\n"), err)
	}
	client, tokens, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	tenants, err := frontdoor.ParseTokens(tokens)
	if err != nil {
		t.Fatalf("serve would refuse README's %s: %v", frontdoor.TokensEnv, err)
	}
	if tenant, ok := tenants.Lookup(client); !ok || tenant != "acme" {
		t.Fatalf("the client's FRONTDOOR_TOKEN is not acme's token at serve (tenant %q, %v)", tenant, ok)
	}
}
