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
	sum := sha256.Sum256(canonicalJSON(tenant, userID, sessionID, msgs))
	return KeyPrefix + hex.EncodeToString(sum[:])
}

// canonicalJSON is the array Key hashes, without a trailing newline.
func canonicalJSON(tenant, userID, sessionID string, msgs []Message) []byte {
	canon := make([]canonicalMessage, len(msgs))
	for i, m := range msgs {
		canon[i] = canonicalMessage(m)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Encoding strings and plain structs cannot fail.
	_ = enc.Encode([]any{tenant, userID, sessionID, canon})
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// canonicalMessage freezes the JSON shape of a message inside the key, so a
// field added to Message later cannot silently change every key; a test
// fails when Message and canonicalMessage disagree.
type canonicalMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// KeyFor returns the workflow ID of r: r.IdempotencyKey when set and valid
// (scoped by r.Tenant with ScopedKey when a tenant is set, so two tenants
// sending the same key never reach each other's call), else
// Key(r.Tenant, r.UserID, r.SessionID, r.Messages). Validate refuses
// an invalid IdempotencyKey; should one reach KeyFor anyway it is ignored
// and the derived key returned, so the result is always a valid workflow ID.
func KeyFor(r Request) string {
	if r.IdempotencyKey != "" && ValidateKey(r.IdempotencyKey) == nil {
		if r.Tenant != "" {
			return ScopedKey(r.Tenant, r.IdempotencyKey)
		}
		return r.IdempotencyKey
	}
	return Key(r.Tenant, r.UserID, r.SessionID, r.Messages)
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
