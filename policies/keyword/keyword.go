package keyword

import (
	"strings"
	"unicode"
)

// In reports whether the folded keyword kw occurs in the folded text
// q: at a word start when kw starts with an ASCII letter or digit, anywhere
// otherwise. An empty keyword never matches.
func In(q, kw string) bool {
	if kw == "" {
		return false
	}
	if !IsASCIIAlnum(kw[0]) {
		return strings.Contains(q, kw)
	}
	for from := 0; from <= len(q)-len(kw); {
		i := strings.Index(q[from:], kw)
		if i < 0 {
			return false
		}
		at := from + i
		if at == 0 || !IsASCIIAlnum(q[at-1]) {
			return true
		}
		from = at + 1
	}
	return false
}

// isASCIIAlnum reports whether b is an ASCII letter or digit.
func IsASCIIAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// matchFold folds s for keyword and FAQ matching: lower case, full-width
// ASCII forms to ASCII, curly apostrophes to "'", the ideographic space and
// every other white space run to a single space, no leading or trailing
// space.
func Fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case r >= 0xFF01 && r <= 0xFF5E: // full-width ASCII
			r -= 0xFEE0
		case r == 0x3000: // ideographic space
			r = ' '
		case r == 0x2018 || r == 0x2019: // curly apostrophes: "can’t" is "can't"
			r = '\''
		}
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
