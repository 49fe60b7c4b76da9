package classify

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	// Cut is set on a stream_broken whose stream the connection cut, or
	// that ended without a finish_reason, after it had started: the
	// endpoint failed a request it had begun (not an idle timeout, an
	// error object or a malformed chunk).
	Cut bool
}

// OK reports whether the attempt succeeded.
func (v Verdict) OK() bool { return v.Class == failure.None && !v.Canceled }

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
		return v.withDetail(err).is(failure.Timeout, "cancelled by the caller")
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
		return classifyErrorStatus(v.withDetail(err), info)
	}

	// No usable response: the transport, a deadline, or a broken 2xx body.
	switch {
	case obs.HeaderTimedOut || isHeaderTimeout(err):
		return v.withDetail(err).is(failure.ReadTimeout, "no response headers within the header timeout (timeout awaiting response headers)")
	case obs.AttemptTimedOut:
		return v.withDetail(err).is(failure.Timeout, "attempt deadline exceeded ("+errKind(err)+")")
	}
	v = v.withDetail(err)
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
		return v.is(failure.InvalidRequest, "refused by the client before sending ("+errKind(err)+")")
	}
	return v.is(failure.ServerError, "unrecognised error ("+errKind(err)+")")
}

// is sets the class and the reason.
func (v Verdict) is(c failure.Class, reason string) Verdict {
	v.Class = c
	v.Reason = oneLine(reason, 240)
	return v
}

// withDetail keeps the text of err in Detail, for operators.
func (v Verdict) withDetail(err error) Verdict {
	v.Detail = oneLine(strings.ToValidUTF8(err.Error(), "\uFFFD"), 300)
	return v
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
	v.Generic = st >= 500 && !info.isHTML && (info.code != "" || info.typ != "" || info.message != "")
	if st >= 500 {
		return v.is(failure.ServerError, seen)
	}
	return v.is(failure.ServerError, seen+" (unexpected status)")
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
	if info.isHTML {
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
	if info.isHTML {
		v.Message = cleanMessage(info.message)
	}
	status := "HTTP response"
	if v.Status != 0 {
		status = fmt.Sprintf("HTTP %d", v.Status)
	}
	what := "malformed JSON body"
	switch {
	case info.isHTML:
		what = "HTML page instead of JSON"
	case len(obs.Body) == 0 && errors.Is(err, io.EOF):
		what = "empty body"
	case errors.Is(err, io.ErrUnexpectedEOF):
		what = "truncated body"
	}
	return v.withDetail(err).is(failure.BodyError, status+", "+what+" ("+errKind(err)+")")
}

func bodyHint(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" (a body of %d bytes)", len(s))
}
