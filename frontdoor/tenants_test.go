package frontdoor

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tokens of the tests, each at least MinTokenLen characters.
const (
	tokA = "tok-a-0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d"
	tokB = "tok-b-9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c"
	tokC = "tok-c-1a3c5e7a9c1e3a5c7e9a1c3e5a7c9e"
)

func TestParseTokens(t *testing.T) {
	tn, err := ParseTokens(" " + tokA + "=acme, " + tokB + "=globex,," + tokC + "=acme ")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token, tenant string
		ok            bool
	}{
		{tokA, "acme", true},
		{tokB, "globex", true},
		{tokC, "acme", true},
		{tokA[:len(tokA)-1], "", false},
		{tokA + " ", "", false},
		{strings.ToUpper(tokA), "", false},
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

// TestTokenWithEqualsSignIsWhole: a pair is cut at its last "=", so a
// token with "=" in it (base64 padding) is the whole token, never a
// shorter prefix of it that anyone could guess more easily.
func TestTokenWithEqualsSignIsWhole(t *testing.T) {
	tok := "c2VjcmV0LXRva2VuLW9mLWFjbWUtMTIzNA=="
	tn, err := ParseTokens(tok + "=acme")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := tn.Lookup(tok); !ok || got != "acme" {
		t.Errorf("Lookup(the whole token) = %q, %v; want acme", got, ok)
	}
	for _, prefix := range []string{"c2VjcmV0LXRva2VuLW9mLWFjbWUtMTIzNA", "c2VjcmV0LXRva2VuLW9mLWFjbWUtMTIzNA="} {
		if got, ok := tn.Lookup(prefix); ok {
			t.Errorf("a prefix of the token is accepted, as tenant %q", got)
		}
	}
}

func TestParseTokensErrorsNeverQuoteTokens(t *testing.T) {
	const secret = "secret-token-1-aaaaaaaaaaaaaaaaaaaaaaaa"
	for _, tc := range []struct{ in, want string }{
		{secret, "pair 1: want token=tenant"},
		{secret + "=", "pair 1: tenant name is empty"},
		{"=acme", "pair 1: empty token"},
		{secret + "=acme," + secret + "=globex", `pair 2: the same token is given to tenants "acme" and "globex"`},
		{secret + "=ac me", "has spaces"},
		{tokA + "=acme,secret-token-2=globex", "pair 2: the token is shorter than 32 characters"},
		{tokA + "=acme, secret-token-1-aaaaaaaaaaaaaaaa=globex", "pair 2: the token is shorter than 32 characters"},
	} {
		_, err := ParseTokens(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTokens(%q) = %v, want an error containing %q", tc.in, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "secret-token") || strings.Contains(err.Error(), tokA) {
			t.Errorf("the error quotes a token: %v", err)
		}
	}
}

func TestTenantsFile(t *testing.T) {
	sum := sha256.Sum256([]byte(tokB))
	data := "tenants:\n" +
		"  - name: acme\n    tokens: [" + tokA + ", " + tokC + "]\n" +
		"  - name: globex\n    token_sha256: [" + hex.EncodeToString(sum[:]) + "]\n"
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	const tokI = "tok-initech-4d5e6f7a8b9c0d1e2f3a4b5c6d"
	tn, err := LoadTenantsFromEnv(path, tokI+"=initech")
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{tokA: "acme", tokC: "acme", tokB: "globex", tokI: "initech"} {
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
		{"no name", "tenants:\n  - tokens: [" + tokA + "]\n", "tenants[0].tokens[0]: tenant name is empty"},
		{"short token", "tenants:\n  - name: acme\n    tokens: [" + tokA + ", tok-acme]\n", "tenants[0].tokens[1]: the token is shorter than 32 characters"},
		{"= in the name", "tenants:\n  - name: ac=me\n    tokens: [" + tokA + "]\n", `tenants[0].tokens[0]: tenant name "ac=me" has "="`},
		{"negative limit", "tenants:\n  - name: acme\n    tokens: [" + tokA + "]\n    limits: {max_in_flight: -1}\n", "tenants[0].limits: max_in_flight is -1"},
		{"negative default", "defaults: {tokens_per_minute: -5}\ntenants:\n  - name: acme\n    tokens: [" + tokA + "]\n", "defaults: tokens_per_minute is -5"},
		{"negative retention", "tenants:\n  - name: acme\n    tokens: [" + tokA + "]\n    limits: {store_retention: -1h}\n", "tenants[0].limits: store_retention is -1h0m0s"},
		{"unknown limit", "tenants:\n  - name: acme\n    tokens: [" + tokA + "]\n    limits: {rpm: 5}\n", "field rpm not found"},
		{"limits twice", "tenants:\n  - name: acme\n    tokens: [" + tokA + "]\n    limits: {max_in_flight: 1}\n  - name: acme\n    tokens: [" + tokC + "]\n    limits: {max_in_flight: 2}\n", `tenants[1].limits: tenant "acme" has limits already in tenants[0]`},
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
	if got, ok := tn.Lookup("tok-acme-dev-3f9a0c7e5b1d4a2c8e6f09b1"); !ok || got != "acme" {
		t.Errorf("Lookup(acme's token) = %q, %v", got, ok)
	}
	if got, ok := tn.Lookup("tok-globex-dev-b7e1c94a2d6f08357a9c1e4b"); !ok || got != "globex" {
		t.Errorf("Lookup by digest = %q, %v", got, ok)
	}
	if got, want := tn.Limits("acme"), (Limits{RequestsPerMinute: 120, TokensPerMinute: 1_000_000, MaxInFlight: 16, ValidationMSPerMinute: 6000}); got != want {
		t.Errorf("Limits(acme) = %+v, want %+v", got, want)
	}
	if got := tn.Limits("globex"); got != DefaultLimits {
		t.Errorf("Limits(globex) = %+v, want the defaults %+v", got, DefaultLimits)
	}
}

// TestTenantsFileLimits: the file's defaults are decoded over
// DefaultLimits (an explicit 0 is no limit), a tenant's limits over the
// file's defaults, and the tenants of FRONTDOOR_TOKENS get the file's
// defaults.
func TestTenantsFileLimits(t *testing.T) {
	data := "defaults:\n  requests_per_minute: 60\n  tokens_per_minute: 0\n" +
		"tenants:\n" +
		"  - name: acme\n    tokens: [" + tokA + "]\n    limits: {max_in_flight: 2}\n" +
		"  - name: globex\n    tokens: [" + tokB + "]\n"
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	tn, err := LoadTenantsFromEnv(path, tokC+"=initech")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant string
		want   Limits
	}{
		{"acme", Limits{RequestsPerMinute: 60, TokensPerMinute: 0, MaxInFlight: 2, ValidationMSPerMinute: DefaultLimits.ValidationMSPerMinute}},
		{"globex", Limits{RequestsPerMinute: 60, TokensPerMinute: 0, MaxInFlight: DefaultLimits.MaxInFlight, ValidationMSPerMinute: DefaultLimits.ValidationMSPerMinute}},
		{"initech", Limits{RequestsPerMinute: 60, TokensPerMinute: 0, MaxInFlight: DefaultLimits.MaxInFlight, ValidationMSPerMinute: DefaultLimits.ValidationMSPerMinute}},
	} {
		if got := tn.Limits(tc.tenant); got != tc.want {
			t.Errorf("Limits(%s) = %+v, want %+v", tc.tenant, got, tc.want)
		}
	}
	env, err := ParseTokens(tokC + "=initech")
	if err != nil {
		t.Fatal(err)
	}
	if got := env.Limits("initech"); got != DefaultLimits {
		t.Errorf("without a file: Limits = %+v, want DefaultLimits", got)
	}
}
