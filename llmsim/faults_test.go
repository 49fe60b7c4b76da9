package llmsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/llmsim"
)

// result is what a go-openai caller can observe about one call.
type result struct {
	q       string
	resp    openai.ChatCompletionResponse
	err     error
	status  int
	header  http.Header
	elapsed time.Duration
	conv    llmsim.Conversation
}

func apiError(t *testing.T, err error, status int, code string) *openai.APIError {
	t.Helper()
	var e *openai.APIError
	if !errors.As(err, &e) {
		t.Fatalf("want *openai.APIError, got %T: %v", err, err)
	}
	if e.HTTPStatusCode != status {
		t.Errorf("status = %d, want %d", e.HTTPStatusCode, status)
	}
	if code != "" && e.Code != code {
		t.Errorf("code = %v, want %q", e.Code, code)
	}
	return e
}

func requestError(t *testing.T, err error, status int, bodyHas string) *openai.RequestError {
	t.Helper()
	var e *openai.RequestError
	if !errors.As(err, &e) {
		t.Fatalf("want *openai.RequestError, got %T: %v", err, err)
	}
	if e.HTTPStatusCode != status {
		t.Errorf("status = %d, want %d", e.HTTPStatusCode, status)
	}
	if !strings.Contains(string(e.Body), bodyHas) {
		t.Errorf("body %q does not contain %q", e.Body, bodyHas)
	}
	return e
}

// headers checks h against name, want pairs; a want of "" means the
// header is absent.
func headers(t *testing.T, h http.Header, pairs ...string) {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if got := h.Get(pairs[i]); got != pairs[i+1] {
			t.Errorf("%s = %q, want %q", pairs[i], got, pairs[i+1])
		}
	}
}

func noHTTPError(t *testing.T, err error) {
	t.Helper()
	var a *openai.APIError
	var r *openai.RequestError
	if err == nil || errors.As(err, &a) || errors.As(err, &r) {
		t.Fatalf("want a transport/decoding error, got %T: %v", err, err)
	}
}

// isTimeout reports a client-side timeout, however net/http words it.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func choice(t *testing.T, r result) openai.ChatCompletionChoice {
	t.Helper()
	if r.err != nil {
		t.Fatalf("unexpected error: %v", r.err)
	}
	if len(r.resp.Choices) != 1 {
		t.Fatalf("choices = %d, want 1", len(r.resp.Choices))
	}
	return r.resp.Choices[0]
}

var ctxMsg = regexp.MustCompile(`^This model's maximum context length is (\d+) tokens\. However, your messages resulted in (\d+) tokens\.`)

