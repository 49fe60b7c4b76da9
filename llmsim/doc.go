// Package llmsim is an OpenAI-compatible LLM simulator that reproduces
// every failure of README "Failure classes" and the capacity of a GPU server. Tests start
// it in-process (NewServer), demos and benchmarks run the command
// llmsim/cmd/llmsim.
//
// # API
//
//	POST /v1/chat/completions   non-streaming, or stream: true as SSE
//	                            ("data: {chunk}\n\n" … "data: [DONE]\n\n")
//	GET  /v1/models, /v1/models/{id}
//	GET  /stats[?buckets=0&conversations=0], POST /stats/reset
//	GET  /admin/scenario, POST /admin/scenario (YAML or JSON body, or ?name=NAME)
//	POST /admin/reset, GET /healthz
//
// Both github.com/sashabaranov/go-openai and github.com/openai/openai-go/v3
// accept the responses unchanged. A healthy answer is deterministic:
// Answer(model, question), e.g. "[qwen-72b] Re: <question> — <words from a
// hash of the question>.", with usage from EstimatePromptTokens and
// EstimateTokens (one token per CJK character, one per four other runes).
// max_tokens is honoured: a longer answer is cut with finish_reason
// "length". A prompt whose estimate exceeds the model's context window is
// refused with OpenAI's 400 context_length_exceeded ("This model's maximum
// context length is N tokens. However, your messages resulted in M
// tokens…"), so pruning really cures it. An unknown model gets 404
// model_not_found.
//
// Every response carries X-Request-ID (the request's, or a generated one),
// Idempotency-Key (when sent), X-Llmsim-Attempt (the attempt number within
// the conversation) and, when a fault was injected, X-Llmsim-Fault.
//
// # Faults
//
// Faults are chosen per request from the in-prompt directives, then the
// model's rate limiter, then the active phase's fault rules (latency rules
// add up; the first other rule that fires decides). Front faults answer
// without taking a slot; back faults answer after the model's service time.
//
//	fault                    status  class (README "Failure classes")          params                    client sees
//	latency                  200     read_timeout (client)    latency                   extra service time, then a normal answer
//	hang                     -       read_timeout             -                         nothing until the client gives up
//	reset                    -       server_error             -                         TCP RST before any response byte (the request was sent)
//	rate_limited             429     rate_limited             retry_after, retry_header rate_limit_exceeded + Retry-After / retry-after-ms
//	quota_exceeded           429     auth                     -                         insufficient_quota
//	queue_full               429     queue_full               status (429|503)          code queue_full + X-RateLimit-Remaining: 0
//	overloaded               529     queue_full               retry_after               {"type":"error","error":{"type":"overloaded_error"}}
//	maintenance              503     service_unavailable      retry_after               "Service under maintenance"
//	unavailable              503     server_error             retry_after               generic 503 JSON error
//	server_error             500     server_error             -                         nginx HTML page, after the service time
//	bad_gateway              502     server_error             -                         nginx HTML page
//	gateway_timeout          504     timeout                  -                         nginx HTML page, after the service time
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
//	stream_break             200     connect/body_error       chunks (2)                connection aborted mid-body / after N chunks
//
// Every fault also reads latency (a delay before a front fault's answer,
// or extra service time for a back fault). retry_header is one of seconds
// (default), ms, both, date, none. The capacity model answers queue_full
// (429 or the model's reject_status) by itself when a model's queue is
// full, and the rate limiter answers rate_limited with Retry-After and
// retry-after-ms.
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
//
// The fault applies to the first k attempts (default 1; "always" for all)
// of the conversation that go to model m (any model when omitted). The
// conversation key is the Idempotency-Key before its last '/', else a hash
// of the last user message (stable when a retry prunes the history or
// switches model), so parallel tests do not interfere. Several directives
// apply one after another. Attributes: fault, times, model, retry_after,
// retry_after_ms, retry_header, latency, status, chunks, duration, window.
// Directives are stripped before the answer echoes the question and before
// tokens are counted. An invalid directive is answered 400
// invalid_directive.
//
// # Capacity
//
// Each model has Slots served at once and a FIFO Queue in front of them.
// Service time = base latency (the phase's override, else the model's) +
// latency faults, stretched by LoadFactor × busy/slots; the time spent
// waiting for a slot comes on top, so latency grows with queue depth.
// Beyond the queue limit a request is refused at once with queue_full.
// With continue_on_disconnect (the default) a request whose client gave up
// keeps its place in the queue and its slot until the simulated work is
// done, as on a GPU server: this is what turns naive retries into a storm.
// Sim.InFlight and the stats expose in-flight and queue depth.
//
// # Scenarios
//
// A scenario is YAML or JSON (see Scenario for every field):
//
//	name: spike-5s
//	seed: 0
//	models:
//	  - {name: qwen-72b, context_window: 32768, slots: 300, queue: 300,
//	     latency: {dist: lognormal, median: 300ms, sigma: 0.3}, rate_limit: 100}
//	phases:
//	  - {name: healthy, duration: 10s}
//	  - name: spike
//	    duration: 5s
//	    latency: 5s                # replaces every model's base latency
//	    faults:
//	      - {kind: rate_limited, model: qwen-72b, probability: 0.1, retry_after: 2s}
//	  - {name: recovered}
//
// Phases run one after another (or from an explicit start offset); outside
// every phase the models are healthy. Fault rules select requests by model
// ("*" for all), probability (seeded RNG) and first (the first N requests
// the rule sees). Bad files are refused with the file and the field:
// `spike.yaml: phases[1].faults[0].kind: unknown fault "rate_limit" (did you
// mean rate_limited?)`. The shipped scenarios (BuiltinScenarios) are
// embedded: healthy, mixed (the demo), spike-5s (a 5-second latency
// spike), vllm-slowdown (a vLLM cluster slowing from 800 ms to 2.5 s; both
// are storms of README "Benchmarks"), metastable, and class-<class> for
// every failure class an upstream can cause (connect failures happen
// before any server sees the request: dial a closed port to produce them).
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
// # Invariants
//
//   - Time for the timeline, rate limiters and buckets comes from
//     Options.Clock; randomness from the scenario's seed.
//   - The package does not log; Options.OnRequest reports each request.
//   - Sim is safe for concurrent use; SetScenario and Reset may be called
//     while requests run.
package llmsim
