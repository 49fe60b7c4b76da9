package structured

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// doubling is the 3 KB schema of issue 30: d_i is two $refs to d_{i-1},
// so the answer's one string is checked 2^levels times.
func doubling(levels int) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{"d0":{"type":"string"}`)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, `,"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i-1, i-1)
	}
	fmt.Fprintf(&b, `},"type":"object","properties":{"q":{"$ref":"#/$defs/d%d"}}}`, levels)
	return b.String()
}

// recursiveDoubling is a $ref cycle through properties whose body has
// two $refs back into the cycle: small and of little expansion, but an
// answer nested n levels deep is checked 2^n times.
const recursiveDoubling = `{"$defs":{"r":{"type":"object","properties":{"a":{"allOf":[{"$ref":"#/$defs/r"},{"$ref":"#/$defs/r"}]}}}},"$ref":"#/$defs/r"}`

// nested is {"a":{"a":…{}…}}, depth levels deep.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + `{}` + strings.Repeat(`}`, depth)
}

// properties is an object schema with n properties, each written by one.
func properties(n int, one func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = one(i)
	}
	return `{"type":"object","properties":{` + strings.Join(parts, ",") + `}}`
}

func repeat(n int, one string) string {
	return strings.TrimSuffix(strings.Repeat(one+",", n), ",")
}

func TestCompileRefusesSchemasOverTheLimits(t *testing.T) {
	chain := func(n int) string { // draft-07: n+1 $refs in a row (the top → r0 → … → rn)
		var defs []string
		for i := 0; i < n; i++ {
			defs = append(defs, fmt.Sprintf(`"r%d":{"$ref":"#/definitions/r%d"}`, i, i+1))
		}
		defs = append(defs, fmt.Sprintf(`"r%d":{"type":"string"}`, n))
		return `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{` + strings.Join(defs, ",") + `},"$ref":"#/definitions/r0"}`
	}
	cases := []struct {
		name, schema string
		want         string // the error's text, or a part of it
	}{
		{"doubling $refs, 40 levels", doubling(40), "the schema's $refs expand it to more than 100000 subschemas; at most 100000"},
		{"doubling $refs, 20 levels", doubling(20), "the schema's $refs expand it to more than 100000 subschemas; at most 100000"},
		{"120,000 properties", properties(120000, func(i int) string { return fmt.Sprintf(`"p%d":{"type":"string"}`, i) }), "the schema is 3248922 bytes; at most 524288 (512 KiB)"},
		{"5,001 properties", properties(5001, func(i int) string { return fmt.Sprintf(`"%d":true`, i) }), "the schema has 5001 properties; at most 5000"},
		{"10,001 subschemas", `{"anyOf":[` + repeat(10000, "true") + `]}`, "the schema has 10001 subschemas; at most 10000"},
		{"1,001 enum values", `{"properties":{"a":{"enum":[` + repeat(600, `"x"`) + `]},"b":{"enum":[` + repeat(401, `1`) + `]}}}`, "the schema has 1001 enum values; at most 1000"},
		{"65 levels deep", strings.Repeat(`{"items":`, 64) + `{}` + strings.Repeat(`}`, 64), "the schema nests subschemas more than 64 deep"},
		{"a chain of 17 $refs", chain(16), "the schema has a chain of more than 16 $refs that lead only to $refs; at most 16"},
		{"a loop of $refs", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"$ref":"#/definitions/b"},"b":{"$ref":"#/definitions/a"}},"$ref":"#/definitions/a"}`, "a chain of more than 16 $refs"},
		{"$dynamicRef", `{"$defs":{"n":{"$dynamicAnchor":"n"}},"items":{"$dynamicRef":"#n"}}`, "$dynamicRef (at /items) is not supported; use $ref"},
		{"$recursiveRef", `{"$schema":"https://json-schema.org/draft/2019-09/schema","items":{"$recursiveRef":"#"}}`, "$recursiveRef (at /items) is not supported"},
		{"an embedded resource", `{"$defs":{"a":{"$id":"https://example.com/a","type":"string"}},"$ref":"https://example.com/a"}`, `$id "https://example.com/a" (at /$defs/a): a schema inside the schema with its own id is not supported`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(c.schema))
			var limit *LimitError
			if !errors.As(err, &limit) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Compile = %v, want a *LimitError %q", err, c.want)
			}
		})
	}
	// A schema at the limits compiles.
	for _, schema := range []string{
		doubling(12),
		properties(5000, func(i int) string { return fmt.Sprintf(`"%d":true`, i) }),
		strings.Repeat(`{"items":`, 63) + `{}` + strings.Repeat(`}`, 63),
		chain(15),
	} {
		if _, err := Compile(json.RawMessage(schema)); err != nil {
			t.Errorf("Compile(%.60s…) = %v, want it compiled", schema, err)
		}
	}
}

// TestCompileRefusesBadRefs: a $ref the checks cannot follow is refused
// (and is not a limit: the schema is wrong, not too big).
func TestCompileRefusesBadRefs(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"properties":{"a":{"enum":[{"type":"string"}]}},"items":{"$ref":"#/properties/a/enum/0"}}`, `$ref "#/properties/a/enum/0" (at /items) does not point at a schema`},
		{`{"properties":{"a":true},"items":{"$ref":"#/properties"}}`, `$ref "#/properties" (at /items) does not point at a schema`},
		{`{"items":{"$ref":"#/$defs/none"}}`, `$ref "#/$defs/none" (at /items) points at nothing`},
		{`{"items":{"$ref":"#nowhere"}}`, `no $anchor "nowhere"`},
		{`{"items":{"$ref":"other.json#/a"}}`, "only references inside the schema are allowed"},
	} {
		_, err := Compile(json.RawMessage(c.schema))
		var limit *LimitError
		if err == nil || errors.As(err, &limit) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Compile(%s) = %v, want an error %q", c.schema, err, c.want)
		}
	}
}

