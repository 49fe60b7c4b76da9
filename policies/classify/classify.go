package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/policies/failure"
	openai "github.com/sashabaranov/go-openai"
)

// Observation is what one upstream attempt produced: everything Classify
// looks at. The caller (the call activity) fills it from go-openai's return
// values and from a recording http.RoundTripper, because go-openai keeps
// neither the headers of an error response nor the raw body.
type Observation struct {
	// Err is the error returned by go-openai's CreateChatCompletion, or a
	// transport or context error; nil on success. go-openai returns
	// *openai.APIError for an error body it understands, *openai.RequestError
	// for one it does not (HTML, empty), a *url.Error from the transport,
	// and a JSON error for a malformed 2xx body.
	Err error
	// Status is the HTTP status when a response arrived (0 otherwise).
	Status int
	// Header is the response header when a response arrived.
	Header http.Header
	// Body is the first bytes of the raw response body (the caller tees up
	// to 64 KiB). It is needed because go-openai decodes an HTTP 200 error
	// body into an empty response without an error.
	Body []byte
	// Response is the decoded response when Err is nil.
	Response *openai.ChatCompletionResponse
	// HeaderTimedOut is set when the HTTP client's response-header timeout
	// fired (http.Transport.ResponseHeaderTimeout). Classify also recognises
	// that error by itself.
	HeaderTimedOut bool
	// AttemptTimedOut is set when the attempt's own deadline fired. It only
	// counts when Err is set: a response that arrived just in time is a
	// success.
	AttemptTimedOut bool
	// PromptTokens and ContextWindow are set, instead of calling, when the
	// prompt does not fit the model's window: such an attempt is
	// context_length_exceeded without any upstream call. Leave them zero
	// when the attempt was sent.
	PromptTokens, ContextWindow int
	// Now resolves a Retry-After given as an HTTP date; with a zero Now
	// such a date is ignored.
	Now time.Time
	// Stream is set for a streamed attempt whose stream was opened (a 2xx
	// response arrived); Response is then the answer assembled from its
	// chunks, when it ended cleanly.
	Stream *Stream
}

// Stream is what reading a streamed reply saw.
type Stream struct {
	// Chunks counts the chunks that carried a content, reasoning or
	// tool-call delta; Tokens the completion tokens received so far.
	Chunks, Tokens int
	// Finished is set when a chunk carried a finish_reason.
	Finished bool
	// Err ended the reading (nil when the stream ended with [DONE] or a
	// clean end of body).
	Err error
	// FirstTokenTimedOut: no first chunk within FirstTokenTimeout (the
	// headers may have come). IdleTimedOut: no chunk within IdleTimeout
	// once the stream had started.
	FirstTokenTimedOut, IdleTimedOut bool
	FirstTokenTimeout, IdleTimeout   time.Duration
}

// Verdict is the classification of one upstream attempt.
type Verdict struct {
	// Class is the failure class; None on success.
	Class failure.Class
	// Status is the HTTP status, when a response arrived.
	Status int
	// Code, Type and Message come from the upstream's error body when it
	// had one. Message is at most about 300 characters; an HTML page is
	// reduced to its title or a short text.
	Code, Type, Message string
	// RetryAfter is the upstream's retry-after-ms / Retry-After, when sent.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// RateLimitRemaining is the X-RateLimit-Remaining header, when sent.
	RateLimitRemaining    int
	HasRateLimitRemaining bool
	// Canceled is set when the caller cancelled the attempt
	// (context.Canceled): the activity should return a cancellation, not a
	// failure. Class is then Timeout, so that a caller that ignores
	// Canceled still never treats the attempt as a success.
	Canceled bool
	// Reason is one line saying what was seen, e.g. "HTTP 429, Retry-After: 2s",
	// in the product's own words and the failure's structure (status, an
	// identifier-like code, headers, counts): never the upstream's message,
	// a transport error's text, a body, or anything a client or a model
	// wrote. Tenants read it; it needs no mask, so it is no oracle.
	Reason string
	// Detail is what the transport said (an error's text), for operators'
	// logs only: it may name addresses or quote what the upstream echoed.
	// The upstream's own words are in Message.
	Detail string
	// Generic is set when an error body came with the response but no
	// rule recognised it: the class is the status code's alone (a small
	// model may name a better one, docs/how-it-works.md "Diagnosis").
	Generic bool
}

// OK reports whether the attempt succeeded.
func (v Verdict) OK() bool { return v.Class == failure.None && !v.Canceled }

