package frontdoor_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// TestPreviousResponseChaining: a tool-using agent continues its stored
// response with previous_response_id, sending only the function call's
// output; the call is rebuilt with the question and the function call
// before it (the simulator answers from the tool's output only then).
// input_items lists them in order; another tenant cannot continue, list
// or delete it; its owner can.
func TestPreviousResponseChaining(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	tool := lookupOrderResponsesTool()
	r1, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "auto", Instructions: openai.String("You are a support agent."),
		Tools: []responses.ToolUnionParam{tool}, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Where is order 42? (chained)")}})
	require.NoError(t, err)
	var call responses.ResponseFunctionToolCall
	for _, item := range r1.Output {
		if item.Type == "function_call" {
			call = item.AsFunctionCall()
		}
	}
	require.Equal(t, "lookup_order", call.Name, "%s", r1.RawJSON())

	out := responses.ResponseInputItemParamOfFunctionCallOutput("shipped on Monday")
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	next := responses.ResponseNewParams{Model: "auto", Tools: []responses.ToolUnionParam{tool}, PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}}
	r2, err := oc.Responses.New(ctx, next)
	if err != nil {
		e := apiError(t, err)
		t.Fatalf("%s %s %s", e.Param, e.Code, e.Message)
	}
	require.Equal(t, "[qwen-72b] lookup_order says shipped on Monday.", r2.OutputText())

	// Its input, oldest first: the question, the function call, its output.
	get := func(tok, method, path string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, d.ts.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
		return resp.StatusCode, m
	}
	code, list := get(tokAcme, http.MethodGet, "/v1/responses/"+r2.ID+"/input_items?order=asc")
	require.Equal(t, http.StatusOK, code, "%v", list)
	var types []string
	for _, it := range list["data"].([]any) {
		types = append(types, it.(map[string]any)["type"].(string))
	}
	require.Equal(t, []string{"message", "function_call", "function_call_output"}, types)

	// Another tenant: the same 404 as an unknown ID, naming the field,
	// and no call started.
	_, err = d.openai(tokGlobex).Responses.New(ctx, next)
	e := apiError(t, err)
	require.Equal(t, http.StatusNotFound, e.StatusCode)
	require.Equal(t, "previous_response_id", e.Param)
	require.NotContains(t, e.Message, "shipped")
	code, _ = get(tokGlobex, http.MethodGet, "/v1/responses/"+r2.ID+"/input_items")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get(tokGlobex, http.MethodDelete, "/v1/responses/"+r2.ID)
	require.Equal(t, http.StatusNotFound, code)

	// Its owner deletes it (Temporal removes the workflow asynchronously).
	code, del := get(tokAcme, http.MethodDelete, "/v1/responses/"+r1.ID)
	require.Equal(t, http.StatusOK, code, "%v", del)
	require.Equal(t, true, del["deleted"])
}

// TestChainOf50Turns: 50 turns chained with previous_response_id; each
// turn's call has as many history events as the first (the conversation
// is in its input, not its history), far under the history guard, and
// every turn sees the whole conversation.
func TestChainOf50Turns(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	var prev string
	var first, most int64
	var total time.Duration
	for i := range 50 {
		p := responses.ResponseNewParams{Model: "auto",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(fmt.Sprintf("turn %d of the chain", i))}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		start := time.Now()
		r, err := oc.Responses.New(ctx, p)
		require.NoError(t, err, "turn %d", i)
		total += time.Since(start)
		desc, err := d.Client.DescribeWorkflowExecution(ctx, strings.TrimPrefix(r.ID, "resp_"), "")
		require.NoError(t, err)
		n := desc.GetWorkflowExecutionInfo().GetHistoryLength()
		if i == 0 {
			first = n
		}
		most = max(most, n)
		require.LessOrEqual(t, n, 2*first, "turn %d: %d history events, the first had %d", i, n, first)
		require.Less(t, n, int64(config.DefaultMaxHistoryEvents))
		prev = r.ID
	}
	req, err := (&llmclient.Client{Temporal: d.Client}).Request(ctx, nil, strings.TrimPrefix(prev, "resp_"), "")
	require.NoError(t, err)
	require.Len(t, req.Messages, 50*2-1) // 50 questions, 49 answers before the last
	t.Logf("50 turns: %d to %d history events per turn, %s per turn (lookup of the previous response, call, answer)", first, most, total/50)
}

