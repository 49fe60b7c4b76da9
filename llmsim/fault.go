package llmsim

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Fault names one failure the simulator can inject. The string values are
// used in scenario files, in-prompt directives, stats and the
// X-Llmsim-Fault response header, so they never change. The table in the
// package documentation (and FaultTable) lists them all.
type Fault string

// The faults. Each comment says what the client receives and which failure
// class (docs/how-it-works.md "Failure classes") a correct classifier assigns to it.
const (
	// FaultNone is no fault: a normal answer.
	FaultNone Fault = ""
	// FaultLatency adds latency (param latency) to the model's time to first token;
	// the request still occupies its slot and then answers normally.
	FaultLatency Fault = "latency"
	// FaultHang never answers: no status line, no headers, until the client
	// gives up (or the simulator closes). Class read_timeout.
	FaultHang Fault = "hang"
	// FaultPause holds the request, without a response byte and without
	// taking it into the model's queue, until the phase it arrived in ends
	// (plus param latency), then serves it as usual: a server that stalls
	// and then resumes (a stuck scheduler, a paused process). A request
	// whose client leaves meanwhile is dropped. In a phase without an end,
	// and for a directive, only param latency. Class read_timeout while it
	// lasts.
	FaultPause Fault = "pause"
	// FaultReset closes the TCP connection with an RST before any response
	// byte is written. Class connect.
	FaultReset Fault = "reset"
	// FaultRateLimited answers 429 rate_limit_exceeded with Retry-After
	// (params retry_after, retry_header); on the Anthropic wire
	// rate_limit_error with anthropic-ratelimit-requests-* headers. Class
	// rate_limited.
	FaultRateLimited Fault = "rate_limited"
	// FaultQuotaExceeded answers 429 insufficient_quota (Anthropic wire:
	// 402 billing_error). Class auth.
	FaultQuotaExceeded Fault = "quota_exceeded"
	// FaultQueueFull answers 429 (or status 503) with code queue_full and
	// X-RateLimit-Remaining: 0, as the capacity model does when its queue is
	// full; on the Anthropic wire 529 overloaded_error. Class queue_full.
	FaultQueueFull Fault = "queue_full"
	// FaultOverloaded answers 529 with an overloaded_error body. Class
	// queue_full.
	FaultOverloaded Fault = "overloaded"
	// FaultServerBusy answers 503 with Ollama's refusal of a request its
	// queue cannot hold (OLLAMA_MAX_QUEUE), byte for byte:
	// {"error":{"message":"server busy, please try again.  maximum pending
	// requests exceeded","type":"api_error","param":null,"code":null}}, no
	// Retry-After unless param retry_after is set; on the Anthropic wire
	// 529 overloaded_error. Class queue_full.
	FaultServerBusy Fault = "server_busy"
	// FaultMaintenance answers 503 "Service under maintenance". Class
	// service_unavailable.
	FaultMaintenance Fault = "maintenance"
	// FaultUnavailable answers a generic 503 JSON error that does not mention
	// maintenance. Class server_error.
	FaultUnavailable Fault = "unavailable"
	// FaultUnknownError answers 500 with an error body no classifier rule
	// knows (an engine's own code; its message says "queue_full" in
	// passing). Class server_error by its status; a diagnosis that reads
	// the body names queue_full.
	FaultUnknownError Fault = "unknown_error"
	// FaultServerError answers 500 with an nginx-style HTML page after the
	// model's time to first token. Class server_error.
	FaultServerError Fault = "server_error"
	// FaultBadGateway answers 502 with an HTML page. Class server_error.
	FaultBadGateway Fault = "bad_gateway"
	// FaultGatewayTimeout answers 504 with an HTML page after the model's
	// time to first token (the gateway gave up; the model keeps working). Class
	// timeout.
	FaultGatewayTimeout Fault = "gateway_timeout"
	// FaultErrorBody answers HTTP 200 whose body is {"error":{...}} (the
	// Anthropic wire's error envelope). Class body_error.
	FaultErrorBody Fault = "error_body"
	// FaultNoChoices answers HTTP 200 with "choices": [] (Anthropic wire:
	// "content": [], stop_reason null). Class body_error.
	FaultNoChoices Fault = "no_choices"
	// FaultMalformedJSON answers HTTP 200 with a body cut in the middle of
	// the JSON document. Class body_error.
	FaultMalformedJSON Fault = "malformed_json"
	// FaultLength answers with a truncated answer and finish_reason
	// "length". Class output_truncated.
	FaultLength Fault = "length"
	// FaultReasoningOnly answers with reasoning_content set and content
	// empty. Class output_truncated.
	FaultReasoningOnly Fault = "reasoning_only"
	// FaultEmptyContent answers with empty content and finish_reason "stop".
	// Class output_truncated.
	FaultEmptyContent Fault = "empty_content"
	// FaultContentFilter answers with empty content and finish_reason
	// "content_filter". Class content_filter.
	FaultContentFilter Fault = "content_filter"
	// FaultContextLength answers 400 context_length_exceeded when the
	// prompt's estimated tokens exceed param window (default: half the
	// prompt, so it always fires). Without this fault the check still runs
	// against the model's real context window. On the Anthropic wire 400
	// "prompt is too long: N tokens > M maximum". Class
	// context_length_exceeded.
	FaultContextLength Fault = "context_length_exceeded"
	// FaultBadRequest answers 400 invalid_request_error (or status 404, 413,
	// 422). Class invalid_request.
	FaultBadRequest Fault = "bad_request"
	// FaultInvalidAPIKey answers 401 invalid_api_key. Class auth.
	FaultInvalidAPIKey Fault = "invalid_api_key"
	// FaultForbidden answers 403 permission denied. Class auth.
	FaultForbidden Fault = "forbidden"
	// FaultModelNotFound answers 404 model_not_found, as for an unknown
	// model. Class model_not_found.
	FaultModelNotFound Fault = "model_not_found"
	// FaultSlowDrip answers 200 but trickles the body (or the stream's
	// chunks) over param duration (default 3 s).
	FaultSlowDrip Fault = "slow_drip"
	// FaultStreamBreak starts the answer and aborts the connection mid-way:
	// after param chunks SSE chunks (default 2), or half of a non-streaming
	// body. The client sees an unexpected EOF. Class stream_broken (SSE),
	// body_error (non-streamed).
	FaultStreamBreak Fault = "stream_break"
	// FaultCutStream streams param after content tokens (default half the
	// answer) as they are generated, then cuts the connection: no
	// finish_reason, no [DONE]. Non-streamed: the headers and half the body,
	// then the cut. Class stream_broken.
	FaultCutStream Fault = "cut_stream"
	// FaultStreamError streams param after content tokens (default half the
	// answer), then an error object inside the stream (data:
	// {"error":{...}}), and ends the stream without finish_reason or
	// [DONE]. Non-streamed: HTTP 200 with {"error":{...}} at the end of
	// generation. On the Anthropic wire event: error overloaded_error
	// (non-streamed: 529 overloaded_error). Class stream_broken.
	FaultStreamError Fault = "stream_error"
	// FaultStall streams param after content tokens (default half the
	// answer), then sends nothing more but keeps the connection open until
	// the client gives up, or for param duration (default Options.MaxHang)
	// after which the connection is cut. Non-streamed: the headers and half
	// the body, then the stall. Class stream_broken (the client's idle
	// timeout).
	FaultStall Fault = "stall"
	// FaultBadToolArgs answers a tool call whose arguments are cut JSON
	// (requests that offer tools); a non-streamed Anthropic tool_use holds
	// them as {"INVALID_JSON": "<cut JSON>"}. Class bad_tool_call.
	FaultBadToolArgs Fault = "bad_tool_args"
	// FaultUnknownTool answers a tool call naming a tool that was not
	// offered. Class bad_tool_call.
	FaultUnknownTool Fault = "unknown_tool"
	// FaultBadJSON answers a json_object / json_schema request with prose
	// and cut JSON. Class schema_mismatch.
	FaultBadJSON Fault = "bad_json"
)

