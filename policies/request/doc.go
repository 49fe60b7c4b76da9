// Package request owns the shape of a call as a caller asks for it and what
// may be asked: the Request and Message types (plain JSON, the workflow's
// input), Validate (README "How it works", step 1), the prompt size
// (PromptBytes, MaxPromptBytes, DefaultMaxPromptBytes: the one definition
// the worker, the front door and llmclient share) and the idempotency key
// (Key, KeyFor, ScopedKey, ValidateKey; README "Idempotency and audit").
//
// Invariants:
//   - No Temporal import; it imports only the config package, for the
//     limits.
//   - Pure functions of their arguments: no clock, no randomness, no state.
//   - The key derivation is frozen: a change would give a running call's
//     retry a new workflow ID (TestKeyGolden guards it).
//   - Validate returns every problem at once, as "field: problem", and
//     never logs.
package request
