package structured

import (
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
		text string
		want string // "" for valid; else a part of the error
	}{
		{`{"order_id":"42","status":"shipped"}`, ""},
		{"  {\"order_id\":\"42\",\"status\":\"pending\"}\n", ""},
		{`{"order_id":42,"status":"shipped"}`, "at /order_id"},
		{`{"order_id":"42"}`, "status"},
		{`{"order_id":"42","status":"lost"}`, "at /status"},
		{`{"order_id":"42","status":"shipped","x":1}`, "x"},
		{`{"order_id": "42", "status": `, "not valid JSON"},
		{`Sure! {"order_id":"42"}`, "not valid JSON"},
		{``, "empty"},
	}
	for _, c := range cases {
		err := s.Validate(c.text)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Validate(%q) = %v, want valid", c.text, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Validate(%q) = %v, want an error with %q", c.text, err, c.want)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Errorf("Validate(%q) error spans lines: %q", c.text, err)
		}
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