// streamFault reports the faults that cut a stream after some tokens.
func (f Fault) streamFault() bool {
	return f == FaultCutStream || f == FaultStreamError || f == FaultStall
}

// stage says where in the request's life a fault happens.
type stage int

const (
	// front faults are answered by the gateway before the model's queue: no
	// slot is taken.
	stageFront stage = iota
	// back faults are answered after the model did its work (holding a slot
	// for the time to first token or the whole generation).
	stageBack
)

// FaultInfo describes one fault for documentation and --help.
type FaultInfo struct {
	// Fault is the name.
	Fault Fault
	// Status is the HTTP status the client sees (0: no HTTP response).
	Status int
	// Class is the failure class of docs/how-it-works.md "Failure classes" a correct classifier assigns.
	Class string
	// Params lists the parameters the fault reads.
	Params string
	// Summary says what the client receives.
	Summary string

	stage stage
}

// faultTable is the one list of faults; FaultTable, doc.go and --help are
// generated from or checked against it.
var faultTable = []FaultInfo{
	{FaultLatency, 200, "read_timeout (client)", "latency", "adds latency to the time to first token, then answers normally", stageBack},
	{FaultHang, 0, "read_timeout", "", "no response at all until the client gives up", stageFront},
	{FaultPause, 200, "read_timeout (client)", "latency", "nothing until the phase ends, then a normal answer", stageFront},
	{FaultReset, 0, "server_error", "", "TCP reset (RST) before any response byte (the request was sent)", stageFront},
	{FaultRateLimited, 429, "rate_limited", "retry_after, retry_header", "code rate_limit_exceeded, Retry-After and/or retry-after-ms", stageFront},
	{FaultQuotaExceeded, 429, "auth", "", "code insufficient_quota (quota exhausted)", stageFront},
	{FaultQueueFull, 429, "queue_full", "status (429|503), retry_after", "code queue_full, X-RateLimit-Remaining: 0", stageFront},
	{FaultOverloaded, 529, "queue_full", "retry_after", `{"type":"error","error":{"type":"overloaded_error"}}`, stageFront},
	{FaultServerBusy, 503, "queue_full", "retry_after", `Ollama's "server busy, please try again.  maximum pending requests exceeded"`, stageFront},
	{FaultMaintenance, 503, "service_unavailable", "retry_after", `"Service under maintenance"`, stageFront},
	{FaultUnavailable, 503, "server_error", "retry_after", "generic 503 JSON error (not maintenance)", stageFront},
	{FaultUnknownError, 500, "server_error", "", `an engine's own error: code E42, "queue_full on all replicas"`, stageFront},
	{FaultServerError, 500, "server_error", "", "HTML error page after the time to first token", stageBack},
	{FaultBadGateway, 502, "server_error", "", "HTML error page", stageFront},
	{FaultGatewayTimeout, 504, "timeout", "", "HTML error page after the time to first token", stageBack},
	{FaultErrorBody, 200, "body_error", "", `HTTP 200 with {"error":{...}}`, stageBack},
	{FaultNoChoices, 200, "body_error", "", `HTTP 200 with "choices": []`, stageBack},
	{FaultMalformedJSON, 200, "body_error", "", "HTTP 200 with JSON cut mid-way", stageBack},
	{FaultLength, 200, "output_truncated", "", `truncated answer, finish_reason "length"`, stageBack},
	{FaultReasoningOnly, 200, "output_truncated", "", "reasoning_content set, content empty", stageBack},
	{FaultEmptyContent, 200, "output_truncated", "", `empty content, finish_reason "stop"`, stageBack},
	{FaultContentFilter, 200, "content_filter", "", `empty content, finish_reason "content_filter"`, stageBack},
	{FaultContextLength, 400, "context_length_exceeded", "window", "computed: fires only while prompt tokens > window", stageFront},
	{FaultBadRequest, 400, "invalid_request", "status (400|404|413|422)", "invalid_request_error", stageFront},
	{FaultInvalidAPIKey, 401, "auth", "", "code invalid_api_key", stageFront},
	{FaultForbidden, 403, "auth", "", "permission denied", stageFront},
	{FaultModelNotFound, 404, "model_not_found", "", "code model_not_found", stageFront},
	{FaultSlowDrip, 200, "timeout (client)", "duration", "body or SSE chunks trickled over duration (default 3s)", stageBack},
	{FaultStreamBreak, 200, "stream_broken/body_error", "chunks", "connection aborted after N SSE chunks (non-streamed: mid-body)", stageBack},
	{FaultCutStream, 200, "stream_broken", "after", "N content tokens streamed, then the connection is cut (no finish_reason, no [DONE])", stageBack},
	{FaultStreamError, 200, "stream_broken", "after", `N content tokens, then data: {"error":{...}} and the stream ends (non-streamed: error body)`, stageBack},
	{FaultStall, 200, "stream_broken", "after, duration", "N content tokens, then silence on an open connection until the client gives up (or duration)", stageBack},
	{FaultBadToolArgs, 200, "bad_tool_call", "", "a tool call whose arguments are cut JSON (requests with tools)", stageBack},
	{FaultUnknownTool, 200, "bad_tool_call", "", "a tool call naming a tool that was not offered", stageBack},
	{FaultBadJSON, 200, "schema_mismatch", "", "prose and cut JSON for a json_object / json_schema answer", stageBack},
}

