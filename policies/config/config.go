package config

import (
	"slices"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// Config is the whole policy of the worker: one YAML file loaded by
// LoadConfig / ParseConfig over the embedded default_policy.yaml, which holds
// every default (DefaultConfig). The field comments say what a field means;
// its default is the value written in default_policy.yaml.
type Config struct {
	// ModelDefaults is what each entry of Models starts from: a field a
	// model leaves out takes its value from here. Its Name stays empty.
	ModelDefaults ModelConfig `yaml:"model_defaults"`
	// Models is the ladder, in order of preference. At least one; left out
	// of a file, the default ladder (the local llmsim) is used.
	Models []ModelConfig `yaml:"models"`
	// Classes maps every failure class to its action (docs/how-it-works.md
	// "Failure classes"). A file's entry for a class is laid over that class's
	// default; an entry that names another action starts from the default
	// entry of the first class (in failure.AllClasses order) with that
	// action and keeps its own TripBreaker (see ParseConfig).
	Classes   map[failure.Class]ClassPolicy `yaml:"classes"`
	Backoff   BackoffConfig                 `yaml:"backoff"`
	Budget    BudgetConfig                  `yaml:"budget"`
	Breaker   BreakerConfig                 `yaml:"breaker"`
	RateLimit RateLimitConfig               `yaml:"rate_limit"`
	Pruning   PruningConfig                 `yaml:"pruning"`
	Call      CallConfig                    `yaml:"call"`
	HTTP      HTTPConfig                    `yaml:"http"`
	Limits    LimitsConfig                  `yaml:"limits"`
	Request   RequestConfig                 `yaml:"request"`
	// Idempotency: how long a completed call answers a duplicate.
	Idempotency IdempotencyConfig `yaml:"idempotency"`
	FAQ         FAQConfig         `yaml:"faq"`
	Stream      StreamConfig      `yaml:"stream"`
	Hedge       HedgeConfig       `yaml:"hedge"`
	Cache       CacheConfig       `yaml:"cache"`
	Store       StoreConfig       `yaml:"store"`
	Spend       SpendConfig       `yaml:"spend"`
	Diagnose    DiagnoseConfig    `yaml:"diagnose"`
	// Rules are the business rules (semantic breaker), checked in order.
	Rules []Rule `yaml:"rules"`
	// Learn is how the rules learn from users' feedback (docs/rules.md
	// "Rules that learn from users").
	Learn LearnConfig `yaml:"learn"`
	// Placeholder is the last-resort answer when neither the FAQ nor a rule
	// card answers (the default is a polite "we are busy, please try again"
	// in English and Chinese).
	Placeholder string `yaml:"placeholder"`

	// Source is the file the config came from ("<embedded default>" for the
	// default). Not read from YAML.
	Source string `yaml:"-"`
}

// SystemPromptSupport says how a model accepts the system prompt.
type SystemPromptSupport string

// System-prompt support levels of a model.
const (
	SystemPromptFull    SystemPromptSupport = "full"    // system role accepted
	SystemPromptPartial SystemPromptSupport = "partial" // folded into the first user turn
	SystemPromptNone    SystemPromptSupport = "none"    // dropped into the user text of the current question
)

// Continuation says whether and how a model continues a final assistant
// message (the text a broken stream had delivered) instead of answering
// from scratch.
type Continuation string

// The continuation styles.
const (
	// ContinueAuto: by the model's api: anthropic for api anthropic, none
	// otherwise (Continues).
	ContinueAuto Continuation = "auto"
	// ContinueNone: the model cannot continue (OpenAI's own API).
	ContinueNone Continuation = "none"
	// ContinueAnthropic: Anthropic's Messages API continues a final
	// assistant message as it is sent (a prefill); api anthropic only.
	ContinueAnthropic Continuation = "anthropic"
	// ContinueVLLM: vLLM's "continue_final_message": true with
	// "add_generation_prompt": false.
	ContinueVLLM Continuation = "vllm"
	// ContinueDeepSeek: DeepSeek's "prefix": true on the final assistant
	// message.
	ContinueDeepSeek Continuation = "deepseek"
)

// API is the wire a model is called through.
type API string

// The upstream APIs.
const (
	// APIOpenAI: OpenAI's chat completions (POST {base_url}/chat/completions),
	// through go-openai; the API of OpenAI, vLLM, Ollama, DeepSeek and most
	// servers.
	APIOpenAI API = "openai"
	// APIAnthropic: Anthropic's Messages API (POST {base_url}/v1/messages),
	// through Anthropic's Go SDK, with Anthropic's own signals (529
	// overloaded_error, an error event inside a 200 stream,
	// anthropic-ratelimit-* headers).
	APIAnthropic API = "anthropic"
)

// RateLimitScope is what a rate limit (429) of a model holds back: its
// whole endpoint, the requests made with its API key on that endpoint, or
// the model alone; auto picks by the provider (ModelConfig.Grain).
type RateLimitScope string

// The scopes of a rate limit.
const (
	ScopeEndpoint RateLimitScope = "endpoint"
	ScopeKey      RateLimitScope = "key"
	ScopeModel    RateLimitScope = "model"
	ScopeAuto     RateLimitScope = "auto"
)

// StandardFields are the top-level fields of a chat-completions request
// that the call sends (or deliberately ignores) itself; a model's
// passthrough list may not name them.
var StandardFields = []string{
	"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
	"temperature", "n", "user", "tools", "tool_choice", "parallel_tool_calls", "response_format",
	"stop", "seed", "top_p", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs",
	"top_logprobs", "reasoning_effort", "functions", "function_call", "store", "metadata",
	"service_tier", "prediction", "modalities", "audio", "web_search_options", "verbosity",
	"safety_identifier", "prompt_cache_key",
}

// Capability is something a model can serve that not every model can.
type Capability string

// The capabilities a request may need (docs/agents.md).
const (
	CapTools      Capability = "tools"       // function tools and tool calls
	CapJSONSchema Capability = "json_schema" // response_format json_object / json_schema
	CapVision     Capability = "vision"      // image parts
	CapReasoning  Capability = "reasoning"   // reasoning_effort
)

// KnownCapabilities lists the capabilities a policy may name.
var KnownCapabilities = []Capability{CapTools, CapJSONSchema, CapVision, CapReasoning}

// Can reports whether m has capability c.
func (m ModelConfig) Can(c Capability) bool {
	for _, have := range m.Capabilities {
		if have == c {
			return true
		}
	}
	return false
}

// ModelConfig is one rung of the model ladder.
type ModelConfig struct {
	// Name is the model name sent upstream and used in the ladder. Required, unique.
	Name string `yaml:"name"`
	// BaseURL of the model's API. Required. For api openai the URL the
	// chat completions path follows, e.g. http://127.0.0.1:8000/v1; for
	// api anthropic the server's root, e.g. https://api.anthropic.com.
	BaseURL string `yaml:"base_url"`
	// API is the wire the model is called through: openai or anthropic.
	API API `yaml:"api"`
	// APIKeyEnv names the environment variable holding the API key. The key
	// itself never appears in the file, in workflow input, history or logs.
	APIKeyEnv string `yaml:"api_key_env"`
	// APIKeyEnvs, when set, is a pool of keys for the model, each named
	// by its environment variable (APIKeyEnv is then not used): calls rotate
	// over them, a rate limit holds only the key it hit and the next
	// attempt takes another key at once, and a key refused as
	// unauthorized or out of quota is parked for KeyPark. The variable's
	// name is the key's id in history and metrics.
	APIKeyEnvs []string `yaml:"api_key_envs"`
	// Deployments, when set, are several deployments of the model (a
	// region each, or replicas behind their own URLs), each with its own
	// base URL and key: calls are balanced over them as over a key pool,
	// by the headroom each reports, a 429 on one sends the next attempt to
	// another at once, and one refused is parked. BaseURL and the keys
	// above are then not used; the deployment's Name is its id in history
	// and metrics.
	Deployments []Deployment `yaml:"deployments"`
	// KeyID is the key (or deployment) an attempt uses, set by WithKey.
	KeyID string `yaml:"-"`
	// KeyPark is how long a key of a pool is left out after an auth or
	// quota failure.
	KeyPark Duration `yaml:"key_park"`
	// ContextWindow in tokens; prompts are pruned to fit.
	ContextWindow int `yaml:"context_window"`
	// WindowAssumed: ContextWindow is the default policy's model_defaults
	// value, set neither for this model nor by the file's model_defaults
	// (a model named only in LLM_MODELS, or a models entry without
	// context_window). The worker then learns the window from the server
	// at start where the server says it (llmworker.LearnWindows).
	WindowAssumed bool `yaml:"-" json:"-"`
	// Timeout of one attempt on this model, the whole answer included (the
	// call's remaining deadline caps it).
	Timeout Duration `yaml:"timeout"`
	// Stream: attempts are streamed (stream: true), so that the first token
	// measures the upstream's queue and a long answer is never a failure.
	// A model that cannot stream has no header timeout but its Timeout.
	Stream bool `yaml:"stream"`
	// FirstTokenTimeout: no first chunk (content, reasoning or tool call)
	// in this time is a read_timeout. Streamed models only.
	FirstTokenTimeout Duration `yaml:"first_token_timeout"`
	// IdleTimeout: no chunk in this time once the stream has started is a
	// stream_broken. Streamed models only.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// StopsOnDisconnect: the server stops working on a request when its
	// client leaves (vLLM aborts it). An overdue request to it is then cut
	// once the model's p90 time to first token says it cannot start in
	// time: leaving frees the server's slot for a request that can.
	StopsOnDisconnect bool `yaml:"stops_on_disconnect"`
	// Continuation: how the model continues the text a broken stream had
	// delivered (auto, none, vllm, deepseek, anthropic).
	Continuation Continuation `yaml:"continuation"`
	// SystemPrompt support: full, partial or none.
	SystemPrompt SystemPromptSupport `yaml:"system_prompt"`
	// RateLimitScope: what a 429 of this model holds back for its
	// Retry-After (endpoint, key or model; see Config.RateLimit), and what
	// RPM and TPM pace.
	RateLimitScope RateLimitScope `yaml:"rate_limit_scope"`
	// RPM and TPM, when positive, pace the requests and tokens (prompt +
	// max_tokens) sent to the model's rate_limit_scope per minute, so that
	// a call waits its turn instead of being sent to be refused (the
	// smallest limit of the models sharing a scope applies).
	RPM int `yaml:"rpm"`
	TPM int `yaml:"tpm"`
	// Capabilities are what the model can serve (tools, json_schema,
	// vision, reasoning): a request that needs one the model lacks skips
	// the rung with a recorded reason, never sent a request it cannot
	// serve.
	Capabilities []Capability `yaml:"capabilities"`
	// Passthrough names provider-specific top-level request fields
	// (vLLM's top_k, …) that a request may carry and that are forwarded to
	// this model as written (JSON whitespace aside).
	Passthrough []string `yaml:"passthrough"`
	// InputPrice and OutputPrice per million tokens, for reports. Optional.
	InputPrice  float64 `yaml:"input_price"`
	OutputPrice float64 `yaml:"output_price"`
}

// Action is what callstate.Next does with a failure class.
type Action string

// The actions a class can take (docs/how-it-works.md "Failure classes").
const (
	// ActionResend resends the same attempt at once (worker_lost; connect
	// failures are resent at the network layer inside the call activity).
	ActionResend Action = "resend"
	// ActionRetry retries the same model after a full-jitter backoff; after
	// SwitchAfter failures of this class on one model it switches model.
	ActionRetry Action = "retry"
	// ActionPruneRetry prunes one more stage, then retries after backoff
	// (timeout, read_timeout).
	ActionPruneRetry Action = "prune_retry"
	// ActionPruneResend prunes to the last KeepRounds rounds and resends at
	// once (context_length_exceeded).
	ActionPruneResend Action = "prune_resend"
	// ActionRetryAfter waits what the upstream's Retry-After says, capped;
	// beyond the cap or the deadline it switches model (rate_limited).
	ActionRetryAfter Action = "retry_after"
	// ActionBumpTokens raises max_tokens and lowers temperature, then
	// retries after the fixed waits: the whole answer is generated again.
	ActionBumpTokens Action = "bump_tokens"
	// ActionContinue is ActionBumpTokens that asks only for the missing
	// part: the next attempt sends the truncated answer as a final
	// assistant message for the model to continue (its Continuation), and
	// the raised max_tokens is all for new text; the answer is the partial
	// text and its continuation. Where the model cannot continue, or the
	// attempt gave no text (reasoning only, empty), it is ActionBumpTokens
	// (output_truncated).
	ActionContinue Action = "continue"
	// ActionSwitchModel goes to the next model of the ladder.
	ActionSwitchModel Action = "switch_model"
	// ActionFallback answers from the business fallback at once.
	ActionFallback Action = "fallback"
	// ActionFail ends the call with a clear, non-retryable error.
	ActionFail Action = "fail"
	// ActionRepair sends the next attempt at once to the same model with
	// the temperature lowered to at most Temperature and a short
	// instruction that says what was wrong with the answer (bad_tool_call,
	// schema_mismatch); after Max repairs it switches model.
	ActionRepair Action = "repair"
	// ActionHold answers backpressure (queue_full): a refusal that cost
	// the server nothing. What refused is held (RateLimitConfig) for the
	// upstream's Retry-After (else rate_limit.hold) and the same request
	// is resent once the hold is released, with jitter (guard.Jittered). Each
	// resend is paid from the endpoint's retry budget but is no attempt
	// against call.max_attempts; at most Max resends per call, within the
	// deadline and call.max_wait. Beyond, the call switches to a model on
	// another endpoint, else to the business fallback.
	ActionHold Action = "hold"
	// ActionResume sends the next attempt at once to the same model (after
	// SwitchAfter failures on it, the next): when text was already
	// delivered to a streaming caller, that attempt continues it (see
	// callstate.Next).
	ActionResume Action = "resume"
)

// knownActions are the actions a policy file may name; a new action is
// added here and decided in callstate.Next.
var knownActions = []Action{ActionResend, ActionRetry, ActionPruneRetry, ActionPruneResend,
	ActionRetryAfter, ActionBumpTokens, ActionContinue, ActionSwitchModel, ActionFallback, ActionFail, ActionResume, ActionRepair,
	ActionHold}

// ClassPolicy is the action for one failure class.
type ClassPolicy struct {
	// Action is what callstate.Next does with a failure of the class.
	Action Action `yaml:"action"`
	// Max is how many times this class may be retried in one call (0: never;
	// -1: up to the attempts cap; ActionResend and ActionHold need a count).
	Max int `yaml:"max"`
	// Waits are fixed waits, one per retry (the last repeats). Empty means
	// full-jitter backoff for retry actions, no wait for resends and switches.
	Waits []Duration `yaml:"waits"`
	// SwitchAfter, for ActionRetry and ActionPruneRetry: after this many
	// failures of the class on the same model, switch model (0: never).
	SwitchAfter int `yaml:"switch_after"`
	// TripBreaker opens the model's breaker at once (auth). It is about the
	// failure, not the action, so a file entry that changes the action keeps it.
	TripBreaker bool `yaml:"trip_breaker"`
	// MaxTokensIncrease (at least 1) and Temperature apply to
	// ActionBumpTokens and ActionContinue: max_tokens grows by
	// MaxTokensIncrease and the temperature becomes *Temperature (nil: the
	// request's is dropped).
	MaxTokensIncrease int      `yaml:"max_tokens_increase"`
	Temperature       *float64 `yaml:"temperature"`
	// KeepRounds (at least 1) applies to ActionPruneResend.
	KeepRounds int `yaml:"keep_rounds"`
	// Summarize, for ActionPruneResend: the rounds the pruning drops are
	// replaced by a summary that PruningConfig.Summary's model writes
	// (docs/how-it-works.md "Context refiner"), so their facts stay in the prompt.
	Summarize bool `yaml:"summarize"`
}

// BackoffConfig is exponential backoff with full jitter:
// sleep = U(0, min(Cap, Base·2^n)).
type BackoffConfig struct {
	Base Duration `yaml:"base"`
	Cap  Duration `yaml:"cap"`
	// RetryAfterCap caps an upstream Retry-After.
	RetryAfterCap Duration `yaml:"retry_after_cap"`
	// ConnectBase is the base of the network-layer resend of connect
	// failures and ConnectRetries their count (0: no resend).
	ConnectBase    Duration `yaml:"connect_base"`
	ConnectRetries int      `yaml:"connect_retries"`
}

// BudgetConfig is the retry budget of an endpoint (guard.RetryBudget): a
// reserve of at most Floor retries, refilled by Ratio per request, whose
// retries leave it after Window, so retries ≤ Ratio·requests + Floor in
// any Window. Ratio 0 leaves only the floor per window; Ratio 0 and
// Floor 0 allow no retries.
type BudgetConfig struct {
	Window Duration `yaml:"window"`
	Ratio  float64  `yaml:"ratio"`
	Floor  int      `yaml:"floor"`
	// TenantShare: while other tenants' calls are in the window, one
	// tenant's retries may take at most this fraction of what it allows
	// (at least one), so a tenant whose calls fail cannot spend everyone's
	// retries. 0: no share, the budget is first come, first served.
	TenantShare float64 `yaml:"tenant_share"`
}

// BreakerConfig is the per-model circuit breaker and the per-class breaker.
type BreakerConfig struct {
	ConsecutiveFailures int     `yaml:"consecutive_failures"`
	FailureRate         float64 `yaml:"failure_rate"` // over the last Window calls
	Window              int     `yaml:"window"`       // calls
	MinCalls            int     `yaml:"min_calls"`    // before the rate applies
	// OpenFor is the first open period. Each failed half-open trial
	// reopens the breaker for twice the period before (at most half the
	// time since it opened from closed), up to OpenForMax
	// (0: the period never grows); trials that close it halve the period,
	// and every HealAfter spent closed halves it again, down to OpenFor
	// (HealAfter 0: back to OpenFor as soon as the breaker closes).
	OpenFor    Duration `yaml:"open_for"`
	OpenForMax Duration `yaml:"open_for_max"`
	HealAfter  Duration `yaml:"heal_after"`
	// ProbeFraction is no longer read: half-open lets up to Probes trials
	// out at once (gobreaker's MaxRequests), not a share of the calls. A
	// policy that sets it still loads.
	ProbeFraction float64 `yaml:"probe_fraction"`
	// CloseThreshold is the share of trial results that must succeed: the
	// breaker reopens as soon as its trials can no longer reach it over
	// at least Probes results, and closes once Probes results are in.
	// Probes is also how many trials half-open lets out at once (one
	// until a trial has succeeded).
	CloseThreshold float64 `yaml:"close_threshold"`
	Probes         int     `yaml:"probes"`
	// ClassFailureRate: when retries of one class fail more than this
	// fraction within ClassWindow, that class stops retrying and goes
	// straight to the fallback (docs/how-it-works.md "Failure classes"). The rate is
	// judged only once ClassMinRetries retries were seen in the window.
	ClassFailureRate float64  `yaml:"class_failure_rate"`
	ClassWindow      Duration `yaml:"class_window"`
	ClassMinRetries  int      `yaml:"class_min_retries"`
}

// RateLimitConfig: a rate limit is backpressure, not sickness. A 429
// (rate_limited) holds its model's RateLimitScope (a pooled key's, that
// key) for the upstream's Retry-After (Hold when it sends none): calls that
// arrive meanwhile wait for it, weigh it again at its release, or take a
// model on another endpoint; a queue_full ejects its endpoint
// (guard.Outliers). Neither counts against a breaker until refusals have
// lasted BreakerAfter without an answer, nor against call.max_attempts.
type RateLimitConfig struct {
	Hold         Duration `yaml:"hold"`
	BreakerAfter Duration `yaml:"breaker_after"`
}

// PruningConfig drives context pruning.
type PruningConfig struct {
	// Factor kept per attempt: attempt n keeps Factor^n of the middle
	// history.
	Factor float64 `yaml:"factor"`
	// ReserveOutputTokens are kept free in the context window for the
	// answer when the request sets no max_tokens; a request's max_tokens is
	// kept free instead. It is also the base that output_truncated raises
	// when the request set no max_tokens.
	ReserveOutputTokens int `yaml:"reserve_output_tokens"`
	// Encoding of the offline tokenizer.
	Encoding string `yaml:"encoding"`
	// Summary is the summarizer of the rounds a prune_resend drops when
	// its class sets summarize (ClassPolicy.Summarize).
	Summary SummaryConfig `yaml:"summary"`
}

// SummaryConfig is the context refiner's summarizer: the model that
// writes the summary of dropped rounds, how long it may be, and how long
// and how many summaries are kept per session for the session's next
// calls.
type SummaryConfig struct {
	// Model writes the summaries; a name not in the ladder (the default
	// "") means its last, smallest rung.
	Model string `yaml:"model"`
	// MaxTokens bounds one summary (16 to 4096).
	MaxTokens int `yaml:"max_tokens"`
	// TTL and MaxEntries bound the summaries kept per session (in the
	// worker, and in the shared store when there is one).
	TTL        Duration `yaml:"ttl"`
	MaxEntries int      `yaml:"max_entries"`
}

// CallConfig bounds one call.
type CallConfig struct {
	MaxAttempts int      `yaml:"max_attempts"` // upstream attempts across all layers
	Deadline    Duration `yaml:"deadline"`     // when the request sets none
	MaxDeadline Duration `yaml:"max_deadline"` // largest deadline a request may ask
	// FallbackReserve is kept free at the end of the deadline for the
	// fallback.
	FallbackReserve Duration `yaml:"fallback_reserve"`
	// HeartbeatTimeout of the call activity: a lost worker is noticed within
	// it.
	HeartbeatTimeout Duration `yaml:"heartbeat_timeout"`
	// MaxHistoryBytes and MaxHistoryEvents: a call whose workflow history
	// has grown past either falls back before its next attempt, well
	// before Temporal's own limits (a warning at 10 MB or 10,240 events,
	// a failed workflow at 50 MB or 51,200). 0: the default (8 MiB, 8,000).
	MaxHistoryBytes  int `yaml:"max_history_bytes"`
	MaxHistoryEvents int `yaml:"max_history_events"`
	// MaxWait caps how long a call whose every rung refuses (open
	// breakers, spent retry budgets, endpoints ejected for refusing,
	// backpressure holds) may wait for recovery, on visible timers,
	// before the FAQ answers; MaxWaitStream the same for a streamed call;
	// MaxWaitScenarios sets it per scenario for both. 0 (the default): no
	// cap of its own — the call waits up to its deadline less the
	// fallback reserve, because a refusal that ends within the deadline
	// is an answer the caller can still get.
	MaxWait          Duration       `yaml:"max_wait"`
	MaxWaitStream    Duration       `yaml:"max_wait_stream"`
	MaxWaitScenarios []ScenarioWait `yaml:"max_wait_scenarios"`
}

// ScenarioWait is call.max_wait for the calls of one scenario.
type ScenarioWait struct {
	Scenario string   `yaml:"scenario"`
	MaxWait  Duration `yaml:"max_wait"`
}

// MaxWaitFor is the cap on the waits of a call of scenario (0: none,
// the deadline bounds them).
func (c CallConfig) MaxWaitFor(scenario string, stream bool) time.Duration {
	for _, w := range c.MaxWaitScenarios {
		if strings.EqualFold(w.Scenario, scenario) {
			return w.MaxWait.D()
		}
	}
	if stream {
		return c.MaxWaitStream.D()
	}
	return c.MaxWait.D()
}

// The defaults of CallConfig's history guard.
const (
	DefaultMaxHistoryBytes  = 8 << 20
	DefaultMaxHistoryEvents = 8000
)

// HistoryLimits are the history guard's limits, defaults filled in.
func (c CallConfig) HistoryLimits() (bytes, events int) {
	bytes, events = c.MaxHistoryBytes, c.MaxHistoryEvents
	if bytes <= 0 {
		bytes = DefaultMaxHistoryBytes
	}
	if events <= 0 {
		events = DefaultMaxHistoryEvents
	}
	return bytes, events
}

// StreamConfig shapes the live stream of a call that asked to stream.
type StreamConfig struct {
	// BatchInterval: the first delta after a quiet spell is published at
	// once, later ones together at most this often (one signal each).
	BatchInterval Duration `yaml:"batch_interval"`
	// Linger: the call waits this long after its last item before it
	// returns, so that subscribers fetch every item before the stream
	// closes.
	Linger Duration `yaml:"linger"`
}

// HTTPConfig shapes the HTTP client of the call activity.
type HTTPConfig struct {
	ConnectTimeout Duration `yaml:"connect_timeout"` // dial + TLS
	// MaxBodyBytes bounds what one attempt reads from the upstream: a
	// plain or error reply's body, one line of a streamed reply, and the
	// answer a stream assembles, JSON-encoded. Beyond it the attempt is
	// body_error. From MinBodyBytes to MaxBodyBytesLimit.
	MaxBodyBytes int `yaml:"max_body_bytes"`
}

// The range of HTTPConfig.MaxBodyBytes: room for an error body at least,
// and at most what keeps an attempt's result well under Temporal's 2 MB
// payload limit.
const (
	MinBodyBytes      = 4 << 10
	MaxBodyBytesLimit = 3 << 19 // 1.5 MiB
)

// LimitsConfig are the request limits of docs/how-it-works.md, step 1.
type LimitsConfig struct {
	MaxPromptBytes int     `yaml:"max_prompt_bytes"`
	MaxMessages    int     `yaml:"max_messages"`
	MaxTokens      int     `yaml:"max_tokens"` // largest max_tokens a request may ask
	MaxTemperature float64 `yaml:"max_temperature"`
	// DefaultMaxTokens is the max_tokens sent for a request that sets
	// none (0: send none), bounded by what the model's context window
	// leaves after the prompt: so that a server's own small default (a
	// Modelfile's num_predict) does not cut the answer. It is the policy's
	// limit, not the caller's: an answer cut at it is output_truncated.
	DefaultMaxTokens int `yaml:"default_max_tokens"`
	// MaxImages per request, and MaxImageBytes per image sent inline as
	// a data URI (every attempt's input, image included, is written to
	// history).
	MaxImages     int `yaml:"max_images"`
	MaxImageBytes int `yaml:"max_image_bytes"`
}

// FAQConfig points at the FAQ knowledge base.
type FAQConfig struct {
	// File is a YAML FAQ file; relative paths are resolved against the
	// policy file's folder. FAQOff: no FAQ (the fallback is a rule's card
	// or the placeholder). Empty: the embedded example FAQ, whose shop is
	// made up — the worker keeps it only while every model goes to the
	// simulator, and turns the FAQ off otherwise.
	File string `yaml:"file"`
	// Threshold is the lowest score that counts as a match, in (0,1].
	Threshold float64 `yaml:"threshold"`
}

// FAQOff is the faq.file that turns the FAQ off.
const FAQOff = "off"

// Off reports whether the FAQ is turned off.
func (f FAQConfig) Off() bool { return f.File == FAQOff }

// Example reports whether the FAQ is the embedded example's.
func (f FAQConfig) Example() bool { return f.File == "" }

// RuleAction is what a business rule does.
type RuleAction string

// The business-rule actions (docs/how-it-works.md).
const (
	RuleHandoff     RuleAction = "handoff"      // hand off to a human, no model call
	RuleSafeMessage RuleAction = "safe_message" // answer with the rule's message, flag for review
	RuleNoRetry     RuleAction = "no_retry"     // call the model once, never retry
	// RuleStepByStep splits the question into three smaller ones, answers
	// each as a child LLMCall and combines the answers (a rule with After
	// only).
	RuleStepByStep RuleAction = "step_by_step"
)

// RuleAfter is a rule's technical condition: the call has had at least
// Count failed attempts whose class is one of Classes (any class when
// Classes is empty).
type RuleAfter struct {
	Classes []failure.Class `yaml:"classes"`
	Count   int             `yaml:"count"`
}

// Holds reports whether failures (failed attempts per class, counted over
// every model) meet the condition.
func (a RuleAfter) Holds(failures map[failure.Class]int) bool {
	n := 0
	for class, k := range failures {
		if len(a.Classes) == 0 || slices.Contains(a.Classes, class) {
			n += k
		}
	}
	return n >= max(a.Count, 1)
}

// LearnConfig is how the rules learn from what users do after a call
// (feedback): each scenario's learner keeps every rule's precision.
type LearnConfig struct {
	// MinFeedback is how many feedbacks on a rule the learner waits for
	// before it may turn the rule off (or back on).
	MinFeedback int `yaml:"min_feedback"`
	// MinPrecision is the precision below which a rule stops firing
	// (a rule's own min_precision overrides it).
	MinPrecision float64 `yaml:"min_precision"`
	// Refresh is how often a worker reads the learners' rule states.
	Refresh Duration `yaml:"refresh"`
}

// Rule is a business rule: when the request's scenario matches (empty
// matches any) and any keyword occurs in the current question.
type Rule struct {
	// ID names the rule in results and logs; unique.
	ID string `yaml:"id"`
	// Scenario the request must have; empty matches any.
	Scenario string `yaml:"scenario"`
	// Keywords, any of which in the current question (case-insensitive)
	// makes the rule match.
	Keywords []string   `yaml:"keywords"`
	Action   RuleAction `yaml:"action"`
	// Message is the answer for handoff and safe_message, and the rule card
	// used as a fallback answer.
	Message string `yaml:"message"`
	// Flag is recorded with the result (e.g. "risk_review") and in the
	// call's LlmFlag search attribute.
	Flag string `yaml:"flag"`
	// After is the rule's technical condition: a rule with After is checked
	// after every failed attempt (its keywords at admission); one without
	// is checked at admission, before any model call.
	After *RuleAfter `yaml:"after"`
	// Review starts a RiskReview workflow that waits for an operator's
	// decision when the rule fires.
	Review bool `yaml:"review"`
	// Pinned marks a safety rule: the learner reports on it but never
	// turns it off.
	Pinned bool `yaml:"pinned"`
	// MinPrecision overrides learn.min_precision for this rule (0: that).
	MinPrecision float64 `yaml:"min_precision"`
}

// Precision is the rule's precision threshold under learn.
func (r Rule) Precision(l LearnConfig) float64 {
	if r.MinPrecision > 0 {
		return r.MinPrecision
	}
	return l.MinPrecision
}

// Duration is a time.Duration written in YAML as "500ms", "8s", "1m"; a
// bare number is refused (see UnmarshalYAML).
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Deployment is one deployment of a model (ModelConfig.Deployments).
type Deployment struct {
	// Name is the deployment's id in history and metrics ("eastus").
	Name string `yaml:"name"`
	// BaseURL of its OpenAI-compatible API.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable with its key ("" for none).
	APIKeyEnv string `yaml:"api_key_env"`
}

// SpendConfig caps what each tenant's calls may cost a day (UTC), priced
// with the models' input_price and output_price: a call of a tenant that
// reached its cap fails at admission with an error of type spend_cap
// (the front door answers 429 until midnight UTC). What counts is the
// fleet's usage table with store.kind postgres (refreshed every
// usage_flush), else this worker's own calls.
type SpendConfig struct {
	// DailyCap for every tenant without a cap of its own; 0: none.
	DailyCap float64 `yaml:"daily_cap"`
	// Tenants with a cap of their own (0: none).
	Tenants []TenantSpend `yaml:"tenants"`
}

// TenantSpend is one tenant's own daily cap.
type TenantSpend struct {
	Name     string  `yaml:"name"`
	DailyCap float64 `yaml:"daily_cap"`
}

// CapOf is tenant's daily cap (0: none).
func (s SpendConfig) CapOf(tenant string) float64 {
	for _, t := range s.Tenants {
		if t.Name == tenant {
			return t.DailyCap
		}
	}
	return s.DailyCap
}

// Capped reports whether any tenant has a cap.
func (s SpendConfig) Capped() bool {
	if s.DailyCap > 0 {
		return true
	}
	for _, t := range s.Tenants {
		if t.DailyCap > 0 {
			return true
		}
	}
	return false
}

// TokenCost is what n tokens of kind (the llm_tokens counter's: prompt,
// completion, failed, duplicate) cost on model: prompt and failed tokens
// at its input price, completion tokens at its output price, per million;
// duplicate tokens are part of the prompt tokens already. ok is false
// when the model is unknown or has no prices.
func (c *Config) TokenCost(model, kind string, n int64) (cost float64, ok bool) {
	m, found := c.Model(model)
	if !found || (m.InputPrice == 0 && m.OutputPrice == 0) {
		return 0, false
	}
	switch kind {
	case "prompt", "failed":
		return float64(n) * m.InputPrice / 1e6, true
	case "completion":
		return float64(n) * m.OutputPrice / 1e6, true
	}
	return 0, true
}
