package request

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// The idempotency key is the workflow ID of a call (docs/how-it-works.md "Idempotency and audit"): a duplicate
// start with the same key attaches to the running call or gets its recorded
// result, so no duplicate ever reaches the upstream twice.

// KeyPrefix starts every key built by Key and ScopedKey.
const KeyPrefix = "llm-"

// MaxKeyLen is the longest idempotency key, in bytes, that ValidateKey
// accepts.
const MaxKeyLen = 200

// ErrInvalidKey is wrapped by the errors of ValidateKey.
var ErrInvalidKey = errors.New("invalid idempotency key")

// Key derives the idempotency key of a call from who asks and what is asked,
// without a deployment secret (IDs{}.Key; see IDs for the keyed form):
//
//	"llm-" + hex(SHA-256(canonical))
//
// where canonical is the compact JSON array [tenant, userID, sessionID,
// messages], encoded as "The idempotency key's bytes" in the package
// documentation says, so that a starter in another language can reproduce
// it. The key is 68 bytes and always passes ValidateKey. It is KeyFor of a
// request that sets only these fields.
func Key(tenant, userID, sessionID string, msgs []Message) string {
	return IDs{}.Key(tenant, userID, sessionID, msgs)
}

// EnvIDSecret names the environment variable that holds the deployment's
// secret for workflow IDs (docs/how-it-works.md "Idempotency and audit"). Every client of
// one deployment (front door, starter, llmclient users) must share it, or
// the same request reaches two different calls.
const EnvIDSecret = "LLM_ID_SECRET"

// MinIDSecretLen is the shortest deployment secret NewIDs accepts, in
// bytes: a short secret can be guessed, and then IDs are predictable again.
const MinIDSecretLen = 32

// IDs derives workflow IDs (idempotency keys) and request fingerprints.
// With a deployment secret every digest is HMAC-SHA-256 keyed with it, so
// nobody without the secret can confirm a guessed prompt from a workflow
// ID, or create a tenant's call before it does; the zero value has no
// secret and uses plain SHA-256 (local development; the package-level Key,
// KeyFor and ScopedKey). An IDs never changes and is safe for concurrent
// use; its String does not show the secret.
type IDs struct {
	secret []byte
}

// NewIDs returns the IDs keyed with secret, which must have at least
// MinIDSecretLen bytes.
func NewIDs(secret []byte) (IDs, error) {
	if len(secret) < MinIDSecretLen {
		return IDs{}, fmt.Errorf("the workflow ID secret has %d bytes, fewer than the %d required (generate one with: openssl rand -hex 32)",
			len(secret), MinIDSecretLen)
	}
	return IDs{secret: bytes.Clone(secret)}, nil
}

// IDsFromEnv returns the IDs keyed with the secret in EnvIDSecret, or the
// unkeyed IDs (plain SHA-256, for local development) when it is not set.
// Surrounding white space is not part of the secret.
func IDsFromEnv(getenv func(string) string) (IDs, error) {
	v := strings.TrimSpace(getenv(EnvIDSecret))
	if v == "" {
		return IDs{}, nil
	}
	ids, err := NewIDs([]byte(v))
	if err != nil {
		return IDs{}, fmt.Errorf("%s: %w", EnvIDSecret, err)
	}
	return ids, nil
}

// Keyed reports whether ids has a deployment secret.
func (ids IDs) Keyed() bool { return len(ids.secret) > 0 }

// String says whether ids is keyed, never the secret.
func (ids IDs) String() string {
	if ids.Keyed() {
		return "IDs(HMAC-SHA-256 with the deployment secret)"
	}
	return "IDs(plain SHA-256, no deployment secret)"
}

// GoString is String, so that %#v does not print the secret either.
func (ids IDs) GoString() string { return ids.String() }

func (ids IDs) hash() hash.Hash {
	if ids.Keyed() {
		return hmac.New(sha256.New, ids.secret)
	}
	return sha256.New()
}

