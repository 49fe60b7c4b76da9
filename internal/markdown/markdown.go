// Package markdown escapes text for the Temporal Web UI, which renders a
// workflow's summary and details as Markdown: a tenant's question, user
// or session ID shown there must read as the text it is, never as a link,
// an image, a heading or HTML an operator could be tricked by.
package markdown

import (
	"strings"
	"unicode"
)

// Escape returns s as literal Markdown text on one line: line breaks and
// other control characters become spaces, and every character that could
// start Markdown or HTML is backslash-escaped (an '_' between two letters
// or digits, as in customer_service, cannot, and stays as it is).
func Escape(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			b.WriteByte(' ')
			continue
		case r == '_':
			if i > 0 && i+1 < len(rs) && wordRune(rs[i-1]) && wordRune(rs[i+1]) {
				b.WriteRune(r)
				continue
			}
			b.WriteString(`\_`)
			continue
		case strings.ContainsRune("\\`*[]()<>#!|~{}", r):
			b.WriteByte('\\')
		case i == 0 && strings.ContainsRune("-+=.", r):
			// A list item or a heading underline at the start (a quote's
			// ">" is escaped above).
			b.WriteByte('\\')
		case r == '.' && i > 0 && allDigits(rs[:i]):
			// "1." at the start is an ordered list ("1)"'s ")" is escaped
			// above).
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func allDigits(rs []rune) bool {
	for _, r := range rs {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
