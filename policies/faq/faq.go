package faq

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"unicode"

	"github.com/durable-llm/durable-llm/internal/yamlnode"
	"github.com/durable-llm/durable-llm/policies/keyword"
	"go.yaml.in/yaml/v3"
)

// The FAQ is the first business fallback (docs/how-it-works.md step 7): when no model may
// or can answer, the best matching FAQ answer above a threshold is returned,
// with the entry's id recorded. It is matched on the fallback path, often
// while the upstream is overloaded, so the index is built once at load and a
// match only walks the postings of the question's features: about 25 µs and
// 42 small allocations for a one-sentence question against the example FAQ
// (BenchmarkFAQMatch), about 55–80 µs against 500 entries
// (faqeval.BenchmarkMatch500, make faq-eval).

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
	// cjk per entry: whether its lang tag names a language written in CJK
	// characters (zh, ja, ko); unknown when the entry has no tag.
	cjk []faqScript
	// typos indexes the FAQ's English words for typo correction.
	typos faqTypos
}

// faqScript is the script an entry or a question is written in.
type faqScript int8

const (
	scriptUnknown faqScript = iota
	scriptLatin
	scriptCJK
)

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
		seen := map[string]bool{}
		for j := 0; j+1 < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			field := at + "." + k.Value
			if seen[k.Value] {
				p.add(k.Line, field, "given twice")
				continue
			}
			seen[k.Value] = true
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
		if len(e.Questions) == 0 && !seen["questions"] {
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

// ---- index and matching ----

// Feature weights. An English word counts 1 and each of its character
// trigrams 0.35 (trigrams let "refunded" meet "refund" and survive typos); a
// Chinese character bigram counts 1 and a single character 0.25.
const (
	faqWordWeight        = 1.0
	faqTrigramWeight     = 0.35
	faqBigramWeight      = 1.0
	faqUnigramWeight     = 0.25
	faqLoneCharWeight    = 1.0
	faqUnknownStretchExp = 0.25
)

// faqWholeCoverageExp: an entry whose paraphrases and keywords together
// cover the question's features scores at least coverage^1.5, so a question
// that mixes words of two paraphrases ("my card keeps getting declined")
// is not held to either paraphrase alone.
const faqWholeCoverageExp = 1.5

// faqUnseenIDF scales the IDF of a feature the FAQ never uses, above the
// IDF of any feature it does (1 + ln(N+1) would be its plain smoothed
// IDF): a word nothing in the FAQ explains ("router", "IRS", "首都") is the
// mark of a question that shares a word with an entry but asks something
// else.
const faqUnseenIDF = 1.3

// Keyword bonus: the first keyword of an entry found in the question adds
// faqKeywordBonus to the entry's score, each further one faqKeywordBonusMore,
// in all at most faqKeywordBonusMax.
const (
	faqKeywordBonus     = 0.2
	faqKeywordBonusMore = 0.1
	faqKeywordBonusMax  = 0.3
)

// buildFAQ indexes valid entries.
func buildFAQ(source string, entries []Entry) *FAQ {
	f := &FAQ{source: source, entries: entries, postings: map[string][]faqPosting{}}

	// Term frequencies of every doc: paraphrases, then the whole entry.
	var docs []map[string]float64
	df := map[string]int{}
	f.keywords = make([][]string, len(entries))
	f.cjk = make([]faqScript, len(entries))
	addWords := func(s string) {
		faqScan(s, func(w string) {
			if !faqStopWords[w] {
				f.typos.add(w)
			}
		}, func([]rune) {})
	}
	for i, e := range entries {
		f.cjk[i] = faqLangScript(e.Lang)
		whole := map[string]float64{}
		for j, q := range e.Questions {
			addWords(keyword.Fold(q))
			tf := faqFeatures(keyword.Fold(q), nil)
			docs = append(docs, tf)
			f.docEntry = append(f.docEntry, i)
			f.docQuestion = append(f.docQuestion, j)
			for k, w := range tf {
				whole[k] += w
			}
		}
		for _, k := range e.Keywords {
			addWords(keyword.Fold(k))
			for ft, w := range faqFeatures(keyword.Fold(k), nil) {
				whole[ft] += w
			}
			if kw := keyword.Fold(k); kw != "" {
				f.keywords[i] = append(f.keywords[i], kw)
			}
		}
		docs = append(docs, whole)
		f.docEntry = append(f.docEntry, i)
		f.docQuestion = append(f.docQuestion, -1)
		for ft := range whole {
			df[ft]++
		}
	}

	// Smoothed inverse document frequency over entries: a feature in every
	// entry ("how", "怎么") weighs 1, one in a single entry about 1+ln(N/2),
	// one the FAQ never uses 1+ln(N+1).
	n := float64(len(entries))
	f.idf = make(map[string]float64, len(df))
	for ft, d := range df {
		f.idf[ft] = 1 + math.Log((1+n)/(1+float64(d)))
	}
	f.unseenIDF = 1 + faqUnseenIDF*math.Log(1+n)

	for d, tf := range docs {
		var norm float64
		for ft, w := range tf {
			w *= f.idf[ft]
			tf[ft] = w
			norm += w * w
		}
		if norm == 0 {
			continue
		}
		norm = math.Sqrt(norm)
		for ft, w := range tf {
			f.postings[ft] = append(f.postings[ft], faqPosting{doc: d, weight: w / norm})
		}
	}
	return f
}

// Match returns the entry that best answers question, when its score
// reaches threshold (threshold ≤ 0 or NaN: DefaultThreshold).
//
// The score is in [0, 1]:
//
//	score = L · min(1, S + K · W)
//
// S compares the question with each of the entry's documents (every
// paraphrase alone, and the entry as a whole: all its paraphrases and
// keywords) and keeps the best:
//
//	S = max(max over docs of cos(q, d) · √coverage(q, d), W^1.5)
//	W = coverage(q, whole entry)
//
// where q and d are TF-IDF vectors and coverage is the share of the
// question's squared weight on features that d also has. The cosine alone
// lets a one-word paraphrase ("When are you open?") match any question that
// uses the word ("how do I open a bank account"); the coverage factor asks
// that the document explain most of what was asked. An identical paraphrase
// gives S = 1. The features are:
//   - English and other space-separated words, lower-cased, stop words
//     ("how", "do", "i", "my" …) dropped, lightly stemmed ("refunds",
//     "refunded" → "refund"), plus their character trigrams;
//   - Chinese (and Japanese, Korean) text: character bigrams and single
//     characters, after cutting out function words (的, 了, 吗, 怎么, 请问 …);
//     mixed text yields both kinds.
//
// Words and phrases that mean the same to a shop's customers are read as
// one word on both sides (faqSynonyms: "parcel", "shipment" → "package",
// "paid" → "pay", "shipped" → "delivery", "Germany" → "country";
// faqPhrases: "sign in" → "login", "hasn't arrived" → "missing", "how
// soon" → "how long"; faqCJKSynonyms: 帐号 → 账号, 顺丰 → 快递). An English word of five
// letters or more that the FAQ never uses is read as the FAQ's word one
// edit away, if any ("refnud" → "refund", "cancle" → "cancel"; a word of
// four only as one with a letter more, "ordr" → "order"); a Chinese
// character that makes a pair the FAQ never uses is read as its homophone
// when that makes a pair the FAQ uses (包果 → 包裹, 退宽 → 退款). A
// character alone between function words is a word and weighs like a
// bigram; a stretch of k bigrams the FAQ never uses (a product name) weighs
// k^0.75 bigrams, not k.
//
// The IDF is computed over the entries, so words every entry uses weigh
// little, and words the FAQ never uses ("France", "天气", "router") weigh
// most (1 + 1.3·ln(N+1)): they lower both the cosine and the coverage of a
// question that shares a word with an entry but asks something else.
//
// K is the keyword bonus: 0.2 for the first of the entry's keywords found in
// the question (matched like business-rule keywords), 0.1 for each further
// one, at most 0.3; it counts in proportion to W, so a keyword in a question
// the entry otherwise does not explain ("tax refund from the IRS") adds
// little. A keyword alone does not reach the default threshold.
//
// L is 0.8 when the entry's lang names a language of the other script than
// most of the question (an English entry for "password忘了怎么办"), else 1:
// a question gets the answer in its own language when the FAQ has one.
//
// Ties go to the entry first in the file, except that among entries that
// reach 1 the one with the closer paraphrase wins. The cost is one pass over the
// question, over the postings of its features and over the keywords,
// independent of the length of the answers.
func (f *FAQ) Match(question string, threshold float64) (Match, bool) {
	if f == nil || len(f.entries) == 0 {
		return Match{}, false
	}
	if !(threshold > 0) {
		threshold = DefaultThreshold
	}
	folded := keyword.Fold(question)
	q := faqFeatures(folded, f)
	script := faqQuestionScript(folded)

	var norm float64
	for ft, w := range q {
		idf, ok := f.idf[ft]
		if !ok {
			idf = f.unseenIDF
		}
		w *= idf
		q[ft] = w
		norm += w * w
	}
	// For every doc: the cosine, and the share of the question's squared
	// weight on features the doc has.
	cos := make([]float64, len(f.docEntry))
	covered := make([]float64, len(f.docEntry))
	if norm > 0 {
		norm = math.Sqrt(norm)
		for ft, w := range q {
			w /= norm
			for _, p := range f.postings[ft] {
				cos[p.doc] += w * p.weight
				covered[p.doc] += w * w
			}
		}
	}

	// Docs are grouped by entry, in entry order.
	// An entry's raw score is before the cap at 1: when two entries both
	// reach 1 (each explains all of the question), the one that explains it
	// by more (a paraphrase close to the question) wins.
	best, bestScore, bestRaw, bestQuestion := -1, 0.0, 0.0, 0
	for d := 0; d < len(cos); {
		e := f.docEntry[d]
		sim, question, questionSim, whole := 0.0, 0, -1.0, 0.0
		for ; d < len(cos) && f.docEntry[d] == e; d++ {
			s := cos[d] * math.Sqrt(covered[d])
			sim = max(sim, s)
			if qi := f.docQuestion[d]; qi >= 0 && s > questionSim {
				question, questionSim = qi, s
			}
			if f.docQuestion[d] < 0 {
				whole = covered[d]
			}
		}
		sim = max(sim, math.Pow(whole, faqWholeCoverageExp))
		bonus := 0.0
		for _, kw := range f.keywords[e] {
			if keyword.In(folded, kw) {
				if bonus == 0 {
					bonus = faqKeywordBonus
				} else {
					bonus += faqKeywordBonusMore
				}
			}
		}
		raw := sim + min(bonus, faqKeywordBonusMax)*whole + questionSim
		if f.cjk[e] != scriptUnknown && script != scriptUnknown && f.cjk[e] != script {
			raw *= faqOtherScript
		}
		score := min(1, sim+min(bonus, faqKeywordBonusMax)*whole)
		if f.cjk[e] != scriptUnknown && script != scriptUnknown && f.cjk[e] != script {
			score *= faqOtherScript
		}
		if score > bestScore+1e-12 || score > bestScore-1e-12 && score >= 1-1e-12 && raw > bestRaw+1e-12 {
			best, bestScore, bestRaw, bestQuestion = e, score, raw, question
		}
	}
	if best < 0 || bestScore < threshold {
		return Match{}, false
	}
	ent := f.entries[best]
	return Match{
		ID:       ent.ID,
		Answer:   ent.Answer,
		Score:    bestScore,
		Question: ent.Questions[bestQuestion],
	}, true
}

// faqFeatures returns the weighted term frequencies of the features of s,
// folded by matchFold: "w:" words, "t:" word trigrams, "b:" CJK bigrams,
// "u:" CJK characters.
func faqFeatures(s string, f *FAQ) map[string]float64 {
	tf := map[string]float64{}
	// The words of a stretch of Latin text, as phrase keys; a CJK run ends
	// the stretch.
	var keys []string
	addStem := func(stem string) {
		tf["w:"+stem] += faqWordWeight
		padded := " " + stem + " "
		for i := 0; i+3 <= len(padded); i++ {
			tf["t:"+padded[i:i+3]] += faqTrigramWeight
		}
	}
	flush := func() {
		for i := 0; i < len(keys); {
			if p := faqPhraseAt(keys[i:]); p != nil {
				for _, stem := range p.to {
					addStem(stem)
				}
				i += len(p.keys)
				continue
			}
			if !faqStopWords[keys[i]] {
				addStem(keys[i])
			}
			i++
		}
		keys = keys[:0]
	}
	faqScan(s, func(w string) {
		if !faqStopWords[w] && f != nil {
			w = f.fixTypo(w)
		}
		keys = append(keys, faqWordKey(w))
	}, func(run []rune) {
		flush()
		run = faqCJKSynonymRun(run)
		if f != nil {
			run = faqCJKSynonymRun(f.fixCJKTypos(run))
		}
		faqCJKFeatures(run, tf, f)
	})
	flush()
	return tf
}

// known reports whether the FAQ uses the feature ft.
func (f *FAQ) known(ft string) bool {
	_, ok := f.idf[ft]
	return ok
}

// fixTypo returns w, or the FAQ's word w is a typo of when the FAQ does
// not use w.
func (f *FAQ) fixTypo(w string) string {
	if f.known("w:" + faqWord(w)) {
		return w
	}
	if c := f.typos.correct(w); c != "" {
		return c
	}
	if c := f.typos.correctFar(w); c != "" {
		return c
	}
	return w
}

// faqOtherScript scales the score of an entry tagged with a language
// written in the other script than the question's (an English entry for a
// Chinese question): a question gets the answer in its own language when
// the FAQ has one, and mixed text ("refund 多久到账") is read by the
// script most of it is written in.
const faqOtherScript = 0.8

// faqLangScript is the script of a language tag: CJK for zh, ja, ko,
// Latin for any other tag, unknown for none.
func faqLangScript(tag string) faqScript {
	primary, _, _ := strings.Cut(strings.ToLower(tag), "-")
	switch primary {
	case "":
		return scriptUnknown
	case "zh", "ja", "ko", "yue", "wuu", "cmn":
		return scriptCJK
	}
	return scriptLatin
}

// faqQuestionScript is the script most of the folded question s is written
// in: CJK when it has at least as many CJK characters as other words.
func faqQuestionScript(s string) faqScript {
	words, cjk := 0, 0
	faqScan(s, func(string) { words++ }, func(run []rune) { cjk += len(run) })
	switch {
	case cjk > 0 && cjk >= words:
		return scriptCJK
	case words > 0:
		return scriptLatin
	}
	return scriptUnknown
}

// faqScan cuts s into words (letters and digits; "what's" → "whats",
// "don't" → "dont": one word) and runs of CJK text, in order, and hands
// each to word or cjk. cjk's run is reused after it returns.
func faqScan(s string, word func(string), cjk func([]rune)) {
	var w strings.Builder
	var run []rune
	flushWord := func() {
		if w.Len() > 0 {
			word(w.String())
			w.Reset()
		}
	}
	flushCJK := func() {
		if len(run) > 0 {
			cjk(run)
			run = run[:0]
		}
	}
	for _, r := range s {
		switch {
		case faqIsCJK(r):
			flushWord()
			run = append(run, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			flushCJK()
			w.WriteRune(r)
		case (r == '\'' || r == '’') && w.Len() > 0:
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
}

// faqIsCJK reports whether r is written without spaces between words.
func faqIsCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// faqCJKFeatures adds the bigrams and characters of a run of CJK text, cut
// at function words so that "我的订单到哪了" gives 订单 单到 到哪 and no
// bigram across a removed word.
func faqCJKFeatures(run []rune, tf map[string]float64, f *FAQ) {
	seg := 0 // start of the current segment
	emit := func(end int) {
		if end-seg == 1 {
			// A character alone between function words is a word (退 in
			// 能退吗, 坏 in 坏了).
			tf["u:"+string(run[seg])] += faqLoneCharWeight
			return
		}
		for i := seg; i < end; i++ {
			tf["u:"+string(run[i])] += faqUnigramWeight
		}
		// Bigrams; a stretch of k bigrams the FAQ never uses (搅拌 拌机) is
		// one word it does not know, and weighs as one: 1/√k each.
		for i := seg; i+1 < end; {
			b := "b:" + string(run[i:i+2])
			if f == nil || f.known(b) {
				tf[b] += faqBigramWeight
				i++
				continue
			}
			j := i + 1
			for j+1 < end && !f.known("b:"+string(run[j:j+2])) {
				j++
			}
			w := faqBigramWeight / math.Pow(float64(j-i), faqUnknownStretchExp)
			for ; i < j; i++ {
				tf["b:"+string(run[i:i+2])] += w
			}
		}
	}
	for i := 0; i < len(run); {
		if n := faqCJKStopAt(run[i:]); n > 0 {
			emit(i)
			i += n
			seg = i
			continue
		}
		i++
	}
	emit(len(run))
}

// faqCJKStopAt returns the length of the function word at the start of run,
// longest first, or 0.
func faqCJKStopAt(run []rune) int {
	for _, w := range faqCJKStopWords[run[0]] {
		if len(w) <= len(run) && string(run[:len(w)]) == string(w) {
			return len(w)
		}
	}
	return 0
}

// faqCJKStopWords are Chinese function words, by first character, longest
// first. They carry no topic: 怎么 and 请问 appear in questions about anything.
var faqCJKStopWords = func() map[rune][][]rune {
	words := []string{
		"请问", "怎么样", "怎么办", "怎么", "怎样", "如何", "什么", "为什么", "为啥",
		"可以", "能不能", "能否", "是否", "有没有", "是不是", "一下", "我们", "你们",
		"您好", "你好", "谢谢", "麻烦", "帮我", "这个", "那个", "现在", "已经",
		"一般", "的", "了", "吗", "呢", "吧", "啊", "呀", "哦", "嘛", "我", "你", "您",
		"能", "想", "要", "跟", "和", "弄", "还", "就", "都", "也", "个", "刚", "得",
	}
	m := map[rune][][]rune{}
	for _, w := range words {
		r := []rune(w)
		m[r[0]] = append(m[r[0]], r)
	}
	for _, ws := range m {
		// Longest first, so 怎么样 wins over 怎么.
		for i := 1; i < len(ws); i++ {
			for j := i; j > 0 && len(ws[j]) > len(ws[j-1]); j-- {
				ws[j], ws[j-1] = ws[j-1], ws[j]
			}
		}
	}
	return m
}()

// faqStopWords are English words that carry no topic.
var faqStopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		a an the and or but if so of to in on at by for with from about into as
		is are was were be been being am do does did done doing have has had
		i me my mine im ive you your yours youre we our us they them their
		he she him her it its this that these those there here
		what whats which who whom whose when where wheres why how hows
		can could would should will shall may might must cant couldnt wont
		dont doesnt didnt isnt arent wasnt werent havent hasnt hadnt
		not no yes any some all just still yet also very too really
		please pls hi hello hey thanks thank ok okay
		want wanna need like would get got let tell know help
		now right guys u ur r wat wot plz thx something anything thing things
		certain ago
	`) {
		m[w] = true
	}
	return m
}()

// faqStem strips common English inflections so that forms of a word meet:
// "refunds", "refunded", "refunding" → "refund"; "deliveries", "delivery" →
// "deliveri"; "cancelled", "cancel" → "cancel"; "charge", "charges" →
// "charg". It is deliberately crude; the trigram features absorb the rest.
func faqStem(w string) string {
	if len(w) < 4 || !faqASCIIWord(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) >= 5:
		w = w[:len(w)-3] + "i"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	switch {
	case strings.HasSuffix(w, "ing") && len(w) >= 6:
		w = w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && len(w) >= 5:
		w = w[:len(w)-2]
	}
	switch {
	case strings.HasSuffix(w, "e") && len(w) >= 4:
		w = w[:len(w)-1]
	case strings.HasSuffix(w, "y") && len(w) >= 4:
		w = w[:len(w)-1] + "i"
	}
	if n := len(w); n >= 4 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiou0123456789", rune(w[n-1])) {
		w = w[:n-1]
	}
	return w
}

// faqASCIIWord reports whether w is ASCII letters and digits only.
func faqASCIIWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if !keyword.IsASCIIAlnum(w[i]) {
			return false
		}
	}
	return true
}