// Key is the package-level Key with this deployment's digest.
func (ids IDs) Key(tenant, userID, sessionID string, msgs []Message) string {
	return ids.keyOf(canonicalJSON(tenant, userID, sessionID, msgs, nil))
}

func (ids IDs) keyOf(canonical []byte) string {
	h := ids.hash()
	h.Write(canonical)
	return KeyPrefix + hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON is the array Key hashes, without a trailing newline; shape,
// when not nil, is its fifth element (see KeyFor).
func canonicalJSON(tenant, userID, sessionID string, msgs []Message, shape *answerShape) []byte {
	canon := make([]canonicalMessage, len(msgs))
	for i, m := range msgs {
		canon[i] = canonicalMessage(m)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Encoding strings and plain structs cannot fail.
	elems := []any{tenant, userID, sessionID, canon}
	if shape != nil {
		elems = append(elems, shape)
	}
	_ = enc.Encode(elems)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// answerShape are the fields of a request besides who asks and its
// messages that change what the answer may be: two requests that differ in
// one of them are two calls. Its JSON is the request's, keys in this order
// (maps by sorted key), empty ones left out; numbers as Go's encoding/json
// writes them (the shortest form that reads back the same, as JavaScript's
// JSON.stringify does). Stream and StreamDeltas are not in it (a streamed
// and a plain request get the same answer) and neither is the idempotency
// key. NoStore is in
// it though it does not change the answer: a response that is kept and
// one that is not are two calls, so neither reaches the other's.
type answerShape struct {
	Scenario          string                     `json:"scenario,omitempty"`
	Model             string                     `json:"model,omitempty"`
	MaxTokens         int                        `json:"max_tokens,omitempty"`
	Temperature       *float64                   `json:"temperature,omitempty"`
	DeadlineMS        int64                      `json:"deadline_ms,omitempty"`
	Tools             []Tool                     `json:"tools,omitempty"`
	ToolChoice        *ToolChoice                `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool                      `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    *ResponseFormat            `json:"response_format,omitempty"`
	Stop              Stop                       `json:"stop,omitempty"`
	Seed              *int64                     `json:"seed,omitempty"`
	TopP              *float64                   `json:"top_p,omitempty"`
	PresencePenalty   *float64                   `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64                   `json:"frequency_penalty,omitempty"`
	LogitBias         map[string]int             `json:"logit_bias,omitempty"`
	Logprobs          bool                       `json:"logprobs,omitempty"`
	TopLogprobs       *int                       `json:"top_logprobs,omitempty"`
	ReasoningEffort   string                     `json:"reasoning_effort,omitempty"`
	Passthrough       map[string]json.RawMessage `json:"passthrough,omitempty"`
	NoStore           bool                       `json:"no_store,omitempty"`
}

// shapeOf is r's answer shape, nil when r sets none of its fields (so the
// keys of plain chat requests never changed).
func shapeOf(r Request) *answerShape {
	s := answerShape{
		Scenario: r.Scenario, Model: r.Model, MaxTokens: r.MaxTokens, Temperature: r.Temperature,
		DeadlineMS: r.DeadlineMS,
		Tools:      r.Tools, ToolChoice: r.ToolChoice, ParallelToolCalls: r.ParallelToolCalls,
		ResponseFormat: r.ResponseFormat, Stop: r.Stop, Seed: r.Seed, TopP: r.TopP,
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty,
		LogitBias: r.LogitBias, Logprobs: r.Logprobs, TopLogprobs: r.TopLogprobs,
		ReasoningEffort: r.ReasoningEffort, Passthrough: r.Passthrough, NoStore: r.NoStore,
	}
	b, _ := json.Marshal(s)
	if string(b) == "{}" {
		return nil
	}
	return &s
}

// canonicalMessage freezes the JSON shape of a message inside the key, so a
// field added to Message later cannot silently change every key; a test
// fails when Message and canonicalMessage disagree.
type canonicalMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Parts      []Part     `json:"parts,omitempty"` // image messages only
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// KeyFor returns the workflow ID of r without a deployment secret:
// IDs{}.For(r).
func KeyFor(r Request) string { return IDs{}.For(r) }

// For returns the workflow ID of r: r.IdempotencyKey when set and valid
// (scoped by r.Tenant with Scoped when a tenant is set, so two tenants
// sending the same key never reach each other's call), else the derived
// key: Key(r.Tenant, r.UserID, r.SessionID, r.Messages) — with, when r sets
// any other field that changes the answer (scenario, model, max_tokens,
// temperature, deadline_ms, tools, tool_choice, parallel_tool_calls,
// response_format, stop, seed, top_p, the penalties, logit_bias, logprobs,
// top_logprobs, reasoning_effort, passthrough), those fields as a fifth
// element of the hashed array, an object with the request's JSON names in
// that order (compact, empty ones left out, map keys sorted). Only stream
// and the idempotency key are left out. Validate refuses an invalid
// IdempotencyKey; should one reach For anyway it is ignored and the
// derived key returned, so the result is always a valid workflow ID.
func (ids IDs) For(r Request) string {
	if r.IdempotencyKey != "" && ValidateKey(r.IdempotencyKey) == nil {
		if r.Tenant != "" {
			return ids.Scoped(r.Tenant, r.IdempotencyKey)
		}
		return r.IdempotencyKey
	}
	return ids.Fingerprint(r)
}

// Fingerprint is the derived key of r (For without its idempotency key):
// two requests have the same fingerprint exactly when, sent without a key,
// they would reach the same call. A call started with an explicit key
// keeps its request's fingerprint (llmclient puts it in the workflow's
// memo), so a later request with the same key but a different fingerprint
// is refused instead of answered with another request's answer.
func (ids IDs) Fingerprint(r Request) string {
	return ids.keyOf(canonicalJSON(r.Tenant, r.UserID, r.SessionID, r.Messages, shapeOf(r)))
}

// ScopedKey is IDs{}.Scoped: without a deployment secret,
//
//	"llm-" + hex(SHA-256(tenant + "\x00" + callerKey))
func ScopedKey(tenant, callerKey string) string { return IDs{}.Scoped(tenant, callerKey) }

// Scoped turns a key supplied by a tenant's caller (the front door's
// Idempotency-Key header) into a workflow ID that no other tenant can
// reach: "llm-" and the hex digest of tenant + "\x00" + callerKey.
//
// It is deterministic, so a retried HTTP request with the same header finds
// the same call. callerKey is expected to pass ValidateKey (in particular it
// holds no NUL byte), which makes the split between tenant and key
// unambiguous. The hashed bytes contain a NUL byte while Key hashes JSON,
// which never does, so a scoped key can never equal a derived one.
func (ids IDs) Scoped(tenant, callerKey string) string {
	h := ids.hash()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(callerKey))
	return KeyPrefix + hex.EncodeToString(h.Sum(nil))
}

// ValidateKey checks that k can be used as a workflow ID and inside the
// per-attempt header value "<workflow id>/<attempt>": not empty, at most
// MaxKeyLen bytes, printable ASCII (0x21–0x7E) without spaces and without
// '/'. Its errors wrap ErrInvalidKey.
func ValidateKey(k string) error {
	if p := keyProblem(k); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidKey, p)
	}
	return nil
}

// keyProblem says what is wrong with k as an idempotency key, or "".
func keyProblem(k string) string {
	if k == "" {
		return "empty"
	}
	if len(k) > MaxKeyLen {
		return fmt.Sprintf("%d bytes, over the limit of %d", len(k), MaxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= 0x80 {
			return fmt.Sprintf("byte %d is 0x%02x, not ASCII (want printable ASCII without spaces or '/')", i, c)
		}
		if c < 0x21 || c > 0x7E || c == '/' {
			return fmt.Sprintf("byte %d is %q (want printable ASCII without spaces or '/')", i, c)
		}
	}
	return ""
}
