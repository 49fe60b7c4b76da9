package faq

import (
	"math"

	"github.com/durable-llm/durable-llm/policies/keyword"
)

// faqUnseenIDF scales the IDF of a feature the FAQ never uses, above the
// IDF of any feature it does (1 + ln(N+1) would be its plain smoothed
// IDF): a word nothing in the FAQ explains ("router", "IRS", "首都") is the
// mark of a question that shares a word with an entry but asks something
// else.
const faqUnseenIDF = 1.3

// buildFAQ indexes valid entries.
func buildFAQ(source string, entries []Entry) *FAQ {
	f := &FAQ{source: source, entries: entries, postings: map[string][]faqPosting{}}

	// Term frequencies of every doc: paraphrases, then the whole entry.
	var docs []map[string]float64
	df := map[string]int{}
	f.keywords = make([][]string, len(entries))
	f.entryScript = make([]faqScript, len(entries))
	addWords := func(s string) {
		faqScan(s, func(w string) {
			if !faqStopWords[w] {
				f.typos.add(w)
			}
		}, func([]rune) {})
	}
	for i, e := range entries {
		f.entryScript[i] = faqLangScript(e.Lang)
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

// known reports whether the FAQ uses the feature ft.
func (f *FAQ) known(ft string) bool {
	_, ok := f.idf[ft]
	return ok
}
