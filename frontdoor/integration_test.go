package frontdoor_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zaptest/observer"

	"github.com/durable-llm/durable-llm/codec"
	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/testkit/testenv"
	"github.com/durable-llm/durable-llm/workflows"
)

// The tenants' bearer tokens (at least frontdoor.MinTokenLen characters).
const (
	tokAcme   = "tok-acme-7f3c9a1e5b2d4f6a8c0e1b3d5f7a9c2e"
	tokGlobex = "tok-globex-2b4d6f8a0c1e3a5c7e9b1d3f5a7c9e0b"
	tokens    = tokAcme + "=acme, " + tokGlobex + "=globex"
)

var shared testenv.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// door is a real dev server, llmsim, worker (on a task queue of the test's
// own) and the front door in an httptest server.
type door struct {
	*rig.Stack
	t  *testing.T
	h  *frontdoor.Handler
	ts *httptest.Server
}

func newDoor(t *testing.T, mutate func(*frontdoor.Options)) *door {
	t.Helper()
	return newDoorOn(t, rig.Options{}, mutate)
}

// newDoorOn is newDoor on the stack o describes (its client, its policy),
// on the package's dev server unless o names a client.
func newDoorOn(t *testing.T, o rig.Options, mutate func(*frontdoor.Options)) *door {
	t.Helper()
	o.Shared = &shared
	if o.QueuePrefix == "" {
		o.QueuePrefix = "frontdoor-"
	}
	return openDoor(t, rig.New(t, o), mutate)
}

// openDoor serves the front door over s.
func openDoor(t *testing.T, s *rig.Stack, mutate func(*frontdoor.Options)) *door {
	t.Helper()
	d := &door{Stack: s, t: t}
	d.h, d.ts = s.Door(tokens, mutate)
	return d
}

// openai returns the official client pointed at the front door with a
// tenant's token; its own retries are off so every test sees each answer.
func (d *door) openai(token string, opts ...option.RequestOption) *openai.Client {
	c := rig.OpenAI(d.ts.URL, token, opts...)
	return &c
}

func params(user, question string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model: "auto",
		User:  openai.String(user),
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a support agent."), openai.UserMessage(question),
		},
	}
}

func msgs(question string) []request.Message {
	return []request.Message{{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: question}}
}

// requireNoWorkflow checks that no workflow with this ID was started.
func (d *door) requireNoWorkflow(id string) {
	d.t.Helper()
	_, err := d.Client.DescribeWorkflowExecution(context.Background(), id, "")
	var nf *serviceerror.NotFound
	require.True(d.t, errors.As(err, &nf), "a workflow %s was started: %v", id, err)
}

func apiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	require.True(t, errors.As(err, &e), "want an API error, got %T %v", err, err)
	return e
}

func TestPlainCall(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	var hr *http.Response
	q := "Where is my order?"
	resp, err := oc.Chat.Completions.New(ctx, params("u-plain", q),
		option.WithHeader("X-Session-Id", "s-7"), option.WithResponseInto(&hr))
	require.NoError(t, err)

	id := request.Key("acme", "u-plain", "s-7", msgs(q))
	require.Equal(t, id, hr.Header.Get("X-Workflow-Id"), "the idempotency key: tenant, user, session, messages")
	require.Equal(t, "model", hr.Header.Get("X-Resilience-Source"))
	require.Equal(t, "chatcmpl-"+id, resp.ID)
	require.Equal(t, "chat.completion", string(resp.Object))
	require.Equal(t, "qwen-72b", resp.Model)
	require.Len(t, resp.Choices, 1)
	require.Equal(t, llmsim.Answer("qwen-72b", q), resp.Choices[0].Message.Content)
	require.Equal(t, "assistant", string(resp.Choices[0].Message.Role))
	require.Equal(t, "stop", resp.Choices[0].FinishReason)
	require.Positive(t, resp.Usage.PromptTokens)
	require.Equal(t, int64(llmsim.EstimateTokens(resp.Choices[0].Message.Content)), resp.Usage.CompletionTokens)
	require.Equal(t, resp.Usage.PromptTokens+resp.Usage.CompletionTokens, resp.Usage.TotalTokens)

	r := rig.Resilience(t, resp.RawJSON())
	require.Equal(t, id, r.WorkflowID)
	require.Equal(t, "model", r.Source)
	require.False(t, r.Degraded)
	require.Equal(t, 1, r.AttemptCount)
	require.Len(t, r.Attempts, 1)
	require.Equal(t, "answer", r.Attempts[0].Decision)
	require.Empty(t, r.Classes)
	require.Equal(t, 1, d.Upstream(id).Attempts)

	// A preferred model of the ladder, and the array-of-parts content form.
	p := openai.ChatCompletionNewParams{Model: "qwen-14b", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("Two parts:"), openai.TextContentPart("where is it?"),
		}),
	}}
	resp, err = oc.Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	require.Equal(t, "qwen-14b", resp.Model)
	require.Equal(t, llmsim.Answer("qwen-14b", "Two parts:\nwhere is it?"), resp.Choices[0].Message.Content)
	// The visibility count that proves "nothing started" elsewhere sees
	// these two calls.
	require.Eventually(t, func() bool { return d.workflowsOnQueue() == 2 }, 30*time.Second, 100*time.Millisecond)
}