// maxMessageLen bounds Verdict.Message, in runes.
const maxMessageLen = 300

// Classify decides the failure class of one upstream attempt (docs/how-it-works.md "Failure classes"). It
// is a pure function of obs and never panics on upstream garbage.
//
// In short: a caller's cancellation is reported as Canceled; an error
// response is judged by its error code first (context_length_exceeded,
// insufficient_quota, queue_full, content_filter, model_not_found, …), then
// by its message, then by its HTTP status; a transport error by its kind
// (dial, DNS, TLS → connect; header timeout → read_timeout; deadline →
// timeout; reset after the request was sent → server_error); a 2xx response
// by its body (error object, no choices, malformed JSON → body_error), its
// finish_reason and its content (empty or reasoning-only → output_truncated).
func Classify(obs Observation) Verdict {
	v := Verdict{Status: obs.Status}
	v.RetryAfter, v.HasRetryAfter = ParseRetryAfter(obs.Header, obs.Now)
	v.RateLimitRemaining, v.HasRateLimitRemaining = rateLimitRemaining(obs.Header)

	if obs.Err == nil && obs.Status >= 300 && obs.Status < 400 {
		// A redirect the client did not follow (no Location, 300, 304):
		// go-openai decodes its body as a reply, but it is no answer.
		return classifyErrorStatus(v, parseErrorBody(obs.Body))
	}
	if obs.Stream != nil && obs.Err == nil {
		return classifyStream(obs, v)
	}
	if obs.Err == nil {
		if obs.Response == nil && obs.Status == 0 && len(obs.Body) == 0 {
			if obs.ContextWindow > 0 && obs.PromptTokens > 0 {
				return v.is(failure.ContextLengthExceeded, fmt.Sprintf(
					"not sent: the prompt (%d tokens) and the room for the answer do not fit the %d-token window",
					obs.PromptTokens, obs.ContextWindow))
			}
			return v.is(failure.BodyError, "no response and no error observed")
		}
		return classifyReply(obs, v)
	}
	err := obs.Err

	if errors.Is(err, context.Canceled) {
		v.Canceled = true
		return v.saw(err).is(failure.Timeout, "cancelled by the caller")
	}

	// An error response that go-openai decoded (*APIError) or could not
	// decode (*RequestError; for {"error":"text"} it wraps an empty
	// *APIError, so the raw body is read again).
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	hasReq := errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0
	hasAPI := errors.As(err, &apiErr)
	switch {
	case hasReq || hasAPI:
		body := obs.Body
		if hasReq && len(reqErr.Body) > 0 {
			body = reqErr.Body
		}
		var info errorInfo
		if hasAPI {
			if v.Status == 0 {
				v.Status = apiErr.HTTPStatusCode
			}
			info = errorInfo{code: anyString(apiErr.Code), typ: apiErr.Type, message: apiErr.Message, raw: body}
			if ie := apiErr.InnerError; ie != nil && info.code == "" {
				info.code = ie.Code // Azure: ResponsibleAIPolicyViolation
			}
		}
		if hasReq && v.Status == 0 {
			v.Status = reqErr.HTTPStatusCode
		}
		if info.code == "" && info.typ == "" && info.message == "" {
			info = parseErrorBody(body)
		}
		return classifyErrorStatus(v, info)
	case v.Status >= 300:
		// A response arrived but its body could not be read (truncated).
		info := parseErrorBody(obs.Body)
		info.note = "body unreadable (" + errKind(err) + ")"
		return classifyErrorStatus(v.saw(err), info)
	}

	// No usable response: the transport, a deadline, or a broken 2xx body.
	switch {
	case obs.HeaderTimedOut || isHeaderTimeout(err):
		return v.saw(err).is(failure.ReadTimeout, "no response headers within the header timeout (timeout awaiting response headers)")
	case obs.AttemptTimedOut:
		return v.saw(err).is(failure.Timeout, "attempt deadline exceeded ("+errKind(err)+")")
	}
	v = v.saw(err)
	if why, ok := connectFailure(err); ok {
		return v.is(failure.Connect, why)
	}
	var netErr net.Error
	var urlErr *url.Error
	closed := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return v.is(failure.Timeout, "deadline exceeded ("+errKind(err)+")")
	case v.Status >= 200 && v.Status < 300:
		return classifyBrokenBody(v, obs, err)
	case closed && errors.As(err, &urlErr):
		// From http.Client.Do: no response at all.
		return v.is(failure.ServerError, "connection closed by the upstream after the request was sent, before a response ("+errKind(err)+")")
	case closed || isJSONError(err):
		// From reading the body of a response the caller did not record.
		return classifyBrokenBody(v, obs, err)
	case isClientLibraryRefusal(err):
		return v.is(failure.InvalidRequest, "refused by go-openai before sending ("+errKind(err)+")")
	}
	return v.is(failure.ServerError, "unrecognised error ("+errKind(err)+")")
}

