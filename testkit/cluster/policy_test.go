package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPolicyEndpoints: a policy whose models name their base_url keeps
// its endpoints (make cluster starts no simulator for it and sets no
// LLM_BASE_URL over it); one that names none, or no policy, gets llmsim.
func TestPolicyEndpoints(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	own := write("own.yaml", "models:\n  - name: gpt-4o\n    base_url: https://llm.internal.example/v1\n")
	none := write("none.yaml", "models:\n  - name: gpt-4o\n")
	for _, c := range []struct {
		path string
		want bool
	}{{own, true}, {none, false}, {"", false}} {
		got, err := policyEndpoints(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("policyEndpoints(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	if _, err := policyEndpoints(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing policy file was taken")
	}
}
