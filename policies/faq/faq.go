package faq

import (
	_ "embed"
	"sync"
)

// DefaultThreshold is the lowest score that counts as a match when no
// threshold is given; it is also the default of faq.threshold in the policy
// file.
const DefaultThreshold = 0.35

// faqExampleSource names the embedded example in errors and FAQ.Source.
const faqExampleSource = "<embedded faq_example.yaml>"

//go:embed faq_example.yaml
var faqExampleYAML []byte

// DefaultFAQYAML returns a copy of the embedded example FAQ file
// (faq_example.yaml: a customer-service FAQ in English and Chinese), the FAQ
// used when the policy file names none. It is a template for a real one.
func DefaultFAQYAML() []byte {
	return append([]byte(nil), faqExampleYAML...)
}

// defaultFAQ parses the embedded example once; a test keeps it valid.
var defaultFAQ = sync.OnceValue(func() *FAQ {
	f, err := ParseFAQ(faqExampleYAML, faqExampleSource)
	if err != nil {
		panic("policies: embedded faq_example.yaml is invalid: " + err.Error())
	}
	return f
})

// DefaultFAQ returns the FAQ of the embedded example file, parsed and
// indexed on first use. The result is shared; like every FAQ it is
// immutable and safe for concurrent use.
func DefaultFAQ() *FAQ { return defaultFAQ() }

// Entry is one entry of the FAQ file.
type Entry struct {
	// ID names the entry in results and history. Required, unique, no spaces.
	ID string `yaml:"id" json:"id"`
	// Lang is an optional language tag (en, zh, zh-CN …), for the people
	// who maintain the file; matching does not depend on it.
	Lang string `yaml:"lang,omitempty" json:"lang,omitempty"`
	// Questions are paraphrases of the question the entry answers. At
	// least one.
	Questions []string `yaml:"questions" json:"questions"`
	// Keywords raise the score of the entry when one of them occurs in the
	// question (matched like business-rule keywords). Optional.
	Keywords []string `yaml:"keywords,omitempty" json:"keywords,omitempty"`
	// Answer is the text returned to the user. Required.
	Answer string `yaml:"answer" json:"answer"`
}

// Match is the answer of FAQ.Match.
type Match struct {
	// ID of the matched entry.
	ID string `json:"id"`
	// Answer of the matched entry.
	Answer string `json:"answer"`
	// Score of the match in [0, 1]; see FAQ.Match.
	Score float64 `json:"score"`
	// Question is the entry's paraphrase closest to the asked question.
	Question string `json:"question"`
}

// FAQ is a parsed and indexed FAQ knowledge base. It is immutable after
// ParseFAQ and safe for concurrent use.
type FAQ struct {
	source  string
	entries []Entry

	// docs are the scored vectors: one per paraphrase, plus one per entry
	// for the entry as a whole (all paraphrases and keywords together).
	docEntry    []int // doc → entry
	docQuestion []int // doc → question index, -1 for the whole-entry doc
	// postings maps a feature to the docs that contain it, with the
	// feature's weight in the doc's unit-length vector.
	postings map[string][]faqPosting
	// idf of the features of the FAQ; unseenIDF for any other feature.
	idf       map[string]float64
	unseenIDF float64
	// keywords per entry, folded.
	keywords [][]string
	// entryScript per entry: the script of the language its lang tag
	// names (CJK for zh, ja, ko); unknown when the entry has no tag.
	entryScript []faqScript
	// typos indexes the FAQ's English words for typo correction.
	typos faqTypos
}

// faqPosting is one doc containing a feature, and the feature's weight there.
type faqPosting struct {
	doc    int
	weight float64
}

// Source returns where the FAQ came from (a path, or the embedded example).
func (f *FAQ) Source() string {
	if f == nil {
		return ""
	}
	return f.source
}

// Len returns the number of entries (0 for a nil FAQ).
func (f *FAQ) Len() int {
	if f == nil {
		return 0
	}
	return len(f.entries)
}

// Entries returns a copy of the entries, in file order.
func (f *FAQ) Entries() []Entry {
	out := make([]Entry, len(f.entries))
	for i, e := range f.entries {
		e.Questions = append([]string(nil), e.Questions...)
		e.Keywords = append([]string(nil), e.Keywords...)
		out[i] = e
	}
	return out
}
