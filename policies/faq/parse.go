package faq

import (
	"fmt"
	"os"
	"strings"
	"unicode"

	"github.com/durable-llm/durable-llm/internal/yamlnode"
	"go.yaml.in/yaml/v3"
)

// LoadFAQ reads and parses the FAQ file at path; see ParseFAQ.
func LoadFAQ(path string) (*FAQ, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("FAQ file: %w", err)
	}
	return ParseFAQ(data, path)
}

// ParseFAQ parses an FAQ file and builds its index. source names the file in
// errors. The file is a mapping with one key, entries, a list of Entry:
//
//	entries:
//	  - id: refund-en
//	    lang: en
//	    questions: [How do I get a refund?, I want my money back]
//	    keywords: [refund, money back]
//	    answer: You can request a refund within 30 days …
//
// A bad file is refused with every problem, each as "file:line: field:
// problem": a missing or duplicate id, no questions, an empty question,
// keyword or answer, an unknown field, no entries.
func ParseFAQ(data []byte, source string) (*FAQ, error) {
	if source == "" {
		source = "<FAQ>"
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("invalid FAQ %s: %w", source, err)
	}
	p := &faqProblems{source: source}
	var entries []Entry
	var doc *yaml.Node
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		doc = root.Content[0]
	}
	switch {
	case doc == nil || doc.Kind == yaml.ScalarNode && doc.Tag == "!!null":
		p.add(1, "entries", "missing: the file is empty (want a mapping with an entries list)")
	case doc.Kind != yaml.MappingNode:
		p.add(doc.Line, "(top level)", "%s (want a mapping with an entries list)", yamlnode.Describe(doc))
	default:
		var list *yaml.Node
		for i := 0; i+1 < len(doc.Content); i += 2 {
			k, v := doc.Content[i], doc.Content[i+1]
			switch {
			case k.Value != "entries":
				p.add(k.Line, k.Value, "unknown field (want entries)")
			case list != nil:
				p.add(k.Line, "entries", "given twice")
			default:
				list = v
			}
		}
		switch {
		case list == nil:
			p.add(doc.Line, "entries", "missing (want a list of entries)")
		case list.Kind != yaml.SequenceNode:
			p.add(list.Line, "entries", "%s (want a list of entries)", yamlnode.Describe(list))
		case len(list.Content) == 0:
			p.add(list.Line, "entries", "empty (want at least one entry)")
		default:
			entries = parseFAQEntries(list, p)
		}
	}
	if len(p.list) > 0 {
		return nil, p
	}
	return buildFAQ(source, entries), nil
}

// faqProblems collects the problems of an FAQ file; it is the error of
// ParseFAQ.
type faqProblems struct {
	source string
	list   []string
}

func (p *faqProblems) add(line int, field, format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf("%s:%d: %s: %s", p.source, line, field, fmt.Sprintf(format, args...)))
}

// Error returns every problem on one line.
func (p *faqProblems) Error() string {
	return "invalid FAQ " + strings.Join(p.list, "; ")
}

// parseFAQEntries decodes and checks the entries list.
func parseFAQEntries(list *yaml.Node, p *faqProblems) []Entry {
	entries := make([]Entry, 0, len(list.Content))
	firstLine := map[string]int{} // id → line of its first entry
	for i, n := range list.Content {
		at := fmt.Sprintf("entries[%d]", i)
		if n.Kind != yaml.MappingNode {
			p.add(n.Line, at, "%s (want a mapping with id, questions, keywords, answer, lang)", yamlnode.Describe(n))
			continue
		}
		var e Entry
		idLine := n.Line
		given := map[string]bool{}
		for j := 0; j+1 < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			field := at + "." + k.Value
			if given[k.Value] {
				p.add(k.Line, field, "given twice")
				continue
			}
			given[k.Value] = true
			switch k.Value {
			case "id":
				e.ID = faqScalar(v, field, p)
				idLine = v.Line
			case "lang":
				e.Lang = faqScalar(v, field, p)
			case "answer":
				e.Answer = faqScalar(v, field, p)
			case "questions":
				e.Questions = faqScalarList(v, field, p)
			case "keywords":
				e.Keywords = faqScalarList(v, field, p)
			default:
				p.add(k.Line, field, "unknown field (want id, questions, keywords, answer or lang)")
			}
		}

		switch id := e.ID; {
		case strings.TrimSpace(id) == "":
			p.add(idLine, at+".id", "missing (want a unique name for the entry)")
		case strings.ContainsFunc(id, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
			p.add(idLine, at+".id", "%q has spaces or control characters", id)
		default:
			if first, dup := firstLine[id]; dup {
				p.add(idLine, at+".id", "duplicate id %q (first at line %d)", id, first)
			} else {
				firstLine[id] = idLine
			}
		}
		name := at
		if e.ID != "" {
			name = fmt.Sprintf("%s (id %q)", at, e.ID)
		}
		if e.Lang != "" && !faqLangTag(e.Lang) {
			p.add(n.Line, at+".lang", "%q is not a language tag (want e.g. en, zh, zh-CN)", e.Lang)
		}
		if len(e.Questions) == 0 && !given["questions"] {
			p.add(n.Line, at+".questions", "missing in %s (want at least one paraphrase)", name)
		} else if len(e.Questions) == 0 {
			p.add(n.Line, at+".questions", "empty in %s (want at least one paraphrase)", name)
		}
		for j, q := range e.Questions {
			if strings.TrimSpace(q) == "" {
				p.add(n.Line, fmt.Sprintf("%s.questions[%d]", at, j), "empty question in %s", name)
			}
		}
		for j, k := range e.Keywords {
			if strings.TrimSpace(k) == "" {
				p.add(n.Line, fmt.Sprintf("%s.keywords[%d]", at, j), "empty keyword in %s", name)
			}
		}
		if strings.TrimSpace(e.Answer) == "" {
			p.add(n.Line, at+".answer", "missing or empty in %s (want the text returned to the user)", name)
		}
		entries = append(entries, e)
	}
	return entries
}

// faqScalar decodes a string field.
func faqScalar(v *yaml.Node, field string, p *faqProblems) string {
	if v.Kind != yaml.ScalarNode {
		p.add(v.Line, field, "%s (want a string)", yamlnode.Describe(v))
		return ""
	}
	if v.Tag == "!!null" {
		return ""
	}
	return v.Value
}

// faqScalarList decodes a list of strings; a single string is a list of one.
func faqScalarList(v *yaml.Node, field string, p *faqProblems) []string {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return nil
		}
		return []string{v.Value}
	case yaml.SequenceNode:
		out := make([]string, 0, len(v.Content))
		for i, c := range v.Content {
			if c.Kind != yaml.ScalarNode {
				p.add(c.Line, fmt.Sprintf("%s[%d]", field, i), "%s (want a string)", yamlnode.Describe(c))
				continue
			}
			out = append(out, c.Value)
		}
		return out
	}
	p.add(v.Line, field, "%s (want a list of strings)", yamlnode.Describe(v))
	return nil
}

// faqLangTag reports whether s looks like a BCP 47 language tag: letters,
// digits and '-', starting with 2–3 letters.
func faqLangTag(s string) bool {
	primary, _, _ := strings.Cut(s, "-")
	if len(primary) < 2 || len(primary) > 3 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case (r >= '0' && r <= '9' || r == '-') && i >= len(primary):
		default:
			return false
		}
	}
	return true
}
