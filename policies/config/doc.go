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
//     changes the action, is under Merging below.
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
//
// # Merging
//
// ParseConfig's rules (docs/policy.md, and the header of
// default_policy.yaml):
//
//   - A field left out, or written with no value ("key:"), keeps its
//     default. A value written is the user's, 0, false and "" included;
//     Validate refuses it where it makes no sense. An empty document is the
//     default policy.
//   - Unknown fields, values of the wrong kind and durations without a unit
//     are refused.
//   - A list replaces the default list as a whole. Each models entry starts
//     from model_defaults (the file's, laid over the default one); entries
//     of other lists start from zero. An explicit empty models list is
//     refused; "rules: []" means no rules.
//   - A classes entry is laid over that class's default, so it sets only
//     what it changes ("rate_limited: {max: 2}" keeps retry_after) and any
//     ClassPolicy field merges the same way. An entry that names a different
//     action starts instead from the default entry of the first class, in
//     failure.AllClasses order, whose default action is that action (max,
//     waits and the action's own settings were tuned for the old action),
//     keeping only its own trip_breaker, which is about the failure, not the
//     action. Classes not in the file keep their defaults.
package config
