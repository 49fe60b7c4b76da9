// Package structured checks the answers an agent parses: tool calls
// against the tools the request offered (and tool_choice), and JSON
// answers against response_format (json_object, json_schema). A check
// that fails is a *Mismatch worded twice: its Error, the failed attempt's
// reason that a tenant reads, is built from the product's own words and
// the failure's structure (the place in the answer, the keyword it fails,
// a tool call's index), never a value, the model's text or a name only
// the model chose; Detail has the full text, values included, for the
// repair instruction sent back to the model (docs/agents.md).
//
// Schemas are compiled with github.com/santhosh-tekuri/jsonschema; a
// schema's $ref may point inside the schema only (nothing is loaded from
// files or the network). Schema work is bounded everywhere:
//
//   - Before compiling, Compile checks the decoded document against the
//     limits (MaxSchemaBytes, MaxSchemaDepth, MaxProperties,
//     MaxSubschemas, MaxEnumValues, MaxExpandedSubschemas, MaxRefChain)
//     in time linear in its size, and refuses one over them with a
//     *LimitError naming the limit and the schema's number.
//   - Checking an answer takes at most StepBudget steps and stops when
//     its context ends: every schema object of the document carries a
//     format the compiler checks before anything else on each visit,
//     whose check counts the visit's work on a meter and stops the
//     library's validator (by a panic that ValidateValue recovers). A
//     compiled copy has its own meter, so a check uses a copy alone.
//   - A Cache keeps compiled schemas within a bound of estimated bytes
//     (DefaultCacheBytes), least recently used out first.
package structured
