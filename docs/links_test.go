package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"unicode"
)

// repo is the repository's root, seen from this package.
var repo = os.DirFS("..")

// pages are the Markdown files whose links are checked: README.md and
// every docs/*.md.
func pages(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	docs, err := fs.Glob(fsys, "docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, docs...)
}

// TestLinksResolve: every relative link and image in README.md and
// docs/*.md names a file or folder of the repository, and every #anchor a
// heading of the page it points to, as GitHub spells heading anchors.
func TestLinksResolve(t *testing.T) {
	for _, p := range brokenLinks(repo, pages(t, repo)) {
		t.Error(p)
	}
}

// TestBrokenLinksAreFound: the checker above reports a missing file, a
// missing anchor in another page and in its own, and accepts the links
// that resolve, so TestLinksResolve can fail.
func TestBrokenLinksAreFound(t *testing.T) {
	fsys := fstest.MapFS{
		"README.md": {Data: []byte("# Top\n\n## Quick start (`make run`)\n\n" +
			"[ok](docs/a.md) [ok](docs/a.md#the-policy-file) [ok](#quick-start-make-run) " +
			"[ok](https://example.com/x) ![ok](docs/p.png) `[not a link](nowhere.md)`\n\n" +
			"```md\n[in code](nowhere.md)\n```\n\n" +
			"[gone](docs/gone.md) [bad](docs/a.md#no-such-heading) [bad](#quick-start)\n")},
		"docs/a.md":  {Data: []byte("# A\n\n## The policy file\n\n[up](../README.md#top) [gone](../x/y.go)\n")},
		"docs/p.png": {Data: []byte{0}},
	}
	got := brokenLinks(fsys, []string{"README.md", "docs/a.md"})
	want := []string{
		"README.md: docs/gone.md: no such file",
		"README.md: docs/a.md#no-such-heading: docs/a.md has no heading with that anchor",
		"README.md: #quick-start: README.md has no heading with that anchor",
		"docs/a.md: ../x/y.go: no such file",
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("broken links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, slug string }{
		{"Quick start", "quick-start"},
		{"A production cluster on one machine (`make cluster`)", "a-production-cluster-on-one-machine-make-cluster"},
		{"What it survives (checked by `make test`)", "what-it-survives-checked-by-make-test"},
		{"From a Temporal workflow (Go)", "from-a-temporal-workflow-go"},
		{"Failure classes (defaults; all configurable in the policy file)", "failure-classes-defaults-all-configurable-in-the-policy-file"},
		{"starter_doctor -- and **more**", "starter_doctor----and-more"},
		{"[Linked](x.md) heading", "linked-heading"},
	} {
		if got := slug(c.heading); got != c.slug {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.slug)
		}
	}
}

var (
	fence     = regexp.MustCompile("^\\s*(```|~~~)")
	inline    = regexp.MustCompile("`[^`]*`")
	link      = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading   = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdLink    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlTag   = regexp.MustCompile(`<[^>]+>`)
	schemeful = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// prose is the page's lines outside fenced code blocks, with their line
// numbers (1-based).
func prose(text string) (lines []string, numbers []int) {
	in := false
	for i, l := range strings.Split(text, "\n") {
		if fence.MatchString(l) {
			in = !in
			continue
		}
		if !in {
			lines, numbers = append(lines, l), append(numbers, i+1)
		}
	}
	return lines, numbers
}

// slug is GitHub's anchor for a heading: the text as shown, lower case,
// every character but letters, digits, spaces, '-' and '_' removed, each
// space a '-'.
func slug(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	h = htmlTag.ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the heading anchors of a page; a repeated heading gets -1,
// -2, … as on GitHub.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	lines, _ := prose(text)
	for _, l := range lines {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// brokenLinks lists, for the given pages of fsys, each relative link whose
// file does not exist and each #anchor that names no heading of its page.
func brokenLinks(fsys fs.FS, pages []string) []string {
	var broken []string
	cache := map[string]map[string]bool{}
	anchorsOf := func(p string) (map[string]bool, error) {
		if a, ok := cache[p]; ok {
			return a, nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		cache[p] = anchors(string(b))
		return cache[p], nil
	}
	for _, page := range pages {
		b, err := fs.ReadFile(fsys, page)
		if err != nil {
			broken = append(broken, fmt.Sprintf("%s: %v", page, err))
			continue
		}
		lines, _ := prose(string(b))
		for _, l := range lines {
			l = inline.ReplaceAllString(l, "")
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if schemeful.MatchString(target) {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = path.Clean(path.Join(path.Dir(page), file))
					if _, err := fs.Stat(fsys, dest); err != nil {
						broken = append(broken, fmt.Sprintf("%s: %s: no such file", page, target))
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					broken = append(broken, fmt.Sprintf("%s: %s: an anchor into a file that is not Markdown", page, target))
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					broken = append(broken, fmt.Sprintf("%s: %s: %v", page, target, err))
					continue
				}
				if !a[frag] {
					broken = append(broken, fmt.Sprintf("%s: %s: %s has no heading with that anchor", page, target, dest))
				}
			}
		}
	}
	return broken
}
