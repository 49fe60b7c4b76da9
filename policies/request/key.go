package request

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// The idempotency key is the workflow ID of a call (README "Idempotency and audit"): a duplicate
// start with the same key attaches to the running call or gets its recorded
// result, so no duplicate ever reaches the upstream twice.

// KeyPrefix starts every key built by Key and ScopedKey.
const KeyPrefix = "llm-"

// MaxKeyLen is the longest idempotency key, in bytes, that ValidateKey
// accepts.
const MaxKeyLen = 200

// ErrInvalidKey is wrapped by the errors of ValidateKey.
var ErrInvalidKey = errors.New("invalid idempotency key")

// Key derives the idempotency key of a call from who asks and what is asked:
//
//	"llm-" + hex(SHA-256(canonical))
//
// where canonical is the compact JSON array
//
//	[tenant, userID, sessionID, messages]
//
// with the strings as JSON strings, so no two different field splits give the
// same bytes (("a","bc") and ("ab","c") differ), and messages as an array of
// objects with the keys, in this order, "role", "content", and only when not
// empty "name", "tool_calls" (objects "id", "type", "function" {"name",
// "arguments"}) and "tool_call_id". Nil and empty message lists encode alike
// ([]). HTML characters are not escaped; Go's encoder escapes U+2028 and
// U+2029 and replaces invalid UTF-8 with U+FFFD (Validate refuses
// invalid UTF-8, so two accepted requests never collide that way). The text
// is hashed as sent: no trimming, no Unicode normalisation.
//
// The key is the prefix and 64 lower-case hex digits (68 bytes) and always
// passes ValidateKey. A starter in another language reproduces it by encoding the
// same array the same way.
func Key(tenant, userID, sessionID string, msgs []Message) string {
	return keyOf(canonicalJSON(tenant, userID, sessionID, msgs, nil))
}

func keyOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return KeyPrefix + hex.EncodeToString(sum[:])
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

// answerShape are the fields of a request besides its messages that
// change what the answer may be: two requests that differ in them are two
// calls. Its JSON is the request's, keys in this order (maps by sorted key).
type answerShape struct {
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
}

// shapeOf is r's answer shape, nil when r sets none of its fields (so the
// keys of plain chat requests never changed).
func shapeOf(r Request) *answerShape {
	s := answerShape{
		Tools: r.Tools, ToolChoice: r.ToolChoice, ParallelToolCalls: r.ParallelToolCalls,
		ResponseFormat: r.ResponseFormat, Stop: r.Stop, Seed: r.Seed, TopP: r.TopP,
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty,
		LogitBias: r.LogitBias, Logprobs: r.Logprobs, TopLogprobs: r.TopLogprobs,
		ReasoningEffort: r.ReasoningEffort, Passthrough: r.Passthrough,
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

// KeyFor returns the workflow ID of r: r.IdempotencyKey when set and valid
// (scoped by r.Tenant with ScopedKey when a tenant is set, so two tenants
// sending the same key never reach each other's call), else
// Key(r.Tenant, r.UserID, r.SessionID, r.Messages) — with, when r sets any
// field that shapes the answer (tools, tool_choice, parallel_tool_calls,
// response_format, stop, seed, top_p, the penalties, logit_bias, logprobs,
// top_logprobs, reasoning_effort, passthrough), those fields as a fifth
// element of the hashed array, an object with the request's JSON names in
// that order (compact, map keys sorted). Validate refuses
// an invalid IdempotencyKey; should one reach KeyFor anyway it is ignored
// and the derived key returned, so the result is always a valid workflow ID.
func KeyFor(r Request) string {
	if r.IdempotencyKey != "" && ValidateKey(r.IdempotencyKey) == nil {
		if r.Tenant != "" {
			return ScopedKey(r.Tenant, r.IdempotencyKey)
		}
		return r.IdempotencyKey
	}
	return keyOf(canonicalJSON(r.Tenant, r.UserID, r.SessionID, r.Messages, shapeOf(r)))
}

// ScopedKey turns a key supplied by a tenant's caller (the front door's
// Idempotency-Key header) into a workflow ID that no other tenant can reach:
//
//	"llm-" + hex(SHA-256(tenant + "\x00" + callerKey))
//
// It is deterministic, so a retried HTTP request with the same header finds
// the same call. callerKey is expected to pass ValidateKey (in particular it
// holds no NUL byte), which makes the split between tenant and key
// unambiguous. The hashed bytes contain a NUL byte while Key hashes JSON,
// which never does, so a scoped key can never equal a derived one.
func ScopedKey(tenant, callerKey string) string {
	h := sha256.New()
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
