package workflows

import "testing"

// TestJoinContinuation: a continuation is appended to the partial answer,
// and a model that started over (its text begins with the partial one)
// is kept once, not twice.
func TestJoinContinuation(t *testing.T) {
	for _, tc := range []struct{ partial, cont, want string }{
		{"Your order ships", " on Monday.", "Your order ships on Monday."},
		{"Your order ships", "Your order ships on Monday.", "Your order ships on Monday."},
		{"", "Your order ships on Monday.", "Your order ships on Monday."},
		{"Your order ships", "", "Your order ships"},
	} {
		if got := joinContinuation(tc.partial, tc.cont); got != tc.want {
			t.Errorf("joinContinuation(%q, %q) = %q, want %q", tc.partial, tc.cont, got, tc.want)
		}
	}
}
