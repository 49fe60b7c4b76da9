package frontdoor

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// TokensEnv is the environment variable that maps bearer tokens to tenants:
//
//	FRONTDOOR_TOKENS="tok-a=acme,tok-b=globex"
const TokensEnv = "FRONTDOOR_TOKENS"

// Tenants maps bearer tokens to tenant names. Only the SHA-256 of each
// token is kept; Lookup compares the hash of a presented token with every
// known hash in constant time. A Tenants is read-only after it is built and
// safe for concurrent use.
type Tenants struct {
	entries []tenantEntry
	names   []string
}

type tenantEntry struct {
	hash   [sha256.Size]byte
	tenant string
}

// TenantsFile is the YAML shape of a tenants file:
//
//	tenants:
//	  - name: acme
//	    tokens: [tok-acme-1]         # bearer tokens as clients send them
//	  - name: globex
//	    token_sha256:                # or their SHA-256 (hex), so the file holds no secret
//	      - cf0b1ca40e47d039012df886642633225d987dbc397e9b576bd3a71a002050b8
type TenantsFile struct {
	Tenants []TenantEntry `yaml:"tenants"`
}

// TenantEntry is one tenant of a tenants file.
type TenantEntry struct {
	// Name of the tenant; part of every idempotency key of its calls.
	Name string `yaml:"name"`
	// Tokens are bearer tokens in clear.
	Tokens []string `yaml:"tokens"`
	// TokenSHA256 are hex SHA-256 digests of bearer tokens.
	TokenSHA256 []string `yaml:"token_sha256"`
}

// ErrNoTenants is returned when a configuration maps no token at all.
var ErrNoTenants = errors.New("no bearer tokens configured")

// Lookup returns the tenant of a bearer token. The time it takes does not
// depend on which token matched, nor on how much of a wrong token is right.
func (t *Tenants) Lookup(token string) (tenant string, ok bool) {
	if t == nil || token == "" {
		return "", false
	}
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(h[:], t.entries[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return t.entries[found].tenant, true
}

// Names returns the tenant names, in the order they were configured.
func (t *Tenants) Names() []string { return append([]string(nil), t.names...) }

// Len returns how many tokens are known.
func (t *Tenants) Len() int { return len(t.entries) }

// ParseTokens parses the FRONTDOOR_TOKENS format: comma-separated
// token=tenant pairs ("tok-a=acme,tok-b=globex"). Whitespace around pairs
// is ignored. Errors never quote a token.
func ParseTokens(s string) (*Tenants, error) {
	b := &tenantsBuilder{source: TokensEnv}
	for i, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		tok, tenant, found := strings.Cut(pair, "=")
		if !found {
			return nil, fmt.Errorf("%s: pair %d: want token=tenant", TokensEnv, i+1)
		}
		b.addToken(fmt.Sprintf("pair %d", i+1), strings.TrimSpace(tenant), strings.TrimSpace(tok))
	}
	return b.done()
}

// LoadTenants reads a YAML tenants file (see TenantsFile).
func LoadTenants(path string) (*Tenants, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTenantsFile(data, path)
}

// ParseTenantsFile parses a YAML tenants file; source names it in errors.
// Unknown fields are refused.
func ParseTenantsFile(data []byte, source string) (*Tenants, error) {
	var f TenantsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	b := &tenantsBuilder{source: source}
	for i, e := range f.Tenants {
		at := fmt.Sprintf("tenants[%d]", i)
		if len(e.Tokens) == 0 && len(e.TokenSHA256) == 0 {
			b.problem(at, "no tokens and no token_sha256")
		}
		for j, tok := range e.Tokens {
			b.addToken(fmt.Sprintf("%s.tokens[%d]", at, j), e.Name, tok)
		}
		for j, hx := range e.TokenSHA256 {
			where := fmt.Sprintf("%s.token_sha256[%d]", at, j)
			raw, err := hex.DecodeString(strings.TrimSpace(hx))
			if err != nil || len(raw) != sha256.Size {
				b.problem(where, "want 64 hex digits (the SHA-256 of the token)")
				continue
			}
			var h [sha256.Size]byte
			copy(h[:], raw)
			b.add(where, e.Name, h)
		}
	}
	return b.done()
}

// LoadTenantsFromEnv builds the tenants from a file (when path is not
// empty) and from the FRONTDOOR_TOKENS value env (when not empty), merged.
func LoadTenantsFromEnv(path, env string) (*Tenants, error) {
	merged := &Tenants{}
	if path != "" {
		t, err := LoadTenants(path)
		if err != nil {
			return nil, err
		}
		merged = t
	}
	if strings.TrimSpace(env) != "" {
		t, err := ParseTokens(env)
		if err != nil {
			return nil, err
		}
		b := &tenantsBuilder{source: TokensEnv, t: *merged}
		for _, e := range t.entries {
			b.add("", e.tenant, e.hash)
		}
		if merged, err = b.done(); err != nil {
			return nil, err
		}
	}
	if merged.Len() == 0 {
		return nil, fmt.Errorf("%w: set %s=\"token=tenant,…\" or give a tenants file", ErrNoTenants, TokensEnv)
	}
	return merged, nil
}

type tenantsBuilder struct {
	source   string
	t        Tenants
	problems []string
}

func (b *tenantsBuilder) problem(where, format string, args ...any) {
	b.problems = append(b.problems, fmt.Sprintf("%s: %s: %s", b.source, where, fmt.Sprintf(format, args...)))
}

func (b *tenantsBuilder) addToken(where, tenant, token string) {
	if token == "" {
		b.problem(where, "empty token")
		return
	}
	if strings.ContainsFunc(token, unicode.IsSpace) || !utf8.ValidString(token) {
		b.problem(where, "a token must be printable, without spaces")
		return
	}
	b.add(where, tenant, sha256.Sum256([]byte(token)))
}

func (b *tenantsBuilder) add(where, tenant string, h [sha256.Size]byte) {
	if p := tenantProblem(tenant); p != "" {
		b.problem(where, "tenant %s", p)
		return
	}
	for _, e := range b.t.entries {
		if e.hash == h {
			if e.tenant != tenant {
				b.problem(where, "the same token is given to tenants %q and %q", e.tenant, tenant)
			}
			return
		}
	}
	b.t.entries = append(b.t.entries, tenantEntry{hash: h, tenant: tenant})
	for _, n := range b.t.names {
		if n == tenant {
			return
		}
	}
	b.t.names = append(b.t.names, tenant)
}

func (b *tenantsBuilder) done() (*Tenants, error) {
	if len(b.problems) > 0 {
		return nil, errors.New(strings.Join(b.problems, "\n"))
	}
	t := b.t
	return &t, nil
}

// tenantProblem says what is wrong with a tenant name, or "".
func tenantProblem(name string) string {
	switch {
	case name == "":
		return "name is empty"
	case len(name) > 100:
		return fmt.Sprintf("name is %d bytes, over 100", len(name))
	case !utf8.ValidString(name):
		return "name is not valid UTF-8"
	case strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }):
		return fmt.Sprintf("name %q has spaces or unprintable characters", name)
	}
	return ""
}