// TestFaultsThroughGoOpenAI drives every fault through go-openai, selected
// by an in-prompt directive, and checks what the caller sees and what the
// stats recorded. The cases run in parallel on one simulator.
func TestFaultsThroughGoOpenAI(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cases := []struct {
		fault     llmsim.Fault
		name      string // defaults to the fault
		directive string // attributes after fault=
		timeout   time.Duration
		outcome   string
		check     func(t *testing.T, r result)
		// edit changes the request (tools, response_format).
		edit func(r *openai.ChatCompletionRequest)
	}{
		{fault: llmsim.FaultLatency, directive: "latency=300ms", outcome: "200", check: func(t *testing.T, r result) {
			c := choice(t, r)
			if c.Message.Content != llmsim.Answer("qwen-72b", r.q) {
				t.Errorf("content = %q", c.Message.Content)
			}
			if r.elapsed < 300*time.Millisecond {
				t.Errorf("elapsed %v, want >= 300ms", r.elapsed)
			}
		}},
		{fault: llmsim.FaultHang, timeout: 300 * time.Millisecond, outcome: llmsim.OutcomeClientGone, check: func(t *testing.T, r result) {
			noHTTPError(t, r.err)
			if !isTimeout(r.err) || r.status != 0 {
				t.Errorf("err = %v (status %d), want a client timeout before any response", r.err, r.status)
			}
		}},
		// Outside a phase with an end, a pause lasts its latency
		// (TestPauseServesWhenThePhaseEnds pauses until a phase ends).
		{fault: llmsim.FaultPause, directive: "latency=300ms", outcome: "200", check: func(t *testing.T, r result) {
			c := choice(t, r)
			if c.Message.Content != llmsim.Answer("qwen-72b", r.q) || r.elapsed < 300*time.Millisecond {
				t.Errorf("content %q after %v, want the answer after 300ms", c.Message.Content, r.elapsed)
			}
		}},
		{fault: llmsim.FaultReset, outcome: llmsim.OutcomeReset, check: func(t *testing.T, r result) {
			noHTTPError(t, r.err)
			if !errors.Is(r.err, syscall.ECONNRESET) && !errors.Is(r.err, io.EOF) {
				t.Errorf("err = %v, want connection reset", r.err)
			}
		}},
		{fault: llmsim.FaultRateLimited, directive: "retry_after=2s", outcome: "429", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 429, "rate_limit_exceeded")
			if e.Type != "requests" {
				t.Errorf("type = %q", e.Type)
			}
			headers(t, r.header, "Retry-After", "2", "Retry-After-Ms", "", "X-Ratelimit-Remaining-Requests", "0")
		}},
		{fault: llmsim.FaultRateLimited, name: "rate_limited_no_quota", directive: "retry_after=1s no_quota=true", outcome: "429", check: func(t *testing.T, r result) {
			apiError(t, r.err, 429, "rate_limit_exceeded")
			// No quota is spent: none of the headers the plain 429 sends.
			headers(t, r.header, "Retry-After", "1", "X-Ratelimit-Remaining-Requests", "", "X-Ratelimit-Reset-Requests", "")
		}},
		{fault: llmsim.FaultRateLimited, name: "rate_limited_ms", directive: "retry_after_ms=1500", outcome: "429", check: func(t *testing.T, r result) {
			apiError(t, r.err, 429, "rate_limit_exceeded")
			headers(t, r.header, "Retry-After-Ms", "1500", "Retry-After", "")
		}},
		{fault: llmsim.FaultRateLimited, name: "rate_limited_both", directive: "retry_after=1500ms retry_header=both", outcome: "429", check: func(t *testing.T, r result) {
			apiError(t, r.err, 429, "rate_limit_exceeded")
			if r.header.Get("Retry-After") != "2" || r.header.Get("Retry-After-Ms") != "1500" {
				t.Errorf("Retry-After = %q, retry-after-ms = %q, want 2 and 1500", r.header.Get("Retry-After"), r.header.Get("Retry-After-Ms"))
			}
		}},
		{fault: llmsim.FaultRateLimited, name: "rate_limited_date", directive: "retry_after=3s retry_header=date", outcome: "429", check: func(t *testing.T, r result) {
			apiError(t, r.err, 429, "rate_limit_exceeded")
			at, err := http.ParseTime(r.header.Get("Retry-After"))
			if err != nil {
				t.Fatalf("Retry-After %q is not an HTTP date: %v", r.header.Get("Retry-After"), err)
			}
			if d := time.Until(at); d < time.Second || d > 4*time.Second {
				t.Errorf("Retry-After date is %v away, want about 3s", d)
			}
		}},
		{fault: llmsim.FaultQuotaExceeded, outcome: "429", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 429, "insufficient_quota")
			if e.Type != "insufficient_quota" || !strings.Contains(e.Message, "quota") {
				t.Errorf("type %q message %q", e.Type, e.Message)
			}
		}},
		{fault: llmsim.FaultQueueFull, outcome: "429", check: func(t *testing.T, r result) {
			apiError(t, r.err, 429, "queue_full")
			if r.header.Get("X-RateLimit-Remaining") != "0" {
				t.Errorf("X-RateLimit-Remaining = %q, want 0", r.header.Get("X-RateLimit-Remaining"))
			}
		}},
		{fault: llmsim.FaultQueueFull, name: "queue_full_503", directive: "status=503 retry_after=1s", outcome: "503", check: func(t *testing.T, r result) {
			apiError(t, r.err, 503, "queue_full")
			if r.header.Get("X-RateLimit-Remaining") != "0" || r.header.Get("Retry-After") != "1" {
				t.Errorf("headers %v", r.header)
			}
		}},
		{fault: llmsim.FaultOverloaded, outcome: "529", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 529, "")
			if e.Type != "overloaded_error" || e.Message != "Overloaded" {
				t.Errorf("type %q message %q", e.Type, e.Message)
			}
		}},
		{fault: llmsim.FaultServerBusy, outcome: "503", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 503, "")
			if e.Type != "api_error" || e.Message != "server busy, please try again.  maximum pending requests exceeded" {
				t.Errorf("type %q message %q, want Ollama's busy refusal", e.Type, e.Message)
			}
			if r.header.Get("Retry-After") != "" {
				t.Errorf("Retry-After %q, want none (Ollama sends none)", r.header.Get("Retry-After"))
			}
		}},
		{fault: llmsim.FaultMaintenance, outcome: "503", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 503, "maintenance")
			if e.Message != "Service under maintenance" {
				t.Errorf("message %q", e.Message)
			}
		}},
		{fault: llmsim.FaultUnavailable, outcome: "503", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 503, "")
			if strings.Contains(strings.ToLower(e.Message), "maintenance") || e.Type != "server_error" {
				t.Errorf("type %q message %q", e.Type, e.Message)
			}
		}},
		{fault: llmsim.FaultUnknownError, outcome: "500", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 500, "E42")
			if e.Type != "engine_error" || !strings.Contains(e.Message, "queue_full") {
				t.Errorf("type %q message %q", e.Type, e.Message)
			}
		}},
		{fault: llmsim.FaultServerError, outcome: "500", check: func(t *testing.T, r result) {
			requestError(t, r.err, 500, "<title>500 Internal Server Error</title>")
			if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
				t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
			}
		}},
		{fault: llmsim.FaultBadGateway, outcome: "502", check: func(t *testing.T, r result) {
			requestError(t, r.err, 502, "502 Bad Gateway")
		}},
		{fault: llmsim.FaultGatewayTimeout, directive: "latency=100ms", outcome: "504", check: func(t *testing.T, r result) {
			requestError(t, r.err, 504, "504 Gateway Time-out")
			if r.elapsed < 100*time.Millisecond {
				t.Errorf("elapsed %v, want >= 100ms", r.elapsed)
			}
		}},
		{fault: llmsim.FaultErrorBody, outcome: "200", check: func(t *testing.T, r result) {
			// go-openai decodes a 200 error body into an empty response.
			if r.err != nil || r.status != 200 || len(r.resp.Choices) != 0 || r.resp.ID != "" {
				t.Errorf("err %v status %d resp %+v", r.err, r.status, r.resp)
			}
		}},
		{fault: llmsim.FaultNoChoices, outcome: "200", check: func(t *testing.T, r result) {
			if r.err != nil || len(r.resp.Choices) != 0 || r.resp.ID == "" || r.resp.Usage.PromptTokens == 0 {
				t.Errorf("err %v resp %+v", r.err, r.resp)
			}
		}},
		{fault: llmsim.FaultMalformedJSON, outcome: "200", check: func(t *testing.T, r result) {
			noHTTPError(t, r.err)
			if r.status != 200 || !errors.Is(r.err, io.ErrUnexpectedEOF) {
				t.Errorf("status %d err %v, want 200 and unexpected EOF", r.status, r.err)
			}
		}},
		{fault: llmsim.FaultLength, outcome: "200", check: func(t *testing.T, r result) {
			c := choice(t, r)
			full := llmsim.Answer("qwen-72b", r.q)
			if c.FinishReason != openai.FinishReasonLength || c.Message.Content == "" ||
				len(c.Message.Content) >= len(full) || !strings.HasPrefix(full, c.Message.Content) {
				t.Errorf("finish %q content %q (full %q)", c.FinishReason, c.Message.Content, full)
			}
		}},
		{fault: llmsim.FaultReasoningOnly, outcome: "200", check: func(t *testing.T, r result) {
			c := choice(t, r)
			if c.Message.Content != "" || c.Message.ReasoningContent == "" || c.FinishReason != openai.FinishReasonStop {
				t.Errorf("content %q reasoning %q finish %q", c.Message.Content, c.Message.ReasoningContent, c.FinishReason)
			}
		}},
		{fault: llmsim.FaultEmptyContent, outcome: "200", check: func(t *testing.T, r result) {
			c := choice(t, r)
			if c.Message.Content != "" || c.Message.ReasoningContent != "" || c.FinishReason != openai.FinishReasonStop {
				t.Errorf("content %q finish %q", c.Message.Content, c.FinishReason)
			}
		}},
		{fault: llmsim.FaultContentFilter, outcome: "200", check: func(t *testing.T, r result) {
			c := choice(t, r)
			if c.Message.Content != "" || c.FinishReason != openai.FinishReasonContentFilter {
				t.Errorf("content %q finish %q", c.Message.Content, c.FinishReason)
			}
		}},
		{fault: llmsim.FaultContextLength, outcome: "400", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 400, "context_length_exceeded")
			m := ctxMsg.FindStringSubmatch(e.Message)
			if m == nil || e.Type != "invalid_request_error" {
				t.Fatalf("type %q message %q", e.Type, e.Message)
			}
			n, _ := strconv.Atoi(m[1])
			got, _ := strconv.Atoi(m[2])
			want := llmsim.EstimatePromptTokens([]llmsim.Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: llmsim.StripDirectives(r.q)}})
			if got != want || n >= got {
				t.Errorf("message says %d tokens over %d, want %d over less", got, n, want)
			}
		}},
		{fault: llmsim.FaultBadRequest, outcome: "400", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 400, "invalid_value")
			if e.Type != "invalid_request_error" || e.Param == nil || *e.Param != "temperature" {
				t.Errorf("type %q param %v", e.Type, e.Param)
			}
		}},
		{fault: llmsim.FaultBadRequest, name: "bad_request_422", directive: "status=422", outcome: "422", check: func(t *testing.T, r result) {
			apiError(t, r.err, 422, "unprocessable_entity")
		}},
		{fault: llmsim.FaultInvalidAPIKey, outcome: "401", check: func(t *testing.T, r result) {
			apiError(t, r.err, 401, "invalid_api_key")
		}},
		{fault: llmsim.FaultForbidden, outcome: "403", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 403, "permission_denied")
			if e.Type != "permission_error" {
				t.Errorf("type %q", e.Type)
			}
		}},
		{fault: llmsim.FaultModelNotFound, outcome: "404", check: func(t *testing.T, r result) {
			e := apiError(t, r.err, 404, "model_not_found")
			if !strings.Contains(e.Message, "`qwen-72b`") {
				t.Errorf("message %q", e.Message)
			}
		}},
		{fault: llmsim.FaultSlowDrip, directive: "duration=400ms", outcome: "200", check: func(t *testing.T, r result) {
			c := choice(t, r)
			if c.Message.Content != llmsim.Answer("qwen-72b", r.q) || r.elapsed < 350*time.Millisecond {
				t.Errorf("content %q after %v", c.Message.Content, r.elapsed)
			}
		}},
		{fault: llmsim.FaultSlowDrip, name: "slow_drip_timeout", directive: "duration=3s", timeout: 800 * time.Millisecond, outcome: "200", check: func(t *testing.T, r result) {
			noHTTPError(t, r.err)
			if r.status != 200 || !isTimeout(r.err) {
				t.Errorf("status %d err %v, want headers then a timeout reading the body", r.status, r.err)
			}
		}},
		{fault: llmsim.FaultStreamBreak, outcome: "200", check: func(t *testing.T, r result) {
			noHTTPError(t, r.err)
			if r.status != 200 || !errors.Is(r.err, io.ErrUnexpectedEOF) {
				t.Errorf("status %d err %v, want 200 then unexpected EOF", r.status, r.err)
			}
		}},
		// The stream faults on a non-streamed answer (TestStreamFaults
		// streams them).
		{fault: llmsim.FaultCutStream, outcome: "200", check: func(t *testing.T, r result) {
			noHTTPError(t, r.err)
			if r.status != 200 || !errors.Is(r.err, io.ErrUnexpectedEOF) {
				t.Errorf("status %d err %v, want 200 then unexpected EOF", r.status, r.err)
			}
		}},
		{fault: llmsim.FaultStreamError, outcome: "200", check: func(t *testing.T, r result) {
			if r.err != nil || r.status != 200 || len(r.resp.Choices) != 0 || r.resp.ID != "" {
				t.Errorf("err %v status %d resp %+v, want the error body of error_body", r.err, r.status, r.resp)
			}
		}},
		{fault: llmsim.FaultBadToolArgs, outcome: "200", edit: offerTools, check: func(t *testing.T, r result) {
			c := choice(t, r)
			if c.FinishReason != openai.FinishReasonToolCalls || len(c.Message.ToolCalls) != 1 || json.Valid([]byte(c.Message.ToolCalls[0].Function.Arguments)) {
				t.Errorf("finish %q calls %+v, want one call with cut arguments", c.FinishReason, c.Message.ToolCalls)
			}
		}},
		{fault: llmsim.FaultUnknownTool, outcome: "200", edit: offerTools, check: func(t *testing.T, r result) {
			c := choice(t, r)
			if len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "unknown_lookup_order" {
				t.Errorf("calls %+v, want one call to a tool not offered", c.Message.ToolCalls)
			}
		}},
		{fault: llmsim.FaultBadJSON, outcome: "200", edit: askJSON, check: func(t *testing.T, r result) {
			c := choice(t, r)
			if json.Valid([]byte(c.Message.Content)) || !strings.HasPrefix(c.Message.Content, "Sure! ") {
				t.Errorf("content %q, want prose and cut JSON", c.Message.Content)
			}
		}},
		{fault: llmsim.FaultStall, directive: "duration=300ms", outcome: "200", check: func(t *testing.T, r result) {
			noHTTPError(t, r.err)
			if r.status != 200 || !errors.Is(r.err, io.ErrUnexpectedEOF) || r.elapsed < 300*time.Millisecond {
				t.Errorf("status %d err %v after %v, want 200, silence for 300ms, then unexpected EOF", r.status, r.err, r.elapsed)
			}
		}},
	}
	covered := map[llmsim.Fault]bool{}
	for _, c := range cases {
		covered[c.fault] = true
	}
	for _, f := range llmsim.Faults() {
		if !covered[f] {
			t.Errorf("fault %s has no case", f)
		}
	}
	for _, c := range cases {
		name := c.name
		if name == "" {
			name = string(c.fault)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			timeout := c.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			key := "wf-" + name
			cl, cap := goClient(srv, timeout, "Idempotency-Key", key+"/1")
			q := fmt.Sprintf("What does %s look like? [[sim fault=%s %s]]", name, c.fault, c.directive)
			begin := time.Now()
			req := ask("qwen-72b", q)
			if c.edit != nil {
				c.edit(&req)
			}
			resp, err := cl.CreateChatCompletion(context.Background(), req)
			r := result{q: q, resp: resp, err: err, elapsed: time.Since(begin)}
			r.status, r.header = cap.last()
			if r.header == nil {
				r.header = http.Header{}
			}
			if r.status != 0 && r.header.Get("X-Llmsim-Fault") != string(c.fault) {
				t.Errorf("X-Llmsim-Fault = %q", r.header.Get("X-Llmsim-Fault"))
			}
			if r.status != 0 && r.header.Get("Idempotency-Key") != key+"/1" {
				t.Errorf("Idempotency-Key echoed as %q", r.header.Get("Idempotency-Key"))
			}
			c.check(t, r)
			eventually(t, "the outcome in stats", func() bool {
				cv := srv.Stats().Conversations[key]
				return len(cv.Requests) == 1 && cv.Requests[0].Outcome != ""
			})
			a := srv.Stats().Conversations[key].Requests[0]
			if a.Outcome != c.outcome || a.Fault != c.fault || a.IdempotencyKey != key+"/1" || a.Model != "qwen-72b" {
				t.Errorf("stats attempt = %+v, want outcome %s fault %s", a, c.outcome, c.fault)
			}
		})
	}
}