// TestCompiledSchemasCheckAsBefore: the checks and the step counting
// change no answer's verdict, in the shapes agents' schema generators
// write (zod's draft-07 with "#/properties/…" $refs and asserted formats,
// pydantic's $defs, a recursive tree, anchors, an OpenAPI-style
// components section).
func TestCompiledSchemasCheckAsBefore(t *testing.T) {
	zod := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"home":{"type":"object","properties":{"city":{"type":"string","minLength":1}},"required":["city"]},"work":{"$ref":"#/properties/home"},"email":{"type":"string","format":"email"}},"required":["home"],"additionalProperties":false}`
	pydantic := `{"$defs":{"Item":{"type":"object","properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-\\d+$"},"qty":{"type":"integer","minimum":1}},"required":["sku","qty"],"additionalProperties":false}},"type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/$defs/Item"},"uniqueItems":true},"note":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["items"]}`
	tree := `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["name"]}`
	anchor := `{"$defs":{"id":{"$anchor":"id","type":"string","format":"uuid"}},"properties":{"a":{"$ref":"#id"}}}`
	openapi := `{"components":{"schemas":{"Pet":{"type":"object","properties":{"tag":{"$ref":"#/components/schemas/Tag"}}},"Tag":{"type":"string","maxLength":3}}},"$ref":"#/components/schemas/Pet"}`
	cases := []struct {
		name, schema, answer string
		ok                   bool
	}{
		{"zod good", zod, `{"home":{"city":"Oslo"},"work":{"city":"Bergen"},"email":"a@b.no"}`, true},
		{"zod: the $ref'd copy is checked", zod, `{"home":{"city":"Oslo"},"work":{"city":""}}`, false},
		{"zod: draft-07 asserts formats", zod, `{"home":{"city":"Oslo"},"email":"not an email"}`, false},
		{"zod: extra", zod, `{"home":{"city":"Oslo"},"x":1}`, false},
		{"pydantic good", pydantic, `{"items":[{"sku":"ABC-1","qty":2},{"sku":"ABC-2","qty":1}],"note":null}`, true},
		{"pydantic: pattern", pydantic, `{"items":[{"sku":"abc-1","qty":2}]}`, false},
		{"pydantic: uniqueItems", pydantic, `{"items":[{"sku":"ABC-1","qty":2},{"sku":"ABC-1","qty":2}]}`, false},
		{"pydantic: anyOf", pydantic, `{"items":[],"note":3}`, false},
		{"tree good", tree, `{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}`, true},
		{"tree: deep child", tree, `{"name":"a","children":[{"name":"b","children":[{}]}]}`, false},
		{"anchor: 2020-12 formats annotate", anchor, `{"a":"not a uuid"}`, true},
		{"anchor: type", anchor, `{"a":1}`, false},
		{"components good", openapi, `{"tag":"abc"}`, true},
		{"components: the $ref'd schema", openapi, `{"tag":"abcd"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(c.schema))
			if err != nil {
				t.Fatal(err)
			}
			err = s.Validate(context.Background(), c.answer)
			if (err == nil) != c.ok {
				t.Errorf("Validate(%s) = %v, want ok=%v", c.answer, err, c.ok)
			}
			var m *Mismatch
			if err != nil && !errors.As(err, &m) {
				t.Errorf("Validate(%s) = %v, want a *Mismatch", c.answer, err)
			}
		})
	}
}