// classifyStream judges a streamed reply once its stream was opened: a
// stream that never produced a chunk is judged as the reply it was (no
// first token in time is read_timeout; an error object is judged by its
// code, as a non-streamed body is); a stream that broke after it had
// started is stream_broken; one that ended cleanly is judged by its
// assembled answer.
func classifyStream(obs Observation, v Verdict) Verdict {
	st := obs.Stream
	after := fmt.Sprintf("after %d chunk(s), %d token(s)", st.Chunks, st.Tokens)
	switch {
	case st.FirstTokenTimedOut:
		return v.is(failure.ReadTimeout, fmt.Sprintf("no first token within %s: the request is queued upstream", st.FirstTokenTimeout))
	case st.IdleTimedOut:
		return v.is(failure.StreamBroken, fmt.Sprintf("no chunk within %s %s", st.IdleTimeout, after))
	case st.Err != nil && errors.Is(st.Err, context.Canceled):
		v.Canceled = true
		return v.saw(st.Err).is(failure.Timeout, "cancelled by the caller")
	case st.Err != nil && obs.AttemptTimedOut:
		return v.is(failure.Timeout, "attempt deadline exceeded "+after)
	case st.Err != nil && st.Chunks == 0 && errors.As(st.Err, new(*openai.APIError)):
		// An error object instead of the first chunk: as a non-streamed
		// HTTP 200 error body, judged by its code, else body_error.
		var apiErr *openai.APIError
		errors.As(st.Err, &apiErr)
		info := errorInfo{code: anyString(apiErr.Code), typ: apiErr.Type, message: apiErr.Message, isError: true}
		v.Code, v.Type, v.Message = info.code, info.typ, cleanMessage(info.message)
		seen := describeResponse(v, info) + " with an error object in the stream"
		if c, why := classByCode(info, v.Status); c != failure.None {
			return v.is(c, seen+" ("+why+")")
		}
		return v.is(failure.BodyError, seen)
	case st.Err != nil && st.Chunks == 0:
		// Nothing was received: judge it as the reply it is (a cut or
		// malformed body).
		inner := obs
		inner.Stream, inner.Err, inner.Response = nil, st.Err, nil
		if inner.Status == 0 {
			inner.Status = 200
		}
		return Classify(inner)
	case st.Err != nil:
		var apiErr *openai.APIError
		if errors.As(st.Err, &apiErr) {
			v.Code, v.Type, v.Message = anyString(apiErr.Code), apiErr.Type, cleanMessage(apiErr.Message)
			what := "error inside the stream"
			if c := codeOf(errorInfo{code: v.Code, typ: v.Type}); c != "" {
				what += " " + c
			}
			return v.saw(st.Err).is(failure.StreamBroken, what+" "+after)
		}
		var mc *MalformedChunk
		if errors.As(st.Err, &mc) {
			return v.saw(st.Err).is(failure.StreamBroken, "malformed chunk "+after+": "+mc.What)
		}
		if isJSONError(st.Err) {
			return v.saw(st.Err).is(failure.StreamBroken, "malformed chunk "+after)
		}
		return v.saw(st.Err).is(failure.StreamBroken, "stream cut "+after+" ("+errKind(st.Err)+")")
	case !st.Finished && st.Chunks == 0:
		return v.is(failure.BodyError, "the stream ended without a chunk")
	case !st.Finished:
		return v.is(failure.StreamBroken, "the stream ended without a finish_reason "+after)
	}
	return classifyReply(obs, v)
}

// MalformedChunk is a stream's chunk that decoded but cannot be used
// (a tool call's index out of range). What says so in the product's words
// and numbers, so a reason may quote it.
type MalformedChunk struct{ What string }

func (e *MalformedChunk) Error() string { return "malformed chunk: " + e.What }

// is sets the class and the reason.
func (v Verdict) is(c failure.Class, reason string) Verdict {
	v.Class = c
	v.Reason = oneLine(reason, 240)
	return v
}

// saw keeps the text of err in Detail, for operators.
func (v Verdict) saw(err error) Verdict {
	v.Detail = oneLine(strings.ToValidUTF8(err.Error(), "\uFFFD"), 300)
	return v
}

