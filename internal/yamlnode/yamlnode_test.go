package yamlnode

import (
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"mapping", "a: 1", "a mapping"},
		{"list", "[1, 2]", "a list"},
		{"integer as written", "0x1F", "0x1F"},
		{"float as written", "1.50", "1.50"},
		{"bool as written", "true", "true"},
		{"null", "~", "nothing"},
		{"text quoted", "fast", `"fast"`},
		{"quoted number stays text", `"12"`, `"12"`},
		{"text with a quote", `it's "x"`, `"it's \"x\""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(tt.doc), &doc); err != nil {
				t.Fatal(err)
			}
			if got := Describe(doc.Content[0]); got != tt.want {
				t.Errorf("Describe(%s) = %s, want %s", tt.doc, got, tt.want)
			}
		})
	}
}

func TestWant(t *testing.T) {
	var f *float64
	tests := []struct {
		v    any
		want string
	}{
		{map[string]int{}, "a mapping"}, {struct{}{}, "a mapping"}, {[]string{}, "a list"},
		{int64(1), "a whole number"}, {uint(1), "a whole number"}, {1.5, "a number"},
		{f, "a number"}, {true, "true or false"}, {"x", "a text"},
	}
	for _, tt := range tests {
		if got := Want(reflect.TypeOf(tt.v)); got != tt.want {
			t.Errorf("Want(%T) = %s, want %s", tt.v, got, tt.want)
		}
	}
}
