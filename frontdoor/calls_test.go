package frontdoor_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"google.golang.org/grpc"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/workflows"
)

// rpcCounter counts the Temporal RPCs a client makes, by method name;
// long polls for a call's end (a result's wait, which the front door's
// in-flight accounting keeps open per async call) are not counted.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if h, ok := req.(*workflowservice.GetWorkflowExecutionHistoryRequest); ok && h.GetWaitNewEvent() {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c.mu.Lock()
	c.n[method[strings.LastIndex(method, "/")+1:]]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the counts since the last take of the methods that read
// calls, and starts counting again.
func (c *rpcCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, m := range []string{"DescribeWorkflowExecution", "GetWorkflowExecutionHistory", "QueryWorkflow", "PollWorkflowExecutionUpdate"} {
		if c.n[m] > 0 {
			out[m] = c.n[m]
		}
	}
	c.n = map[string]int{}
	return out
}

// countingClient is a client of the shared dev server whose RPCs are
// counted.
func countingClient(t *testing.T) (client.Client, *rpcCounter) {
	t.Helper()
	rc := &rpcCounter{n: map[string]int{}}
	c, err := client.Dial(client.Options{
		HostPort: shared.Server(t).FrontendHostPort(),
		Logger:   log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: client.ConnectionOptions{
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(rc.intercept)},
		},
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, rc
}

// noWorker points the front door at a task queue nobody polls, with
// short margins: its calls wait for a worker that never comes.
func noWorker(margins time.Duration) func(o *frontdoor.Options) {
	return func(o *frontdoor.Options) {
		o.Client = &llmclient.Client{Temporal: o.Client.Temporal, TaskQueue: "nobody-polls-" + uuid.NewString()[:8], ExecutionMargin: margins}
		o.WaitMargin = margins
	}
}

// rawPost sends a chat completion with headers and returns the status,
// the body and how long it took.
func (d *door) rawPost(ctx context.Context, body string, headers map[string]string) (int, string, time.Duration) {
	d.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.ts.URL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(d.t, err)
	req.Header.Set("Authorization", "Bearer "+tokAcme)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return resp.StatusCode, string(b), time.Since(start)
}

// callURL sends method to /v1/calls/{id} with a tenant's token.
func (d *door) callURL(ctx context.Context, method, token, id string) (int, string) {
	d.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, d.ts.URL+"/v1/calls/"+id, nil)
	require.NoError(d.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return resp.StatusCode, string(b)
}

// TestReusedIdempotencyKeyWithAnotherRequestIs422: an Idempotency-Key names
// one request. Sent again with another question, model or temperature it
// is refused with 422 idempotency_key_reused, naming the key, instead of
// the first request's answer; the same request again gets the answer, and
// without a key, requests that differ in any answer-changing field are
// different calls.
func TestReusedIdempotencyKeyWithAnotherRequestIs422(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	key := "refund-" + uuid.NewString()[:8]
	oc := d.openai(tokAcme, option.WithHeader("Idempotency-Key", key))
	q := "Can I get a refund for order 42?"
	first, err := oc.Chat.Completions.New(ctx, params("u-reuse", q))
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		p    openai.ChatCompletionNewParams
		opts []option.RequestOption
	}{
		{"another question", params("u-reuse", "Can I get a refund for order 43?"), nil},
		{"another model", withModel(params("u-reuse", q), "qwen-14b"), nil},
		{"another temperature", withTemp(params("u-reuse", q), 0.1), nil},
		{"another max_tokens", withMaxTokens(params("u-reuse", q), 64), nil},
		{"another scenario", params("u-reuse", q), []option.RequestOption{option.WithHeader(frontdoor.HeaderScenario, "finance")}},
		{"another deadline", params("u-reuse", q), []option.RequestOption{option.WithHeader(frontdoor.HeaderDeadlineMS, "30000")}},
		{"respond-async", params("u-reuse", "Something else entirely"), []option.RequestOption{option.WithHeader("Prefer", "respond-async")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := oc.Chat.Completions.New(ctx, tc.p, tc.opts...)
			e := apiError(t, err)
			require.Equal(t, http.StatusUnprocessableEntity, e.StatusCode, e.RawJSON())
			require.Equal(t, "idempotency_key_reused", e.Code)
			require.Equal(t, "Idempotency-Key", e.Param)
			require.Contains(t, e.Message, `"`+key+`"`, "the error names the key")
		})
	}

	again, err := oc.Chat.Completions.New(ctx, params("u-reuse", q))
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, first.Choices[0].Message.Content, again.Choices[0].Message.Content)

	t.Run("derived keys differ with every answer-changing field", func(t *testing.T) {
		plain := d.openai(tokAcme)
		seen := map[string]string{}
		for name, p := range map[string]openai.ChatCompletionNewParams{
			"base":        params("u-derived", q),
			"model":       withModel(params("u-derived", q), "qwen-14b"),
			"temperature": withTemp(params("u-derived", q), 0.1),
			"max_tokens":  withMaxTokens(params("u-derived", q), 64),
		} {
			var hr *http.Response
			_, err := plain.Chat.Completions.New(ctx, p, option.WithResponseInto(&hr))
			require.NoError(t, err, name)
			id := hr.Header.Get(frontdoor.HeaderWorkflowID)
			require.NotContains(t, seen, id, "%s reached the call of %s", name, seen[id])
			seen[id] = name
		}
	})
}