// TestAgentsSDKChainsWithPreviousResponseID: the OpenAI Agents SDK
// (@openai/agents) runs a tool-using support agent for two turns, the
// second continuing the first with previousResponseId; the tool runs,
// both turns answer from its output, and the second turn's call holds
// the first turn's conversation.
func TestAgentsSDKChainsWithPreviousResponseID(t *testing.T) {
	node, dir := requireTS(t, "the OpenAI Agents SDK", "@openai", "agents")
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	out := runTS(t, ctx, node, dir, []string{"OPENAI_BASE_URL=" + d.ts.URL + "/v1", "OPENAI_API_KEY=" + tokAcme}, "agents-sdk.mjs")
	t.Logf("%s", out)
	var got struct {
		First, FirstID, Second, SecondID string
		ToolCalls                        []string
	}
	require.NoError(t, json.Unmarshal(out, &struct {
		First     *string   `json:"first"`
		FirstID   *string   `json:"first_id"`
		Second    *string   `json:"second"`
		SecondID  *string   `json:"second_id"`
		ToolCalls *[]string `json:"tool_calls"`
	}{&got.First, &got.FirstID, &got.Second, &got.SecondID, &got.ToolCalls}), string(out))
	require.Equal(t, "[qwen-72b] lookup_order says shipped on Monday.", got.First)
	require.NotEmpty(t, got.ToolCalls)
	require.Equal(t, "42", got.ToolCalls[0])
	req, err := (&llmclient.Client{Temporal: d.Client}).Request(ctx, nil, strings.TrimPrefix(got.SecondID, "resp_"), "")
	require.NoError(t, err)
	var texts []string
	for _, m := range req.Messages {
		texts = append(texts, m.Text())
	}
	require.Contains(t, texts, "Where is order 42?", "the second turn's call holds the first turn")
	require.Contains(t, texts, "Where is order 42? Tell me again.")
}