// FaultTable returns a copy of the fault catalogue in documentation order.
func FaultTable() []FaultInfo {
	return append([]FaultInfo(nil), faultTable...)
}

// Faults returns every fault name in documentation order.
func Faults() []Fault {
	out := make([]Fault, len(faultTable))
	for i, f := range faultTable {
		out[i] = f.Fault
	}
	return out
}

func faultInfo(f Fault) (FaultInfo, bool) {
	for _, i := range faultTable {
		if i.Fault == f {
			return i, true
		}
	}
	return FaultInfo{}, false
}

// Valid reports whether f is a known fault (FaultNone is not).
func (f Fault) Valid() bool {
	_, ok := faultInfo(f)
	return ok
}

// ParseFault returns the fault named s, or an error that suggests the
// closest known name ("unknown fault "rate_limit" (did you mean
// rate_limited?)").
func ParseFault(s string) (Fault, error) {
	f := Fault(strings.TrimSpace(s))
	if f.Valid() {
		return f, nil
	}
	names := make([]string, len(faultTable))
	for i, fi := range faultTable {
		names[i] = string(fi.Fault)
	}
	return "", fmt.Errorf("unknown fault %q%s", s, suggest(s, names))
}

// FormatFaultTable renders the catalogue as an aligned plain-text table for
// --help and the documentation.
func FormatFaultTable() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "FAULT\tSTATUS\tCLASS\tPARAMS\tCLIENT SEES\n")
	for _, f := range faultTable {
		st := "-"
		if f.Status != 0 {
			st = fmt.Sprint(f.Status)
		}
		p := f.Params
		if p == "" {
			p = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Fault, st, f.Class, p, f.Summary)
	}
	_ = tw.Flush()
	return b.String()
}