// TestGetCallIsOneDescribe: polling a call is one Describe: no history
// read, no query to a worker (a call no worker took answers at once),
// and the owner comes from the call's memo, so another tenant's poll of
// the same call is answered exactly like a poll of a call that does not
// exist.
func TestGetCallIsOneDescribe(t *testing.T) {
	c, rc := countingClient(t)
	// Only the front door's RPCs are counted: the worker (its guard sync,
	// its rule states) polls on a client of its own.
	d := newDoor(t, func(o *frontdoor.Options) {
		noWorker(time.Minute)(o)
		o.Client.Temporal = c
	})
	ctx := rig.Context(t, 2*time.Minute)
	q := "Answer me later, please."
	var hr *http.Response
	_, err := d.openai(tokAcme).Chat.Completions.New(ctx, params("u-poll", q),
		option.WithHeader("Prefer", "respond-async"), option.WithResponseInto(&hr))
	require.NoError(t, err)
	id := hr.Header.Get(frontdoor.HeaderWorkflowID)
	require.Equal(t, request.Key("acme", "u-poll", "", msgs(q)), id)
	t.Cleanup(func() { _ = d.Client.TerminateWorkflow(context.Background(), id, "", "test done") })
	// The front door watches an async call in the background, to free its
	// in-flight slot when it ends; the watch's first read (a Describe for
	// the run ID, then a long poll) is not a poll's.
	require.Eventually(t, func() bool { return rc.take()["DescribeWorkflowExecution"] > 0 },
		10*time.Second, 10*time.Millisecond, "the front door never watched the async call")

	for i := 0; i < 3; i++ {
		rc.take()
		start := time.Now()
		status, body := d.callURL(ctx, http.MethodGet, tokAcme, id)
		require.Equal(t, http.StatusAccepted, status, body)
		require.Equal(t, map[string]int{"DescribeWorkflowExecution": 1}, rc.take(), "poll %d", i)
		require.Less(t, time.Since(start), 2*time.Second, "no query waits for a worker")
		var st frontdoor.CallStatus
		require.NoError(t, json.Unmarshal([]byte(body), &st))
		require.Equal(t, frontdoor.StatusRunning, st.Status)
		require.NotNil(t, st.Resilience)
		require.Equal(t, id, st.Resilience.WorkflowID)
	}

	otherStatus, other := d.callURL(ctx, http.MethodGet, tokGlobex, id)
	unknownID := request.Key("acme", "u-nobody", "", msgs("Never asked."))
	unknownStatus, unknown := d.callURL(ctx, http.MethodGet, tokAcme, unknownID)
	require.Equal(t, http.StatusNotFound, otherStatus)
	require.Equal(t, http.StatusNotFound, unknownStatus)
	require.Equal(t, unknown, strings.ReplaceAll(other, id, unknownID), "another tenant's call looks like no call at all")

	// An ended call: still one Describe; its close event is read (a long
	// poll, not counted) by the run ID the Describe gave.
	require.NoError(t, d.Client.TerminateWorkflow(ctx, id, "", "ended for the poll"))
	rc.take()
	status, body := d.callURL(ctx, http.MethodGet, tokAcme, id)
	require.NotEqual(t, http.StatusAccepted, status, body)
	require.Equal(t, map[string]int{"DescribeWorkflowExecution": 1}, rc.take(), "poll of the ended call")
}