// steps is how many steps s's last check took (one copy: tests check
// one answer at a time).
func steps(t *testing.T, s *Schema) int64 {
	t.Helper()
	c := <-s.copies
	defer func() { s.copies <- c }()
	return c.m.steps
}

// validateGuarded runs ValidateValue, failing the test if it has not
// returned within a minute (a hang guard, not a timing).
func validateGuarded(t *testing.T, ctx context.Context, s *Schema, text string) error {
	t.Helper()
	v, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ValidateValue(ctx, v) }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the check still runs after a minute")
		return nil
	}
}

// TestCheckingAnAnswerIsBounded: an answer whose check would be
// exponential (a recursive doubling schema, an answer 40 levels deep:
// 2^40 visits) ends with ErrStepBudget after StepBudget steps, and a
// check whose context ends stops.
func TestCheckingAnAnswerIsBounded(t *testing.T) {
	s, err := Compile(json.RawMessage(recursiveDoubling))
	if err != nil {
		t.Fatalf("Compile = %v: the schema is small and within the limits", err)
	}
	if err := validateGuarded(t, context.Background(), s, nested(8)); err != nil {
		t.Fatalf("8 levels: %v, want valid (2^8 visits)", err)
	}
	if n := steps(t, s); n < 256 || n > 10000 {
		t.Errorf("8 levels took %d steps, want a few hundred to a few thousand", n)
	}

	err = validateGuarded(t, context.Background(), s, nested(40))
	if !errors.Is(err, ErrStepBudget) || err.Error() != fmt.Sprintf("the answer could not be checked within %d steps", StepBudget) {
		t.Fatalf("40 levels: %v, want ErrStepBudget", err)
	}
	if n := steps(t, s); n <= StepBudget || n > StepBudget+1000 {
		t.Errorf("the check stopped after %d steps, want just over %d", n, StepBudget)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = validateGuarded(t, ctx, s, nested(40))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
	if n := steps(t, s); n > 2*checkEvery {
		t.Errorf("a cancelled check took %d steps, want at most %d", n, 2*checkEvery)
	}

	// Cancelled while it runs, with no step budget to end it otherwise.
	s.budget = 1 << 62
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	if err := validateGuarded(t, ctx, s, nested(60)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while checking: %v, want context.Canceled", err)
	}
}

// TestConcurrentChecksCountApart: checks of one schema at the same time
// use copies with meters of their own, so none is charged another's
// steps.
func TestConcurrentChecksCountApart(t *testing.T) {
	s, err := Compile(json.RawMessage(recursiveDoubling))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	for i := 0; i < cap(errs); i++ {
		text := nested(6)
		if i%2 == 1 {
			text = nested(40)
		}
		v, err := Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		go func() { errs <- s.ValidateValue(context.Background(), v) }()
	}
	var good, over int
	for i := 0; i < cap(errs); i++ {
		select {
		case err := <-errs:
			switch {
			case err == nil:
				good++
			case errors.Is(err, ErrStepBudget):
				over++
			default:
				t.Errorf("unexpected %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("checks still run after a minute")
		}
	}
	if good != 8 || over != 8 {
		t.Errorf("%d checks passed and %d ran out of steps, want 8 and 8", good, over)
	}
	if s.made > s.maxCopies {
		t.Errorf("%d copies compiled, at most %d", s.made, s.maxCopies)
	}
}