// FaultSpec is one fault rule of a scenario phase, or the fault of an
// in-prompt directive. Zero fields take the defaults stated on each field.
type FaultSpec struct {
	// Kind is the fault to inject.
	Kind Fault `json:"kind" yaml:"kind"`
	// Model restricts the rule to one model; "" or "*" means every model.
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
	// Probability that the rule fires for a request it sees, drawn from the
	// scenario's seeded RNG; 0 means 1 (always).
	Probability float64 `json:"probability,omitempty" yaml:"probability,omitempty"`
	// First limits the rule to the first N requests it sees (counted since
	// the scenario was set or reset); 0 means no limit.
	First int `json:"first,omitempty" yaml:"first,omitempty"`
	// Latency is the extra delay: added to the time to first token for
	// FaultLatency and for faults answered after a slot, waited before
	// answering for the others. Zero means none.
	Latency Latency `json:"latency,omitzero" yaml:"latency,omitempty"`
	// RetryAfter is the advertised wait of rate_limited (default 1s) and,
	// when set, of queue_full, overloaded, server_busy, maintenance and
	// unavailable.
	RetryAfter Duration `json:"retry_after,omitempty" yaml:"retry_after,omitempty"`
	// RetryHeader selects how RetryAfter is advertised: "seconds"
	// (Retry-After: whole seconds rounded up; the default), "ms"
	// (retry-after-ms only), "both", "date" (Retry-After as an HTTP date) or
	// "none".
	RetryHeader string `json:"retry_header,omitempty" yaml:"retry_header,omitempty"`
	// NoQuota leaves out of rate_limited the rate-limit headers that say
	// the quota is spent (x-ratelimit-*, anthropic-ratelimit-*): the 429
	// of a gateway or a self-hosted server that sheds load, with only its
	// Retry-After.
	NoQuota bool `json:"no_quota,omitempty" yaml:"no_quota,omitempty"`
	// Status overrides the HTTP status where the fault allows it
	// (queue_full: 429 or 503; bad_request: 400, 404, 413 or 422).
	Status int `json:"status,omitempty" yaml:"status,omitempty"`
	// Chunks is the number of SSE chunks stream_break sends before it
	// aborts; 0 means 2.
	Chunks int `json:"chunks,omitempty" yaml:"chunks,omitempty"`
	// Duration is how long slow_drip trickles the body (0 means 3s), and
	// how long stall keeps the connection silent before cutting it (0
	// means Options.MaxHang).
	Duration Duration `json:"duration,omitempty" yaml:"duration,omitempty"`
	// Window is the context window context_length_exceeded checks against;
	// 0 means half the prompt's estimated tokens (so it always fires).
	Window int `json:"window,omitempty" yaml:"window,omitempty"`
	// After is the number of content tokens cut_stream, stream_error and
	// stall stream before they strike; nil means half the answer's tokens.
	// 0 strikes before the first content token (after the role chunk and
	// any reasoning).
	After *int `json:"after,omitempty" yaml:"after,omitempty"`
}