func TestModels(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokGlobex)
	page, err := oc.Models.List(ctx)
	require.NoError(t, err)
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{"qwen-72b", "qwen-14b", "llama-8b"}, ids)
	m, err := oc.Models.Get(ctx, "llama-8b")
	require.NoError(t, err)
	require.Equal(t, "llama-8b", m.ID)
	_, err = oc.Models.Get(ctx, "gpt-4o")
	require.Equal(t, http.StatusNotFound, apiError(t, err).StatusCode)
}

func TestStreamedCallKeepsAliveWhileRetrying(t *testing.T) {
	d := newDoor(t, func(o *frontdoor.Options) { o.KeepAlive = 200 * time.Millisecond })
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	// The first attempt is rate limited for 2 s: the stream is committed
	// and kept alive until the retry answers.
	q := "[[sim fault=rate_limited retry_after=2s times=1]] Please stream the delivery status of my order in a few words."
	p := params("u-stream", q)
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	var hr *http.Response
	a := accumulate(t, oc.Chat.Completions.NewStreaming(ctx, p, option.WithResponseInto(&hr)), nil)
	acc := a.acc

	id := request.Key("acme", "u-stream", "", msgs(q))
	require.Equal(t, id, hr.Header.Get("X-Workflow-Id"))
	want := llmsim.Answer("qwen-72b", q)
	require.Len(t, acc.Choices, 1)
	require.Equal(t, want, acc.Choices[0].Message.Content)
	require.Equal(t, "stop", acc.Choices[0].FinishReason)
	require.Equal(t, "chatcmpl-"+id, acc.ID)
	require.Greater(t, a.chunks, 3, "role, several content pieces, final, usage")
	require.Positive(t, acc.Usage.PromptTokens)
	require.Equal(t, int64(llmsim.EstimateTokens(want)), acc.Usage.CompletionTokens)

	// The source is known only at the end: it comes in the final chunk (and
	// as an HTTP trailer, which a client that stops at [DONE] may not read).
	r := rig.Resilience(t, a.last.RawJSON())
	require.Equal(t, "model", r.Source)
	require.Equal(t, []string{"rate_limited"}, r.Classes)
	require.Equal(t, 2, r.AttemptCount)
	require.Equal(t, "wait retry-after", r.Attempts[0].Decision)
	require.Equal(t, 2, d.Upstream(id).Attempts)
}

func TestStreamedCallThatFails(t *testing.T) {
	// The keep-alive interval is when the stream commits to 200: a refusal
	// before it is a plain 400, one after it an error event. 3 s leaves a
	// loaded machine time for the first case; the second waits 6 s.
	d := newDoor(t, func(o *frontdoor.Options) { o.KeepAlive = 3 * time.Second })
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)

	// Refused at once: a proper 400 before any event.
	stream := oc.Chat.Completions.NewStreaming(ctx, params("u-sfail", "[[sim fault=bad_request times=always]] Refuse me."))
	require.False(t, stream.Next())
	e := apiError(t, stream.Err())
	require.Equal(t, http.StatusBadRequest, e.StatusCode)
	require.Equal(t, "upstream_invalid_request", e.Code)

	// Refused after the stream was committed: an error event, raised by
	// the client.
	stream = oc.Chat.Completions.NewStreaming(ctx, params("u-sfail", "[[sim fault=bad_request latency=6s times=always]] Refuse me later."))
	n := 0
	for stream.Next() {
		n++
	}
	require.Equal(t, 1, n, "only the role chunk came before the error")
	require.ErrorContains(t, stream.Err(), "The model refused the request as invalid")
}

