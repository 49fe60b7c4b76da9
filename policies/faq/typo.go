package faq

import "slices"

// Typo correction for English words. A word of the question that the FAQ
// never uses ("refnud", "cancle", "pasword", "ordr") is read as the FAQ's
// word at edit distance 1 (one letter inserted, deleted, replaced, or two
// neighbours swapped) when there is one. A word one letter shorter than
// faqTypoMinLen is only read as a word with one more letter ("ordr" →
// "order"), shorter words are left alone: at that length one changed
// letter turns a real word into another ("card" and "cart").
const faqTypoMinLen = 5

// faqTypos indexes the FAQ's English words by themselves and by every
// one-letter deletion of them (symmetric deletion: two words at edit
// distance 1 share a key).
type faqTypos struct {
	byKey map[string][]string
	// byTrigram indexes the words of faqTypoFarMinLen letters or more by
	// their character trigrams (the word padded with a space each side),
	// for typos beyond one edit.
	byTrigram map[string][]string
}

// A word of faqTypoFarMinLen letters or more that is no word of the FAQ
// one edit away is read as the FAQ's word with the same first letter that
// shares the most character trigrams with it, when their Dice coefficient
// (2·shared / (trigrams of one + of the other)) is at least faqTypoFarDice
// and their lengths differ by at most 2: "passwrodd" → "password",
// "cancellatoin" → "cancellation".
const (
	faqTypoFarMinLen = 6
	faqTypoFarDice   = 0.45
)

// add indexes the surface word w.
func (t *faqTypos) add(w string) {
	if len(w) < faqTypoMinLen-1 || !faqASCIIWord(w) {
		return
	}
	if t.byKey == nil {
		t.byKey = map[string][]string{}
	}
	put := func(k string) {
		if !slices.Contains(t.byKey[k], w) {
			t.byKey[k] = append(t.byKey[k], w)
		}
	}
	put(w)
	for i := range len(w) {
		put(w[:i] + w[i+1:])
	}
	if len(w) >= faqTypoFarMinLen {
		if t.byTrigram == nil {
			t.byTrigram = map[string][]string{}
		}
		padded := " " + w + " "
		for i := 0; i+3 <= len(padded); i++ {
			k := padded[i : i+3]
			if !slices.Contains(t.byTrigram[k], w) {
				t.byTrigram[k] = append(t.byTrigram[k], w)
			}
		}
	}
}

// correctFar returns the FAQ's word closest to w by character trigrams
// (see faqTypoFarDice), the alphabetically first of equals, or "".
func (t *faqTypos) correctFar(w string) string {
	if len(w) < faqTypoFarMinLen || !faqASCIIWord(w) || t.byTrigram == nil {
		return ""
	}
	shared := map[string]int{}
	padded := " " + w + " "
	for i := 0; i+3 <= len(padded); i++ {
		for _, c := range t.byTrigram[padded[i:i+3]] {
			shared[c]++
		}
	}
	best, bestDice := "", 0.0
	for c, n := range shared {
		if c[0] != w[0] || len(c)-len(w) > 2 || len(w)-len(c) > 2 {
			continue
		}
		// A padded word of n letters has n trigrams.
		dice := 2 * float64(n) / float64(len(c)+len(w))
		if dice >= faqTypoFarDice && (dice > bestDice || dice == bestDice && c < best) {
			best, bestDice = c, dice
		}
	}
	return best
}

// correct returns the FAQ's word at edit distance 1 from w, the
// alphabetically first when there are several, or "".
func (t *faqTypos) correct(w string) string {
	if len(w) < faqTypoMinLen-1 || !faqASCIIWord(w) || t.byKey == nil {
		return ""
	}
	best := ""
	try := func(k string) {
		for _, c := range t.byKey[k] {
			if len(w) < faqTypoMinLen && len(c) <= len(w) {
				continue // a short word only lacks a letter
			}
			if c != w && (best == "" || c < best) && faqOSA1(w, c) {
				best = c
			}
		}
	}
	try(w)
	var buf []byte
	for i := range len(w) {
		buf = append(append(buf[:0], w[:i]...), w[i+1:]...)
		try(string(buf))
	}
	return best
}

// faqOSA1 reports whether a and b are at most one edit apart, counting a
// swap of two neighbouring letters as one edit.
func faqOSA1(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	switch len(b) - len(a) {
	case 0:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		if i == len(a) {
			return true
		}
		if a[i+1:] == b[i+1:] {
			return true // replaced
		}
		return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:] // swapped
	case 1:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		return a[i:] == b[i+1:]
	}
	return false
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
