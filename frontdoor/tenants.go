package frontdoor

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/durable-llm/durable-llm/policies/config"
)

// TokensEnv is the environment variable that maps bearer tokens to tenants:
//
//	FRONTDOOR_TOKENS="<token of acme>=acme,<token of globex>=globex"
//
// A pair is cut at its last "=": a token may contain "=" (base64 padding),
// a tenant name may not.
const TokensEnv = "FRONTDOOR_TOKENS"

// MinTokenLen is the shortest bearer token accepted, in bytes: 32, the
// length of 16 random bytes in hex (openssl rand -hex 32 gives 64).
const MinTokenLen = 32

// Tenants maps bearer tokens to tenant names. Only the SHA-256 of each
// token is kept; Lookup compares the hash of a presented token with every
// known hash in constant time. A Tenants is read-only after it is built and
// safe for concurrent use.
type Tenants struct {
	entries []tenantEntry
	names   []string
	// defaults are the limits of a tenant not in limits.
	defaults Limits
	limits   map[string]Limits
}

type tenantEntry struct {
	hash   [sha256.Size]byte
	tenant string
}

// TenantsFile is the YAML shape of a tenants file:
//
//	defaults:                      # every tenant's limits (DefaultLimits where not given)
//	  requests_per_minute: 600
//	  tokens_per_minute: 1000000
//	  max_in_flight: 64
//	tenants:
//	  - name: acme
//	    tokens: [<token>]            # bearer tokens as clients send them (32+ characters)
//	    limits: {requests_per_minute: 60, store_retention: 24h}   # this tenant's own, over the defaults
//	  - name: globex
//	    token_sha256:                # or their SHA-256 (hex), so the file holds no secret
//	      - cf0b1ca40e47d039012df886642633225d987dbc397e9b576bd3a71a002050b8
type TenantsFile struct {
	// Defaults are the limits of every tenant, also those of
	// FRONTDOOR_TOKENS, that its entry does not set. Decoded over
	// DefaultLimits: a field left out keeps its default, an explicit 0
	// means no limit.
	Defaults Limits        `yaml:"defaults"`
	Tenants  []TenantEntry `yaml:"tenants"`
}

// TenantEntry is one tenant of a tenants file.
type TenantEntry struct {
	// Name of the tenant; part of every idempotency key of its calls.
	Name string `yaml:"name"`
	// Tokens are bearer tokens in clear.
	Tokens []string `yaml:"tokens"`
	// TokenSHA256 are hex SHA-256 digests of bearer tokens.
	TokenSHA256 []string `yaml:"token_sha256"`
	// Limits are this tenant's own limits; a field not given is the
	// file's default. A tenant listed twice gives them at most once.
	Limits *TenantLimits `yaml:"limits"`
}

// TenantLimits are the limits a tenant's entry sets; nil fields keep the
// file's defaults (TenantsFile.Defaults).
type TenantLimits struct {
	RequestsPerMinute     *int `yaml:"requests_per_minute"`
	TokensPerMinute       *int `yaml:"tokens_per_minute"`
	MaxInFlight           *int `yaml:"max_in_flight"`
	ValidationMSPerMinute *int `yaml:"validation_ms_per_minute"`
	// StoreRetention, when set, is the tenant's Limits.StoreRetention.
	StoreRetention *config.Duration `yaml:"store_retention"`
}

// over returns d with the fields of l that are set.
func (l *TenantLimits) over(d Limits) Limits {
	if l == nil {
		return d
	}
	for _, f := range []struct {
		from *int
		to   *int
	}{{l.RequestsPerMinute, &d.RequestsPerMinute}, {l.TokensPerMinute, &d.TokensPerMinute}, {l.MaxInFlight, &d.MaxInFlight},
		{l.ValidationMSPerMinute, &d.ValidationMSPerMinute}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if l.StoreRetention != nil {
		d.StoreRetention = *l.StoreRetention
	}
	return d
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

// Authenticates reports whether r carries a tenant's bearer token, read
// as the Handler reads it. The server's connection limits use it: a
// connection serving a tenant's request is governed by the tenant's
// limits, not by its address's connection cap.
func (t *Tenants) Authenticates(r *http.Request) bool {
	_, ok := t.Lookup(bearerToken(r))
	return ok
}

// bearerToken is the bearer token of r's Authorization header ("" for
// none, or another scheme).
func bearerToken(r *http.Request) string {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// Names returns the tenant names, in the order they were configured.
func (t *Tenants) Names() []string { return append([]string(nil), t.names...) }

// Len returns how many tokens are known.
func (t *Tenants) Len() int { return len(t.entries) }

// Limits returns the limits of tenant: its entry's in the tenants file,
// else the file's defaults, else DefaultLimits.
func (t *Tenants) Limits(tenant string) Limits {
	if t == nil {
		return DefaultLimits
	}
	if l, ok := t.limits[tenant]; ok {
		return l
	}
	return t.defaults
}

// ParseTokens parses the FRONTDOOR_TOKENS format: comma-separated
// token=tenant pairs, each cut at its last "=" (a tenant name has none, a
// token may). Whitespace around pairs is ignored. A token must have at
// least MinTokenLen characters. Errors name a pair by its position and
// never quote a token. Its tenants have DefaultLimits.
func ParseTokens(s string) (*Tenants, error) {
	b := newBuilder(TokensEnv)
	for i, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		cut := strings.LastIndexByte(pair, '=')
		if cut < 0 {
			return nil, fmt.Errorf("%s: pair %d: want token=tenant", TokensEnv, i+1)
		}
		tok, tenant := pair[:cut], pair[cut+1:]
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
	f := TenantsFile{Defaults: DefaultLimits}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	b := newBuilder(source)
	if p := f.Defaults.problem(); p != "" {
		b.problem("defaults", "%s", p)
	}
	b.t.defaults = f.Defaults
	limitsAt := map[string]int{}
	for i, e := range f.Tenants {
		at := fmt.Sprintf("tenants[%d]", i)
		if len(e.Tokens) == 0 && len(e.TokenSHA256) == 0 {
			b.problem(at, "no tokens and no token_sha256")
		}
		if e.Limits != nil {
			l := e.Limits.over(f.Defaults)
			if p := l.problem(); p != "" {
				b.problem(at+".limits", "%s", p)
			}
			if j, twice := limitsAt[e.Name]; twice {
				b.problem(at+".limits", "tenant %q has limits already in tenants[%d]", e.Name, j)
			}
			limitsAt[e.Name] = i
			b.t.limits[e.Name] = l
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
		if b.t.limits == nil {
			b.t.defaults, b.t.limits = DefaultLimits, map[string]Limits{}
		}
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

func newBuilder(source string) *tenantsBuilder {
	return &tenantsBuilder{source: source, t: Tenants{defaults: DefaultLimits, limits: map[string]Limits{}}}
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
	if len(token) < MinTokenLen {
		b.problem(where, "the token is shorter than %d characters (make one with: openssl rand -hex 32)", MinTokenLen)
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
	case strings.Contains(name, "="):
		return fmt.Sprintf("name %q has \"=\" (it separates token and tenant in %s)", name, TokensEnv)
	}
	return ""
}
