package frontdoor_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/workflows"
)

// sseEvent is one event of a raw SSE stream: its id and data lines, and
// the comments before it.
type sseEvent struct {
	ID       string
	Data     string
	Comments []string
}

// content is the delta content of a chunk event ("" for other events).
func (e sseEvent) content(t *testing.T) string {
	t.Helper()
	c, err := chunkContent(e.Data)
	require.NoError(t, err)
	return c
}

// chunkContent is the delta content of a chunk event's data ("" for
// other events).
func chunkContent(data string) (string, error) {
	if !strings.HasPrefix(data, "{") {
		return "", nil
	}
	var c struct {
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return "", fmt.Errorf("%w: %s", err, data)
	}
	if len(c.Choices) == 0 {
		return "", nil
	}
	return c.Choices[0].Delta.Content, nil
}

// readSSE hands each event of body to fn until fn returns false or the
// body ends; comments after the last event come as an event without data.
func readSSE(t *testing.T, body io.Reader, fn func(sseEvent) bool) {
	t.Helper()
	require.NoError(t, scanSSE(body, fn))
}

// scanSSE is readSSE without a test: a line that is not SSE is an error.
func scanSSE(body io.Reader, fn func(sseEvent) bool) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var e sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if e.Data != "" || e.ID != "" {
				if !fn(e) {
					return nil
				}
				e = sseEvent{}
			}
		case strings.HasPrefix(line, ":"):
			e.Comments = append(e.Comments, strings.TrimSpace(line[1:]))
		case strings.HasPrefix(line, "id: "):
			e.ID = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			e.Data += line[len("data: "):]
		default:
			return fmt.Errorf("unexpected SSE line %q", line)
		}
	}
	if len(e.Comments) > 0 {
		fn(e)
	}
	return nil // a body cut short shows in what fn was handed
}

// postStream sends a raw streamed request with tenant acme's token.
func (d *door) postStream(ctx context.Context, body string, hdr map[string]string) *http.Response {
	d.t.Helper()
	resp, err := d.sendStream(ctx, body, hdr)
	require.NoError(d.t, err)
	return resp
}

// sendStream is postStream without a test (safe off the test's goroutine).
func (d *door) sendStream(ctx context.Context, body string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.ts.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tokAcme)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return http.DefaultClient.Do(req)
}

func streamBody(user, question string) string {
	b, _ := json.Marshal(map[string]any{"model": "auto", "stream": true, "user": user,
		"messages": []map[string]string{{"role": "user", "content": question}}})
	return string(b)
}

