// Package yamlnode words YAML nodes for people, so that the loaders of the
// policy file, the FAQ and llmsim scenarios say "got a list" or
// "got \"fast\"" the same way.
package yamlnode

import (
	"reflect"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Describe says what a node holds: a number or true as written, a text
// quoted, null as "nothing", else its kind ("a mapping", "a list", "an
// alias").
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float", "!!bool":
			return n.Value
		case "!!null":
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// Want names how a value of Go type t is written in YAML, for people: "a
// mapping", "a list", "a whole number", "a number", "true or false", "a
// text" (pointers name what they point at).
func Want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return Want(t.Elem())
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a text"
	}
	return "a plain value"
}
