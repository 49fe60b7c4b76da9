package faq

import (
	"math"

	"github.com/durable-llm/durable-llm/policies/keyword"
)

// faqWholeCoverageExp: an entry whose paraphrases and keywords together
// cover the question's features scores at least coverage^1.5, so a question
// that mixes words of two paraphrases ("my card keeps getting declined")
// is not held to either paraphrase alone.
const faqWholeCoverageExp = 1.5

// Keyword bonus: the first keyword of an entry found in the question adds
// faqKeywordBonus to the entry's score, each further one faqKeywordBonusMore,
// in all at most faqKeywordBonusMax.
const (
	faqKeywordBonus     = 0.2
	faqKeywordBonusMore = 0.1
	faqKeywordBonusMax  = 0.3
)

// faqOtherScript scales the score of an entry tagged with a language
// written in the other script than the question's (an English entry for a
// Chinese question): a question gets the answer in its own language when
// the FAQ has one, and mixed text ("refund 多久到账") is read by the
// script most of it is written in.
const faqOtherScript = 0.8

// Match returns the entry that best answers question, when its score
// reaches threshold (threshold ≤ 0 or NaN: DefaultThreshold). The score is
// in [0, 1]; "Scoring" in the package documentation says how it is
// computed and how ties are broken.
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
		if f.entryScript[e] != scriptUnknown && script != scriptUnknown && f.entryScript[e] != script {
			raw *= faqOtherScript
		}
		score := min(1, sim+min(bonus, faqKeywordBonusMax)*whole)
		if f.entryScript[e] != scriptUnknown && script != scriptUnknown && f.entryScript[e] != script {
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
