package prompt

import (
	_ "embed"
	"unicode/utf8"
)

// The estimator counts in sixteenths of a token (estUnit) and rounds up
// once per string.
const estUnit = 16

// estimateTables is generated from cl100k_base by
//
//	go test ./policies/prompt -run TestEstimateTables -update-estimate-tables
//
// and checked against the tokenizer by TestEstimateTables. Layout:
// estBigramBytes bytes of bitmap, bit a*26+b set when the letter pair
// (a, b) is rare inside cl100k_base's lower-case words; then two bits per
// rune from U+0080 to U+FFFF: what the rune costs alone (1–3; 0 for the
// surrogates, which never decode); then one byte per ASCII byte c: what a
// long run of c costs per character, in 256ths of a token (estRepeatMin
// or more of the same byte: "=====", "zzzz", spaces), the larger of
// cl100k_base and o200k_base.
//
//go:embed estimate_cl100k.bin
var estimateTables string

const (
	estBigramBytes = (26*26 + 7) / 8
	estRuneFirst   = 0x80
	estRuneLast    = 0xFFFF
	estRunesBytes  = (estRuneLast - estRuneFirst + 1 + 3) / 4
	estRepeatAt    = estBigramBytes + estRunesBytes
	estTablesLen   = estRepeatAt + 128
	estRepeatMin   = 8
)

// estRepeat returns the cost of k ≥ estRepeatMin copies of the ASCII byte
// c, or -1 if s is not one repeated byte.
func estRepeat(s string) int {
	c := s[0]
	for i := 1; i < len(s); i++ {
		if s[i] != c {
			return -1
		}
	}
	return estUnit + (len(s)*int(estimateTables[estRepeatAt+int(c)])+15)/16
}

// Byte classes of the scanner.
const (
	ecPunct   = iota // ASCII punctuation, symbols and control characters
	ecLower          // a-z
	ecUpper          // A-Z
	ecDigit          // 0-9
	ecSpace          // ' ', '\t', '\v', '\f'
	ecNewline        // '\n', '\r'
	ecHigh           // a byte of a non-ASCII character
)

var estClass = func() (c [256]uint8) {
	for b := range 256 {
		switch {
		case b >= 0x80:
			c[b] = ecHigh
		case b >= 'a' && b <= 'z':
			c[b] = ecLower
		case b >= 'A' && b <= 'Z':
			c[b] = ecUpper
		case b >= '0' && b <= '9':
			c[b] = ecDigit
		case b == ' ' || b == '\t' || b == '\v' || b == '\f':
			c[b] = ecSpace
		case b == '\n' || b == '\r':
			c[b] = ecNewline
		default:
			c[b] = ecPunct
		}
	}
	return c
}()

// estWord is what a lower-case (or capitalised) word of n letters costs,
// in sixteenths, before rare letter pairs; estCaps the same for a run of
// capitals (beyond the table: n/2.5 tokens).
var (
	estWord = [17]int{0, 16, 16, 17, 17, 18, 18, 19, 20, 21, 23, 25, 27, 30, 33, 37, 41}
	estCaps = [...]int{0, 16, 18, 22, 29, 33, 38, 45, 51, 58, 64}
)

// estRarePair is what a rare letter pair inside a word adds; estLead what
// a punctuation mark or tab leading a word adds (".Println", "/otlp").
const (
	estRarePair = 24
	estLead     = 8
	// estForeignPercent is added to the words of a text with an accented
	// Latin letter.
	estForeignPercent = 30
)

func estWordUnits(n int) int {
	if n < len(estWord) {
		return estWord[n]
	}
	// Long runs are rare in prose; "ababab…" takes a token per pair.
	return estWord[len(estWord)-1] + (n-len(estWord)+1)*estUnit*5/8
}

func estCapsUnits(n int) int {
	if n < len(estCaps) {
		return estCaps[n]
	}
	return n * 32 / 5
}

// estPair[(a&31)<<5|b&31] is estRarePair if the letter pair (a, b),
// either case, is rare, else 0.
var estPair = func() (p [32 * 32]uint8) {
	for a := range 26 {
		for b := range 26 {
			i := a*26 + b
			if estimateTables[i>>3]&(1<<(i&7)) != 0 {
				p[(a+1)<<5|(b+1)] = estRarePair
			}
		}
	}
	return p
}()

// estRuneUnits is what a non-ASCII rune costs.
func estRuneUnits(r rune, size int) int {
	switch {
	case size == 1: // invalid UTF-8: the tokenizer takes raw bytes
		return estUnit
	case r <= estRuneLast:
		i := int(r - estRuneFirst)
		c := int(estimateTables[estBigramBytes+i>>2]>>((i&3)*2)) & 3
		if c == 0 {
			c = size
		}
		return c * estUnit
	case r >= 0x1F000 && r <= 0x1FAFF: // emoji: 2 or 3 alone
		return 3 * estUnit
	default:
		return size * estUnit
	}
}