// The wire format of a stream that waits for its first token: the role
// chunk, keep-alive comments, then a chunk per delta with an id, the final
// chunk, then [DONE] (what proxies and every SSE parser see).
func TestStreamWireFormat(t *testing.T) {
	d := newDoor(t, func(o *frontdoor.Options) { o.KeepAlive = 100 * time.Millisecond })
	body := `{"model":"auto","stream":true,"user":"u-wire","messages":[{"role":"user","content":"[[sim fault=latency latency=1500ms]] Is it raining?"}]}`
	req, err := http.NewRequestWithContext(rig.Context(t, 2*time.Minute), http.MethodPost, d.ts.URL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tokAcme)
	req.Header.Set("Idempotency-Key", "wire-"+uuid.NewString()[:8])
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))

	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	require.NoError(t, sc.Err())
	require.True(t, strings.HasPrefix(lines[0], `data: {"id":"chatcmpl-llm-`), lines[0])
	require.Contains(t, lines[0], `"delta":{"role":"assistant","content":""}`)
	require.Equal(t, "data: [DONE]", lines[len(lines)-1])
	keepAlives, content := 0, 0
	for i, l := range lines[1 : len(lines)-1] {
		switch {
		case l == ": keep-alive":
			if content == 0 {
				keepAlives++
			}
		case strings.HasPrefix(l, ": "): // an attempt event
		case strings.HasPrefix(l, "id: "):
			content++
			require.True(t, strings.HasPrefix(lines[i+2], `data: {"id":"chatcmpl-llm-`), "an id line is followed by its chunk")
			require.Contains(t, lines[i+2], `"delta":{"content":`)
		case strings.HasPrefix(l, "data: {"):
		default:
			t.Fatalf("unexpected line %q", l)
		}
	}
	require.Positive(t, keepAlives, "keep-alive comments while the first token was awaited")
	require.Positive(t, content)
	require.Contains(t, lines[len(lines)-2], `"finish_reason":"stop"`)
	require.Contains(t, lines[len(lines)-2], `"x_resilience"`)
}

func TestUpstreamFailureAnsweredByFallback(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	for _, tc := range []struct {
		name, scenario, q, source, model string
		classes                          []string
	}{
		{"maintenance answered by the FAQ", "class-service_unavailable", "How do I get a refund for my order?",
			"faq", "durable-llm/faq", []string{"service_unavailable"}},
		{"a failing model answered by the next model", "", "[[sim fault=bad_gateway model=qwen-72b times=always]] Where is my parcel?",
			"fallback_model", "qwen-14b", []string{"server_error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.scenario != "" {
				prev := d.Sim.Scenario()
				sc, err := llmsim.BuiltinScenario(tc.scenario)
				require.NoError(t, err)
				require.NoError(t, d.Sim.SetScenario(sc))
				defer func() { require.NoError(t, d.Sim.SetScenario(prev)) }()
			}
			var hr *http.Response
			resp, err := oc.Chat.Completions.New(ctx, params("u-fb", tc.q), option.WithResponseInto(&hr))
			require.NoError(t, err)
			require.Equal(t, tc.source, hr.Header.Get("X-Resilience-Source"))
			require.Equal(t, "true", hr.Header.Get("X-Resilience-Degraded"))
			require.Equal(t, tc.model, resp.Model)
			require.NotEmpty(t, resp.Choices[0].Message.Content)
			r := rig.Resilience(t, resp.RawJSON())
			require.Equal(t, tc.source, r.Source)
			require.True(t, r.Degraded)
			require.Equal(t, tc.classes, r.Classes)
			require.NotEmpty(t, r.Reason)
			if tc.source == "faq" {
				require.NotEmpty(t, r.FAQID)
				require.Equal(t, 1, d.Upstream(r.WorkflowID).Attempts, "maintenance is not retried")
			}
		})
	}
}

func TestSameIdempotencyKeyMakesOneUpstreamCall(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme, option.WithHeader("Idempotency-Key", "order-42-refund"))
	id := request.ScopedKey("acme", "order-42-refund")
	q := "[[sim fault=latency latency=1s]] Can I get a refund for order 42?"

	// Two at once attach to one call; a third after it ended gets the
	// recorded answer.
	var wg sync.WaitGroup
	got := make([]*openai.ChatCompletion, 2)
	errs := make([]error, 2)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = oc.Chat.Completions.New(ctx, params("u-idem", q))
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	again, err := oc.Chat.Completions.New(ctx, params("u-idem", q))
	require.NoError(t, err)
	for _, c := range []*openai.ChatCompletion{got[1], again} {
		require.Equal(t, got[0].ID, c.ID)
		require.Equal(t, got[0].Choices[0].Message.Content, c.Choices[0].Message.Content)
	}
	require.Equal(t, "chatcmpl-"+id, got[0].ID)
	require.Equal(t, 1, d.Upstream(id).Attempts, "three requests with one key reached the upstream once")
}