// running reports whether the call's workflow is still running.
func (d *door) running(ctx context.Context, id string) bool {
	d.t.Helper()
	desc, err := d.Client.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(d.t, err)
	return desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// result waits for the call's result.
func (d *door) result(ctx context.Context, id string) workflows.CallResult {
	d.t.Helper()
	var res workflows.CallResult
	require.NoError(d.t, d.Client.GetWorkflow(ctx, id, "").Get(ctx, &res))
	return res
}

// sseStream is what a raw streamed request received.
type sseStream struct {
	workflowID string // X-Workflow-Id
	events     []sseEvent
	text       string // the content of its chunks
}

// readStream sends a raw streamed request, requires a 200 and reads its
// events, handing each to more (if not nil) until more returns false.
func (d *door) readStream(ctx context.Context, body string, hdr map[string]string, more func(sseEvent) bool) sseStream {
	d.t.Helper()
	resp := d.postStream(ctx, body, hdr)
	defer resp.Body.Close()
	require.Equal(d.t, http.StatusOK, resp.StatusCode)
	s := sseStream{workflowID: resp.Header.Get("X-Workflow-Id")}
	var text strings.Builder
	readSSE(d.t, resp.Body, func(e sseEvent) bool {
		s.events = append(s.events, e)
		text.WriteString(e.content(d.t))
		return more == nil || more(e)
	})
	s.text = text.String()
	return s
}

// chunkStream is the official client's stream of chunks.
type chunkStream interface {
	Next() bool
	Current() openai.ChatCompletionChunk
	Err() error
}

// accumulated is what an official client's stream delivered.
type accumulated struct {
	acc    openai.ChatCompletionAccumulator
	chunks int
	last   openai.ChatCompletionChunk // the one with the finish_reason
}

// accumulate reads the official client's stream to its end, handing each
// chunk to each (if not nil), and requires that it ended without an error.
func accumulate(t *testing.T, s chunkStream, each func(openai.ChatCompletionChunk)) accumulated {
	t.Helper()
	var a accumulated
	for s.Next() {
		c := s.Current()
		a.acc.AddChunk(c)
		a.chunks++
		if len(c.Choices) > 0 && c.Choices[0].FinishReason != "" {
			a.last = c
		}
		if each != nil {
			each(c)
		}
	}
	require.NoError(t, s.Err())
	return a
}

// subscriptionsOpened is how many workflow-stream subscriptions the front
// door has opened.
func (d *door) subscriptionsOpened() int64 {
	opened, _ := d.h.StreamSubscriptions()
	return opened
}

// requireSubscriptionsClosed waits until the front door has no open
// subscription (the grace period after the last connection).
func (d *door) requireSubscriptionsClosed() {
	d.t.Helper()
	require.Eventually(d.t, func() bool { _, open := d.h.StreamSubscriptions(); return open == 0 },
		30*time.Second, 50*time.Millisecond, "a subscription stayed open")
}

// TestStreamForwardsDeltasLive: the official client gets the answer's
// text while the model is still generating it, and the chunks add up to
// the call's content.
func TestStreamForwardsDeltasLive(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	q := "[[sim tokens=200]] Tell me everything about the delivery of order 31."
	p := params("u-live", q)
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	var hr *http.Response
	key := "live-31-" + uuid.NewString()[:8] // -count=N reuses the dev server
	stream := d.openai(tokAcme).Chat.Completions.NewStreaming(ctx, p,
		option.WithHeader("Idempotency-Key", key), option.WithResponseInto(&hr))
	id := request.ScopedKey("acme", key)

	var text strings.Builder
	contentChunks := 0
	firstWhileRunning := false
	a := accumulate(t, stream, func(c openai.ChatCompletionChunk) {
		if len(c.Choices) == 0 {
			return
		}
		if s := c.Choices[0].Delta.Content; s != "" {
			contentChunks++
			text.WriteString(s)
			if contentChunks == 1 {
				firstWhileRunning = d.running(ctx, id)
			}
		}
	})
	require.Equal(t, id, hr.Header.Get("X-Workflow-Id"))
	require.True(t, firstWhileRunning, "the first content chunk came while the call was still running")
	require.Greater(t, contentChunks, 10, "the text came in many chunks, as generated")

	res := d.result(ctx, id)
	require.Equal(t, res.Content, text.String(), "the chunks add up to the call's content")
	require.Equal(t, llmsim.AnswerTokens("qwen-72b", q, 200), res.Content)
	require.Equal(t, res.Content, a.acc.Choices[0].Message.Content)
	require.Equal(t, "chatcmpl-"+id, a.acc.ID)
	require.Equal(t, "stop", a.acc.Choices[0].FinishReason)
	require.Equal(t, int64(200), a.acc.Usage.CompletionTokens)
	r := rig.Resilience(t, a.last.RawJSON())
	require.Equal(t, "model", r.Source)
	require.Equal(t, id, r.WorkflowID)
	require.Equal(t, 1, r.AttemptCount)

	require.EqualValues(t, 1, d.subscriptionsOpened())
	d.requireSubscriptionsClosed()
}

// TestStreamContinuesACutStream: the upstream cuts its stream after 50
// tokens; the next attempt continues it and the client gets every token
// once, the attempt events as SSE comments, and ids that say where the
// stream is.
func TestStreamContinuesACutStream(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	q := "[[sim fault=cut_stream after=50 times=1]] [[sim tokens=150]] Where is parcel 9?"
	var comments []string
	sent, lastBytes := 0, 0
	s := d.readStream(ctx, streamBody("u-cut", q), map[string]string{"Idempotency-Key": "cut-" + uuid.NewString()[:8]}, func(e sseEvent) bool {
		comments = append(comments, e.Comments...)
		if c := e.content(t); c != "" {
			sent += len(c)
			off, n, ok := strings.Cut(e.ID, ":")
			require.True(t, ok, "content chunk without an OFFSET:BYTES id: %q", e.ID)
			_, err := strconv.ParseInt(off, 10, 64)
			require.NoError(t, err)
			b, err := strconv.Atoi(n)
			require.NoError(t, err)
			require.Equal(t, sent, b, "the id counts the bytes sent so far")
			require.Greater(t, b, lastBytes)
			lastBytes = b
		}
		return true
	})
	events := s.events
	require.Equal(t, "[DONE]", events[len(events)-1].Data)
	require.Contains(t, events[0].Data, `"delta":{"role":"assistant","content":""}`)

	res := d.result(ctx, s.workflowID)
	require.Equal(t, res.Content, s.text, "nothing repeated, nothing lost")
	require.Equal(t, llmsim.AnswerTokens("qwen-72b", q, 150), res.Content)
	r := rig.Resilience(t, events[len(events)-2].Data)
	require.Equal(t, []string{"stream_broken"}, r.Classes)
	require.Equal(t, 2, r.AttemptCount)

	all := strings.Join(comments, "\n")
	require.Contains(t, all, "attempt 1 failed · stream_broken")
	require.Contains(t, all, "attempt 2 · qwen-72b · resuming the answer")
}

// TestStreamContinuesAnAnthropicOverload: the ladder on Anthropic's
// wire; the model's stream is cut after 50 tokens by an overloaded_error
// event inside the HTTP 200 stream (Anthropic's mid-stream overload). The
// next attempt sends the 50 tokens as a prefill for the model to continue:
// the client gets every token once, and the model generates only the
// missing 100.
func TestStreamContinuesAnAnthropicOverload(t *testing.T) {
	d := newDoorOn(t, rig.Options{Policy: func(c *config.Config) {
		for i := range c.Models {
			c.Models[i].API, c.Models[i].Continuation = config.APIAnthropic, config.ContinueAuto
			c.Models[i].BaseURL = strings.TrimSuffix(c.Models[i].BaseURL, "/v1")
		}
	}}, nil)
	ctx := rig.Context(t, 2*time.Minute)
	q := "[[sim fault=stream_error after=50 times=1]] [[sim tokens=150]] Where is parcel 9?"
	s := d.readStream(ctx, streamBody("u-overload", q), map[string]string{"Idempotency-Key": "overload-" + uuid.NewString()[:8]}, nil)
	res := d.result(ctx, s.workflowID)
	require.Equal(t, []string{"qwen-72b:stream_broken:resume (continue)", "qwen-72b:ok:answer"}, res.Decisions())
	require.Equal(t, res.Content, s.text, "nothing repeated, nothing lost")
	require.Equal(t, llmsim.AnswerTokens("qwen-72b", q, 150), res.Content)
	gens := d.Sim.Generations(res.RequestID)
	require.Len(t, gens, 2)
	require.Equal(t, llmsim.WireAnthropic, gens[1].Wire)
	require.True(t, gens[1].Continuation && gens[1].PrefixMatched, "the second request continued the first's text: %+v", gens[1])
	require.Equal(t, 100, gens[1].CompletionTokens, "only the missing part is generated")
}

// TestStreamReconnectWithLastEventID: a client that loses the stream and
// reconnects with the same key and Last-Event-ID gets the rest of the
// text, none of it twice: while the call runs (through the same
// subscription) and after it has ended (from the result).
func TestStreamReconnectWithLastEventID(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	q := "[[sim tokens=200]] Read me the whole returns policy, please."
	body := streamBody("u-reconnect", q)
	k := "reconnect-7-" + uuid.NewString()[:8]
	key := map[string]string{"Idempotency-Key": k}
	id := request.ScopedKey("acme", k)

	// First connection: five content chunks, then it drops.
	cctx, cancel := context.WithCancel(ctx)
	lastID, n := "", 0
	first := d.readStream(cctx, body, key, func(e sseEvent) bool {
		if e.content(t) != "" {
			lastID = e.ID
			n++
		}
		return n < 5
	})
	cancel()
	require.Equal(t, 5, n)
	require.Contains(t, first.events[0].Data, `"role":"assistant"`)
	require.True(t, d.running(ctx, id), "dropped while the call runs")

	// Reconnect with Last-Event-ID: the rest, no role chunk again.
	reconnect := map[string]string{"Idempotency-Key": k, "Last-Event-ID": lastID}
	rest := d.readStream(ctx, body, reconnect, nil)
	events := rest.events
	require.NotContains(t, events[0].Data, `"role":"assistant"`, "a reconnect does not start the message again")
	require.Equal(t, "[DONE]", events[len(events)-1].Data)
	res := d.result(ctx, id)
	require.Equal(t, llmsim.AnswerTokens("qwen-72b", q, 200), res.Content)
	require.Equal(t, res.Content, first.text+rest.text, "the two connections add up to the content")
	require.Equal(t, 1, d.Upstream(id).Attempts)
	require.EqualValues(t, 1, d.subscriptionsOpened(), "the reconnect, within the grace period, reused the subscription")

	// The same after the call ended: the rest comes from the result.
	rest = d.readStream(ctx, body, reconnect, nil)
	require.Equal(t, res.Content, first.text+rest.text)
	d.requireSubscriptionsClosed()
}

// TestStreamConnectionsShareOneSubscription: two clients streaming one
// call (one key) at once both get the whole text through ONE subscription
// to the workflow's stream.
func TestStreamConnectionsShareOneSubscription(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	q := "[[sim tokens=200]] Explain the warranty terms of my kettle."
	key := "shared-stream-" + uuid.NewString()[:8]
	oc := d.openai(tokAcme, option.WithHeader("Idempotency-Key", key))
	id := request.ScopedKey("acme", key)

	read := func(s chunkStream, firstChunk chan<- struct{}) (string, error) {
		var text strings.Builder
		for s.Next() {
			c := s.Current()
			if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
				if text.Len() == 0 && firstChunk != nil {
					close(firstChunk)
				}
				text.WriteString(c.Choices[0].Delta.Content)
			}
		}
		return text.String(), s.Err()
	}
	texts := make([]string, 2)
	errs := make([]error, 2)
	first0, first1, done0 := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done0)
		texts[0], errs[0] = read(oc.Chat.Completions.NewStreaming(ctx, params("u-share", q)), first0)
	}()
	select {
	case <-first0:
	case <-ctx.Done():
		t.Fatal("no first chunk")
	}
	require.True(t, d.running(ctx, id))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		texts[1], errs[1] = read(oc.Chat.Completions.NewStreaming(ctx, params("u-share", q)), first1)
	}()
	select {
	case <-first1:
	case <-ctx.Done():
		t.Fatal("no first chunk on the second connection")
	}
	select {
	case <-done0:
		t.Fatal("the first connection ended before the second got its first chunk: they did not overlap")
	default:
	}
	wg.Wait()
	<-done0
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])

	res := d.result(ctx, id)
	require.Equal(t, res.Content, texts[0])
	require.Equal(t, res.Content, texts[1], "the late joiner got the text from the start")
	require.EqualValues(t, 1, d.subscriptionsOpened(), "one subscription for two connections")
	require.Equal(t, 1, d.Upstream(id).Attempts)
	d.requireSubscriptionsClosed()
}