// errorInfo is what an error body says.
type errorInfo struct {
	code, typ, message string
	html               bool   // the body was an HTML page
	isError            bool   // the body is an error object ({"error":…} or "object":"error")
	note               string // extra detail for the reason
	raw                []byte
}

// classifyErrorStatus judges an error response: code, then message, then status.
func classifyErrorStatus(v Verdict, info errorInfo) Verdict {
	v.Code, v.Type, v.Message = info.code, info.typ, cleanMessage(info.message)
	st := v.Status
	seen := describeResponse(v, info)

	if c, why := classByCode(info, st); c != failure.None {
		return v.is(c, seen+" ("+why+")")
	}
	remaining0 := v.HasRateLimitRemaining && v.RateLimitRemaining == 0
	switch {
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return v.is(failure.Auth, seen)
	case st == http.StatusPaymentRequired:
		return v.is(failure.Auth, seen+" (quota exhausted)")
	case st == http.StatusTooManyRequests:
		if remaining0 && !v.HasRetryAfter {
			return v.is(failure.QueueFull, seen+" (nothing remaining and no Retry-After to honour)")
		}
		return v.is(failure.RateLimited, seen)
	case st == http.StatusRequestTimeout || st == http.StatusGatewayTimeout || st == 524:
		return v.is(failure.Timeout, seen)
	case st == 529:
		return v.is(failure.QueueFull, seen+" (overloaded)")
	case st == http.StatusServiceUnavailable && saysMaintenance(info):
		return v.is(failure.ServiceUnavailable, seen+" (maintenance)")
	case st >= 500 && remaining0:
		return v.is(failure.QueueFull, seen+" (nothing remaining: queue full)")
	case st == http.StatusServiceUnavailable && saysBusy(info):
		return v.is(failure.QueueFull, seen+" (server busy: backpressure)")
	}
	if st >= 400 && st < 500 {
		return v.is(failure.InvalidRequest, seen) // the request's own fault, never diagnosed into a retry
	}
	v.Generic = st >= 500 && !info.html && (info.code != "" || info.typ != "" || info.message != "")
	if st >= 500 {
		return v.is(failure.ServerError, seen)
	}
	return v.is(failure.ServerError, seen+" (unexpected status)")
}

// classByCode recognises the classes an error code or message names,
// whatever the status. It returns None when they name none.
func classByCode(info errorInfo, status int) (failure.Class, string) {
	code := strings.ToLower(info.code + " " + info.typ)
	msg := strings.ToLower(info.message)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(code, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("context_length_exceeded", "context_length", "string_above_max_length"):
		return failure.ContextLengthExceeded, "context length"
	case has("insufficient_quota", "quota_exceeded", "billing_hard_limit", "insufficient_balance", "arrearage"),
		status != http.StatusTooManyRequests && has("quota"),
		containsAny(msg, "exceeded your current quota", "insufficient quota", "insufficient balance", "quota exhausted", "余额不足"):
		return failure.Auth, "quota exhausted"
	case has("queue_full", "overloaded", "server_busy", "capacity"):
		return failure.QueueFull, "upstream queue full"
	case has("content_filter", "content_policy", "data_inspection_failed", "responsibleaipolicyviolation", "safety"):
		return failure.ContentFilter, "content filtered"
	case has("model_not_found", "modelnotfound", "model_not_available"):
		return failure.ModelNotFound, "model not found"
	case has("invalid_api_key", "invalid_authentication", "authentication_error", "permission_error", "permission_denied", "unauthorized"):
		return failure.Auth, "not authorised"
	case has("rate_limit"):
		return failure.RateLimited, "rate limited"
	}
	if status != http.StatusTooManyRequests && saysContextLength(msg) {
		return failure.ContextLengthExceeded, "message says the context length is exceeded"
	}
	if (status == http.StatusNotFound || status == http.StatusBadRequest || status < 300) && saysModelMissing(msg) {
		return failure.ModelNotFound, "message says the model does not exist"
	}
	return failure.None, ""
}

var (
	contextLengthPhrases = []string{
		"maximum context length", "context length", "context_length", "context window",
		"context size", "too many tokens", "prompt is too long", "input is too long",
		"input token count", "`inputs` tokens", "reduce the length of the messages",
		"maximum input length", "上下文长度", "超出最大长度",
	}
	modelMissingRE = regexp.MustCompile(`\bmodel\b.{0,120}\b(does not exist|doesn't exist|not found|not exist|is not available|unknown)\b|\bno such model\b|\bunknown model\b|模型不存在`)
)

