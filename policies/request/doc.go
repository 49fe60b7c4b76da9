// Package request owns the shape of a call as a caller asks for it and what
// may be asked: the Request and Message types (plain JSON, the workflow's
// input), Validate (docs/how-it-works.md, step 1), the prompt size
// (PromptBytes, MaxPromptBytes, DefaultMaxPromptBytes: the one definition
// the worker, the front door and llmclient share) and the idempotency key
// (IDs, keyed with the deployment secret of LLM_ID_SECRET; Key, KeyFor,
// ScopedKey without one; ValidateKey; docs/how-it-works.md "Idempotency and audit").
//
// Invariants:
//   - No Temporal import; besides the standard library it imports the
//     config package (the limits), structured (schemas) and
//     golang.org/x/net/idna (image URLs' hosts).
//   - Pure functions of their arguments: no clock, no randomness, no state
//     (an IDs is an immutable value; its String never shows its secret).
//   - The key derivation is frozen: a change would give a running call's
//     retry a new workflow ID (TestKeyGolden guards it).
//   - Validate returns every problem at once, as "field: problem", and
//     never logs.
package request