// TestStreamOfACallStartedWithoutStreaming: a stream that attaches to a
// call started without stream: true (it hosts no stream) gets the answer
// from the result when it ends, cut into chunks.
func TestStreamOfACallStartedWithoutStreaming(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	q := "[[sim tokens=120]] [[sim fault=latency latency=1s]] What is in my basket?"
	oc := d.openai(tokAcme, option.WithHeader("Idempotency-Key", "plain-then-stream-"+uuid.NewString()[:8]))
	_, err := oc.Chat.Completions.New(ctx, params("u-late", q), option.WithHeader("Prefer", "respond-async"))
	require.NoError(t, err)

	a := accumulate(t, oc.Chat.Completions.NewStreaming(ctx, params("u-late", q)), nil)
	want := llmsim.AnswerTokens("qwen-72b", q, 120)
	require.Equal(t, want, a.acc.Choices[0].Message.Content)
	require.Greater(t, a.chunks, 4, "role, several pieces, final")
}

// TestStreamedFallbackAnswer: when the models cannot answer, the
// fallback's answer is streamed as its text, with the fallback as model.
func TestStreamedFallbackAnswer(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	sc, err := llmsim.BuiltinScenario("class-service_unavailable")
	require.NoError(t, err)
	require.NoError(t, d.Sim.SetScenario(sc))
	var hr *http.Response
	stream := d.openai(tokAcme).Chat.Completions.NewStreaming(ctx, params("u-fbs", "How do I get a refund for my order?"),
		option.WithHeader("Idempotency-Key", "fallback-"+uuid.NewString()[:8]), option.WithResponseInto(&hr))
	a := accumulate(t, stream, nil)
	res := d.result(ctx, hr.Header.Get("X-Workflow-Id"))
	require.Equal(t, workflows.SourceFAQ, res.Source)
	require.Equal(t, res.Content, a.acc.Choices[0].Message.Content)
	require.Equal(t, "durable-llm/faq", a.last.Model)
	r := rig.Resilience(t, a.last.RawJSON())
	require.Equal(t, "faq", r.Source)
	require.True(t, r.Degraded)
}

