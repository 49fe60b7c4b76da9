package frontdoor

import (
	"strings"
	"testing"

	"github.com/durable-llm/durable-llm/policies/request"
)

// TestIDsFor: without LLM_ID_SECRET the front door keeps working on a
// loopback address (plain SHA-256 IDs, local development) and refuses any
// address other machines can reach, naming the variable; with a secret it
// listens anywhere with keyed IDs.
func TestIDsFor(t *testing.T) {
	secret := strings.Repeat("k", request.MinIDSecretLen)
	tests := []struct {
		addr, secret string
		keyed        bool
		wantErr      string
	}{
		{"127.0.0.1:8080", "", false, ""},
		{"localhost:8080", "", false, ""},
		{"[::1]:8080", "", false, ""},
		{"127.0.0.2:8080", "", false, ""},
		{":8080", "", false, "the front door listens on :8080, beyond this machine, and LLM_ID_SECRET is not set"},
		{"0.0.0.0:8080", "", false, "LLM_ID_SECRET is not set"},
		{"[::]:8080", "", false, "LLM_ID_SECRET is not set"},
		{"10.0.0.5:8080", "", false, "LLM_ID_SECRET is not set"},
		{"frontdoor.internal:8080", "", false, "LLM_ID_SECRET is not set"},
		{"0.0.0.0:8080", secret, true, ""},
		{"127.0.0.1:8080", secret, true, ""},
		{"127.0.0.1:8080", "short", false, "LLM_ID_SECRET: the workflow ID secret has 5 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.addr+"/"+map[bool]string{true: "secret", false: "no secret"}[tt.secret != ""], func(t *testing.T) {
			ids, err := IDsFor(tt.addr, func(k string) string {
				if k == request.EnvIDSecret {
					return tt.secret
				}
				return ""
			})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("IDsFor(%q) error = %v, want %q", tt.addr, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("IDsFor(%q) = %v", tt.addr, err)
			}
			if ids.Keyed() != tt.keyed {
				t.Errorf("Keyed = %v, want %v", ids.Keyed(), tt.keyed)
			}
		})
	}
}
