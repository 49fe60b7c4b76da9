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
	if Normalize("Where is my refund?") == Normalize("Where is my order?") {
		t.Error("different questions share a key")
	}
}
