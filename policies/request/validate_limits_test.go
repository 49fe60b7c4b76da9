package request

import (
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/config"
)

func TestValidateRequestSizeLimitsOfTemporal(t *testing.T) {
	cfg := config.DefaultConfig()
	q := []Message{{Role: RoleUser, Content: "where is my order?"}}
	tests := []struct {
		name  string
		req   Request
		field string
		says  string
	}{
		{"long scenario (a search attribute)", Request{Scenario: strings.Repeat("s", 3000), Messages: q}, "scenario", "over the limit of 256"},
		{"long user id", Request{UserID: strings.Repeat("u", 300), Messages: q}, "user_id", "over the limit of 256"},
		{"prompt small in bytes, too big as JSON",
			Request{Messages: []Message{{Role: RoleUser, Content: strings.Repeat("<", 400_000)}}}, "messages", "once JSON-encoded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.req, cfg)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.field+": ") || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not name %s (%s)", err, tc.field, tc.says)
			}
		})
	}
	if err := Validate(Request{Scenario: "customer_service", Messages: q}, cfg); err != nil {
		t.Fatalf("a normal request is refused: %v", err)
	}
}