func TestClientDisconnectDoesNotCancelTheCall(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme, option.WithHeader("Idempotency-Key", "leaving-early"))
	id := request.ScopedKey("acme", "leaving-early")
	q := "[[sim fault=latency latency=2s]] Will you still answer when I hang up?"

	_, err := oc.Chat.Completions.New(ctx, params("u-leave", q), option.WithRequestTimeout(300*time.Millisecond))
	require.Error(t, err, "the client gave up before the answer")

	resp, err := oc.Chat.Completions.New(ctx, params("u-leave", q))
	require.NoError(t, err)
	require.Equal(t, llmsim.Answer("qwen-72b", q), resp.Choices[0].Message.Content)
	require.Equal(t, "model", rig.Resilience(t, resp.RawJSON()).Source)
	require.Equal(t, 1, d.Upstream(id).Attempts, "the call went on and was fetched again, not run twice")
}

func TestTenantsWithTheSameKeyAreKeptApart(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	q := "What are your opening hours?"
	ids := map[string]string{}
	for _, tok := range []string{tokAcme, tokGlobex} {
		var hr *http.Response
		oc := d.openai(tok, option.WithHeader("Idempotency-Key", "shared-key-1"))
		_, err := oc.Chat.Completions.New(ctx, params("u-same", q), option.WithResponseInto(&hr))
		require.NoError(t, err)
		ids[tok] = hr.Header.Get("X-Workflow-Id")
	}
	require.Equal(t, request.ScopedKey("acme", "shared-key-1"), ids[tokAcme])
	require.Equal(t, request.ScopedKey("globex", "shared-key-1"), ids[tokGlobex])
	require.NotEqual(t, ids[tokAcme], ids[tokGlobex])
	require.Equal(t, 1, d.Upstream(ids[tokAcme]).Attempts)
	require.Equal(t, 1, d.Upstream(ids[tokGlobex]).Attempts, "two workflows, each called upstream once")

	// Without a key the derived keys differ by tenant too.
	var a, b *http.Response
	_, err := d.openai(tokAcme).Chat.Completions.New(ctx, params("u-same", q), option.WithResponseInto(&a))
	require.NoError(t, err)
	_, err = d.openai(tokGlobex).Chat.Completions.New(ctx, params("u-same", q), option.WithResponseInto(&b))
	require.NoError(t, err)
	require.NotEqual(t, a.Header.Get("X-Workflow-Id"), b.Header.Get("X-Workflow-Id"))

	// globex cannot read acme's call, whichever ID it tries.
	var out json.RawMessage
	for _, id := range []string{ids[tokAcme], a.Header.Get("X-Workflow-Id")} {
		err = d.openai(tokGlobex).Get(ctx, "calls/"+id, nil, &out)
		e := apiError(t, err)
		require.Equal(t, http.StatusNotFound, e.StatusCode)
		require.Equal(t, "call_not_found", e.Code)
		require.NotContains(t, e.RawJSON(), "acme")
	}
	// Its owner can.
	var hr *http.Response
	require.NoError(t, d.openai(tokAcme).Get(ctx, "calls/"+ids[tokAcme], nil, &out, option.WithResponseInto(&hr)))
	require.Equal(t, http.StatusOK, hr.StatusCode)
	require.Equal(t, llmsim.Answer("qwen-72b", q), gjsonContent(t, out))
	// A workflow not started by the front door is nobody's.
	run, err := d.Calls.Start(ctx, workflows.CallRequest{UserID: "direct", Messages: msgs(q)})
	require.NoError(t, err)
	e := apiError(t, d.openai(tokAcme).Get(ctx, "calls/"+run.GetID(), nil, &out))
	require.Equal(t, http.StatusNotFound, e.StatusCode)
}

func gjsonContent(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var c openai.ChatCompletion
	require.NoError(t, json.Unmarshal(raw, &c))
	require.Len(t, c.Choices, 1)
	return c.Choices[0].Message.Content
}

