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
	return &Schema{s: s}, nil
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

// ValidateValue checks a value decoded by Parse against the schema.
func (s *Schema) ValidateValue(v any) error {
	err := s.s.Validate(v)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		var problems []string
		leaves(ve, &problems)
		return Join(problems)
	}
	return err
}

// leaves collects the innermost problems of a validation error.
func leaves(e *jsonschema.ValidationError, out *[]string) {
	if len(e.Causes) == 0 {
		at := "/" + strings.Join(e.InstanceLocation, "/")
		*out = append(*out, fmt.Sprintf("at %s: %s", at, e.ErrorKind.LocalizedString(printer)))
		return
	}
	for _, c := range e.Causes {
		leaves(c, out)
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
		return nil, fmt.Errorf("the answer is not valid JSON: %s", oneLine(err.Error()))
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

// Join words problems as one line, at most maxProblems of them.
func Join(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	if len(problems) > maxProblems {
		problems = append(problems[:maxProblems:maxProblems], fmt.Sprintf("and %d more", len(problems)-maxProblems))
	}
	return errors.New(strings.Join(problems, "; "))
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