// TestCompletedResponseIsContinuedAtOnce: what retrieve calls completed,
// every endpoint of every front door treats as completed. With the
// official OpenAI JavaScript client (testdata/openai-ts/chain.mjs), 20
// background turns, each polled with responses.retrieve on one front door
// until it is completed and at once continued with previous_response_id
// on another, while its input_items are listed, it is cancelled (answered
// completed, unchanged) and its message is named by an item_reference;
// then a response deleted as soon as it is completed is a 404 on both.
//
// A background call lingers after its answer for its stream's late
// subscribers: retrieve read the answer while chaining waited for the
// run to close, and answered 400 response_not_completed for most of a
// second; a cancel in that time cancelled a completed response.
func TestCompletedResponseIsContinuedAtOnce(t *testing.T) {
	node, dir := requireTS(t, "the OpenAI JavaScript client", "openai")
	var opts frontdoor.Options
	d := newDoor(t, func(o *frontdoor.Options) { opts = *o })
	other, err := frontdoor.New(opts) // a second front door process
	require.NoError(t, err)
	ts := httptest.NewServer(other)
	t.Cleanup(ts.Close)
	ctx := rig.Context(t, 2*time.Minute)
	const turns = 20
	out := runTS(t, ctx, node, dir, nil, "chain.mjs", d.ts.URL+"/v1", ts.URL+"/v1", tokAcme, "u-ts-chain", fmt.Sprint(turns))
	var got struct {
		Turns []struct {
			ID, Status, Text string
			InputItems       []string `json:"input_items"`
			CancelStatus     string   `json:"cancel_status"`
			CancelText       string   `json:"cancel_text"`
			ReferenceStatus  string   `json:"reference_status"`
		} `json:"turns"`
		Refusals []map[string]any `json:"refusals"`
		Deleted  struct {
			Status  string `json:"status"`
			Deleted bool   `json:"deleted"`
			After   []any  `json:"after"`
		} `json:"deleted"`
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	require.Empty(t, got.Refusals, "every endpoint takes a response retrieve called completed")
	require.Len(t, got.Turns, turns)
	client := &llmclient.Client{Temporal: d.Client}
	for i, turn := range got.Turns {
		require.Equal(t, "completed", turn.Status, "turn %d", i)
		require.NotEmpty(t, turn.Text, "turn %d", i)
		require.Equal(t, "completed", turn.CancelStatus, "turn %d: a completed response is not cancelled", i)
		require.Equal(t, turn.Text, turn.CancelText, "turn %d", i)
		require.Equal(t, "completed", turn.ReferenceStatus, "turn %d", i)
		// Turn i holds the i turns before it: a question and an answer each.
		want := []string{"message"}
		for range i {
			want = append(want, "message", "message")
		}
		require.Equal(t, want, turn.InputItems, "turn %d", i)
		res, err := client.Result(ctx, strings.TrimPrefix(turn.ID, "resp_"))
		require.NoError(t, err)
		require.Equal(t, turn.Text, res.Content, "turn %d", i)
	}
	require.Equal(t, "completed", got.Deleted.Status)
	require.True(t, got.Deleted.Deleted)
	require.Equal(t, []any{404.0, 404.0, 404.0, 404.0}, got.Deleted.After, "retrieve and previous_response_id on both front doors")
}

// TestDeletedResponseIsGone: right after DELETE answers, the response is
// gone for its owner on every endpoint, as OpenAI's is: retrieve,
// input_items, previous_response_id and a second DELETE are 404. The
// same for a background response deleted while it runs. The same request
// sent again is a new call, kept like any other.
func TestDeletedResponseIsGone(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	gone := func(t *testing.T, id string) {
		t.Helper()
		_, err := oc.Responses.Get(ctx, id, responses.ResponseGetParams{})
		e := apiError(t, err)
		require.Equal(t, http.StatusNotFound, e.StatusCode, "retrieve: %s", e.Message)
		require.Equal(t, "response_not_found", e.Code)
		s := oc.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{})
		require.False(t, s.Next())
		require.Equal(t, http.StatusNotFound, apiError(t, s.Err()).StatusCode, "retrieve with stream")
		_, err = oc.Responses.InputItems.List(ctx, id, responses.InputItemListParams{})
		require.Equal(t, http.StatusNotFound, apiError(t, err).StatusCode, "input_items")
		_, err = oc.Responses.New(ctx, responses.ResponseNewParams{Model: "auto", PreviousResponseID: openai.String(id),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And then?")}})
		e = apiError(t, err)
		require.Equal(t, http.StatusNotFound, e.StatusCode, "previous_response_id: %s", e.Message)
		require.Equal(t, "previous_response_id", e.Param)
		require.Equal(t, "previous_response_not_found", e.Code)
		_, err = oc.Responses.Cancel(ctx, id)
		require.Equal(t, http.StatusNotFound, apiError(t, err).StatusCode, "cancel")
		err = oc.Responses.Delete(ctx, id)
		require.Equal(t, http.StatusNotFound, apiError(t, err).StatusCode, "a second DELETE")
	}

	t.Run("completed", func(t *testing.T) {
		p := responses.ResponseNewParams{Model: "auto", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("A response to delete.")}}
		r, err := oc.Responses.New(ctx, p)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, oc.Responses.Delete(ctx, r.ID))
		t.Logf("DELETE of a completed response answered in %s", time.Since(start))
		gone(t, r.ID)

		again, err := oc.Responses.New(ctx, p)
		require.NoError(t, err)
		require.Equal(t, r.OutputText(), again.OutputText())
		require.Equal(t, 2, d.Upstream(strings.TrimPrefix(r.ID, "resp_")).Attempts, "answered by a new call, not the deleted one")
		kept, err := oc.Responses.Get(ctx, again.ID, responses.ResponseGetParams{})
		require.NoError(t, err, "the same request after the DELETE is a new call, kept")
		require.Equal(t, responses.ResponseStatusCompleted, kept.Status)
	})

	t.Run("running", func(t *testing.T) {
		r, err := oc.Responses.New(ctx, backgroundParams("[[sim tokens=2000]] A long answer, deleted while it runs."))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			got, err := oc.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
			require.NoError(t, err)
			return got.Status == responses.ResponseStatusInProgress
		}, 30*time.Second, 50*time.Millisecond)
		start := time.Now()
		require.NoError(t, oc.Responses.Delete(ctx, r.ID))
		t.Logf("DELETE of a running response answered in %s", time.Since(start))
		gone(t, r.ID)
	})
}

