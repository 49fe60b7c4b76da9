package faq

import (
	"strings"

	"github.com/durable-llm/durable-llm/policies/keyword"
)

// Normalize is a question as the FAQ reads it, as one key for an exact
// match: folded like keywords (case, full-width forms), English words
// stemmed with the words that carry no topic left out, Chinese (and other
// CJK) text with its particles and courtesies left out, in order and
// space-separated. Unlike the FAQ's matching it keeps the words that turn
// a question's meaning (not, no, can't, why, how, when, 为什么, 怎么 …):
// "How do I cancel my order?" and "Why can't I cancel my order?" are two
// keys, while "What's the status of my ORDER?" and "status of my order"
// are one, and so are "请问我的订单到哪了？" and "订单到哪".
func Normalize(question string) string {
	var out []string
	faqScan(keyword.Fold(question), func(w string) {
		if !faqStopWords[w] || normalizeKeep[w] {
			out = append(out, faqStem(w))
		}
	}, func(run []rune) {
		var kept []rune
		for i := 0; i < len(run); {
			if n := cjkParticleAt(run[i:]); n > 0 {
				i += n
				continue
			}
			kept = append(kept, run[i])
			i++
		}
		if len(kept) > 0 {
			out = append(out, string(kept))
		}
	})
	return strings.Join(out, " ")
}

// normalizeKeep are the stop words that change what a question asks.
var normalizeKeep = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`not no cant cannot wont dont doesnt didnt isnt arent wasnt werent
		havent hasnt hadnt couldnt why how when where which who what can could should would will may must`) {
		m[w] = true
	}
	return m
}()

// cjkParticles are the Chinese words Normalize leaves out: particles,
// pronouns and courtesies, never a question word.
var cjkParticles = [][]rune{
	[]rune("请问"), []rune("您好"), []rune("你好"), []rune("谢谢"), []rune("麻烦"), []rune("一下"),
	[]rune("我们"), []rune("你们"), []rune("的"), []rune("了"), []rune("吗"), []rune("呢"), []rune("吧"),
	[]rune("啊"), []rune("呀"), []rune("哦"), []rune("嘛"), []rune("我"), []rune("你"), []rune("您"),
}

// cjkParticleAt returns the length of the particle at the start of run, or 0.
func cjkParticleAt(run []rune) int {
	for _, w := range cjkParticles {
		if len(w) <= len(run) && string(run[:len(w)]) == string(w) {
			return len(w)
		}
	}
	return 0
}