// TestDeleteCancelsTheTenantsOwnCall: DELETE /v1/calls/{id} cancels the
// tenant's running call (202 canceling, then the call's URL answers 410
// call_canceled); another tenant's DELETE of it is the 404 of an unknown
// call and cancels nothing; a DELETE of an ended call is a 409.
func TestDeleteCancelsTheTenantsOwnCall(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	q := "[[sim fault=latency latency=20s]] A question its caller will cancel."
	var hr *http.Response
	_, err := d.openai(tokAcme).Chat.Completions.New(ctx, params("u-delete", q),
		option.WithHeader("Prefer", "respond-async"), option.WithResponseInto(&hr))
	require.NoError(t, err)
	id := hr.Header.Get(frontdoor.HeaderWorkflowID)

	status, body := d.callURL(ctx, http.MethodDelete, tokGlobex, id)
	require.Equal(t, http.StatusNotFound, status, body)
	require.Contains(t, body, "call_not_found")
	status, _ = d.callURL(ctx, http.MethodGet, tokAcme, id)
	require.Equal(t, http.StatusAccepted, status, "another tenant's DELETE left the call running")

	status, body = d.callURL(ctx, http.MethodDelete, tokAcme, id)
	require.Equal(t, http.StatusAccepted, status, body)
	var st frontdoor.CallStatus
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, frontdoor.CallStatus{ID: id, Object: "chat.completion.call", Status: frontdoor.StatusCanceling, URL: "/v1/calls/" + id}, st)

	start := time.Now()
	require.Eventually(t, func() bool {
		status, body = d.callURL(ctx, http.MethodGet, tokAcme, id)
		return status == http.StatusGone && strings.Contains(body, "call_canceled")
	}, 15*time.Second, 100*time.Millisecond, "last answer %d %s", status, body)
	require.Less(t, time.Since(start), 15*time.Second, "canceled well before the upstream's 20 s")

	status, body = d.callURL(ctx, http.MethodDelete, tokAcme, id)
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, "call_not_running")
}

// TestCallWithNoWorkerEndsInBoundedTime: with no worker polling, a plain
// and a streamed request end soon after the call's deadline plus the
// margins, with an OpenAI-shaped error that names the call and says that
// the same request (same Idempotency-Key) gets it again, instead of
// hanging forever.
func TestCallWithNoWorkerEndsInBoundedTime(t *testing.T) {
	d := newDoor(t, noWorker(time.Second))
	ctx := rig.Context(t, 2*time.Minute)
	for _, tc := range []struct{ name, stream string }{{"plain", "false"}, {"streamed", "true"}} {
		t.Run(tc.name, func(t *testing.T) {
			key := "nobody-home-" + uuid.NewString()[:8]
			id := request.ScopedKey("acme", key)
			status, body, took := d.rawPost(ctx,
				`{"model":"auto","stream":`+tc.stream+`,"messages":[{"role":"user","content":"Is anybody there?"}]}`,
				map[string]string{"Idempotency-Key": key, frontdoor.HeaderDeadlineMS: "1000"})
			t.Logf("after %v: %d %s", took.Round(time.Millisecond), status, body)
			require.Less(t, took, 20*time.Second)
			require.Equal(t, http.StatusGatewayTimeout, status, body)
			var e struct {
				Error struct{ Message, Type, Code string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &e))
			require.Equal(t, "call_timed_out", e.Error.Code)
			require.Equal(t, "server_error", e.Error.Type)
			require.Contains(t, e.Error.Message, id, "the error names the call")
			require.Contains(t, e.Error.Message, "same request (same Idempotency-Key")
		})
	}
}

// TestWaitIsBoundedForACallWithoutTimeout: a call with no execution
// timeout (started by an older client) and no worker does not hold a
// request forever either: the wait ends at the deadline plus the margins
// with 504 call_still_running, which names the call and says the same
// request attaches to it.
func TestWaitIsBoundedForACallWithoutTimeout(t *testing.T) {
	d := newDoor(t, noWorker(time.Second))
	ctx := rig.Context(t, 2*time.Minute)
	key := "old-call-" + uuid.NewString()[:8]
	id := request.ScopedKey("acme", key)
	req := workflows.CallRequest{Tenant: "acme", Messages: msgs("Still there?"), DeadlineMS: 1000, IdempotencyKey: key}
	_, err := d.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls-old-" + uuid.NewString()[:8]},
		workflows.WorkflowName, req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Client.TerminateWorkflow(context.Background(), id, "", "test done") })

	for _, stream := range []string{"false", "true"} {
		status, body, took := d.rawPost(ctx,
			`{"model":"auto","stream":`+stream+`,"messages":[{"role":"system","content":"You are a support agent."},{"role":"user","content":"Still there?"}]}`,
			map[string]string{"Idempotency-Key": key, frontdoor.HeaderDeadlineMS: "1000"})
		t.Logf("stream %s after %v: %d %s", stream, took.Round(time.Millisecond), status, body)
		require.GreaterOrEqual(t, took, 2*time.Second, "waited for the deadline and margins")
		require.Less(t, took, 15*time.Second)
		require.Equal(t, http.StatusGatewayTimeout, status, body)
		require.Contains(t, body, `"code":"call_still_running"`)
		require.Contains(t, body, id, "the error names the call")
		require.Contains(t, body, "same request (same Idempotency-Key")
	}
}
