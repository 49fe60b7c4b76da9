package structured

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
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

// Schema is a compiled JSON Schema. It is safe for concurrent use.
type Schema struct {
	doc   map[string]any // the instrumented document, read only
	steps []step
	// declared holds the names the schema declares under properties,
	// which a public line may show.
	declared map[string]bool
	// cost is the estimated memory the Schema holds at most, in bytes
	// (estimate, with maxCopies).
	cost       int64
	subschemas int
	// budget is the steps one check may take (StepBudget).
	budget int64
	// copies holds the compiled copies not in use. Each copy counts on
	// its own meter, so one check at a time uses it; a check that finds
	// none compiles another while fewer than maxCopies exist, else waits.
	copies    chan *compiled
	mu        sync.Mutex
	made      int
	maxCopies int
}

// compiled is one compiled copy of a Schema with the meter its steps
// count on.
type compiled struct {
	s *jsonschema.Schema
	m *meter
}

// The memory a Schema holds, estimated from its size: the decoded
// document takes up to 8 bytes per byte of JSON, and a compiled subschema
// with its part of the document up to 2,500 bytes whatever its text (the
// library's Schema struct, the document's maps). Measured on the heap
// after compiling schemas of many small properties, long descriptions,
// large enums, arrays of items and 60 levels of nesting (the densest in
// maps): the estimate of one copy is 1.0 to 2.5 times what they hold
// (BenchmarkCompile reports both).
const (
	bytesPerByte      = 8
	bytesPerSubschema = 2500
	// maxCopiesOfSmall is the most compiled copies of a schema of at most
	// smallSchema bytes (no more than the CPUs either); a larger one has
	// one copy, and its checks take turns.
	maxCopiesOfSmall = 4
	smallSchema      = 16 << 10
)

// estimate is the memory a schema of rawBytes with subschemas holds with
// copies compiled copies.
func estimate(rawBytes, subschemas, copies int) int64 {
	return int64(rawBytes)*bytesPerByte + int64(copies)*int64(subschemas)*bytesPerSubschema
}

// noLoader refuses every $ref outside the schema itself.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref %q: only references inside the schema are allowed", url)
}

// Compile compiles a JSON Schema (draft 2020-12 unless it says otherwise).
// Its error says what is wrong with the schema; a *LimitError says which
// of the limits (MaxSchemaBytes, …) the schema is over, found on the
// decoded document before anything is compiled.
func Compile(raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("missing (want a JSON Schema object)")
	}
	if len(raw) > MaxSchemaBytes {
		return nil, limitf("the schema is %d bytes; at most %d (%d KiB)", len(raw), MaxSchemaBytes, MaxSchemaBytes>>10)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("want a JSON Schema object")
	}
	p, err := check(doc)
	if err != nil {
		return nil, err
	}
	s := &Schema{doc: doc, steps: p.instrument(), declared: p.declared, subschemas: p.subschemas, budget: StepBudget, maxCopies: 1}
	if len(raw) <= smallSchema {
		s.maxCopies = min(maxCopiesOfSmall, runtime.GOMAXPROCS(0))
	}
	s.cost = estimate(len(raw), p.subschemas, s.maxCopies)
	s.copies = make(chan *compiled, s.maxCopies)
	c, err := s.compile()
	if err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	s.made = 1
	s.copies <- c
	return s, nil
}

// compile makes one compiled copy of s.
func (s *Schema) compile() (*compiled, error) {
	m := &meter{}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.AssertFormat() // the steps are formats (instrument keeps the drafts' own)
	for _, st := range s.steps {
		c.RegisterFormat(st.format(m))
	}
	const loc = "urn:durable-llm:schema"
	if err := c.AddResource(loc, s.doc); err != nil {
		return nil, err
	}
	cs, err := c.Compile(loc)
	if err != nil {
		return nil, err
	}
	return &compiled{s: cs, m: m}, nil
}

// take returns a compiled copy for one check, waiting for one while
// maxCopies are in use.
func (s *Schema) take(ctx context.Context) (*compiled, error) {
	select {
	case c := <-s.copies:
		return c, nil
	default:
	}
	s.mu.Lock()
	grow := s.made < s.maxCopies
	if grow {
		s.made++
	}
	s.mu.Unlock()
	if grow {
		c, err := s.compile()
		if err != nil {
			s.mu.Lock()
			s.made--
			s.mu.Unlock()
			return nil, err
		}
		return c, nil
	}
	select {
	case c := <-s.copies:
		return c, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", errStopped, context.Cause(ctx))
	}
}

// Validate checks a JSON text against the schema: an error when it does
// not parse or does not validate, naming the place and the problem. The
// check stops when ctx ends, and after StepBudget steps.
func (s *Schema) Validate(ctx context.Context, text string) error {
	v, err := Parse(text)
	if err != nil {
		return err
	}
	return s.ValidateValue(ctx, v)
}

// ValidateValue checks a value decoded by Parse against the schema. A
// value that does not match is a *Mismatch; one that cannot be checked
// within StepBudget steps is ErrStepBudget; a check stopped because ctx
// ended wraps ctx's error.
func (s *Schema) ValidateValue(ctx context.Context, v any) error {
	c, err := s.take(ctx)
	if err != nil {
		return err
	}
	defer func() { s.copies <- c }()
	c.m.reset(ctx, s.budget)
	err = c.validate(v)
	if errors.Is(err, errStopped) {
		return fmt.Errorf("%w: %w", err, context.Cause(ctx))
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		var problems []Problem
		s.leaves(v, ve, &problems)
		return Join(problems)
	}
	return err
}

// validate runs the library's check, turning a meter's stop into its
// error.
func (c *compiled) validate(v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			st, ok := r.(stop)
			if !ok {
				panic(r)
			}
			err = st.err
		}
	}()
	return c.s.Validate(v)
}

// leaves collects the innermost problems of a validation error: in public
// the place in the answer and the keyword it fails, in detail what the
// library says (with the values).
func (s *Schema) leaves(v any, e *jsonschema.ValidationError, out *[]Problem) {
	if len(e.Causes) == 0 {
		at := "/" + strings.Join(e.InstanceLocation, "/")
		*out = append(*out, Problem{
			Public: fmt.Sprintf("at %s: %s", s.publicPath(v, e.InstanceLocation), failsWhat(e.ErrorKind)),
			Detail: fmt.Sprintf("at %s: %s", at, e.ErrorKind.LocalizedString(printer)),
		})
		return
	}
	for _, c := range e.Causes {
		s.leaves(v, c, out)
	}
}

// publicPath is the location loc in the answer v as a tenant may read
// it: the indexes of arrays, and of an object's names those the schema
// itself declares under properties; a name only the model chose is "*".
func (s *Schema) publicPath(v any, loc []string) string {
	parts := make([]string, len(loc))
	for i, tok := range loc {
		parts[i] = "*"
		switch c := v.(type) {
		case []any:
			if n, err := strconv.Atoi(tok); err == nil && n >= 0 && n < len(c) {
				parts[i], v = tok, c[n]
				continue
			}
		case map[string]any:
			if s.declared[tok] {
				parts[i] = tok
			}
			v = c[tok]
			continue
		}
		v = nil
	}
	return "/" + strings.Join(parts, "/")
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
