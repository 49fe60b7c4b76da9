package faq

import (
	"strings"
	"unicode"

	"github.com/durable-llm/durable-llm/policies/keyword"
)

// Normalize is a question as the FAQ reads it, as one key: folded like
// keywords (case, full-width forms), English words stemmed with the words
// that carry no topic left out, Chinese (and other CJK) text with its
// function words left out, in order and space-separated. "What's the
// status of my ORDER?" and "status of my order" give the same key, and so
// do "请问我的订单到哪了？" and "订单到哪".
func Normalize(question string) string {
	var out []string
	var word strings.Builder
	var cjk []rune
	flushWord := func() {
		if word.Len() == 0 {
			return
		}
		w := word.String()
		word.Reset()
		if !faqStopWords[w] {
			out = append(out, faqStem(w))
		}
	}
	flushCJK := func() {
		var kept []rune
		for i := 0; i < len(cjk); {
			if n := faqCJKStopAt(cjk[i:]); n > 0 {
				i += n
				continue
			}
			kept = append(kept, cjk[i])
			i++
		}
		if len(kept) > 0 {
			out = append(out, string(kept))
		}
		cjk = cjk[:0]
	}
	for _, r := range keyword.Fold(question) {
		switch {
		case faqIsCJK(r):
			flushWord()
			cjk = append(cjk, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			flushCJK()
			word.WriteRune(r)
		case (r == '\'' || r == '’') && word.Len() > 0:
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
	return strings.Join(out, " ")
}
