// Package config owns the worker's policy (docs/policy.md): the
// Config type, the embedded default policy file default_policy.yaml, and
// the loading and checking of a user's policy file.
//
// Invariants:
//
//   - One source for every default: default_policy.yaml. DefaultConfig
//     decodes it (TestDefaultPolicyYAMLSpellsOutEveryField keeps it
//     complete); no Go code or comment holds a default value. The per-entry
//     defaults of models (model_defaults) and of classes (each class's
//     entry) are in the same file.
//   - A value written in a file is the user's: ParseConfig lays the file
//     over a copy of DefaultConfig, so a field left out (or written with no
//     value) keeps its default, and 0, false and "" are never replaced by
//     one. Validate refuses the values that make no sense, naming the field.
//   - Decoding follows the Go types by reflection: a mapping is laid over
//     the struct or class entry already there, a list replaces the list
//     already there. A field added to a struct is read, checked and merged
//     with no new code. The one rule of its own, for a classes entry that
//     changes the action, is documented at ParseConfig.
//   - Every problem of a file is reported at once in an *Error: file, field
//     path, what is expected, what was found (named for people: "a mapping",
//     "a whole number", never a Go type) and the line, from the positions of
//     yaml.v3 nodes. A syntax error stops the load; its line is where the
//     parser stopped reading.
//   - A Config from LoadConfig, ParseConfig or DefaultConfig is valid. One
//     built or changed in code should start from DefaultConfig and be checked
//     with Config.Validate; Config.ClassPolicy falls back to the default of a
//     class the Config lacks.
//   - The package imports neither Temporal nor an LLM client, so every layer
//     may depend on it (TestPackageImports). It reads no environment
//     variables: the worker applies LLM_BASE_URL with Config.OverrideEndpoint.
package config
