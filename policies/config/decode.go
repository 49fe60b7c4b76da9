package config

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/internal/yamlnode"
	"github.com/durable-llm/durable-llm/policies/failure"
	"go.yaml.in/yaml/v3"
)

// decoder lays a YAML node tree over a Config, following the Go types: a
// value the file sets replaces the one already there, a mapping is laid
// over the struct or map entry already there, and anything the types do
// not allow becomes a Problem at the node's line (the value already there
// stands). yaml.v3 decodes only single scalars; its error text is never read.
type decoder struct {
	problems []Problem
	lines    map[string]int // field path → line of its key (or list item)
	// classDefaults are the default class entries an entry that changes
	// its class's action starts from (nil for the embedded file itself).
	classDefaults map[failure.Class]ClassPolicy
	// modelDefaults is what each models entry starts from.
	modelDefaults *ModelConfig
	nodes         int // values visited, against alias bombs
}

// maxNodes bounds the values one file may expand to through aliases; a
// policy file has a few hundred, a big one some thousands.
const maxNodes = 200_000

var (
	durationType = reflect.TypeFor[Duration]()
	classesType  = reflect.TypeFor[map[failure.Class]ClassPolicy]()
	modelType    = reflect.TypeFor[ModelConfig]()
	configType   = reflect.TypeFor[Config]()
)

func newDecoder(classDefaults map[failure.Class]ClassPolicy) *decoder {
	return &decoder{lines: map[string]int{}, classDefaults: classDefaults}
}

// config lays the document's root mapping over cfg.
func (d *decoder) config(root *yaml.Node, cfg *Config) {
	d.modelDefaults = &cfg.ModelDefaults
	d.value(root, reflect.ValueOf(cfg).Elem(), "")
}