// offerTools offers lookup_order.
func offerTools(r *openai.ChatCompletionRequest) {
	r.Tools = []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "lookup_order",
		Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)}}}
}

// askJSON asks for a JSON object.
func askJSON(r *openai.ChatCompletionRequest) {
	r.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
}

func TestUnknownModelAndBadRequests(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl, _ := goClient(srv, 5*time.Second)
	_, err := cl.CreateChatCompletion(context.Background(), ask("gpt-9", "hello"))
	e := apiError(t, err, 404, "model_not_found")
	if !strings.Contains(e.Message, "`gpt-9`") {
		t.Errorf("message %q", e.Message)
	}
	_, err = cl.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "qwen-72b"})
	apiError(t, err, 400, "")
	_, err = cl.CreateChatCompletion(context.Background(), ask("qwen-72b", "hi [[sim fault=rate_limt]]"))
	e = apiError(t, err, 400, "invalid_directive")
	if !strings.Contains(e.Message, "did you mean rate_limited?") {
		t.Errorf("message %q", e.Message)
	}

	resp, err := http.Post(srv.BaseURL+"/chat/completions", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("malformed request: status %d", resp.StatusCode)
	}
	resp, err = http.Get(srv.BaseURL + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: status %d", resp.StatusCode)
	}
	st := srv.Stats()
	if st.Totals.Arrivals != 4 || st.Totals.Responses["404"] != 1 || st.Totals.Responses["400"] != 3 {
		t.Errorf("totals %+v", st.Totals)
	}
}

