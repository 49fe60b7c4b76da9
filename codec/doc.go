// Package codec encrypts Temporal payloads with AES-256-GCM, so prompts and
// answers stored in workflow history are unreadable without the key, and
// serves the standard codec-server endpoints (/encode, /decode) that the
// Temporal Web UI and CLI call to show decrypted payloads to operators.
//
// # Keys
//
// Keys come from the environment variable LLM_PAYLOAD_KEYS as a
// comma-separated list of <key id>:<base64 of 32 random bytes>:
//
//	LLM_PAYLOAD_KEYS="k2:<base64>,k1:<base64>"
//
// The first key encrypts; every listed key decrypts. The key ID is written
// into each payload's metadata (encryption-key-id), so keys rotate without
// re-writing history: put the new key first, keep the old ones listed while
// histories written with them are still read (retention, replay tests).
// When the variable is empty, nothing is encrypted and FromEnv returns nil.
//
// # What is encrypted
//
// Every payload that goes through the client's data converter: workflow
// input and result, activity inputs and results, local-activity markers,
// heartbeat details, queries, memo, and the user metadata (the workflow,
// activity and timer summaries and details the Web UI shows). The
// ConfigureClient helper also sets a failure converter that encodes error
// messages and stack traces, which Temporal otherwise stores in plain text.
//
// Not encrypted, by Temporal's design: search attributes (the server must
// index them), workflow and activity IDs and types, task queue names, and
// timer durations. The LLM search attributes hold only outcome, source,
// model, classes, attempt count, scenario and the degraded flag, never
// prompt or answer text; the workflow ID is a hash.
//
// Payloads that are not encrypted (written before encryption was turned on)
// still decode, so encryption can be switched on for a running system;
// LLM_PAYLOAD_PLAINTEXT_CUTOFF (the time it was switched on) ends that: a
// workflow started after it refuses every plaintext payload it reads, so a
// call started without the keys, or forged by anyone who may write to the
// namespace, fails with ErrPlaintext instead of running.
//
// # The codec server
//
// NewHTTPHandler serves /encode and /decode to the Web UI and the CLI. A
// bearer token (CODEC_SERVER_TOKEN) guards both; `starter codec-server`
// refuses to start without one unless it is bound to loopback. Without a
// token, /decode answers loopback clients only and /encode is off: it
// would encrypt anything, for anyone, with the deployment's key. Browsers
// log in once at /login and send the cookie it sets; only the listed Web
// UI origins may send it ("*" never grants credentials). A payload that
// does not decode comes back as it was, marked, and the rest of the page
// decodes.
//
// # Invariants
//
// Key material never appears in an error message, a log line or the output
// of fmt: errors name the variable and the entry by its position, never any
// part of it (an entry written the wrong way round puts the key where the
// ID goes, and is refused as such). The key
// ID is bound to the ciphertext as additional authenticated data, so a
// payload whose metadata was altered is rejected like a payload whose bytes
// were altered.
package codec