// estLetters returns the cost of the ASCII letter run starting at s[i]
// and where it ends: sub-words split at case changes, each charged by its
// length plus its rare letter pairs.
func estLetters(s string, i int) (units, end int) {
	n := len(s)
	start := i
	for {
		k := i
		for i < n && s[i]-'A' < 26 {
			i++
		}
		nu := i - k
		var prev byte
		if nu > 0 {
			prev = s[i-1] & 31
		}
		l := i
		for i < n && s[i]-'a' < 26 {
			c := s[i] & 31
			units += int(estPair[(int(prev)<<5|int(c))&(len(estPair)-1)]) // prev 0: no pair
			prev = c
			i++
		}
		nl := i - l
		switch {
		case nl == 0:
			units += estCapsUnits(nu)
		case nu >= 2: // HTTPServer: HTTP + Server
			units += estCapsUnits(nu-1) + estWordUnits(nl+1)
		default:
			units += estWordUnits(nu + nl)
		}
		if i >= n || s[i]-'A' >= 26 {
			break
		}
	}
	if i-start >= estRepeatMin && s[start] == s[start+1] {
		if u := estRepeat(s[start:i]); u >= 0 {
			return u, i
		}
	}
	if i-start >= 6 && s[start] == s[start+2] && s[start+1] == s[start+3] {
		// "ababab", "hahaha": a token per pair.
		j := start + 2
		for j < i && s[j] == s[j-2] {
			j++
		}
		if j == i {
			units = max(units, (i-start+1)/2*estUnit)
		}
	}
	return units, i
}

// estPunct is what a run of n ASCII punctuation characters costs.
// Longer runs: 3/4 of a token a character (random punctuation is 2/3).
var estPunct = [...]int{0, 16, 16, 17, 23, 30, 38}

// estSpaces is what a piece of n whitespace characters with t changes of
// character costs: one token, half a token per change, and one per 12
// characters (runs of newlines, tabs or "\r\n" take 8–30 characters a
// token, alternating " \n" two).
func estSpaces(n, t int) int {
	return estUnit + t*estUnit/2 + n*estUnit/12
}

// estimateUnits is EstimateTokens in sixteenths of a token.
func estimateUnits(s string) int {
	units, words, runs := 0, 0, 0
	latin := 0 // accented Latin letters: French, German, Polish…
	n := len(s)
	for i := 0; i < n; {
		switch estClass[s[i]] {
		case ecLower, ecUpper:
			var u int
			u, i = estLetters(s, i)
			words += u
			runs++
		case ecDigit:
			j := i + 1
			for j < n && estClass[s[j]] == ecDigit {
				j++
			}
			units += (j - i + 2) / 3 * estUnit
			i = j
		case ecPunct:
			j := i + 1
			for j < n && estClass[s[j]] == ecPunct {
				j++
			}
			k := j - i
			if k == 1 && j < n && (estClass[s[j]] == ecLower || estClass[s[j]] == ecUpper) {
				// `[^\r\n\p{L}\p{N}]?\p{L}+`: it leads the word.
				units += estLead
				i = j
				continue
			}
			switch u := -1; {
			case k >= estRepeatMin && s[i] == s[i+1]:
				if u = estRepeat(s[i:j]); u >= 0 {
					units += u
					break
				}
				units += k * estUnit * 3 / 4
			case k < len(estPunct):
				units += estPunct[k]
			default:
				units += k * estUnit * 3 / 4
			}
			// ` ?[^\s\p{L}\p{N}]+[\r\n]*`: newlines join the piece.
			for j < n && estClass[s[j]] == ecNewline {
				units += estUnit / 4
				j++
			}
			i = j
		case ecSpace, ecNewline:
			if s[i] == ' ' && i+1 < n && estClass[s[i+1]] <= ecUpper && estClass[s[i+1]] >= ecLower {
				i++ // " word": the space leads the word
				continue
			}
			j, lastNL, changes := i, -1, 0
			for ; j < n && (estClass[s[j]] == ecSpace || estClass[s[j]] == ecNewline); j++ {
				if estClass[s[j]] == ecNewline {
					lastNL = j
				}
				if j > i && s[j] != s[j-1] {
					changes++
				}
			}
			if j-i >= estRepeatMin && s[i] == s[i+1] {
				if u := estRepeat(s[i:j]); u >= 0 {
					units += u + estUnit // and the piece split off its end
					i = j
					continue
				}
			}
			if lastNL >= 0 { // `\s*[\r\n]+`: up to the last newline
				units += estSpaces(lastNL+1-i, changes)
				i = lastNL + 1
			}
			t := j - i // spaces and tabs left, before s[j]
			if t == 0 {
				continue
			}
			next := uint8(ecPunct)
			if j < n {
				next = estClass[s[j]]
			}
			switch {
			case j == n: // `\s+` at the end
				units += estSpaces(t, 0)
			case next == ecLower || next == ecUpper || (s[j-1] == ' ' && (next == ecPunct || next == ecHigh)):
				// The last one leads the next piece; `\s+(?!\S)` takes the rest.
				if s[j-1] != ' ' {
					units += estLead
				}
				if t > 1 {
					units += estSpaces(t-1, 0)
				}
			default: // before a digit, or a tab before punctuation: its own piece
				if t > 1 {
					units += estSpaces(t-1, 0)
				}
				units += estUnit
			}
			i = j
		default: // ecHigh
			r, size := utf8.DecodeRuneInString(s[i:])
			units += estRuneUnits(r, size)
			if r >= 0xC0 && r <= 0x24F && r != 0xD7 && r != 0xF7 {
				latin++
			}
			i += size
		}
	}
	if latin*16 >= runs && latin > 0 {
		// French, German, Polish… words split more than English ones (one
		// accented letter in 16 words is not English).
		words += words * estForeignPercent / 100
	}
	return units + words
}
