// Package realllm runs a real OpenAI-compatible LLM server for tests:
// Ollama, built from the Go module proxy by `make ollama` into bin/ollama
// (the version in Version), serving tiny random-weight llama models that
// WriteModel writes. Their text is gibberish; the server, its tokenizer,
// chat template, streaming, usage, token limits, queueing and errors are
// real.
//
// Start runs one server for a test, on a free port, in a temporary
// directory of its own (models, HOME and log), behind a reverse proxy
// that records every request it forwards, so that a test counts upstream
// requests exactly (by the X-Request-ID the worker sends). The server is
// stopped, with the runners it started, when the test ends.
//
// Nothing is downloaded at test time: the binary is built beforehand (a
// test skips without it, unless DURABLE_LLM_REQUIRE_REALLLM=1 or CI is
// set), and the model files are written from a fixed seed. A Server is
// safe for concurrent use.
package realllm