func (d *decoder) problem(path string, line int, format string, args ...any) {
	d.problems = append(d.problems, Problem{Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

// mismatch reports a value of the wrong kind for a field of type t.
func (d *decoder) mismatch(n *yaml.Node, t reflect.Type, path string) {
	d.problem(path, n.Line, "must be %s, got %s", kindWord(t), yamlnode.Describe(n))
}

// refused reports whether the file's value at path, or at a field that
// holds it, was refused while decoding.
func (d *decoder) refused(path string) bool {
	for _, p := range d.problems {
		if p.Path == path || strings.HasPrefix(path, p.Path+".") || strings.HasPrefix(path, p.Path+"[") {
			return true
		}
	}
	return false
}

// lineOf is the line of path, or of its nearest parent that is in the file
// (a value that came from the defaults has no line of its own).
func (d *decoder) lineOf(path string) int {
	for path != "" {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

func (d *decoder) note(path string, line int) {
	if _, ok := d.lines[path]; !ok {
		d.lines[path] = line
	}
}

// value lays n over v, which must be settable.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string) {
	n = resolve(n)
	if d.nodes++; d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			d.problem(path, n.Line, "must not expand to more than %d values through aliases", maxNodes)
		}
		return
	}
	if isNull(n) {
		return // "key:" with no value is the same as leaving the key out
	}
	t := v.Type()
	switch t {
	case durationType:
		dur, msg := parseDuration(n)
		if msg != "" {
			d.problem(path, n.Line, "%s", msg)
			return
		}
		v.Set(reflect.ValueOf(dur))
		return
	case classesType:
		d.classes(n, v, path)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem()) // never write through a pointer the defaults may share
		if !v.IsNil() {
			p.Elem().Set(v.Elem())
		}
		d.value(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.structure(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.mismatch(n, t, path)
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.note(p, item.Line)
			if t.Elem() == modelType && d.modelDefaults != nil {
				s.Index(i).Set(reflect.ValueOf(clone(*d.modelDefaults)))
			}
			d.value(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64:
		out := reflect.New(t)
		if n.Kind != yaml.ScalarNode || n.Decode(out.Interface()) != nil || !wholeIfInt(n, t) {
			d.mismatch(n, t, path)
			return
		}
		v.Set(out.Elem())
	default:
		panic("config: no YAML decoding for " + t.String()) // a new kind of field; TestYAMLRoundTrip finds it
	}
}

// structure lays a mapping over the struct v, field by yaml name.
func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.mismatch(n, v.Type(), path)
		return
	}
	names, index := yamlFields(v.Type())
	pairs := d.pairs(n, path)
	if i := slices.IndexFunc(pairs, func(kv pair) bool { return kv.key.Value == "model_defaults" }); i > 0 && v.Type() == configType {
		// model_defaults first, wherever it is written: every models entry starts from it.
		kv := pairs[i]
		pairs = slices.Insert(slices.Delete(pairs, i, i+1), 0, kv)
	}
	for _, kv := range pairs {
		p := joinPath(path, kv.key.Value)
		i, ok := index[kv.key.Value]
		if !ok {
			d.problem(p, kv.key.Line, "unknown field; expected one of %s", strings.Join(names, ", "))
			continue
		}
		d.note(p, kv.key.Line)
		d.value(kv.value, v.Field(i), p)
		if v.Type() == modelType && kv.key.Value == "context_window" {
			// The file chose the window (a models entry, or model_defaults
			// for every entry that starts from it).
			v.FieldByName("WindowAssumed").SetBool(false)
		}
	}
}

// classes lays the classes mapping over the map v: each entry over its
// class's entry already there (see ParseConfig for the rule when the
// entry changes the action).
func (d *decoder) classes(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.mismatch(n, v.Type(), path)
		return
	}
	out := clone(v.Interface().(map[failure.Class]ClassPolicy))
	if out == nil {
		out = map[failure.Class]ClassPolicy{}
	}
	for _, kv := range d.pairs(n, path) {
		cl := failure.Class(kv.key.Value)
		p := joinPath(path, kv.key.Value)
		d.note(p, kv.key.Line)
		base := out[cl]
		// Which action does the entry end with? Decode it once, quietly.
		probe := clone(base)
		(&decoder{lines: map[string]int{}}).value(kv.value, reflect.ValueOf(&probe).Elem(), p)
		if probe.Action != base.Action {
			tripBreaker := base.TripBreaker
			base = d.classTemplate(probe.Action)
			base.TripBreaker = tripBreaker
		}
		cp := clone(base)
		d.value(kv.value, reflect.ValueOf(&cp).Elem(), p)
		out[cl] = cp
	}
	v.Set(reflect.ValueOf(out))
}

// classTemplate is a copy of the default entry of the first class whose
// default action is a, or the zero ClassPolicy. bump_tokens and continue
// share their settings: one stands in for the other when no class has it
// by default (output_truncated's default is continue).
func (d *decoder) classTemplate(a Action) ClassPolicy {
	for _, want := range []Action{a, sibling[a]} {
		for _, cl := range failure.AllClasses {
			if cp, ok := d.classDefaults[cl]; ok && want != "" && cp.Action == want {
				cp = clone(cp)
				cp.Action = a
				return cp
			}
		}
	}
	return ClassPolicy{}
}

// sibling pairs the actions whose settings are the same.
var sibling = map[Action]Action{ActionBumpTokens: ActionContinue, ActionContinue: ActionBumpTokens}

// pair is one key and value of a mapping.
type pair struct{ key, value *yaml.Node }

// pairs lists the keys of mapping n with their values: its own keys, then
// those of the mappings merged in with "<<" that it does not set itself
// (of several merged mappings the first wins). A key written twice, or a
// key that is not a plain scalar, is a problem.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var own, merged []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			for _, m := range d.mergeSources(val, path) {
				merged = append(merged, d.pairs(m, path)...)
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.problem(path, k.Line, "must have field names as keys, got %s", yamlnode.Describe(k))
			continue
		}
		if line, dup := seen[k.Value]; dup {
			d.problem(joinPath(path, k.Value), k.Line, "mapping key %q already defined at line %d", k.Value, line)
			continue
		}
		seen[k.Value] = k.Line
		own = append(own, pair{k, val})
	}
	for _, kv := range merged {
		if _, ok := seen[kv.key.Value]; !ok {
			seen[kv.key.Value] = kv.key.Line
			own = append(own, kv)
		}
	}
	return own
}