func saysContextLength(msg string) bool { return containsAny(msg, contextLengthPhrases...) }

func saysModelMissing(msg string) bool { return modelMissingRE.MatchString(msg) }

// busyRE are the wordings of a 503 that refuses a request for want of
// room (backpressure): Ollama's "server busy, please try again.  maximum
// pending requests exceeded", "overloaded" (OpenAI's "The engine is
// currently overloaded", vLLM's, TGI's), "queue is full", "at capacity",
// "too many (pending, concurrent) requests".
var busyRE = regexp.MustCompile(`\bbusy\b|overload|\bqueue (is )?full\b|queue_full|pending requests|\b(at|over|out of|no|insufficient) capacity\b|too many (pending |concurrent |simultaneous )?requests|繁忙|过载`)

// downRE are the wordings of a 503 from a server that is down, whatever
// else it says: a model still loading (llama.cpp's "Loading model"), a
// proxy whose backend is dead (Envoy's "no healthy upstream", "upstream
// connect error", HAProxy's "no server is available"), a refused
// connection. The breaker must see those.
var downRE = regexp.MustCompile(`\bloading\b|\bstarting up\b|\bnot ready\b|no healthy upstream|upstream connect error|no server is available|no available (server|backend|upstream)|connection refused`)

// saysBusy reports whether a 503's body refuses for want of room rather
// than for being down: a JSON or text body (an HTML page is a proxy's)
// with a busy wording (busyRE) and none of being down (downRE).
func saysBusy(info errorInfo) bool {
	if info.html {
		return false
	}
	text := strings.ToLower(info.message + " " + info.code + " " + info.typ)
	return busyRE.MatchString(text) && !downRE.MatchString(text)
}

// apacheStock503 is the sentence of Apache httpd's stock 503 page, which
// mod_proxy sends for a dead backend: its "maintenance" announces none.
const apacheStock503 = "unable to service your request due to maintenance downtime or capacity problems"

func saysMaintenance(info errorInfo) bool {
	text := collapse(strings.ToLower(info.message + " " + info.code + " " + info.typ + " " + string(info.raw)))
	text = strings.ReplaceAll(text, apacheStock503, "")
	return containsAny(text, "maintenance", "维护")
}

