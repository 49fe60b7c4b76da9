package structured

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

const orderSchema = `{"type":"object","properties":{"order_id":{"type":"string"},"status":{"type":"string","enum":["shipped","pending"]}},"required":["order_id","status"],"additionalProperties":false}`

func TestSchemaValidate(t *testing.T) {
	s, err := Compile(json.RawMessage(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		text   string
		public string // "" for valid; else the error's text
		detail string // a part of Detail
	}{
		{"good", `{"order_id":"42","status":"shipped"}`, "", ""},
		{"good with space", "  {\"order_id\":\"42\",\"status\":\"pending\"}\n", "", ""},
		{"wrong type", `{"order_id":42,"status":"shipped"}`, "at /order_id: fails type", "at /order_id: got number, want string"},
		{"missing", `{"order_id":"42"}`, "at /: fails required", "status"},
		{"not in enum", `{"order_id":"42","status":"lost"}`, "at /status: fails enum", "at /status: value must be one of"},
		{"extra", `{"order_id":"42","status":"shipped","x":1}`, "at /: fails additionalProperties", "'x'"},
		{"cut", `{"order_id": "42", "status": `, "the answer is not valid JSON", "not valid JSON: "},
		{"prose", `Sure! {"order_id":"42"}`, "the answer is not valid JSON", "invalid character 'S'"},
		{"empty", ``, "the answer is empty, not JSON", "empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := s.Validate(context.Background(), c.text)
			switch {
			case c.public == "" && err != nil:
				t.Errorf("Validate(%q) = %v, want valid", c.text, err)
			case c.public != "" && (err == nil || err.Error() != c.public):
				t.Errorf("Validate(%q) = %v, want %q", c.text, err, c.public)
			case c.public != "" && !strings.Contains(Detail(err), c.detail):
				t.Errorf("Detail(Validate(%q)) = %q, want %q in it", c.text, Detail(err), c.detail)
			case err != nil && strings.ContainsAny(err.Error()+Detail(err), "\n"):
				t.Errorf("Validate(%q) error spans lines: %q", c.text, Detail(err))
			}
		})
	}
}

func TestCompileRefusesBadSchemas(t *testing.T) {
	for _, raw := range []string{``, `[]`, `{"type":"nonsense"}`, `{"$ref":"https://example.com/s.json"}`, `{"type":`} {
		if _, err := Compile(json.RawMessage(raw)); err == nil {
			t.Errorf("Compile(%q) = nil error", raw)
		}
	}
	if _, err := Compile(json.RawMessage(`{"$defs":{"id":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/id"}}}`)); err != nil {
		t.Errorf("a local $ref: %v", err)
	}
}
