package frontdoor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/policies/request"
)

// fieldError is a problem with one field of the request body.
type fieldError struct {
	field, problem string
}

func (e *fieldError) Error() string {
	if e.field == "" {
		return e.problem
	}
	return e.field + ": " + e.problem
}

// fieldSet is what one API makes of top-level request fields: the ones
// it reads, the ones it ignores, and the ones it refuses with a reason.
type fieldSet struct {
	handled, ignored []string
	unsupported      map[string]string
}

// sortFields checks every top-level field of a body against an API's
// fieldSet: a passthrough field (one the policy's models forward) goes to
// r.Passthrough compacted, an unsupported or unknown one is refused by
// name, in sorted order so the same body always names the same field.
func sortFields(top map[string]json.RawMessage, fs fieldSet, passthrough map[string]bool, r *request.Request) *fieldError {
	for _, name := range sortedFields(top) {
		switch {
		case name == "":
			// Named as written: an empty field name would read as a
			// problem of the whole body.
			return &fieldError{`""`, "a field with an empty name is not accepted"}
		case slices.Contains(fs.handled, name), slices.Contains(fs.ignored, name):
		case passthrough[name]:
			var buf bytes.Buffer
			if err := json.Compact(&buf, top[name]); err != nil {
				return &fieldError{name, "not valid JSON"}
			}
			if r.Passthrough == nil {
				r.Passthrough = map[string]json.RawMessage{}
			}
			r.Passthrough[name] = buf.Bytes()
		case fs.unsupported[name] != "":
			return &fieldError{name, fs.unsupported[name]}
		default:
			return &fieldError{name, "unknown field (not sent upstream, so not accepted; a model's passthrough list in the policy can forward provider-specific fields)"}
		}
	}
	return nil
}

// sortedFields are the keys of obj, sorted, so the first problem named is
// the same on every run.
func sortedFields(obj map[string]json.RawMessage) []string {
	out := make([]string, 0, len(obj))
	for k := range obj {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// decodeString decodes an optional string field (null: empty).
func decodeString(obj map[string]json.RawMessage, name string, dst *string) *fieldError {
	var p *string
	if err := decodeField(obj, name, &p, "a string"); err != nil {
		return err
	}
	if p != nil {
		*dst = *p
	}
	return nil
}

// decodeField decodes obj[name] into dst when present; want describes the
// expected JSON type for the error.
func decodeField(obj map[string]json.RawMessage, name string, dst any, want string) *fieldError {
	raw, ok := obj[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		got := "a JSON " + jsonKind(raw)
		return &fieldError{name, fmt.Sprintf("want %s, got %s", want, got)}
	}
	return nil
}

// stringAt is decodeString for a field of the object at path at.
func stringAt(obj map[string]json.RawMessage, name, at string, dst *string) *fieldError {
	if err := decodeString(obj, name, dst); err != nil {
		err.field = at + "." + err.field
		return err
	}
	return nil
}

// decodeParts reads message content: null (no parts), a string (one text
// part), or an array of typed parts, each read by part (typ is its "type",
// pat its path) — the one shape both APIs share.
func decodeParts(raw json.RawMessage, at string, part func(p map[string]json.RawMessage, typ, pat string) (request.Part, *fieldError)) ([]request.Part, *fieldError) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []request.Part{{Type: request.PartText, Text: s}}, nil
	}
	var parts []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, &fieldError{at, "want a string or an array of content parts"}
	}
	out := make([]request.Part, 0, len(parts))
	for j, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, j)
		var typ string
		if err := stringAt(p, "type", pat, &typ); err != nil {
			return nil, err
		}
		pt, err := part(p, typ, pat)
		if err != nil {
			return nil, err
		}
		out = append(out, pt)
	}
	return out, nil
}

// nestedFields is what the front door makes of the fields of an object
// inside the body: the ones it reads, the ones it drops, and the ones it
// takes only as null (any other value is refused with the reason).
type nestedFields struct {
	read, ignored []string
	nullOnly      map[string]string
}

// check refuses the first field of obj (at path at), in sorted order,
// that nf neither reads nor drops, naming its path.
func (nf nestedFields) check(obj map[string]json.RawMessage, at string) *fieldError {
	for _, name := range sortedFields(obj) {
		path := at + "." + name
		if name == "" {
			path = at + `.""`
		}
		switch {
		case slices.Contains(nf.read, name), slices.Contains(nf.ignored, name):
		case nf.nullOnly[name] != "":
			if !isNull(obj[name]) {
				return &fieldError{path, nf.nullOnly[name]}
			}
		default:
			return &fieldError{path, "unknown field (not sent upstream, so not accepted)"}
		}
	}
	return nil
}

// checkNested decodes raw, when it is an object, and checks its fields
// with nf; any other JSON is left to the decoder that names its type.
func checkNested(raw json.RawMessage, at string, nf nestedFields) *fieldError {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	return nf.check(obj, at)
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonKind names the JSON type of a raw value.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if len(t) > 24 {
		t = append(t[:24:24], "…"...)
	}
	return "number " + string(t)
}

// decodeTop decodes a body into its top-level fields.
func decodeTop(body []byte) (map[string]json.RawMessage, *fieldError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, &fieldError{problem: "the request body is empty (want a JSON object)"}
		}
		return nil, &fieldError{problem: "malformed JSON: want a JSON object"}
	}
	return top, nil
}

// decodeText decodes a request body with decode, after checkText: the
// JSON decoder would replace what is not UTF-8 by U+FFFD without a word,
// and the request would run on text the client did not send.
func decodeText[R any](body []byte, passthrough map[string]bool, decode func([]byte, map[string]bool) (R, *fieldError)) (R, *fieldError) {
	if err := checkText(body); err != nil {
		var zero R
		return zero, err
	}
	return decode(body, passthrough)
}

// checkText reports where body is not Unicode text: a byte sequence that
// is not UTF-8, or a \u escape of half a UTF-16 surrogate pair (a "\ud83d"
// without its low half), which JSON decoding replaces by U+FFFD too. The
// offset is the byte's in the body; the field is not known this early.
func checkText(body []byte) *fieldError {
	if !utf8.Valid(body) {
		i := 0
		for i < len(body) {
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return &fieldError{problem: fmt.Sprintf("the request body is not valid UTF-8 (byte %d); JSON text must be UTF-8", i)}
	}
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(body):
			i++
			if body[i] != 'u' {
				continue
			}
			hi, ok := hex4(body, i+1)
			if !ok {
				continue // a malformed escape: the decoder names it
			}
			switch {
			case hi >= 0xDC00 && hi <= 0xDFFF:
				return surrogateProblem(i - 1)
			case hi >= 0xD800 && hi <= 0xDBFF:
				lo, ok := -1, false
				if i+6 < len(body) && body[i+5] == '\\' && body[i+6] == 'u' {
					lo, ok = hex4(body, i+7)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return surrogateProblem(i - 1)
				}
				i += 10 // both escapes, the loop's i++ steps past the last digit
			default:
				i += 4
			}
		}
	}
	return nil
}

func surrogateProblem(at int) *fieldError {
	return &fieldError{problem: fmt.Sprintf("the request body has a \\u escape of half a UTF-16 surrogate pair at byte %d, which is no character (JSON strings must be Unicode text)", at)}
}

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (int, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return int(v), err == nil
}