func TestBadTokens(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	d := newDoor(t, func(o *frontdoor.Options) { o.Logger = slog.New(zapslog.NewHandler(core)) })
	ctx := rig.Context(t, 2*time.Minute)
	for _, tc := range []struct {
		name string
		opts []option.RequestOption
		code string
	}{
		{"unknown token", []option.RequestOption{option.WithAPIKey("tok-acme-but-wrong")}, "invalid_api_key"},
		{"another scheme", []option.RequestOption{option.WithHeader("Authorization", "Basic dG9rLWFjbWU6")}, "missing_api_key"},
		{"no token", []option.RequestOption{option.WithHeaderDel("Authorization")}, "missing_api_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oc := d.openai(tokAcme, tc.opts...)
			_, err := oc.Chat.Completions.New(ctx, params("u-token", "Who am I?"))
			e := apiError(t, err)
			require.Equal(t, http.StatusUnauthorized, e.StatusCode)
			require.Equal(t, tc.code, e.Code)
			require.Equal(t, "authentication_error", e.Type)
			require.NotContains(t, e.RawJSON(), "tok-acme")
			_, err = oc.Models.List(ctx)
			require.Equal(t, http.StatusUnauthorized, apiError(t, err).StatusCode)
		})
	}
	// A good token too, then: one log line per request, none with a token.
	_, err := d.openai(tokAcme).Models.List(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, logs.Len())
	for _, entry := range logs.All() {
		line, err := json.Marshal(entry.ContextMap())
		require.NoError(t, err)
		require.NotContains(t, entry.Message+string(line), "tok-", "a token in the log")
	}
	require.Equal(t, "acme", logs.All()[6].ContextMap()["tenant"])
	// No workflow for any tenant.
	for _, tenant := range []string{"", "acme", "globex"} {
		d.requireNoWorkflow(request.Key(tenant, "u-token", "", msgs("Who am I?")))
	}
}

func TestBadRequestsStartNothing(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	wantKey := request.Key("acme", "u-bad", "", msgs("Where is it?"))
	raw := func(body string) []option.RequestOption {
		return []option.RequestOption{option.WithRequestBody("application/json", []byte(body))}
	}
	for _, tc := range []struct {
		name   string
		p      openai.ChatCompletionNewParams
		opts   []option.RequestOption
		status int
		param  string
		code   string
		key    string // the workflow ID the request would have had; "" when none can be derived
	}{
		{"malformed JSON", params("u-bad", "x"), raw(`{"model":"auto","messages":[{"role":"user","content":"Hi"}`), 400, "", "invalid_json", ""},
		{"not an object", params("u-bad", "x"), raw(`["Hi"]`), 400, "", "invalid_json", ""},
		{"content of the wrong type", params("u-bad", "x"), raw(`{"messages":[{"role":"user","content":42}]}`), 400, "messages[0].content", "invalid_value", ""},
		{"temperature as a string", params("u-bad", "x"), raw(`{"temperature":"hot","messages":[{"role":"user","content":"Hi"}]}`), 400, "temperature", "invalid_value", ""},
		{"audio part", params("u-bad", "x"), raw(`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA"}}]}]}`), 400, "messages[0].content[0].type", "invalid_value", ""},
		{"image over the size cap", params("u-bad", "x"), raw(`{"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("A", 400<<10) + `"}}]}]}`), 400, "messages[0].content[1].image_url.url", "invalid_value", ""},
		{"unknown field", params("u-bad", "x"), raw(`{"messages":[{"role":"user","content":"Hi"}],"mirostat":2}`), 400, "mirostat", "invalid_value", ""},
		{"an unknown tool in tool_choice", params("u-bad", "x"), raw(`{"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"lookup_order"}}],"tool_choice":{"type":"function","function":{"name":"cancel_order"}}}`), 400, "tool_choice", "invalid_value", ""},
		{"tools of the wrong type", params("u-bad", "x"), raw(`{"messages":[{"role":"user","content":"Hi"}],"tools":"lookup_order"}`), 400, "tools", "invalid_value", ""},
		{"no messages", params("u-bad", "x"), raw(`{"model":"auto"}`), 400, "messages", "invalid_value", ""},
		{"unknown model", withModel(params("u-bad", "Where is it?"), "gpt-4o"), nil, 400, "model", "model_not_found", wantKey},
		{"temperature out of range", withTemp(params("u-bad", "Where is it?"), 5), nil, 400, "temperature", "invalid_value", wantKey},
		{"negative max_completion_tokens", withMaxTokens(params("u-bad", "Where is it?"), -1), nil, 400, "max_completion_tokens", "invalid_value", wantKey},
		{"last message not from the user", openai.ChatCompletionNewParams{Model: "auto", Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("Hi"), openai.AssistantMessage("Hello!")}}, nil, 400, "messages[1].role", "invalid_value",
			request.Key("acme", "", "", []request.Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"}})},
		{"bad Idempotency-Key", params("u-bad", "Where is it?"), []option.RequestOption{option.WithHeader("Idempotency-Key", "has a space")}, 400, "Idempotency-Key", "invalid_value", wantKey},
		{"bad deadline", params("u-bad", "Where is it?"), []option.RequestOption{option.WithHeader("X-Deadline-Ms", "10")}, 400, "X-Deadline-Ms", "invalid_value", wantKey},
		{"n above 1", withN(params("u-bad", "Where is it?"), 3), nil, 400, "n", "invalid_value", wantKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := oc.Chat.Completions.New(ctx, tc.p, tc.opts...)
			e := apiError(t, err)
			require.Equal(t, tc.status, e.StatusCode, e.RawJSON())
			require.Equal(t, "invalid_request_error", e.Type)
			require.Equal(t, tc.param, e.Param, e.RawJSON())
			require.Equal(t, tc.code, e.Code)
			if tc.param != "" {
				require.Contains(t, e.Message, tc.param, "the message names the field")
			}
			if tc.key != "" {
				d.requireNoWorkflow(tc.key)
			}
		})
	}
	d.requireNoWorkflowOnQueue()
}

// requireNoWorkflowOnQueue checks visibility: nothing ran on the test's
// task queue.
func (d *door) requireNoWorkflowOnQueue() {
	d.t.Helper()
	require.Zero(d.t, d.workflowsOnQueue(), "workflows were started on %s", d.TaskQueue)
}

func (d *door) workflowsOnQueue() int64 {
	d.t.Helper()
	n, err := d.Client.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: "default", Query: fmt.Sprintf("TaskQueue = %q AND WorkflowType = %q", d.TaskQueue, workflows.WorkflowName)})
	require.NoError(d.t, err)
	return n.GetCount()
}

