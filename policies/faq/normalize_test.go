package faq

import "testing"

func TestNormalize(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"What's the status of my ORDER?", "status of my order"},
		{"Where is my refund??", "where are my refunds"},
		{"请问我的订单到哪了？", "订单到哪"},
		{"ｏｒｄｅｒ　１２", "order 12"},
	} {
		if na, nb := Normalize(c.a), Normalize(c.b); na != nb || na == "" {
			t.Errorf("Normalize(%q) = %q, Normalize(%q) = %q: want the same key", c.a, na, c.b, nb)
		}
	}
	for _, c := range []struct{ a, b string }{
		{"Where is my refund?", "Where is my order?"},
		{"How do I cancel my order?", "Why can't I cancel my order?"},
		{"I want to cancel my order", "I don't want to cancel my order"},
		{"怎么退款", "为什么退款"},
	} {
		if Normalize(c.a) == Normalize(c.b) {
			t.Errorf("%q and %q share the key %q", c.a, c.b, Normalize(c.a))
		}
	}
}
