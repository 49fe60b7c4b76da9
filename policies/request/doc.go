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
//
// # Validation
//
// Validate reports every problem of a request at once; each field must be:
//
//   - messages: at least one, at most Limits.MaxMessages; each with a known
//     role (system, developer, user, assistant, tool); tool messages with a
//     tool_call_id answering a tool call of an earlier assistant message;
//     tool calls only on assistant messages, each with an id and a function
//     name; the last message from the user and not blank, or a tool message
//     (an agent sending its tool results).
//   - the prompt (PromptBytes) at most Limits.MaxPromptBytes and at most
//     PromptBytesPerContextToken bytes a token of the ladder's largest
//     context window.
//   - model: empty or one of cfg.Models (when the config has models).
//   - max_tokens: 0 (the upstream's default) or 1..Limits.MaxTokens.
//   - temperature: unset or a number in 0..Limits.MaxTemperature.
//   - deadline_ms: 0 (the policy's default) or
//     MinRequestDeadline..Call.MaxDeadline.
//   - the agent fields (docs/agents.md): tools (functions with unique
//     names and parameters that compile as JSON Schema), tool_choice
//     (a mode, or a function that is offered), response_format (a schema
//     that compiles), stop, top_p, penalties, logit_bias, top_logprobs,
//     reasoning_effort in OpenAI's ranges; image parts in user messages,
//     http(s) or data URIs within Limits.MaxImages / MaxImageBytes;
//     passthrough fields that a model's policy lists; and a model that
//     can serve what the request needs (Needs: the preferred one, else
//     at least one rung).
//   - scenario: empty or one cfg.KnownScenario accepts (request.scenarios,
//     the rules' and hedge.scenarios' scenarios).
//   - image URLs: none to an address or name inside the network (loopback,
//     link-local, private, shared, localhost, *.internal, …) unless
//     request.allow_image_hosts lists it, none with credentials (see
//     imageURLProblem).
//   - idempotency_key: empty or valid for ValidateKey.
//   - every string valid UTF-8.
//
// # The idempotency key's bytes
//
// Key hashes the compact JSON array [tenant, userID, sessionID, messages]
// with the strings as JSON strings, so no two different field splits give
// the same bytes (("a","bc") and ("ab","c") differ), and messages as an
// array of objects with the keys, in this order, "role", "content", and
// only when not empty "parts" (image messages), "name", "tool_calls"
// (objects "id", "type", "function" {"name", "arguments"}) and
// "tool_call_id". Nil and empty message lists encode alike ([]). HTML
// characters are not escaped; Go's encoder escapes U+2028 and U+2029 and
// replaces invalid UTF-8 with U+FFFD (Validate refuses invalid UTF-8, so
// two accepted requests never collide that way). The text is hashed as
// sent: no trimming, no Unicode normalisation. The key is the prefix and
// 64 lower-case hex digits. A starter in another language reproduces it by
// encoding the same array the same way; IDs.For says what a request's
// other fields add.
package request
