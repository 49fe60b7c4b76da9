package markdown_test

import (
	"testing"

	"github.com/durable-llm/durable-llm/internal/markdown"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "Where is my order 1234?", "Where is my order 1234?"},
		{"identifier", "customer_service", "customer_service"},
		{"link", "[reset your password](https://evil.example)", `\[reset your password\]\(https://evil.example\)`},
		{"image", "![x](https://evil.example/p.png)", `\!\[x\]\(https://evil.example/p.png\)`},
		{"html", "<img src=x onerror=alert(1)>", `\<img src=x onerror=alert\(1\)\>`},
		{"emphasis", "*urgent* _now_ `code`", `\*urgent\* \_now\_ \` + "`" + `code\` + "`"},
		{"new lines", "u-1\n# Heading\r\n- item", `u-1 \# Heading  - item`},
		{"heading at start", "# Heading", `\# Heading`},
		{"list at start", "- item", `\- item`},
		{"ordered list at start", "12. item", `12\. item`},
		{"backslash", `a\b`, `a\\b`},
		{"table", "a | b", `a \| b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := markdown.Escape(tc.in); got != tc.want {
				t.Fatalf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
