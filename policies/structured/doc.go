// Package structured checks the answers an agent parses: tool calls
// against the tools the request offered (and tool_choice), and JSON
// answers against response_format (json_object, json_schema). A check
// that fails names what is wrong in one short line, which is both the
// failed attempt's reason in history and the instruction of the repair
// attempt (README "Agents").
//
// Schemas are compiled with github.com/santhosh-tekuri/jsonschema; a
// schema's $ref may point inside the schema only (nothing is loaded from
// files or the network).
package structured
