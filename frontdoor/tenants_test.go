package frontdoor

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	tn, err := ParseTokens(" tok-a=acme, tok-b=globex,,tok-c=acme ")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token, tenant string
		ok            bool
	}{
		{"tok-a", "acme", true},
		{"tok-b", "globex", true},
		{"tok-c", "acme", true},
		{"tok-", "", false},
		{"tok-a ", "", false},
		{"TOK-A", "", false},
		{"", "", false},
	} {
		got, ok := tn.Lookup(tc.token)
		if got != tc.tenant || ok != tc.ok {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tc.token, got, ok, tc.tenant, tc.ok)
		}
	}
	if got := strings.Join(tn.Names(), ","); got != "acme,globex" {
		t.Errorf("Names() = %s", got)
	}
}

func TestParseTokensErrorsNeverQuoteTokens(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"secret-token-1", "pair 1: want token=tenant"},
		{"secret-token-1=", "pair 1: tenant name is empty"},
		{"=acme", "pair 1: empty token"},
		{"secret-token-1=acme,secret-token-1=globex", `pair 2: the same token is given to tenants "acme" and "globex"`},
		{"secret-token-1=ac me", "has spaces"},
	} {
		_, err := ParseTokens(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTokens(%q) = %v, want an error containing %q", tc.in, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "secret-token") {
			t.Errorf("the error quotes a token: %v", err)
		}
	}
}

func TestTenantsFile(t *testing.T) {
	sum := sha256.Sum256([]byte("tok-globex"))
	data := "tenants:\n" +
		"  - name: acme\n    tokens: [tok-acme-1, tok-acme-2]\n" +
		"  - name: globex\n    token_sha256: [" + hex.EncodeToString(sum[:]) + "]\n"
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	tn, err := LoadTenantsFromEnv(path, "tok-initech=initech")
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{"tok-acme-1": "acme", "tok-acme-2": "acme", "tok-globex": "globex", "tok-initech": "initech"} {
		if got, ok := tn.Lookup(tok); !ok || got != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tok, got, ok, want)
		}
	}
	if tn.Len() != 4 {
		t.Errorf("Len() = %d, want 4", tn.Len())
	}
}

func TestTenantsFileProblems(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"unknown field", "tenants:\n  - name: acme\n    token: [x]\n", "field token not found"},
		{"no tokens", "tenants:\n  - name: acme\n", "t.yaml: tenants[0]: no tokens and no token_sha256"},
		{"bad digest", "tenants:\n  - name: acme\n    token_sha256: [abc]\n", "tenants[0].token_sha256[0]: want 64 hex digits"},
		{"no name", "tenants:\n  - tokens: [x]\n", "tenants[0].tokens[0]: tenant name is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTenantsFile([]byte(tc.data), "t.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := LoadTenantsFromEnv("", " "); err == nil || !strings.Contains(err.Error(), TokensEnv) {
		t.Errorf("no tokens at all: err = %v, want one naming %s", err, TokensEnv)
	}
}

func TestExampleTenantsFileLoads(t *testing.T) {
	tn, err := LoadTenants(filepath.Join("testdata", "tenants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := tn.Lookup("tok-acme-dev"); !ok || got != "acme" {
		t.Errorf("Lookup(tok-acme-dev) = %q, %v", got, ok)
	}
	if got, ok := tn.Lookup("tok-globex-dev"); !ok || got != "globex" {
		t.Errorf("Lookup by digest = %q, %v", got, ok)
	}
}