func withModel(p openai.ChatCompletionNewParams, m string) openai.ChatCompletionNewParams {
	p.Model = m
	return p
}

func withTemp(p openai.ChatCompletionNewParams, v float64) openai.ChatCompletionNewParams {
	p.Temperature = openai.Float(v)
	return p
}

func withMaxTokens(p openai.ChatCompletionNewParams, v int64) openai.ChatCompletionNewParams {
	p.MaxCompletionTokens = openai.Int(v)
	return p
}

func withN(p openai.ChatCompletionNewParams, n int64) openai.ChatCompletionNewParams {
	p.N = openai.Int(n)
	return p
}

func TestOversizeBodies(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	for _, tc := range []struct {
		name  string
		size  int
		param string
	}{
		{"body over the HTTP cap", 3 << 20, ""},
		{"prompt over the 1 MiB limit", 1<<20 + 1024, "messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := strings.Repeat("a", tc.size)
			_, err := oc.Chat.Completions.New(ctx, params("u-big", q))
			e := apiError(t, err)
			require.Equal(t, http.StatusRequestEntityTooLarge, e.StatusCode)
			require.Equal(t, "request_too_large", e.Code)
			require.Equal(t, tc.param, e.Param)
			d.requireNoWorkflow(request.Key("acme", "u-big", "", msgs(q)))
		})
	}
	d.requireNoWorkflowOnQueue()
}

func TestUpstreamInvalidRequestIs400(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	var hr *http.Response
	_, err := d.openai(tokAcme).Chat.Completions.New(ctx,
		params("u-400", "[[sim fault=bad_request times=always]] Something the model refuses."), option.WithResponseInto(&hr))
	e := apiError(t, err)
	require.Equal(t, http.StatusBadRequest, e.StatusCode, e.RawJSON())
	require.Equal(t, "upstream_invalid_request", e.Code)
	require.Equal(t, "invalid_request_error", e.Type)
	require.Contains(t, e.Message, "400", "the upstream's reason")
	body, err := io.ReadAll(e.Response.Body)
	require.NoError(t, err)
	r := rig.Resilience(t, string(body))
	require.Equal(t, frontdoor.StatusFailed, r.Status)
	require.Equal(t, []string{"invalid_request"}, r.Classes)
	require.Equal(t, 1, d.Upstream(r.WorkflowID).Attempts, "an invalid request is not retried")
}

