package activities

import (
	"bytes"
	"errors"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/policies/classify"
	"github.com/durable-llm/durable-llm/policies/config"
	openai "github.com/sashabaranov/go-openai"
)

// redacted replaces an API key, or any part of one, that an upstream
// echoed back.
const redacted = "[redacted]"

// minKeyPart is the shortest part of a key that is masked wherever it
// appears: an upstream may quote a key cut short ("sk-abc…") or
// JSON-escaped, and a message cut to a length may end inside one.
const minKeyPart = 8

// redact removes the model's API key from what the upstream answered
// before anything of it is classified, recorded in history or logged:
// some gateways quote the key they refused in their 401 message, in full,
// cut, or JSON-escaped. The raw body is masked through its JSON escapes,
// and every field go-openai decoded from it is masked again after the
// decoding; URLs in transport errors lose their user, query and any part
// that looks like a key.
func redact(obs *classify.Observation, key string) {
	var ue *url.Error
	if errors.As(obs.Err, &ue) {
		ue.URL = config.RedactURL(ue.URL)
	}
	if key == "" {
		return
	}
	obs.Body = redactBytes(obs.Body, key)
	redactErr(obs.Err, key)
	if obs.Stream != nil {
		redactErr(obs.Stream.Err, key)
		if errors.As(obs.Stream.Err, &ue) {
			ue.URL = config.RedactURL(ue.URL)
		}
	}
}

// redactErr masks the key in the fields of the go-openai errors in err.
func redactErr(err error, key string) {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		apiErr.Message = redactString(apiErr.Message, key)
		apiErr.Type = redactString(apiErr.Type, key)
		if s, ok := apiErr.Code.(string); ok {
			apiErr.Code = redactString(s, key)
		}
		if apiErr.Param != nil {
			p := redactString(*apiErr.Param, key)
			apiErr.Param = &p
		}
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		reqErr.Body = redactBytes(reqErr.Body, key)
	}
}

// redactVerdict masks the key in the upstream's words a verdict keeps for
// operators: code, type, message and the transport's text. Never its
// Reason: tenants read it, it may name fields of their own schema, and a
// mask over text a tenant chose answers, fragment by fragment, which
// pieces belong to the key. The reason is kept free of the upstream's
// words by construction instead (classify.Verdict.Reason).
func redactVerdict(v *classify.Verdict, key string) {
	v.Detail = redactString(v.Detail, key)
	v.Code = redactString(v.Code, key)
	v.Type = redactString(v.Type, key)
	v.Message = redactString(v.Message, key)
}

// RedactKey masks in s the API key and every part of it of 8 bytes or
// more, as the activities do with everything an upstream sends back: for
// other code that shows an upstream's words (the worker's start-up check).
func RedactKey(s, key string) string { return redactString(s, key) }

// redactString masks in s the key and every part of it of minKeyPart
// bytes or more (a key shorter than that only whole).
func redactString(s, key string) string {
	if key == "" || s == "" {
		return s
	}
	return string(redactBytes([]byte(s), key))
}

// redactBytes masks in b the key and every part of it of minKeyPart bytes
// or more, also where b writes its characters as JSON escapes (\u0073,
// \/). A run of masked bytes becomes one "[redacted]". b is returned
// unchanged when nothing matched.
func redactBytes(b []byte, key string) []byte {
	if key == "" || len(b) == 0 {
		return b
	}
	// The text as JSON would decode it, each byte remembering the span of
	// b it came from, so that an escaped key is found like a plain one. A
	// body without a backslash is its own decoding (byte i from span
	// [i, i+1)): most bodies, read without an allocation per byte.
	plain, from, to := b, []int(nil), []int(nil)
	if bytes.IndexByte(b, '\\') >= 0 {
		plain, from, to = unescapeLoose(b)
	}
	span := func(i int) (int, int) {
		if from == nil {
			return i, i + 1
		}
		return from[i], to[i]
	}
	n := minKeyPart
	if len(key) < n {
		n = len(key)
	}
	parts := map[string]bool{}
	for i := 0; i+n <= len(key); i++ {
		parts[key[i:i+n]] = true
	}
	var mask []bool // allocated at the first hit
	for i := 0; i+n <= len(plain); i++ {
		if !parts[string(plain[i:i+n])] {
			continue
		}
		if mask == nil {
			mask = make([]bool, len(b))
		}
		start, _ := span(i)
		_, end := span(i + n - 1)
		for j := start; j < end; j++ {
			mask[j] = true
		}
	}
	if mask == nil {
		return b
	}
	var out bytes.Buffer
	for i := 0; i < len(b); {
		if !mask[i] {
			out.WriteByte(b[i])
			i++
			continue
		}
		out.WriteString(redacted)
		for i < len(b) && mask[i] {
			i++
		}
	}
	return out.Bytes()
}

// unescapeLoose decodes the JSON string escapes of b that stand for one
// ASCII character (\/, \\, \", \uXXXX below 0x80) and keeps every other
// byte as it is: for each byte of the result, from and to are the span of
// b it came from. It never fails: b may be cut anywhere.
func unescapeLoose(b []byte) (plain []byte, from, to []int) {
	plain, from, to = make([]byte, 0, len(b)), make([]int, 0, len(b)), make([]int, 0, len(b))
	for i := 0; i < len(b); {
		c, w := b[i], 1
		if c == '\\' && i+1 < len(b) {
			switch b[i+1] {
			case '/', '\\', '"':
				c, w = b[i+1], 2
			case 'u':
				if i+6 <= len(b) {
					if r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16); err == nil && r < utf8.RuneSelf {
						c, w = byte(r), 6
					}
				}
			}
		}
		plain, from, to = append(plain, c), append(from, i), append(to, i+w)
		i += w
	}
	return plain, from, to
}
