package structured

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// printer words the schema library's messages.
var printer = message.NewPrinter(language.English)

// maxProblems bounds the problems one check reports.
const maxProblems = 3

// Schema is a compiled JSON Schema.
type Schema struct {
	s *jsonschema.Schema
	// declared holds the names the schema declares under properties,
	// which a public line may show.
	declared map[string]bool
}

// noLoader refuses every $ref outside the schema itself.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %q: only references inside the schema are allowed", url)
}

// Compile compiles a JSON Schema (draft 2020-12 unless it says otherwise).
// Its error says what is wrong with the schema.
func Compile(raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("missing (want a JSON Schema object)")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, errors.New("want a JSON Schema object")
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const loc = "urn:durable-llm:schema"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	declared := map[string]bool{}
	declare(doc, declared)
	return &Schema{s: s, declared: declared}, nil
}

// declare adds the names under every "properties" of doc to names.
func declare(doc any, names map[string]bool) {
	switch v := doc.(type) {
	case map[string]any:
		for k, sub := range v {
			if props, ok := sub.(map[string]any); ok && k == "properties" {
				for name := range props {
					names[name] = true
				}
			}
			declare(sub, names)
		}
	case []any:
		for _, sub := range v {
			declare(sub, names)
		}
	}
}

// Validate checks a JSON text against the schema: an error when it does
// not parse or does not validate, naming the place and the problem.
func (s *Schema) Validate(text string) error {
	v, err := Parse(text)
	if err != nil {
		return err
	}
	return s.ValidateValue(v)
}

// ValidateValue checks a value decoded by Parse against the schema. A
// value that does not match is a *Mismatch.
func (s *Schema) ValidateValue(v any) error {
	err := s.s.Validate(v)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		var problems []Problem
		s.leaves(ve, &problems)
		return Join(problems)
	}
	return err
}

// leaves collects the innermost problems of a validation error: in public
// the place in the answer and the keyword it fails, in detail what the
// library says (with the values).
func (s *Schema) leaves(e *jsonschema.ValidationError, out *[]Problem) {
	if len(e.Causes) == 0 {
		at := "/" + strings.Join(e.InstanceLocation, "/")
		*out = append(*out, Problem{
			Public: fmt.Sprintf("at %s: %s", s.publicPath(e.InstanceLocation), failsWhat(e.ErrorKind)),
			Detail: fmt.Sprintf("at %s: %s", at, e.ErrorKind.LocalizedString(printer)),
		})
		return
	}
	for _, c := range e.Causes {
		s.leaves(c, out)
	}
}

// publicPath is an instance location as a tenant may read it: array
// indexes, and the names the schema itself declares under properties; a
// name only the model chose is "*".
func (s *Schema) publicPath(loc []string) string {
	parts := make([]string, len(loc))
	for i, tok := range loc {
		switch {
		case isIndex(tok), s.declared[tok]:
			parts[i] = tok
		default:
			parts[i] = "*"
		}
	}
	return "/" + strings.Join(parts, "/")
}

func isIndex(tok string) bool {
	if tok == "" || len(tok) > 9 {
		return false
	}
	for _, r := range tok {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// failsWhat names the constraint an error kind is about in the product's
// own words: the keyword, never the value or the schema's argument (a
// pattern, the names required).
func failsWhat(k jsonschema.ErrorKind) string {
	switch k.(type) {
	case *kind.FalseSchema:
		return "not allowed here (false schema)"
	case *kind.RefCycle:
		return "the schema's $refs loop"
	case *kind.InvalidJsonValue:
		return "not a JSON value"
	}
	if kw := k.KeywordPath(); len(kw) > 0 && publicKeyword[kw[0]] {
		return "fails " + kw[0]
	}
	return "does not match the schema"
}

// publicKeyword lists the keywords a public line may name.
var publicKeyword = map[string]bool{}

func init() {
	for _, kw := range strings.Fields(`type enum const format $ref $dynamicRef allOf anyOf oneOf not
		minProperties maxProperties required dependency dependentRequired additionalProperties
		propertyNames minItems maxItems additionalItems uniqueItems contains minContains maxContains
		minLength maxLength pattern contentEncoding contentMediaType contentSchema
		minimum maximum exclusiveMinimum exclusiveMaximum multipleOf`) {
		publicKeyword[kw] = true
	}
}

// Parse decodes a JSON text (numbers kept exact) for ValidateValue; its
// error says the text is not JSON.
func Parse(text string) (any, error) {
	t := strings.TrimSpace(text)
	if t == "" {
		return nil, errors.New("the answer is empty, not JSON")
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(t))
	if err != nil {
		return nil, &Mismatch{Problems: []Problem{{Public: "the answer is not valid JSON", Detail: "the answer is not valid JSON: " + oneLine(err.Error())}}}
	}
	return v, nil
}

// ObjectText checks that text is one JSON object (response_format
// json_object).
func ObjectText(text string) error {
	v, err := Parse(text)
	if err != nil {
		return err
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("the answer is JSON but not an object (want {…})")
	}
	return nil
}

// Cache compiles each schema once. It is safe for concurrent use.
type Cache struct {
	mu      sync.Mutex
	schemas map[[32]byte]*Schema
}

// maxCached bounds the compiled schemas a Cache keeps.
const maxCached = 256

// NewCache returns an empty Cache.
func NewCache() *Cache { return &Cache{schemas: map[[32]byte]*Schema{}} }

// Schema compiles raw, or returns it compiled before. A nil Cache
// compiles every time.
func (c *Cache) Schema(raw json.RawMessage) (*Schema, error) {
	if c == nil {
		return Compile(raw)
	}
	key := sha256.Sum256(raw)
	c.mu.Lock()
	s, ok := c.schemas[key]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := Compile(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.schemas) >= maxCached {
		clear(c.schemas)
	}
	c.schemas[key] = s
	c.mu.Unlock()
	return s, nil
}

// Problem is one thing wrong with an answer, worded twice.
type Problem struct {
	// Public is what a tenant may read (an attempt's reason): built from
	// the product's own words and the failure's structure only (the
	// place, the constraint's keyword, the tool call's index), never a
	// value, the model's text, a name the model chose or a pattern.
	Public string
	// Detail is the full text for the model's repair instruction, the
	// values included.
	Detail string
}

// Mismatch is an answer that fails a check: its Error is the public line,
// Detail(err) the model-facing one.
type Mismatch struct {
	Problems []Problem
}

// Error is the problems' public words, at most maxProblems of them.
func (m *Mismatch) Error() string {
	return line(m.Problems, func(p Problem) string { return p.Public })
}

// Detail is the full text of err for the model's repair instruction: a
// Mismatch's details (values included), else err.Error(). Never show it
// to a tenant.
func Detail(err error) string {
	var m *Mismatch
	if errors.As(err, &m) {
		return line(m.Problems, func(p Problem) string { return p.Detail })
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// Join makes problems one *Mismatch (nil when there are none).
func Join(problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	return &Mismatch{Problems: problems}
}

// line words problems as one line, at most maxProblems of them.
func line(problems []Problem, word func(Problem) string) string {
	n := min(len(problems), maxProblems)
	parts := make([]string, 0, n+1)
	for _, p := range problems[:n] {
		parts = append(parts, word(p))
	}
	if len(problems) > maxProblems {
		parts = append(parts, fmt.Sprintf("and %d more", len(problems)-maxProblems))
	}
	return strings.Join(parts, "; ")
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