func TestHealthyAnswerAndHeaders(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl, cap := goClient(srv, 5*time.Second, "X-Request-ID", "req-42", "Idempotency-Key", "llm-abc/3")
	q := "如何重置密码？ Please explain."
	resp, err := cl.CreateChatCompletion(context.Background(), ask("qwen-14b", q))
	if err != nil {
		t.Fatal(err)
	}
	want := llmsim.Answer("qwen-14b", q)
	if !strings.HasPrefix(want, "[qwen-14b] Re: 如何重置密码？ Please explain. — ") {
		t.Errorf("Answer = %q", want)
	}
	c := resp.Choices[0]
	if c.Message.Content != want || c.FinishReason != openai.FinishReasonStop || c.Message.Role != "assistant" {
		t.Errorf("choice %+v", c)
	}
	if resp.Model != "qwen-14b" || resp.Object != "chat.completion" {
		t.Errorf("model %q object %q", resp.Model, resp.Object)
	}
	prompt := llmsim.EstimatePromptTokens([]llmsim.Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: q}})
	if resp.Usage.PromptTokens != prompt || resp.Usage.CompletionTokens != llmsim.EstimateTokens(want) ||
		resp.Usage.TotalTokens != prompt+llmsim.EstimateTokens(want) {
		t.Errorf("usage %+v, want prompt %d completion %d", resp.Usage, prompt, llmsim.EstimateTokens(want))
	}
	_, h := cap.last()
	if h.Get("X-Request-ID") != "req-42" || h.Get("Idempotency-Key") != "llm-abc/3" || h.Get("X-Llmsim-Attempt") != "1" {
		t.Errorf("headers %v", h)
	}
	if resp.Header().Get("X-Request-ID") != "req-42" {
		t.Errorf("go-openai response header %v", resp.Header())
	}
	cv := srv.Stats().Conversations["llm-abc"]
	if cv.Attempts != 1 || cv.Requests[0].RequestID != "req-42" || cv.Requests[0].IdempotencyKey != "llm-abc/3" {
		t.Errorf("conversation %+v", cv)
	}

	// Another model: same words, other prefix; max_tokens cuts with "length".
	req := ask("llama-8b", q)
	req.MaxTokens = 5
	resp, err = cl.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	c = resp.Choices[0]
	if c.FinishReason != openai.FinishReasonLength || resp.Usage.CompletionTokens != 5 ||
		!strings.HasPrefix(llmsim.Answer("llama-8b", q), c.Message.Content) {
		t.Errorf("max_tokens 5: finish %q content %q usage %+v", c.FinishReason, c.Message.Content, resp.Usage)
	}

	models, err := cl.ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Models {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "qwen-72b,qwen-14b,llama-8b" {
		t.Errorf("models %v", ids)
	}
}