// TestStreamBadInput: stream: true with n > 1, a malformed stream_options
// or Last-Event-ID is a 400 naming the field, and starts nothing.
func TestStreamBadInput(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	const messages = `"messages":[{"role":"user","content":"Where is it?"}]`
	for _, tc := range []struct {
		name, body, lastEventID, param, message string
	}{
		{"n above 1", `{"stream":true,"n":2,` + messages + `}`, "", "n", "2 choices asked"},
		{"stream_options a string", `{"stream":true,"stream_options":"usage",` + messages + `}`, "", "stream_options", "want an object, got a JSON string"},
		{"include_usage a string", `{"stream":true,"stream_options":{"include_usage":"yes"},` + messages + `}`, "", "stream_options.include_usage", "want a boolean"},
		{"Last-Event-ID not ours", `{"stream":true,` + messages + `}`, "17", "Last-Event-ID", "OFFSET:BYTES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tc.lastEventID != "" {
				hdr["Last-Event-ID"] = tc.lastEventID
			}
			resp := d.postStream(ctx, tc.body, hdr)
			defer resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode)
			var e struct {
				Error struct {
					Message, Type string
					Param         *string
				}
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.NotNil(t, e.Error.Param)
			require.Equal(t, tc.param, *e.Error.Param)
			require.Contains(t, e.Error.Message, tc.param)
			require.Contains(t, e.Error.Message, tc.message)
		})
	}
	// The official client, asking for 3 streamed choices.
	p := params("u-bad-stream", "Where is it?")
	p.N = openai.Int(3)
	stream := d.openai(tokAcme).Chat.Completions.NewStreaming(ctx, p)
	require.False(t, stream.Next())
	e := apiError(t, stream.Err())
	require.Equal(t, http.StatusBadRequest, e.StatusCode)
	require.Equal(t, "n", e.Param)
	d.requireNoWorkflow(request.Key("acme", "u-bad-stream", "", msgs("Where is it?")))
	d.requireNoWorkflowOnQueue()
	require.Zero(t, d.subscriptionsOpened())
}