// mergeSources are the mappings a "<<" key merges in: one mapping or a
// list of them.
func (d *decoder) mergeSources(n *yaml.Node, path string) []*yaml.Node {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{n}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, item := range n.Content {
			if item = resolve(item); item.Kind == yaml.MappingNode {
				out = append(out, item)
			} else {
				d.problem(path, item.Line, "must merge (<<) mappings, got %s", yamlnode.Describe(item))
			}
		}
		return out
	}
	d.problem(path, n.Line, "must merge (<<) a mapping or a list of mappings, got %s", yamlnode.Describe(n))
	return nil
}

// wholeIfInt reports whether n can fill an integer field of type t
// without losing a fraction (yaml.v3 truncates 1.5 to 1).
func wholeIfInt(n *yaml.Node, t reflect.Type) bool {
	if t.Kind() != reflect.Int && t.Kind() != reflect.Int64 {
		return true
	}
	var f float64
	return n.ShortTag() != "!!float" || (n.Decode(&f) == nil && f == math.Trunc(f))
}

// yamlFields lists the yaml names of t's fields in order, and their index.
func yamlFields(t reflect.Type) ([]string, map[string]int) {
	var names []string
	index := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		names = append(names, name)
		index[name] = i
	}
	return names, index
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// resolve follows aliases to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// durationWant says what a duration must look like.
const durationWant = `a duration with a unit such as "500ms", "8s" or "1m"`

// kindWord names what a value of type t is written as, for people.
func kindWord(t reflect.Type) string {
	if t == durationType || (t.Kind() == reflect.Pointer && t.Elem() == durationType) {
		return durationWant
	}
	return yamlnode.Want(t)
}

// parseDuration reads a duration written with a unit; msg says what is
// wrong when it is not one.
func parseDuration(n *yaml.Node) (d Duration, msg string) {
	got := yamlnode.Describe(n)
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		got = n.Value + " (a bare number: add a unit)"
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		if v, err := time.ParseDuration(strings.TrimSpace(n.Value)); err == nil {
			return Duration(v), ""
		}
	}
	return 0, "must be " + durationWant + ", got " + got
}

// UnmarshalYAML reads a duration written with a unit: "500ms", "8s", "1m",
// "1m30s". Bare numbers are refused (is 5 seconds or nanoseconds?).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, msg := parseDuration(n)
	if msg != "" {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration as "500ms", "8s", "1m0s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String is the duration as time.Duration prints it ("500ms", "1m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// clone returns a deep copy of v: pointers, slices and maps are copied, so
// the copy shares nothing with v (nil stays nil, empty stays empty).
func clone[T any](v T) T {
	var out T
	copyValue(reflect.ValueOf(&out).Elem(), reflect.ValueOf(v))
	return out
}

func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if !src.IsNil() {
			p := reflect.New(src.Type().Elem())
			copyValue(p.Elem(), src.Elem())
			dst.Set(p)
		}
	case reflect.Slice:
		if !src.IsNil() {
			s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
			for i := range src.Len() {
				copyValue(s.Index(i), src.Index(i))
			}
			dst.Set(s)
		}
	case reflect.Map:
		if !src.IsNil() {
			m := reflect.MakeMapWithSize(src.Type(), src.Len())
			for it := src.MapRange(); it.Next(); {
				e := reflect.New(src.Type().Elem()).Elem()
				copyValue(e, it.Value())
				m.SetMapIndex(it.Key(), e)
			}
			dst.Set(m)
		}
	case reflect.Struct:
		for i := range src.NumField() {
			copyValue(dst.Field(i), src.Field(i))
		}
	default:
		dst.Set(src)
	}
}