func containsAny(s string, subs ...string) bool {
	for _, w := range subs {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// describeResponse is the "what was seen" part of a reason:
// `HTTP 429 rate_limit_exceeded, Retry-After: 2s`. It never quotes the
// upstream's message (Verdict.Message keeps it for operators): an upstream
// may echo the request, or the key it refused.
func describeResponse(v Verdict, info errorInfo) string {
	var b strings.Builder
	if v.Status != 0 {
		fmt.Fprintf(&b, "HTTP %d", v.Status)
	} else {
		b.WriteString("HTTP response")
	}
	if info.html {
		b.WriteString(" HTML page")
	}
	if c := codeOf(info); c != "" {
		b.WriteString(" " + c)
	}
	if v.HasRetryAfter {
		fmt.Fprintf(&b, ", Retry-After: %s", v.RetryAfter)
	}
	if v.HasRateLimitRemaining {
		fmt.Fprintf(&b, ", X-RateLimit-Remaining: %d", v.RateLimitRemaining)
	}
	if info.note != "" {
		b.WriteString(", " + info.note)
	}
	return b.String()
}

// codeOf is the error code (else type) of info when it is an identifier
// (letters, digits, _ . : -, at most 64 bytes): the structure of a failure
// a reason may name. Anything else is the upstream's prose, kept in
// Verdict.Message only.
func codeOf(info errorInfo) string {
	code := info.code
	if _, err := strconv.Atoi(code); err == nil {
		code = "" // a numeric code (vLLM repeats the status) says nothing new
	}
	for _, c := range []string{code, info.typ} {
		if identifierRE.MatchString(c) {
			return c
		}
	}
	return ""
}

var identifierRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]{0,63}$`)

// classifyReply judges a response that go-openai decoded without error.
func classifyReply(obs Observation, v Verdict) Verdict {
	if v.Status == 0 {
		v.Status = http.StatusOK
	}
	if info := parseErrorBody(obs.Body); info.isError {
		v.Code, v.Type, v.Message = info.code, info.typ, cleanMessage(info.message)
		seen := describeResponse(v, info) + " with an error object in the body"
		if c, why := classByCode(info, v.Status); c != failure.None {
			return v.is(c, seen+" ("+why+")")
		}
		return v.is(failure.BodyError, seen)
	}
	resp := obs.Response
	if resp == nil || len(resp.Choices) == 0 {
		return v.is(failure.BodyError, fmt.Sprintf("HTTP %d without choices%s", v.Status, bodyHint(obs.Body)))
	}
	ch := resp.Choices[0]
	switch ch.FinishReason {
	case openai.FinishReasonContentFilter:
		return v.is(failure.ContentFilter, fmt.Sprintf("HTTP %d, finish_reason content_filter", v.Status))
	case openai.FinishReasonLength:
		return v.is(failure.OutputTruncated, fmt.Sprintf("HTTP %d, finish_reason length after %d completion tokens", v.Status, resp.Usage.CompletionTokens))
	}
	msg := ch.Message
	if len(msg.ToolCalls) > 0 || msg.FunctionCall != nil {
		return v.is(failure.None, fmt.Sprintf("HTTP %d, tool call, finish_reason %s", v.Status, finishReason(ch)))
	}
	content := msg.Content
	if content == "" {
		for _, p := range msg.MultiContent {
			content += p.Text
		}
	}
	if strings.TrimSpace(content) == "" {
		switch {
		case msg.Refusal != "":
			v.Message = cleanMessage(msg.Refusal)
			return v.is(failure.ContentFilter, fmt.Sprintf("HTTP %d, the model refused", v.Status))
		case strings.TrimSpace(msg.ReasoningContent) != "":
			return v.is(failure.OutputTruncated, fmt.Sprintf("HTTP %d, reasoning only (%d characters of thinking, no answer), finish_reason %s",
				v.Status, utf8.RuneCountInString(msg.ReasoningContent), finishReason(ch)))
		}
		return v.is(failure.OutputTruncated, fmt.Sprintf("HTTP %d, empty content, finish_reason %s", v.Status, finishReason(ch)))
	}
	if strings.TrimSpace(StripThinking(content)) == "" {
		return v.is(failure.OutputTruncated, fmt.Sprintf("HTTP %d, content is only a <think> block (no answer), finish_reason %s", v.Status, finishReason(ch)))
	}
	return v.is(failure.None, fmt.Sprintf("HTTP %d, finish_reason %s", v.Status, finishReason(ch)))
}

func finishReason(ch openai.ChatCompletionChoice) string {
	if ch.FinishReason == "" {
		return "(none)"
	}
	return string(ch.FinishReason)
}

// classifyBrokenBody judges a 2xx (or unknown-status) response whose body
// could not be decoded: malformed or truncated JSON, an HTML page.
func classifyBrokenBody(v Verdict, obs Observation, err error) Verdict {
	info := parseErrorBody(obs.Body)
	if info.isError {
		v.Code, v.Type, v.Message = info.code, info.typ, cleanMessage(info.message)
		if c, why := classByCode(info, v.Status); c != failure.None {
			return v.is(c, describeResponse(v, info)+" ("+why+")")
		}
	}
	if info.html {
		v.Message = cleanMessage(info.message)
	}
	status := "HTTP response"
	if v.Status != 0 {
		status = fmt.Sprintf("HTTP %d", v.Status)
	}
	what := "malformed JSON body"
	switch {
	case info.html:
		what = "HTML page instead of JSON"
	case len(obs.Body) == 0 && errors.Is(err, io.EOF):
		what = "empty body"
	case errors.Is(err, io.ErrUnexpectedEOF):
		what = "truncated body"
	}
	return v.saw(err).is(failure.BodyError, status+", "+what+" ("+errKind(err)+")")
}

func bodyHint(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" (a body of %d bytes)", len(s))
}

// parseErrorBody reads the error dialects seen in the wild:
// {"error":{"message","type","code"}} (OpenAI), {"error":"text"},
// {"object":"error","message","type","code"} (vLLM), {"detail":…}
// (FastAPI), {"type":"error","error":{…}} (Anthropic), HTML pages, text.
func parseErrorBody(body []byte) errorInfo {
	info := errorInfo{raw: body}
	s := strings.TrimSpace(string(body))
	if s == "" {
		return info
	}
	if s[0] == '{' {
		var top map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &top) == nil {
			readErrorFields(&info, top)
			if e, ok := top["error"]; ok && string(e) != "null" {
				info.isError = true
				var obj map[string]json.RawMessage
				var text string
				switch {
				case json.Unmarshal(e, &obj) == nil:
					readErrorFields(&info, obj)
				case json.Unmarshal(e, &text) == nil:
					info.message = text
				}
			}
			if d, ok := top["detail"]; ok && info.message == "" {
				info.message = detailText(d)
			}
			var object string
			if o, ok := top["object"]; ok && json.Unmarshal(o, &object) == nil && object == "error" {
				info.isError = true
			}
			return info
		}
	}
	if looksLikeHTML(s) {
		info.html = true
		info.message = htmlSummary(s)
		return info
	}
	info.message = s
	return info
}

// detailText reads FastAPI's "detail": a text, or a list of validation
// errors {"loc":[…],"msg":…}.
func detailText(d json.RawMessage) string {
	var text string
	if json.Unmarshal(d, &text) == nil {
		return text
	}
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(d, &items) == nil {
		var parts []string
		for _, it := range items {
			if it.Msg == "" {
				continue
			}
			loc := make([]string, len(it.Loc))
			for i, l := range it.Loc {
				loc[i] = fmt.Sprint(l)
			}
			if len(loc) > 0 {
				parts = append(parts, strings.Join(loc, ".")+": "+it.Msg)
			} else {
				parts = append(parts, it.Msg)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	return string(d)
}

// readErrorFields copies message, type and code from one JSON object,
// keeping values already found.
func readErrorFields(info *errorInfo, obj map[string]json.RawMessage) {
	str := func(key string) string {
		raw, ok := obj[key]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var n json.Number
		if json.Unmarshal(raw, &n) == nil {
			return n.String()
		}
		return ""
	}
	if info.message == "" {
		info.message = str("message")
	}
	if info.typ == "" {
		if t := str("type"); t != "error" { // Anthropic's envelope says "type":"error"
			info.typ = t
		}
	}
	if info.code == "" {
		info.code = str("code")
	}
}

func anyString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return fmt.Sprint(v)
}

func looksLikeHTML(s string) bool {
	head := strings.ToLower(s[:min(len(s), 512)])
	return strings.HasPrefix(head, "<") && containsAny(head, "<html", "<!doctype", "<head", "<body", "<title", "<h1", "<center")
}

var (
	htmlTitleRE  = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	htmlH1RE     = regexp.MustCompile(`(?is)<h1[^>]*>(.*?)</h1>`)
	htmlDropRE   = regexp.MustCompile(`(?is)<(script|style)[^>]*>.*?</(script|style)>`)
	htmlTagRE    = regexp.MustCompile(`(?s)<[^>]*>`)
	whitespaceRE = regexp.MustCompile(`\s+`)
	thinkRE      = regexp.MustCompile(`(?is)<(think|thinking)>.*?(</(think|thinking)>|\z)`)
)

// htmlSummary reduces an HTML error page to its title (or first heading,
// or its text).
func htmlSummary(s string) string {
	for _, re := range []*regexp.Regexp{htmlTitleRE, htmlH1RE} {
		if m := re.FindStringSubmatch(s); m != nil {
			if t := collapse(html.UnescapeString(htmlTagRE.ReplaceAllString(m[1], " "))); t != "" {
				return t
			}
		}
	}
	s = htmlDropRE.ReplaceAllString(s, " ")
	return collapse(html.UnescapeString(htmlTagRE.ReplaceAllString(s, " ")))
}

// StripThinking removes <think>…</think> (and <thinking>) blocks from a
// model's answer; an unclosed block runs to the end. Content that is empty
// after stripping is a reasoning-only answer (output_truncated).
func StripThinking(content string) string {
	return strings.TrimSpace(thinkRE.ReplaceAllString(content, ""))
}

func collapse(s string) string { return strings.TrimSpace(whitespaceRE.ReplaceAllString(s, " ")) }

// cleanMessage makes an upstream message fit for a reason and history:
// HTML reduced to a title, whitespace collapsed, at most maxMessageLen
// runes, bytes that are not UTF-8 replaced (a protobuf string, such as a
// Temporal failure message, must be valid UTF-8).
func cleanMessage(s string) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if s == "" {
		return ""
	}
	if looksLikeHTML(s) {
		s = htmlSummary(s)
	}
	return truncateRunes(collapse(s), maxMessageLen)
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func oneLine(s string, n int) string { return truncateRunes(collapse(s), n) }

// errKind names the kind of a transport or decoding error in the
// product's words, for a reason: its text (Verdict.Detail) may name the
// upstream's address.
func errKind(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "context canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "context deadline exceeded"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	case errors.Is(err, io.EOF):
		return "EOF"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by peer"
	case errors.Is(err, syscall.ECONNABORTED):
		return "connection aborted"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case isJSONError(err):
		return "malformed JSON"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "i/o timeout"
	}
	if why, ok := connectFailure(err); ok {
		return why
	}
	return "transport error"
}

func isHeaderTimeout(err error) bool {
	return strings.Contains(err.Error(), "timeout awaiting response headers")
}

// connectFailure recognises failures before the request was sent: dial,
// DNS, TLS handshake, proxy connect, refused or unreachable, or a
// connection that broke while the request was being written.
func connectFailure(err error) (string, bool) {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "DNS lookup failed", true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		switch opErr.Op {
		case "dial":
			return "dial failed", true
		case "proxyconnect":
			return "proxy connect failed", true
		case "write":
			return "connection broke while sending the request", true
		}
	}
	var (
		certErr     *tls.CertificateVerificationError
		recordErr   tls.RecordHeaderError
		alertErr    tls.AlertError
		authorityEr x509.UnknownAuthorityError
		hostnameErr x509.HostnameError
		invalidErr  x509.CertificateInvalidError
	)
	if errors.As(err, &certErr) || errors.As(err, &recordErr) || errors.As(err, &alertErr) ||
		errors.As(err, &authorityEr) || errors.As(err, &hostnameErr) || errors.As(err, &invalidErr) ||
		strings.Contains(err.Error(), "tls: ") {
		return "TLS handshake failed", true
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return "TLS handshake failed (the server speaks plain HTTP)", true
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "upstream unreachable", true
	}
	return "", false
}

func isJSONError(err error) bool {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &syntaxErr) || errors.As(err, &typeErr)
}

// clientLibraryRefusals are go-openai's checks before sending.
var clientLibraryRefusals = []error{
	openai.ErrChatCompletionInvalidModel, openai.ErrChatCompletionStreamNotSupported,
	openai.ErrContentFieldsMisused, openai.ErrReasoningEffortUnsupported,
	openai.ErrReasoningToolsRequireResponses, openai.ErrReasoningSamplingUnsupported,
	openai.ErrO1MaxTokensDeprecated, openai.ErrO1BetaLimitationsMessageTypes,
	openai.ErrO1BetaLimitationsTools, openai.ErrO1BetaLimitationsLogprobs,
	openai.ErrO1BetaLimitationsOther, openai.ErrReasoningModelMaxTokensDeprecated,
	openai.ErrReasoningModelLimitationsLogprobs, openai.ErrReasoningModelLimitationsOther,
}

func isClientLibraryRefusal(err error) bool {
	for _, e := range clientLibraryRefusals {
		if errors.Is(err, e) {
			return true
		}
	}
	var marshalErr *json.MarshalerError
	var unsupported *json.UnsupportedValueError
	return errors.As(err, &marshalErr) || errors.As(err, &unsupported)
}

var retryAfterNumberRE = regexp.MustCompile(`^\d+(\.\d+)?$`)

// maxRetryAfter bounds a parsed Retry-After so that absurd values cannot
// overflow a time.Duration; any cap the caller applies is far below.
const maxRetryAfter = 365 * 24 * time.Hour

// ParseRetryAfter reads how long the upstream asks to wait: the
// retry-after-ms header (milliseconds, OpenAI and Azure), else Retry-After
// in seconds (fractions allowed) or as an HTTP date, measured from now; a
// date in the past means 0. It reports false when neither header is present
// or parseable (negative numbers and garbage are ignored), and for a date
// when now is zero.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if s := strings.TrimSpace(h.Get("Retry-After-Ms")); retryAfterNumberRE.MatchString(s) {
		ms, _ := strconv.ParseFloat(s, 64)
		return secondsToDuration(ms / 1000), true
	}
	s := strings.TrimSpace(h.Get("Retry-After"))
	if s == "" {
		return 0, false
	}
	if retryAfterNumberRE.MatchString(s) {
		secs, _ := strconv.ParseFloat(s, 64)
		return secondsToDuration(secs), true
	}
	if t, err := http.ParseTime(s); err == nil && !now.IsZero() {
		return min(max(t.Sub(now), 0), maxRetryAfter), true
	}
	return 0, false
}

func secondsToDuration(secs float64) time.Duration {
	if math.IsNaN(secs) || secs <= 0 {
		return 0
	}
	if secs >= maxRetryAfter.Seconds() {
		return maxRetryAfter
	}
	return time.Duration(math.Round(secs * float64(time.Second)))
}

// rateLimitRemaining reads X-RateLimit-Remaining.
func rateLimitRemaining(h http.Header) (int, bool) {
	s := strings.TrimSpace(h.Get("X-RateLimit-Remaining"))
	if s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
