package llmsim

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/durable-llm/durable-llm/internal/yamlnode"
	"go.yaml.in/yaml/v3"
)

// ScenarioError is a problem with one field of a scenario. Its message has
// the form "<source>: <field>: <problem>", for example
// `spike.yaml: phases[1].faults[0].kind: unknown fault "rate_limit" (did you
// mean rate_limited?)`.
type ScenarioError struct {
	// Source names the file (or "scenario" for one built in Go).
	Source string
	// Field is the path of the offending field, e.g. "phases[1].faults[0].kind";
	// empty for a problem with the document as a whole.
	Field string
	// Problem says what is wrong and what is expected.
	Problem string
}

// Error implements error.
func (e *ScenarioError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// errList collects field errors during validation.
type errList struct {
	source string
	errs   []error
}

func (l *errList) add(field, format string, args ...any) {
	l.errs = append(l.errs, &ScenarioError{Source: l.source, Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (l *errList) err() error { return errors.Join(l.errs...) }

// scalarDecoder is implemented by types that accept a scalar in place of
// their usual form (Duration, Latency).
type scalarDecoder interface {
	decodeScalar(n *yaml.Node) error
}

// decodeStrict decodes n into target (a pointer), refusing unknown fields
// and naming the path of the first offending field in its error.
func decodeStrict(n *yaml.Node, path string, target any) error {
	return decodeValue(n, path, reflect.ValueOf(target).Elem())
}

func fieldErr(path, format string, args ...any) error {
	return &ScenarioError{Field: path, Problem: fmt.Sprintf(format, args...)}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func decodeValue(n *yaml.Node, path string, v reflect.Value) error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decodeValue(n, path, v.Elem())
	}
	if sd, ok := v.Addr().Interface().(scalarDecoder); ok && n.Kind == yaml.ScalarNode {
		if err := sd.decodeScalar(n); err != nil {
			return fieldErr(path, "%v", err)
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fieldErr(path, "expected a mapping (key: value), got %s", yamlnode.Describe(n))
		}
		fields := map[string]int{}
		var names []string
		t := v.Type()
		for i := range t.NumField() {
			tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" || !t.Field(i).IsExported() {
				continue
			}
			fields[tag] = i
			names = append(names, tag)
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			p := join(path, key)
			idx, ok := fields[key]
			if !ok {
				return fieldErr(p, "unknown field%s (known: %s)", suggest(key, names), strings.Join(names, ", "))
			}
			if seen[key] {
				return fieldErr(p, "field given twice")
			}
			seen[key] = true
			if err := decodeValue(n.Content[i+1], p, v.Field(idx)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fieldErr(path, "expected a list, got %s", yamlnode.Describe(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			if err := decodeValue(c, fmt.Sprintf("%s[%d]", path, i), s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return fieldErr(path, "expected a mapping, got %s", yamlnode.Describe(n))
		}
		m := reflect.MakeMap(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			e := reflect.New(v.Type().Elem()).Elem()
			if err := decodeValue(n.Content[i+1], join(path, key), e); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), e)
		}
		v.Set(m)
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return fieldErr(path, "expected %s, got %s", yamlnode.Want(v.Type()), yamlnode.Describe(n))
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		return fieldErr(path, "expected %s, got %q", yamlnode.Want(v.Type()), n.Value)
	}
	return nil
}