func TestAsyncMode(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokGlobex)
	q := "[[sim fault=latency latency=4s]] Please answer later: where is my order?"
	var hr *http.Response
	accepted, err := oc.Chat.Completions.New(ctx, params("u-async", q),
		option.WithHeader("Prefer", "respond-async"), option.WithResponseInto(&hr))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, hr.StatusCode)
	require.Equal(t, "respond-async", hr.Header.Get("Preference-Applied"))
	id := request.Key("globex", "u-async", "", msgs(q))
	require.Equal(t, id, hr.Header.Get("X-Workflow-Id"))
	require.Equal(t, "/v1/calls/"+id, hr.Header.Get("Location"))
	var st frontdoor.CallStatus
	require.NoError(t, json.Unmarshal([]byte(accepted.RawJSON()), &st))
	require.Equal(t, frontdoor.CallStatus{ID: id, Object: "chat.completion.call", Status: "running", URL: "/v1/calls/" + id}, st)

	// Poll the URL with the same client: 202 while the upstream is slow,
	// then 200 with the completion.
	var codes []int
	var body json.RawMessage
	for {
		var pr *http.Response
		require.NoError(t, oc.Get(ctx, strings.TrimPrefix(st.URL, "/v1/"), nil, &body, option.WithResponseInto(&pr)))
		codes = append(codes, pr.StatusCode)
		if pr.StatusCode == http.StatusOK {
			break
		}
		require.Equal(t, http.StatusAccepted, pr.StatusCode)
		var running frontdoor.CallStatus
		require.NoError(t, json.Unmarshal(body, &running))
		require.Equal(t, "running", running.Status)
		require.NotNil(t, running.Resilience, "the state so far, from the call's search attributes")
		require.Equal(t, frontdoor.StatusRunning, running.Resilience.Status)
		require.Equal(t, id, running.Resilience.WorkflowID)
		time.Sleep(250 * time.Millisecond)
	}
	require.Equal(t, http.StatusAccepted, codes[0], "the first poll came while the upstream was still slow")
	require.Equal(t, llmsim.Answer("qwen-72b", q), gjsonContent(t, body))
	require.Equal(t, "model", rig.Resilience(t, string(body)).Source)
	require.Equal(t, 1, d.Upstream(id).Attempts)
}

func TestTemporalUnreachableIs503(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	c, err := client.NewLazyClient(client.Options{HostPort: addr, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	require.NoError(t, err)
	defer c.Close()
	tenants, err := frontdoor.ParseTokens(tokens)
	require.NoError(t, err)
	h, err := frontdoor.New(frontdoor.Options{Client: &llmclient.Client{Temporal: c}, Tenants: tenants,
		StartTimeout: 2 * time.Second, LookupTimeout: 2 * time.Second, RetryAfter: 3 * time.Second})
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	defer ts.Close()
	oc := rig.OpenAI(ts.URL, tokAcme)
	ctx := rig.Context(t, 2*time.Minute)

	_, err = oc.Chat.Completions.New(ctx, params("u-down", "Anyone there?"))
	e := apiError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, e.StatusCode, e.RawJSON())
	require.Equal(t, "3", e.Response.Header.Get("Retry-After"))
	require.Equal(t, "temporal_unavailable", e.Code)
	require.NotContains(t, e.Message, addr, "internal addresses stay in the log")

	var out json.RawMessage
	e = apiError(t, oc.Get(ctx, "calls/"+request.Key("acme", "u-down", "", nil), nil, &out))
	require.Equal(t, http.StatusServiceUnavailable, e.StatusCode)
}

func TestEncryptedPayloads(t *testing.T) {
	srv := shared.Server(t)
	secret := make([]byte, codec.KeySize)
	for i := range secret {
		secret[i] = byte(i * 7)
	}
	cd, err := codec.New(codec.Key{ID: "k1", Secret: secret})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		DataConverter: cd.DataConverter(), FailureConverter: cd.FailureConverter()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	d := newDoorOn(t, rig.Options{Client: c}, nil) // the client carries the codec
	ctx := rig.Context(t, 2*time.Minute)

	q := "Is my data encrypted at rest?"
	var hr *http.Response
	_, err = d.openai(tokAcme).Chat.Completions.New(ctx, params("u-enc", q),
		option.WithHeader("Prefer", "respond-async"), option.WithResponseInto(&hr))
	require.NoError(t, err)
	id := hr.Header.Get("X-Workflow-Id")

	// The input in history is ciphertext…
	hist, err := srv.Client().WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
		Namespace: "default", Execution: &commonpb.WorkflowExecution{WorkflowId: id}, MaximumPageSize: 1})
	require.NoError(t, err)
	in := hist.GetHistory().GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	require.Equal(t, "binary/encrypted", string(in.GetMetadata()["encoding"]))
	require.NotContains(t, string(in.GetData()), "acme")

	// …yet the owner reads the call and the other tenant still cannot.
	var body json.RawMessage
	require.Eventually(t, func() bool {
		var pr *http.Response
		err := d.openai(tokAcme).Get(ctx, "calls/"+id, nil, &body, option.WithResponseInto(&pr))
		return err == nil && pr.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond)
	require.Equal(t, llmsim.Answer("qwen-72b", q), gjsonContent(t, body))
	e := apiError(t, d.openai(tokGlobex).Get(ctx, "calls/"+id, nil, &body))
	require.Equal(t, http.StatusNotFound, e.StatusCode)

	// A front door without the key cannot tell whose call it is: it says so
	// instead of answering 404.
	tenants, err := frontdoor.ParseTokens(tokens)
	require.NoError(t, err)
	core, logs := observer.New(zap.InfoLevel)
	h, err := frontdoor.New(frontdoor.Options{Client: &llmclient.Client{Temporal: srv.Client(), TaskQueue: d.TaskQueue}, Tenants: tenants,
		Logger: slog.New(zapslog.NewHandler(core))})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/calls/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+tokAcme)
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
	errs := logs.FilterMessage("cannot read a call").All()
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].ContextMap()["error"], "payload keys")
}

