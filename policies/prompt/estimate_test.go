package prompt

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// estSubstrings returns s and k random substrings of it, cut at rune
// boundaries: messages are of every length.
func estSubstrings(rng *rand.Rand, s string, k int) []string {
	out := []string{s}
	for range k {
		a, b := rng.IntN(len(s)+1), rng.IntN(len(s)+1)
		if a > b {
			a, b = b, a
		}
		for a > 0 && a < len(s) && !utf8.RuneStart(s[a]) {
			a--
		}
		for b < len(s) && !utf8.RuneStart(s[b]) {
			b++
		}
		if b > a {
			out = append(out, s[a:b])
		}
	}
	return out
}

// estNatural says which corpus classes estLower must hold for; the others
// (runs of repeated characters, whitespace floods, random strings) only
// need estUpper and estFloor.
func estNatural(class string) bool {
	return class != "repeated" && class != "whitespace" && class != "random"
}

// TestEstimateTokensBounds measures EstimateTokens against cl100k_base
// and o200k_base on the corpus, per class, and checks the bounds Fit
// relies on for every text and every substring of it:
//
//	real ≤ estUpper(est)   every class but estLatinPlain
//	real ≥ estLower(est)   natural text, cl100k_base
//	real ≥ estFloor(est)   every class
//
// Run with -v for the table (ratios real/est; min and max over texts of
// 30 estimated tokens or more).
func TestEstimateTokensBounds(t *testing.T) {
	encodings := []*TokenCounter{mustCounter(t, "cl100k_base"), mustCounter(t, "o200k_base")}
	rng := rand.New(rand.NewPCG(7, 7))
	classes := append(estCorpus(rng), estClassSamples{"latin, no accent", estLatinPlain})
	t.Logf("%-16s %6s %8s | %-22s | %-22s", "class", "texts", "est", "cl100k real/est [min,max]", "o200k real/est [min,max]")
	for _, c := range classes {
		var texts []string
		for _, s := range c.samples {
			texts = append(texts, estSubstrings(rng, s, 8)...)
		}
		line := fmt.Sprintf("%-16s %6d", c.name, len(texts))
		sumE := 0
		for _, s := range texts {
			sumE += EstimateTokens(s)
		}
		line += fmt.Sprintf(" %8d", sumE)
		for _, tc := range encodings {
			sumX, lo, hi := 0, 99.0, 0.0
			for _, s := range texts {
				x, e := tc.Count(s), EstimateTokens(s)
				sumX += x
				if e >= 30 {
					r := float64(x) / float64(e)
					lo, hi = min(lo, r), max(hi, r)
				}
				if c.name == "latin, no accent" {
					continue
				}
				if x > estUpper(e) {
					t.Errorf("%s %s: %q: %d tokens > estUpper(%d) = %d", tc.Encoding(), c.name, s, x, e, estUpper(e))
				}
				if x < estFloor(e) {
					t.Errorf("%s %s: %q: %d tokens < estFloor(%d) = %d", tc.Encoding(), c.name, s, x, e, estFloor(e))
				}
				if estNatural(c.name) && tc.tight && x < estLower(e) {
					t.Errorf("%s %s: %q: %d tokens < estLower(%d) = %d", tc.Encoding(), c.name, s, x, e, estLower(e))
				}
			}
			line += fmt.Sprintf(" | %.2f [%.2f, %.2f]      ", float64(sumX)/float64(sumE), lo, hi)
		}
		t.Log(line)
	}
}

// Wrapping a question in a role (a folded system prompt: WrapQuestion, in
// English or Chinese, the texts joined by "\n\n" when there are several)
// costs one token more than the two texts, within fitJoinUp and
// fitJoinDown.
func TestEstimateJoinSlack(t *testing.T) {
	tc := mustCounter(t, "cl100k_base")
	rng := rand.New(rand.NewPCG(3, 4))
	var texts []string
	for _, c := range estCorpus(rng) {
		for _, s := range c.samples {
			texts = append(texts, estSubstrings(rng, s, 2)...)
		}
	}
	lo, hi := 0, 0
	for range 3000 {
		a, b := texts[rng.IntN(len(texts))], texts[rng.IntN(len(texts))]
		d := tc.Count(a+"\n\n"+b) - tc.Count(a) - tc.Count(b) - 1
		lo, hi = min(lo, d), max(hi, d)
		for _, q := range []string{b, "问题：" + b} {
			d = tc.Count(WrapQuestion(a, q)) - tc.Count(a) - tc.Count(q) - 1
			lo, hi = min(lo, d), max(hi, d)
		}
	}
	t.Logf("count(a+\"\\n\\n\"+b) - count(a) - count(b) - 1 in [%d, %d]", lo, hi)
	if hi > fitJoinUp || -lo > fitJoinDown {
		t.Errorf("join slack [%d, %d] outside [-%d, %d]", lo, hi, fitJoinDown, fitJoinUp)
	}
}

func BenchmarkEstimateTokens(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		name  string
		parts []string
	}{{"english", estEnglish}, {"chinese", estChinese}, {"code", estCode}} {
		var sb strings.Builder
		for sb.Len() < 64<<10 {
			sb.WriteString(c.parts[rng.IntN(len(c.parts))])
			sb.WriteString("\n\n")
		}
		s := sb.String()
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				EstimateTokens(s)
			}
		})
	}
}