// TestUnstoredResponseIsNotKept: a response created with store: false is
// answered, and then, as OpenAI's, it cannot be retrieved, listed,
// continued, cancelled or deleted, not even by its own tenant: each is a
// 404 that says why. The same request sent again with its idempotency key
// is still answered by the same call, one upstream request; the same
// request with store: true is another call, kept. A background response
// must be stored (400 naming store).
func TestUnstoredResponseIsNotKept(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	p := responses.ResponseNewParams{Model: "auto", Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("A question not to keep.")}}
	key := option.WithHeader("Idempotency-Key", "unstored-"+fmt.Sprint(time.Now().UnixNano()))
	r, err := oc.Responses.New(ctx, p, key)
	require.NoError(t, err)
	require.NotEmpty(t, r.OutputText())
	wid := strings.TrimPrefix(r.ID, "resp_")

	notKept := func(what string, err error) {
		t.Helper()
		e := apiError(t, err)
		require.Equal(t, http.StatusNotFound, e.StatusCode, "%s: %s", what, e.Message)
		require.Contains(t, e.Message, "store: false", what)
	}
	_, err = oc.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	notKept("retrieve", err)
	require.Equal(t, "response_not_found", apiError(t, err).Code)
	s := oc.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{})
	require.False(t, s.Next())
	notKept("retrieve with stream", s.Err())
	_, err = oc.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{})
	notKept("input_items", err)
	_, err = oc.Responses.Cancel(ctx, r.ID)
	notKept("cancel", err)
	notKept("delete", oc.Responses.Delete(ctx, r.ID))
	_, err = oc.Responses.New(ctx, responses.ResponseNewParams{Model: "auto", PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And then?")}})
	notKept("previous_response_id", err)
	e := apiError(t, err)
	require.Equal(t, "previous_response_id", e.Param)
	require.Equal(t, "previous_response_not_found", e.Code)

	// Idempotency is kept: the same request and key reach the same call.
	again, err := oc.Responses.New(ctx, p, key)
	require.NoError(t, err)
	require.Equal(t, r.ID, again.ID)
	require.Equal(t, r.OutputText(), again.OutputText())
	require.Equal(t, 1, d.Upstream(wid).Attempts)

	// The same question stored is another call, which is kept.
	p.Store = openai.Bool(true)
	kept, err := oc.Responses.New(ctx, p)
	require.NoError(t, err)
	require.NotEqual(t, r.ID, kept.ID)
	got, err := oc.Responses.Get(ctx, kept.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, kept.OutputText(), got.OutputText())

	p.Store, p.Background = openai.Bool(false), openai.Bool(true)
	_, err = oc.Responses.New(ctx, p)
	e = apiError(t, err)
	require.Equal(t, http.StatusBadRequest, e.StatusCode)
	require.Equal(t, "store", e.Param)
	require.Contains(t, e.Message, "background")
}

// TestStoredResponseRetentionIsTheTenants: a tenant whose entry sets
// store_retention 1h keeps its responses for an hour, another tenant for
// the front door's retention: two hours after both completed, acme's can
// no longer be continued (400 response_expired, naming the retention) and
// globex's still can.
func TestStoredResponseRetentionIsTheTenants(t *testing.T) {
	var later atomic.Int64 // how far the front door's clock is ahead
	tenants, err := frontdoor.ParseTenantsFile([]byte(fmt.Sprintf(
		"tenants:\n  - name: acme\n    tokens: [%s]\n    limits: {store_retention: 1h}\n  - name: globex\n    tokens: [%s]\n", tokAcme, tokGlobex)), "tenants.yaml")
	require.NoError(t, err)
	d := newDoor(t, func(o *frontdoor.Options) {
		o.Tenants = tenants
		o.Now = func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	})
	ctx := rig.Context(t, 2*time.Minute)
	first := map[string]string{}
	for _, tok := range []string{tokAcme, tokGlobex} {
		r, err := d.openai(tok).Responses.New(ctx, responses.ResponseNewParams{Model: "auto",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Which plan am I on? (retention)")}})
		require.NoError(t, err)
		first[tok] = r.ID
	}
	later.Store(int64(2 * time.Hour))
	cont := func(tok string) error {
		_, err := d.openai(tok).Responses.New(ctx, responses.ResponseNewParams{Model: "auto", PreviousResponseID: openai.String(first[tok]),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("And what does it cost?")}})
		return err
	}
	e := apiError(t, cont(tokAcme))
	require.Equal(t, http.StatusBadRequest, e.StatusCode, e.Message)
	require.Equal(t, "response_expired", e.Code)
	require.Contains(t, e.Message, "retention of 1h0m0s")
	require.NoError(t, cont(tokGlobex), "globex keeps the front door's 30 days")
}