func TestCanceledCallIsGone(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme, option.WithHeader("Idempotency-Key", "to-be-canceled"))
	q := "[[sim fault=latency latency=5s]] A question an operator will cancel."
	var hr *http.Response
	_, err := oc.Chat.Completions.New(ctx, params("u-cancel", q), option.WithHeader("Prefer", "respond-async"), option.WithResponseInto(&hr))
	require.NoError(t, err)
	id := hr.Header.Get("X-Workflow-Id")
	require.Eventually(t, func() bool { return d.Upstream(id).Attempts == 1 }, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, d.Client.CancelWorkflow(ctx, id, ""))

	var out json.RawMessage
	require.Eventually(t, func() bool {
		err := oc.Get(ctx, "calls/"+id, nil, &out)
		var e *openai.Error
		return errors.As(err, &e) && e.StatusCode == http.StatusGone && e.Code == "call_canceled"
	}, 30*time.Second, 100*time.Millisecond)
}

// TestHedgeReplaceThroughTheFrontDoor: under hedge.replace the OpenAI
// client gets the hedge's quick answer long before the slow first
// model's, marked replaceable (x_resilience status running); the call's
// URL then serves the first model's answer, which records the quick one
// it replaced.
func TestHedgeReplaceThroughTheFrontDoor(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	d := newDoorOn(t, rig.Options{Policy: func(c *config.Config) {
		c.Hedge.After, c.Hedge.Model, c.Hedge.Budget, c.Hedge.Replace = "400ms", "llama-8b", 1, true
	}}, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	// Far slower than the hedge: a slow machine's scheduling cannot
	// decide the race (and under its 8 s first_token_timeout).
	q := "[[sim fault=latency latency=6s model=qwen-72b times=1]] Where is my order 44?"
	start := time.Now()
	var hr *http.Response
	resp, err := oc.Chat.Completions.New(ctx, params("u-replace", q), option.WithResponseInto(&hr))
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "the quick answer waited for the slow first model")
	require.Equal(t, "llama-8b", resp.Model)
	require.True(t, strings.HasPrefix(resp.Choices[0].Message.Content, "[llama-8b] "), resp.Choices[0].Message.Content)
	r := rig.Resilience(t, resp.RawJSON())
	require.True(t, r.Replaceable)
	require.Equal(t, frontdoor.StatusRunning, r.Status)
	id := hr.Header.Get("X-Workflow-Id")

	var body json.RawMessage
	for {
		var pr *http.Response
		require.NoError(t, oc.Get(ctx, "calls/"+id, nil, &body, option.WithResponseInto(&pr)))
		if pr.StatusCode == http.StatusOK {
			break
		}
		require.Equal(t, http.StatusAccepted, pr.StatusCode)
		time.Sleep(250 * time.Millisecond)
	}
	require.Equal(t, llmsim.Answer("qwen-72b", q), gjsonContent(t, body))
	final := rig.Resilience(t, string(body))
	require.Equal(t, frontdoor.StatusCompleted, final.Status)
	require.False(t, final.Replaceable)
	require.NotNil(t, final.Replaced)
	require.Equal(t, "llama-8b", final.Replaced.Model)
	require.Equal(t, resp.Choices[0].Message.Content, final.Replaced.Content)
}
