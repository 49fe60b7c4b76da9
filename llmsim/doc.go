// Package llmsim is an OpenAI- and Anthropic-compatible LLM simulator that reproduces
// every failure of docs/how-it-works.md "Failure classes" and the capacity of a GPU server. Tests start
// it in-process (NewServer), demos and benchmarks run the command
// llmsim/cmd/llmsim.
//
// # API
//
//	POST /v1/chat/completions   non-streaming, or stream: true as SSE
//	                            ("data: {chunk}\n\n" … "data: [DONE]\n\n")
//	POST /v1/messages           Anthropic's Messages API, the same (see
//	                            Anthropic wire)
//	GET  /v1/models, /v1/models/{id}
//	GET  /stats[?buckets=0&conversations=0&generations=1&conversation=KEY]
//	POST /stats/reset
//	GET  /admin/scenario, POST /admin/scenario (YAML or JSON body, or ?name=NAME)
//	POST /admin/reset, GET /healthz
//
// Both github.com/sashabaranov/go-openai and github.com/openai/openai-go/v3
// accept the responses unchanged. A prompt whose estimate exceeds the
// model's context window is refused with OpenAI's 400
// context_length_exceeded ("This model's maximum context length is N
// tokens. However, your messages resulted in M tokens…"), so pruning
// really cures it. An unknown model gets 404 model_not_found.
//
// Every response carries X-Request-ID (the request's, or a generated one;
// on the Anthropic wire also request-id),
// Idempotency-Key (when sent), X-Llmsim-Attempt (the attempt number within
// the conversation) and, when a fault was injected, X-Llmsim-Fault.
//
// # Anthropic wire
//
// POST /v1/messages serves Anthropic's Messages API through the same
// pipeline as chat completions — plan, faults, directives, capacity,
// latency, pacing, rate limits, stats, conversation keys, Idempotency-Key
// — differing only in the wire format (Wire, Record.Wire,
// Generation.Wire, Attempt.Wire). Anthropic's Go SDK takes Server.URL as
// its base URL. The request (model, max_tokens — required: 400 naming it
// when missing —, system as a string or text blocks, messages whose
// content is a string or text, image, tool_use and tool_result blocks,
// tools with input_schema, tool_choice auto|any|tool|none, stop_sequences,
// temperature, top_p, stream, metadata) is mapped onto the chat request:
// tool_result blocks become tool messages, images count no tokens (as on
// the chat wire), any is tool_choice "required", a last assistant message
// is a prefill that the answer continues (see Continuation; a model with
// continuation: reject refuses it with 400). The key is x-api-key, else the
// bearer token; anthropic-version is accepted.
//
// The answer is a message ("msg_llmsim…") whose content holds a thinking
// block (reasoning models), tool_use blocks ("toolu_…") or a text block;
// stop_reason maps finish_reason: stop is end_turn (stop_sequence when a
// stop sequence cut it), length max_tokens, tool_calls tool_use,
// content_filter refusal; usage counts input_tokens and output_tokens. A
// stream sends event: message_start, ping, per block content_block_start,
// one content_block_delta per token (text_delta, input_json_delta,
// thinking_delta then signature_delta), content_block_stop, then
// message_delta (stop_reason, usage.output_tokens) and message_stop, each
// token at the time its OpenAI chunk would go out.
//
// Errors are {"type":"error","error":{"type":T,"message":…}}, T by status:
// 400 invalid_request_error, 401 authentication_error, 403
// permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error (quota_exceeded: 402 billing_error), 529 overloaded_error,
// others api_error; the HTML pages stay HTML. Where faults differ:
//
//   - queue_full (fault or capacity model) and server_busy: 529
//     overloaded_error "Overloaded", as overloaded;
//   - rate_limited and a model's rate limit: retry-after, and
//     anthropic-ratelimit-requests-limit|remaining|reset (an RFC 3339
//     time) instead of x-ratelimit-*, also on a limited model's successes;
//   - context_length_exceeded: 400 "prompt is too long: N tokens > M
//     maximum";
//   - stream_error: event: error with overloaded_error "Overloaded" after
//     the tokens (Anthropic's mid-stream overload); non-streamed, 529
//     overloaded_error at the end of the generation;
//   - error_body: HTTP 200 with the api_error envelope (streamed: event:
//     error first); no_choices: "content": [] and stop_reason null;
//     empty_content: one empty text block, end_turn; reasoning_only: a
//     thinking block only; content_filter: no content, refusal;
//   - bad_tool_args: the streamed partial_json is the cut JSON;
//     non-streamed, input must be an object, so it is
//     {"INVALID_JSON":"<cut JSON>"} (the convention Anthropic's docs use for
//     invalid tool input);
//   - malformed_json: the body (streamed: message_start's data) cut
//     mid-way; stream_break counts OpenAI's chunks (message_start, ping and
//     the block start are the first); bad_json needs a response_format,
//     which this wire does not read, so its answers stay normal.
//
// # Answers
//
// A healthy answer is deterministic. Without a length it is
// Answer(model, question), e.g. "[qwen-72b] Re: <question> — <words from a
// hash of the question>." (about 30 tokens). Its length in completion
// tokens (EstimateTokens: one token per CJK character, one per four other
// runes; prompts by EstimatePromptTokens) is set by
//
//   - [[sim tokens=N]] in the last user message: exactly N tokens,
//     finish_reason "stop" (on every attempt and model);
//   - else the short answer.
//
// max_tokens (or max_completion_tokens) never lengthens an answer, as on a
// real server (a client may send a generous limit on every request). A
// request that sets none gets the model's own limit (ModelSpec's
// default_max_tokens, DefaultServerMaxTokens = 512 unless set; -1 none), as
// an Ollama Modelfile's num_predict or a gateway's default: a longer answer
// is cut there with finish_reason "length".
//
// The text is AnswerTokens(model, question, N): the short answer continued
// with sentences of words chosen by a hash of the question, so answers of
// one question are prefixes of each other and a test can predict what a
// client must receive. A max_tokens M below the answer's length (the short
// answer's, or the directive's N) cuts it at M tokens with finish_reason
// "length", as before.
//
// # Generation time
//
// Each model generates at its own speed (ModelSpec): the first token comes
// TTFT after the request gets a slot (default DefaultTTFT(): lognormal,
// median 300 ms, seeded), then one token every ITL (default 1/40 s =
// 25 ms). Generating n tokens (reasoning included) takes
//
//	TTFT + n × ITL, stretched by the load factor (see Capacity)
//
// so a 500-token answer takes over 12.5 s at the defaults. A non-streamed
// answer sends its headers and body when the generation ends. A streamed
// answer (stream: true) sends its headers, the role chunk and the first
// token at TTFT, then one chunk per token as it is generated (the first k
// content chunks are exactly the answer's first k tokens), then the
// finish_reason chunk, with stream_options.include_usage a last chunk with
// usage and empty choices (as OpenAI does), then "data: [DONE]". A
// reasoning model (reasoning: true) first generates reasoning_tokens of
// reasoning_content, streamed as reasoning_content deltas.
//
// A model that sets only latency (the old name of ttft) and neither
// tokens_per_second nor itl keeps its former meaning: the whole service
// time, tokens take no time (the shipped storm and class-* scenarios rely
// on it). InstantModels() are the default models with TTFT and ITL 0: every
// answer at once, for tests that measure something else.
//
// # Continuation
//
// A request continues the last assistant message when it carries vLLM's
// "continue_final_message": true (which needs "add_generation_prompt":
// false, else 400 as vLLM answers) or DeepSeek's "prefix": true on that
// last assistant message (a last message that is not the assistant's is
// refused with 400). A model with continuation: prefix (the default)
// then generates only what follows that text in its answer to the question
// (the last user message): a client that concatenates the partial text it
// received before a cut with the continuation gets exactly the full answer,
// no token duplicated or lost. The answer's length is still set by the
// tokens directive (the whole answer, prefix included) or else max_tokens
// (the new tokens, as vLLM counts them); max_tokens caps the new tokens. A
// prefix that is not the start of the answer is continued from the same
// token position (Generation.PrefixMatched is false). Reasoning is not
// repeated. Usage counts the prefix in prompt_tokens and only the new
// tokens in completion_tokens. A model with continuation: none ignores the
// flags and answers from scratch (as OpenAI's models do); continuation:
// reject answers 400 "Unrecognized request argument supplied:
// continue_final_message" (as OpenAI's API does for unknown arguments).
//
// # Faults
//
// Faults are chosen per request from the in-prompt directives, then the
// model's rate limiter, then the active phase's fault rules (latency rules
// add up; the first other rule that fires decides). Front faults answer
// without taking a slot; back faults take a slot and answer after the
// model's time to first token (error answers) or its generation time.
//
//	fault                    status  class (docs/how-it-works.md "Failure classes")          params                    client sees
//	latency                  200     read_timeout (client)    latency                   extra time to first token, then a normal answer
//	hang                     -       read_timeout             -                         nothing until the client gives up
//	pause                    200     read_timeout (client)    latency                   nothing until the phase ends, then a normal answer
//	reset                    -       server_error             -                         TCP RST before any response byte (the request was sent)
//	rate_limited             429     rate_limited             retry_after, retry_header rate_limit_exceeded + Retry-After / retry-after-ms
//	quota_exceeded           429     auth                     -                         insufficient_quota
//	queue_full               429     queue_full               status (429|503)          code queue_full + X-RateLimit-Remaining: 0
//	overloaded               529     queue_full               retry_after               {"type":"error","error":{"type":"overloaded_error"}}
//	server_busy              503     queue_full               retry_after               Ollama's "server busy, please try again.  maximum pending requests exceeded"
//	maintenance              503     service_unavailable      retry_after               "Service under maintenance"
//	unavailable              503     server_error             retry_after               generic 503 JSON error
//	unknown_error            500     server_error             -                         an engine's own error: code E42, "queue_full on all replicas"
//	server_error             500     server_error             -                         nginx HTML page, after the time to first token
//	bad_gateway              502     server_error             -                         nginx HTML page
//	gateway_timeout          504     timeout                  -                         nginx HTML page, after the time to first token
//	error_body               200     body_error               -                         {"error":{...}} (SSE: data: {"error":…})
//	no_choices               200     body_error               -                         "choices": []
//	malformed_json           200     body_error               -                         JSON cut mid-way
//	length                   200     output_truncated         -                         half the answer, finish_reason "length"
//	reasoning_only           200     output_truncated         -                         reasoning_content set, content ""
//	empty_content            200     output_truncated         -                         content "", finish_reason "stop"
//	content_filter           200     content_filter           -                         content "", finish_reason "content_filter"
//	context_length_exceeded  400     context_length_exceeded  window                    fires only while prompt tokens > window
//	bad_request              400     invalid_request          status (400|404|413|422)  invalid_request_error
//	invalid_api_key          401     auth                     -                         invalid_api_key
//	forbidden                403     auth                     -                         permission_denied
//	model_not_found          404     model_not_found          -                         model_not_found
//	slow_drip                200     timeout (client)         duration (3s)             body / SSE chunks trickled over duration
//	stream_break             200     stream_broken/body_error chunks (2)                connection aborted after N SSE chunks / mid-body
//	cut_stream               200     stream_broken            after (half)              N content tokens streamed, then the connection is cut
//	stream_error             200     stream_broken            after (half)              N content tokens, then data: {"error":…}, stream ends
//	stall                    200     stream_broken            after (half), duration    N content tokens, then silence on an open connection
//	bad_tool_args            200     bad_tool_call            -                         a tool call whose arguments are cut JSON
//	unknown_tool             200     bad_tool_call            -                         a tool call naming a tool that was not offered
//	bad_json                 200     schema_mismatch          -                         a JSON answer with prose before cut JSON
//
// Tools and structured outputs: a request that offers tools (tool_choice
// not "none") is answered with a tool call (streamed as tool-call deltas)
// until its current turn holds tool results, then from the results;
// tool_choice "required" always calls, a named function calls that one,
// auto picks the tool whose name shares most words with the question.
// Arguments, and the answer to a json_object or json_schema
// response_format, are JSON built from the schema (a property named like
// an id takes the question's first number). The three faults above apply
// only to such answers (otherwise the answer is normal).
//
// The three stream faults strike after "after" content tokens were
// streamed (default half the answer; 0: before the first content token),
// never send a finish_reason or [DONE], and leave the generation running
// as planned. cut_stream closes the connection (the client reads an
// unexpected EOF); stream_error sends data: {"error":{"message":…,
// "type":"server_error","code":"internal_error"}} and ends the body;
// stall sends nothing more until the client gives up (its idle timeout),
// or until duration (default Options.MaxHang) after which it cuts the
// connection. On a non-streamed request cut_stream and stall send the
// headers and half the body (then cut, or stall), and stream_error answers
// error_body's 200 {"error":…} when the generation ends. /stats records
// how many tokens were delivered before the strike (see Stats).
//
// pause holds a request, outside the model's queue, until the phase it
// arrived in ends and then serves it as usual (a request whose client left
// meanwhile is dropped): the hang of a server that resumes, where hang is
// the hang of one that lost the request.
//
// Every fault also reads latency (a delay before a front fault's answer,
// or extra time to first token for a back fault). retry_header is one of seconds
// (default), ms, both, date, none. The capacity model answers queue_full
// (429 or the model's reject_status) by itself when a model's queue is
// full, and the rate limiter (rate_limit requests a second, burst) answers
// rate_limited with Retry-After and retry-after-ms; every response of a
// limited model carries x-ratelimit-limit|remaining|reset-requests
// (anthropic-ratelimit-requests-* on the Anthropic wire). With
// rate_limit_per_key each API key (the bearer token, or x-api-key) has a
// bucket of its own, as providers count per key.
//
// Go's http.Transport silently resends a request that carries an
// Idempotency-Key when a reused keep-alive connection fails before the
// response (reset): the simulator then sees two arrivals for one client
// call, as a real upstream would.
//
// # In-prompt directives
//
// For tests and demos, the last user message may carry
//
//	[[sim fault=<name> times=<k> model=<m> retry_after=2s latency=3s]]
//	[[sim tokens=800]]
//	[[sim tokens=800 fault=cut_stream after=100]]
//
// The fault applies to the first k attempts (default 1; "always" for all)
// of the conversation that go to model m (any model when omitted). The
// conversation key is the Idempotency-Key before its last '/', else a hash
// of the last user message (stable when a retry prunes the history or
// switches model), so parallel tests do not interfere. Several directives
// apply one after another. Attributes: fault, times, model, retry_after,
// retry_after_ms, retry_header, latency, status, chunks, duration, window,
// after, tokens — the answer's length (see Answers), which applies to
// every attempt and model and needs no fault — and recall=FACT, which
// checks that FACT reached the model in another message of the request
// (see Summarize: summary requests and recall checks). Directives are stripped
// before the answer echoes the question and before tokens are counted. An
// invalid directive is answered 400 invalid_directive.
//
// # Capacity
//
// Each model has Slots served at once and a FIFO Queue in front of them.
// A request's generation time (TTFT — the phase's override, else the
// model's — plus latency faults, plus tokens × ITL) is stretched by
// 1 + LoadFactor × busy/slots, busy counted when it gets its slot; the time
// spent waiting for a slot comes on top, so latency grows with queue depth.
// The slot is held for the whole generation (streamed or not). Beyond the
// queue limit a request is refused at once with queue_full. With
// continue_on_disconnect (the default) a request whose client gave up (or
// whose stream was cut) keeps its place in the queue and its slot until
// the simulated work is done, as on a GPU server: this is what turns naive
// retries into a storm. Sim.InFlight and the stats expose in-flight and
// queue depth; Record (Options.OnRequest) and Generation give each
// request's schedule (FirstToken/TTFT, PerToken/ITL, Service).
//
// # Scenarios
//
// A scenario is YAML or JSON (see Scenario for every field):
//
//	name: spike-5s
//	seed: 0
//	models:
//	  - {name: qwen-72b, context_window: 32768, slots: 300, queue: 300,
//	     ttft: {dist: lognormal, median: 300ms, sigma: 0.3}, tokens_per_second: 40,
//	     rate_limit: 100}
//	  - {name: r1, reasoning: true, reasoning_tokens: 200, continuation: none}
//	phases:
//	  - {name: healthy, duration: 10s}
//	  - name: spike
//	    duration: 5s
//	    latency: 5s                # replaces every model's time to first token
//	    faults:
//	      - {kind: rate_limited, model: qwen-72b, probability: 0.1, retry_after: 2s}
//	  - {name: recovered}
//
// Model generation fields: ttft (or its old name latency: a duration or a
// distribution; default DefaultTTFT()), tokens_per_second (default 40) or
// itl (a duration per token; itl: 0 makes tokens free), reasoning and
// reasoning_tokens (default 64), continuation (prefix, none or reject;
// default prefix), stream_interval (an extra pause between chunks). The
// command's --ttft, --tokens-per-second and --instant flags override them
// for every model of the scenario it starts with.
//
// Phases run one after another (or from an explicit start offset); outside
// every phase the models are healthy. Fault rules select requests by model
// ("*" for all), probability (seeded RNG) and first (the first N requests
// the rule sees). The seeded RNG draws in arrival order; with
// Options.CallNumber, which numbers each conversation by its logical call,
// every draw of a request (its fault, its latency) comes instead from the
// seed, the call number and the attempt, so that clients run one after
// another against the same scenario meet the same faults request for
// request. Bad files are refused with the file and the field:
// `spike.yaml: phases[1].faults[0].kind: unknown fault "rate_limit" (did you
// mean rate_limited?)`. The shipped scenarios (BuiltinScenarios) are
// embedded: healthy, mixed (the demo), spike-5s (a 5-second latency
// spike), vllm-slowdown (a vLLM cluster slowing from 800 ms to 2.5 s; both
// are storms of docs/benchmarks.md), metastable, and class-<class> for
// every failure class an upstream can cause (connect failures happen
// before any server sees the request: dial a closed port to produce them).
// healthy and mixed generate at realistic speeds, class-stream_broken at
// 200 tokens/s; the storm scenarios and the other class-* ones keep
// latency-only models (instant tokens) so that their calibration and the
// tests using them stay as they were.
//
// # Stats
//
// Stats (GET /stats) counts arrivals, completions (simulated work done),
// responses by status ("499": client gave up first; "reset"), rejections,
// abandonments, in-flight and queue depth, in total, per model and per
// 100 ms bucket on the simulator's clock, plus attempts per conversation.
// Counts are exact; Amplification and PeakToMean compute the storm
// metrics.
//
// GET /stats?generations=1 (with &conversation=KEY for one conversation)
// adds "generations": what each of the last Options.KeepGenerations (1000)
// answers generated, oldest first — model, conversation, attempt, the full
// text generated ("text"; for a continuation only the new text, with the
// assistant text it continued in "prefix") and the reasoning,
// completion_tokens, finish_reason, whether it was a continuation, how
// much reached the client ("sent_bytes", "sent_tokens": text[:sent_bytes]
// is what the client got before a cut, error or stall), how it ended
// ("end": done, client_gone, error, stream_break, cut_stream,
// stream_error, stall) and its schedule (ttft, itl, service). Plain /stats
// leaves them out so that the stats of big benchmarks stay small.
// Sim.Generations returns them in Go, and Sim.Generated(conversation) the
// last whole answer generated for a conversation (prefix + text), to
// compare with what a client delivered.
//
// # Invariants
//
//   - Time for the timeline, rate limiters and buckets comes from
//     Options.Clock; randomness from the scenario's seed.
//   - The package does not log; Options.OnRequest reports each request.
//   - Sim is safe for concurrent use; SetScenario and Reset may be called
//     while requests run.
package llmsim