// Retry header styles of FaultSpec.RetryHeader.
const (
	RetryHeaderSeconds = "seconds"
	RetryHeaderMS      = "ms"
	RetryHeaderBoth    = "both"
	RetryHeaderDate    = "date"
	RetryHeaderNone    = "none"
)

var retryHeaders = []string{RetryHeaderSeconds, RetryHeaderMS, RetryHeaderBoth, RetryHeaderDate, RetryHeaderNone}

// validate checks the spec's fields; field names the spec's path.
func (f FaultSpec) validate(field string, models map[string]bool, errs *errList) {
	if !f.Kind.Valid() {
		_, err := ParseFault(string(f.Kind))
		errs.add(join(field, "kind"), "%v", err)
		return
	}
	if f.Model != "" && f.Model != "*" && models != nil && !models[f.Model] {
		errs.add(join(field, "model"), "unknown model %q%s", f.Model, suggest(f.Model, keys(models)))
	}
	if f.Probability < 0 || f.Probability > 1 {
		errs.add(join(field, "probability"), "must be between 0 and 1, got %v", f.Probability)
	}
	if f.First < 0 {
		errs.add(join(field, "first"), "must not be negative, got %d", f.First)
	}
	f.Latency.validate(join(field, "latency"), errs)
	if f.RetryAfter < 0 {
		errs.add(join(field, "retry_after"), "must not be negative")
	}
	if f.RetryHeader != "" && !contains(retryHeaders, f.RetryHeader) {
		errs.add(join(field, "retry_header"), "unknown style %q (one of %s)%s", f.RetryHeader, strings.Join(retryHeaders, ", "), suggest(f.RetryHeader, retryHeaders))
	}
	if f.Status != 0 {
		ok := false
		switch f.Kind {
		case FaultQueueFull:
			ok = f.Status == 429 || f.Status == 503
		case FaultBadRequest:
			ok = f.Status == 400 || f.Status == 404 || f.Status == 413 || f.Status == 422
		}
		if !ok {
			errs.add(join(field, "status"), "status %d not allowed for fault %s (queue_full: 429|503; bad_request: 400|404|413|422)", f.Status, f.Kind)
		}
	}
	if f.Chunks < 0 {
		errs.add(join(field, "chunks"), "must not be negative")
	}
	if f.Duration < 0 {
		errs.add(join(field, "duration"), "must not be negative")
	}
	if f.Window < 0 {
		errs.add(join(field, "window"), "must not be negative")
	}
	if f.After != nil && *f.After < 0 {
		errs.add(join(field, "after"), "must not be negative, got %d", *f.After)
	}
}

// after returns the number of content tokens a stream fault lets through
// out of total.
func (f FaultSpec) after(total int) int {
	if f.After == nil {
		return total / 2
	}
	return min(*f.After, total)
}

func (f FaultSpec) matchesModel(model string) bool {
	return f.Model == "" || f.Model == "*" || f.Model == model
}

func (f FaultSpec) retryAfter() time.Duration {
	if f.RetryAfter == 0 && f.Kind == FaultRateLimited {
		return time.Second
	}
	return f.RetryAfter.D()
}

func (f FaultSpec) chunks() int {
	if f.Chunks <= 0 {
		return 2
	}
	return f.Chunks
}

func (f FaultSpec) drip() time.Duration {
	if f.Duration <= 0 {
		return 3 * time.Second
	}
	return f.Duration.D()
}

// suggest returns " (did you mean X?)" for the candidate closest to s, or ""
// when none is close.
func suggest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	ls := strings.ToLower(s)
	for _, c := range candidates {
		d := levenshtein(ls, strings.ToLower(c))
		if strings.HasPrefix(strings.ToLower(c), ls) && ls != "" {
			d = min(d, 1)
		}
		if len(ls) >= 4 && strings.Contains(strings.ToLower(c), ls) {
			d = min(d, 2)
		}
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > max(2, len(s)/3) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
