package structured

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The limits on a schema (a tool's parameters, response_format's
// json_schema), checked on its decoded document before it is compiled,
// in time linear in its size. Compiling is quadratic in the number of
// subschemas in the library we use, and checking an answer against a
// schema can be exponential in its $refs; a schema over a limit is
// refused with a *LimitError before either is paid. The numbers follow
// OpenAI's own limits on structured outputs (5,000 object properties in
// all, 1,000 enum values in all, 10 levels of object nesting), which no
// schema an agent sends to OpenAI can exceed, with room to spare where
// it costs nothing.
const (
	// MaxSchemaBytes bounds a schema's JSON text: 5,000 properties with
	// a type and a sentence of description each are about 400 KB.
	MaxSchemaBytes = 512 << 10
	// MaxSchemaDepth bounds how deep subschemas nest (the schema itself
	// is depth 1, a property's schema 2, that property's items 3, …).
	// OpenAI allows 10 levels of object nesting; a level takes up to
	// three subschemas (the property, its anyOf with null, an array's
	// items), so 64 leaves twice that.
	MaxSchemaDepth = 64
	// MaxProperties bounds the properties (and patternProperties) of all
	// the schema's objects together: OpenAI's limit.
	MaxProperties = 5000
	// MaxSubschemas bounds the schema objects and booleans in the
	// document: compiling is quadratic in them (10,000 take about 0.5 s
	// on one core; a schema at the other limits has at most a few
	// thousand).
	MaxSubschemas = 10000
	// MaxEnumValues bounds the values of all the schema's enums
	// together: OpenAI's limit.
	MaxEnumValues = 1000
	// MaxExpandedSubschemas bounds the size of the schema with every
	// $ref inlined (a $ref that leads back to a schema it is inside of
	// counts once): the most work one value of an answer can cause.
	// Definitions used a few dozen times stay far below it; a schema that
	// doubles its $refs level after level (2^40 subschemas in 3 KB) does
	// not.
	MaxExpandedSubschemas = 100000
	// MaxRefChain bounds how many $refs may lead one to another before
	// one reaches a schema that is not only a $ref (drafts before
	// 2019-09 ignore everything beside a $ref, so such a chain is walked
	// without doing anything else).
	MaxRefChain = 16
)

// LimitError is a schema refused before it is compiled: over one of the
// limits, or using a feature whose work the limits cannot bound. Its text
// names the limit and the schema's value.
type LimitError struct {
	msg string
}

func (e *LimitError) Error() string { return e.msg }

func limitf(format string, args ...any) *LimitError {
	return &LimitError{msg: fmt.Sprintf(format, args...)}
}

// The keywords whose value is one subschema, an array of them, or an
// object of them, in every draft the library knows (its own list of
// subschema locations; a keyword an older or newer draft does not know is
// ignored by the library, so treating it as a schema costs nothing).
var (
	oneSchema = set("not", "if", "then", "else", "additionalProperties", "additionalItems",
		"contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contentSchema", "items")
	schemaArray = set("allOf", "anyOf", "oneOf", "prefixItems", "items")
	schemaMap   = set("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
	// memberKeyword lists the keywords whose subschemas apply to an
	// instance's members (so once per member, not once per visit).
	memberKeyword = set("properties", "patternProperties", "additionalProperties", "items", "prefixItems",
		"additionalItems", "contains", "propertyNames", "unevaluatedProperties", "unevaluatedItems")
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// node is one schema object of the document as the checks see it.
type node struct {
	obj   map[string]any
	ptr   string
	depth int
	// static and member are the subschemas it applies to the instance
	// itself (allOf, not, …) and to the instance's members (properties,
	// items, …); ref is its $ref's target (nil: none, or a boolean).
	static, member []*node
	ref            *node
	refText        string
	// entry is the work a visit does before its step is counted: enum
	// and const comparisons. work is what a visit does for the schema's
	// own lists (required, dependencies, …); patterns weighs its
	// regular expressions (pattern, patternProperties), each run on a
	// string value or on every member's name.
	entry, work int64
	patterns    int64
	// expanded memoises the size with $refs inlined; state is 0 before,
	// 1 during, 2 after its computation.
	expanded int64
	state    int8
	chain    int // old drafts: the $refs that follow one another from here
	chainSet bool
}

// plan is what the checks learnt of a document: its nodes, in the order
// they were found, and what instrument needs.
type plan struct {
	draft          int
	nodes          []*node
	byObj          map[uintptr]*node
	anchors        map[string]*node
	rootID         string
	refs           []*node // the nodes with a $ref, to resolve
	declared       map[string]bool
	props          int
	enums          int
	subschemas     int // booleans included
	hasUniqueItems bool
}

// check runs the limits on a decoded schema document and returns what it
// learnt, or the first limit it is over.
func check(doc map[string]any) (*plan, error) {
	p := &plan{
		draft:    draftOf(doc),
		byObj:    map[uintptr]*node{},
		anchors:  map[string]*node{},
		declared: map[string]bool{},
	}
	if id, ok := doc[p.idKeyword()].(string); ok {
		p.rootID, _, _ = strings.Cut(id, "#")
	}
	if _, err := p.walk(doc, "", 1, true); err != nil {
		return nil, err
	}
	// Resolving a $ref into a place no keyword declares a schema (an
	// unknown keyword's value) walks what it finds there: the loop runs
	// until no new $ref is found.
	for i := 0; i < len(p.refs); i++ {
		n := p.refs[i]
		target, err := p.resolve(n)
		if err != nil {
			return nil, err
		}
		n.ref = target
	}
	// The counts are checked once the walks are done, so that an error
	// says the schema's own numbers: a walk is linear in the document,
	// whose size is bounded already.
	switch {
	case p.subschemas > MaxSubschemas:
		return nil, limitf("the schema has %d subschemas; at most %d", p.subschemas, MaxSubschemas)
	case p.props > MaxProperties:
		return nil, limitf("the schema has %d properties; at most %d", p.props, MaxProperties)
	case p.enums > MaxEnumValues:
		return nil, limitf("the schema has %d enum values; at most %d", p.enums, MaxEnumValues)
	}
	if p.draft < 2019 {
		for _, n := range p.refs {
			if c := p.refChain(n); c > MaxRefChain {
				return nil, limitf("the schema has a chain of more than %d $refs that lead only to $refs; at most %d", MaxRefChain, MaxRefChain)
			}
		}
	}
	for _, n := range p.nodes {
		if n.state == 0 {
			if e := p.expand(n); e > MaxExpandedSubschemas {
				return nil, limitf("the schema's $refs expand it to more than %d subschemas; at most %d", MaxExpandedSubschemas, MaxExpandedSubschemas)
			}
		}
	}
	return p, nil
}

// draftOf is the draft a document's $schema names (2020-12 by default,
// as the compiler's).
func draftOf(doc map[string]any) int {
	s, _ := doc["$schema"].(string)
	u, frag, _ := strings.Cut(s, "#")
	if frag != "" {
		return 2020
	}
	u = strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	switch u {
	case "json-schema.org/draft/2019-09/schema":
		return 2019
	case "json-schema.org/draft-07/schema":
		return 7
	case "json-schema.org/draft-06/schema":
		return 6
	case "json-schema.org/draft-04/schema":
		return 4
	}
	return 2020
}

func (p *plan) idKeyword() string {
	if p.draft == 4 {
		return "id"
	}
	return "$id"
}

func identity(m map[string]any) uintptr { return reflect.ValueOf(m).Pointer() }

// walk visits the schema v at ptr and every subschema under it. main is
// false for a part walked because a $ref points there (its anchors are
// not the library's).
func (p *plan) walk(v any, ptr string, depth int, main bool) (*node, error) {
	obj, ok := v.(map[string]any)
	if ok {
		if n := p.byObj[identity(obj)]; n != nil {
			return n, nil
		}
	}
	p.subschemas++
	if !ok {
		return nil, nil // a boolean schema does no work; anything else does not compile
	}
	if depth > MaxSchemaDepth {
		return nil, limitf("the schema nests subschemas more than %d deep (at %s); at most %d", MaxSchemaDepth, ptrText(ptr), MaxSchemaDepth)
	}
	n := &node{obj: obj, ptr: ptr, depth: depth, entry: 1}
	p.byObj[identity(obj)] = n
	p.nodes = append(p.nodes, n)

	if err := p.keywords(n, main); err != nil {
		return nil, err
	}
	for _, kw := range sortedKeys(obj) {
		val := obj[kw]
		var subs []*node
		var err error
		add := func(sub any, at string) {
			if err != nil {
				return
			}
			var s *node
			if s, err = p.walk(sub, at, depth+1, main); s != nil {
				subs = append(subs, s)
			}
		}
		switch {
		case schemaMap[kw]:
			m, ok := val.(map[string]any)
			if !ok {
				continue
			}
			if kw == "properties" || kw == "patternProperties" {
				p.props += len(m)
			}
			for _, name := range sortedKeys(m) {
				if kw == "properties" {
					p.declared[name] = true
				}
				if sub := m[name]; kw != "dependencies" || !isArray(sub) {
					add(sub, ptr+"/"+escape(kw)+"/"+escape(name))
				}
			}
		case schemaArray[kw] && isArray(val):
			for i, sub := range val.([]any) {
				add(sub, ptr+"/"+kw+"/"+strconv.Itoa(i))
			}
		case oneSchema[kw]:
			add(val, ptr+"/"+kw)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		if memberKeyword[kw] {
			n.member = append(n.member, subs...)
		} else {
			n.static = append(n.static, subs...)
		}
	}
	return n, nil
}

// keywords reads what the checks need of one schema object: $ref, ids
// and anchors, enum and const, uniqueItems.
func (p *plan) keywords(n *node, main bool) error {
	obj, at := n.obj, ptrText(n.ptr)
	for _, kw := range []string{"$dynamicRef", "$recursiveRef"} {
		if _, ok := obj[kw]; ok {
			return limitf("%s (at %s) is not supported; use $ref", kw, at)
		}
	}
	if ref, ok := obj["$ref"].(string); ok {
		n.refText = ref
		p.refs = append(p.refs, n)
	}
	if id, ok := obj[p.idKeyword()].(string); ok && n.ptr != "" && !(p.draft < 2019 && hasRef(obj)) {
		if name, ok := strings.CutPrefix(id, "#"); ok && p.draft < 2019 && name != "" && !strings.HasPrefix(name, "/") {
			p.anchor(name, n, main) // draft-07 and older: "$id": "#name" is an anchor
		} else {
			return limitf("%s %q (at %s): a schema inside the schema with its own id is not supported; use $defs and \"#/$defs/…\"", p.idKeyword(), id, at)
		}
	}
	if p.draft >= 2019 {
		for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
			if name, ok := obj[kw].(string); ok {
				p.anchor(name, n, main)
			}
		}
	}
	if e, ok := obj["enum"].([]any); ok {
		p.enums += len(e)
		n.entry += dataSize(e)
	}
	if c, ok := obj["const"]; ok {
		n.entry += dataSize(c)
	}
	if u, ok := obj["uniqueItems"].(bool); ok && u {
		p.hasUniqueItems = true
	}
	if r, ok := obj["required"].([]any); ok {
		n.work += int64(len(r))
	}
	for _, kw := range []string{"dependencies", "dependentSchemas", "dependentRequired"} {
		if m, ok := obj[kw].(map[string]any); ok {
			n.work += int64(len(m))
		}
	}
	if m, ok := obj["patternProperties"].(map[string]any); ok {
		for re := range m {
			n.patterns += regexWeight(re)
		}
	}
	if re, ok := obj["pattern"].(string); ok {
		n.patterns += regexWeight(re)
	}
	return nil
}

func (p *plan) anchor(name string, n *node, main bool) {
	if _, dup := p.anchors[name]; !dup && main {
		p.anchors[name] = n
	}
}

// resolve finds the schema n's $ref points at, as the library would: a
// fragment of this document (a JSON pointer or an anchor), optionally
// after the document's own id. A pointer into a place no keyword of the
// drafts declares a schema is walked as a schema; a pointer into data
// (enum, const, …) or at a collection of schemas is refused.
func (p *plan) resolve(n *node) (*node, error) {
	ref, at := n.refText, ptrText(n.ptr)
	base, frag, _ := strings.Cut(ref, "#")
	if base != "" && !p.sameDocument(base) {
		return nil, fmt.Errorf("$ref %q (at %s): only references inside the schema are allowed", ref, at)
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, fmt.Errorf("$ref %q (at %s) is not a valid reference", ref, at)
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		target, ok := p.anchors[frag]
		if !ok {
			return nil, fmt.Errorf("$ref %q (at %s): no $anchor %q in the schema", ref, at, frag)
		}
		return target, nil
	}
	var v any = p.nodes[0].obj
	where := "schema" // what v is: schema, schemas (a collection), data, or free (an unknown keyword's value)
	var toks []string
	if frag != "" {
		toks = strings.Split(frag[1:], "/")
	}
	for _, tok := range toks {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var next any
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if next, ok = c[tok]; !ok {
				return nil, fmt.Errorf("$ref %q (at %s) points at nothing", ref, at)
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("$ref %q (at %s) points at nothing", ref, at)
			}
			next = c[i]
		default:
			return nil, fmt.Errorf("$ref %q (at %s) points at nothing", ref, at)
		}
		switch where {
		case "schema":
			switch {
			case oneSchema[tok] && !isArray(next):
				where = "schema"
			case schemaArray[tok] || schemaMap[tok]:
				where = "schemas"
			case knownKeyword[tok]:
				where = "data"
			default:
				where = "free"
			}
		case "schemas":
			where = "schema"
			if isArray(next) {
				where = "data" // dependencies' lists of names
			}
		}
		v = next
	}
	switch where {
	case "schema", "free":
	default:
		return nil, fmt.Errorf("$ref %q (at %s) does not point at a schema", ref, at)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		if _, ok := v.(bool); ok {
			return nil, nil
		}
		return nil, fmt.Errorf("$ref %q (at %s) does not point at a schema", ref, at)
	}
	if target := p.byObj[identity(obj)]; target != nil {
		return target, nil
	}
	return p.walk(obj, frag, len(toks)+1, false)
}

// sameDocument says whether a reference's URL part names this document:
// its own id, absolute or relative to it.
func (p *plan) sameDocument(base string) bool {
	if p.rootID == "" {
		return false
	}
	if base == p.rootID {
		return true
	}
	root, err := url.Parse(p.rootID)
	if err != nil {
		return false
	}
	ref, err := url.Parse(base)
	return err == nil && root.ResolveReference(ref).String() == p.rootID
}

// knownKeyword lists the keywords whose value is data, not a schema: a
// $ref into them does not point at a schema.
var knownKeyword = set("$schema", "$id", "id", "$ref", "$anchor", "$dynamicAnchor", "$comment", "$vocabulary",
	"type", "enum", "const", "default", "examples", "required", "format", "pattern", "title", "description",
	"minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
	"minItems", "maxItems", "uniqueItems", "minContains", "maxContains", "minProperties", "maxProperties",
	"dependentRequired", "contentEncoding", "contentMediaType", "readOnly", "writeOnly", "deprecated")

// expand is n's size with its $refs inlined, memoised; a $ref back to a
// schema being expanded counts once. It stops counting past the limit.
func (p *plan) expand(n *node) int64 {
	switch n.state {
	case 1:
		return 1
	case 2:
		return n.expanded
	}
	n.state = 1
	size := int64(1)
	for _, group := range [][]*node{n.static, n.member} {
		for _, s := range group {
			size += p.expand(s)
			if size > MaxExpandedSubschemas {
				break
			}
		}
	}
	if n.ref != nil && size <= MaxExpandedSubschemas {
		size += p.expand(n.ref)
	}
	n.expanded = min(size, MaxExpandedSubschemas+1)
	n.state = 2
	return n.expanded
}

// refChain is, in a draft before 2019-09, how many $refs follow one
// another from n (which has a $ref) before a schema that does something;
// a loop of $refs is over the limit.
func (p *plan) refChain(n *node) int {
	if n.chainSet {
		return n.chain
	}
	n.chainSet, n.chain = true, MaxRefChain+1 // a loop back here is over the limit
	c := 1
	if t := n.ref; t != nil && hasRef(t.obj) {
		c += p.refChain(t)
	}
	n.chain = min(c, MaxRefChain+1)
	return n.chain
}

// entryOf is the work a visit of n does before its step is counted (so
// the schema that leads to n pays for it): its enum and const; in a draft
// before 2019-09, for a $ref, the chain of $refs and where it ends.
func (p *plan) entryOf(n *node) int64 {
	if p.draft >= 2019 || !hasRef(n.obj) {
		return n.entry
	}
	var e int64
	t := n
	for hops := 0; t != nil && hasRef(t.obj) && hops <= MaxRefChain; hops++ {
		e++
		t = t.ref
	}
	if t != nil && !hasRef(t.obj) {
		e += t.entry
	}
	return e
}

// regexWeight is the steps a regular expression costs per 8 bytes it is
// run on: Go's are linear in the text and in their own length.
func regexWeight(re string) int64 { return 1 + int64(len(re))/8 }

func hasRef(obj map[string]any) bool {
	_, ok := obj["$ref"].(string)
	return ok
}

func isArray(v any) bool {
	_, ok := v.([]any)
	return ok
}

// dataSize counts the values in v, nested ones included.
func dataSize(v any) int64 {
	switch c := v.(type) {
	case map[string]any:
		n := int64(1)
		for _, sub := range c {
			n += dataSize(sub)
		}
		return n
	case []any:
		n := int64(1)
		for _, sub := range c {
			n += dataSize(sub)
		}
		return n
	case string:
		return 1 + int64(len(c))/64
	}
	return 1
}

// escape writes a name as a JSON pointer token.
func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

func ptrText(ptr string) string {
	if ptr == "" {
		return "the top"
	}
	return ptr
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
