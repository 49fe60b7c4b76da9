package structured

import (
	"context"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// StepBudget bounds the work of checking one value against a schema, in
// steps: a step is one visit of a subschema, weighed by the members of
// the value it looks at (and by the schema's own lists: enum, required,
// patternProperties). An answer of a few thousand values against a
// schema with unions of a dozen variants takes tens of thousands; a
// million take about a second on one core, at most. The schema's limits
// bound what a schema can cost before any answer; this bounds what one
// answer can cost (a $ref cycle that doubles with every level of the
// answer is exponential in the answer, not in the schema).
const StepBudget = 1_000_000

// ErrStepBudget is the error of an answer that could not be checked
// within StepBudget steps.
var ErrStepBudget = fmt.Errorf("the answer could not be checked within %d steps", StepBudget)

// checkEvery is how many steps pass between two looks at the context.
const checkEvery = 256

// meter counts the steps of one check. A check that runs out of steps or
// whose context ends stops by panicking with stop, which check recovers:
// the library's validator has no other way out.
type meter struct {
	steps, budget, next int64
	done                <-chan struct{}
}

type stop struct{ err error }

func (m *meter) reset(ctx context.Context, budget int64) {
	m.steps, m.budget, m.next, m.done = 0, budget, checkEvery, ctx.Done()
}

func (m *meter) add(n int64) {
	m.steps += n
	if m.steps > m.budget {
		panic(stop{ErrStepBudget})
	}
	if m.steps >= m.next {
		m.next = m.steps + checkEvery
		select {
		case <-m.done:
			panic(stop{errStopped})
		default:
		}
	}
}

var errStopped = errors.New("checking the answer was stopped")

// step is the format every schema object of an instrumented document
// carries: the compiler looks a format up by name before it visits the
// rest of a subschema, so its check runs first, for every visit.
type step struct {
	name        string
	fixed, each int64 // per visit, per member of the value
	deep        bool  // uniqueItems: the value is hashed whole
	// patterns weighs the regular expressions a visit runs on a string
	// value (pattern) or on each of an object's names
	// (patternProperties), in steps per 8 bytes (regexWeight).
	patterns int64
}

// cost is the steps of one visit of v.
func (s step) cost(v any) int64 {
	n := s.fixed
	switch c := v.(type) {
	case map[string]any:
		n += s.each * int64(len(c))
		if s.patterns > 0 {
			for name := range c {
				n += s.patterns * int64(len(name)/8)
			}
		}
	case []any:
		n += s.each * int64(len(c))
	case string:
		n += int64(len(c))/64 + s.patterns*int64(len(c)/8)
	}
	return n
}

// deepSize counts v's values, nested ones included, stopping past limit.
func deepSize(v any, limit int64) int64 {
	n := int64(1)
	switch c := v.(type) {
	case map[string]any:
		for _, sub := range c {
			if n > limit {
				break
			}
			n += deepSize(sub, limit-n)
		}
	case []any:
		for _, sub := range c {
			if n > limit {
				break
			}
			n += deepSize(sub, limit-n)
		}
	}
	return n
}

// format is the step's check for one compiled copy, counting on m.
func (s step) format(m *meter) *jsonschema.Format {
	return &jsonschema.Format{Name: s.name, Validate: func(v any) error {
		n := s.cost(v)
		if s.deep {
			n += deepSize(v, m.budget-m.steps)
		}
		m.add(n)
		return nil
	}}
}

// instrument gives every schema object of the checked document its step,
// and returns the steps to register. A format the document had is kept
// where a draft asserts it (before 2019-09: moved into an allOf beside
// the step) and dropped where it is only an annotation.
func (p *plan) instrument() []step {
	byName := map[string]step{}
	var steps []step
	for _, n := range p.nodes {
		st := step{fixed: 1 + n.work, each: 1, deep: uniqueItems(n.obj), patterns: n.patterns}
		for _, c := range n.static {
			st.fixed += p.entryOf(c)
		}
		if n.ref != nil && p.draft >= 2019 {
			st.fixed += p.entryOf(n.ref)
		}
		var most int64
		for _, c := range n.member {
			most = max(most, p.entryOf(c))
		}
		st.each += most
		st.name = fmt.Sprintf("durable-llm-step/%d/%d/%d/%t", st.fixed, st.each, st.patterns, st.deep)
		if !p.mark(n.obj, st.name) {
			continue
		}
		if _, seen := byName[st.name]; !seen {
			byName[st.name] = st
			steps = append(steps, st)
		}
	}
	return steps
}

// mark sets obj's format to name, keeping an asserted format it had; it
// says false where it cannot (the schema does not compile then, or, in an
// old draft, obj is a $ref whose other keywords are ignored).
func (p *plan) mark(obj map[string]any, name string) bool {
	f, has := obj["format"]
	old, isString := f.(string)
	switch {
	case has && !isString:
		return false
	case p.draft >= 2019:
	case hasRef(obj):
		return false
	case has:
		all, ok := obj["allOf"]
		if !ok {
			all = []any{}
		}
		list, ok := all.([]any)
		if !ok {
			return false
		}
		obj["allOf"] = append(list, map[string]any{"format": old})
	}
	obj["format"] = name
	return true
}

func uniqueItems(obj map[string]any) bool {
	u, ok := obj["uniqueItems"].(bool)
	return ok && u
}
