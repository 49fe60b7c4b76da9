package frontdoor_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/request"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// doorHTTP sends one request with a tenant's token (and an
// Idempotency-Key when key is set) and decodes the JSON answer.
func (d *door) doorHTTP(t *testing.T, tok, method, path, key string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(rig.Context(t, 2*time.Minute), method, d.ts.URL+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return resp.StatusCode, m
}

// turnOf is an input item of input_items as (role or type, text).
type turnOf struct{ Role, Text string }

// inputTurns lists the input of response rid, oldest first.
func (d *door) inputTurns(t *testing.T, rid string) []turnOf {
	t.Helper()
	code, list := d.doorHTTP(t, tokAcme, http.MethodGet, "/v1/responses/"+rid+"/input_items?order=asc", "", nil)
	require.Equal(t, http.StatusOK, code, "%v", list)
	var out []turnOf
	for _, it := range list["data"].([]any) {
		item := it.(map[string]any)
		switch item["type"] {
		case "message":
			var text []string
			for _, p := range item["content"].([]any) {
				text = append(text, fmt.Sprint(p.(map[string]any)["text"]))
			}
			out = append(out, turnOf{fmt.Sprint(item["role"]), strings.Join(text, "")})
		case "function_call":
			out = append(out, turnOf{"function_call", fmt.Sprintf("%s %s", item["name"], item["arguments"])})
		case "function_call_output":
			out = append(out, turnOf{"function_call_output", fmt.Sprint(item["output"])})
		}
	}
	return out
}

// TestItemReferences: an item_reference input item names an output item
// of a stored response of the tenant (its message msg_…, its function
// call fc_…_i) and the call is given that item: the earlier answer as
// the assistant's turn, the earlier function call before its output. An
// ID that names nothing served (unknown, another tenant's, not an item
// ID, a function call the response did not make, a store: false or
// deleted response's, a response still running) is refused in OpenAI's
// error shape naming input[i].id, and no call is started.
func TestItemReferences(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	text := func(s string) responses.ResponseNewParamsInputUnion {
		return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
	}

	// A plain answer, then a question after it that names it by ID.
	q1, q2 := "Where is my parcel? (item reference)", "And when will it arrive? (item reference)"
	r1, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "auto", Input: text(q1)})
	require.NoError(t, err)
	msgID := r1.Output[0].ID
	require.Equal(t, "msg_"+strings.TrimPrefix(r1.ID, "resp_"), msgID)
	code, r2 := d.doorHTTP(t, tokAcme, http.MethodPost, "/v1/responses", "", map[string]any{"model": "auto", "input": []any{
		map[string]any{"role": "user", "content": q1},
		map[string]any{"type": "item_reference", "id": msgID},
		map[string]any{"role": "user", "content": q2},
	}})
	require.Equal(t, http.StatusOK, code, "%v", r2)
	require.Equal(t, []turnOf{{"user", q1}, {"assistant", r1.OutputText()}, {"user", q2}}, d.inputTurns(t, r2["id"].(string)),
		"the call was given the earlier answer as the assistant's turn")
	require.Equal(t, llmsim.Answer("qwen-72b", q2), outputText(r2), "answered as the second turn of the conversation")

	// A function call named by ID, then its output: answered from the output.
	tool := map[string]any{"type": "function", "name": "lookup_order", "description": "Find an order by its id", "strict": false,
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []string{"order_id"}}}
	q3 := "Where is order 42? (item reference)"
	code, r3 := d.doorHTTP(t, tokAcme, http.MethodPost, "/v1/responses", "", map[string]any{"model": "auto", "input": q3, "tools": []any{tool}})
	require.Equal(t, http.StatusOK, code, "%v", r3)
	call := r3["output"].([]any)[0].(map[string]any)
	require.Equal(t, "function_call", call["type"], "%v", r3)
	fcID := call["id"].(string)
	wid3 := strings.TrimPrefix(r3["id"].(string), "resp_")
	require.Equal(t, "fc_"+wid3+"_0", fcID)
	code, r4 := d.doorHTTP(t, tokAcme, http.MethodPost, "/v1/responses", "", map[string]any{"model": "auto", "tools": []any{tool}, "input": []any{
		map[string]any{"role": "user", "content": q3},
		map[string]any{"type": "item_reference", "id": fcID},
		map[string]any{"type": "function_call_output", "call_id": call["call_id"], "output": "shipped on Monday"},
	}})
	require.Equal(t, http.StatusOK, code, "%v", r4)
	require.Equal(t, "[qwen-72b] lookup_order says shipped on Monday.", outputText(r4))
	require.Equal(t, []turnOf{{"user", q3}, {"function_call", `lookup_order {"order_id":"42"}`}, {"function_call_output", "shipped on Monday"}},
		d.inputTurns(t, r4["id"].(string)))

	// Responses whose items are not served.
	unstored, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "auto", Store: openai.Bool(false), Input: text("Not kept. (item reference)")})
	require.NoError(t, err)
	deleted, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "auto", Input: text("Deleted. (item reference)")})
	require.NoError(t, err)
	require.NoError(t, oc.Responses.Delete(ctx, deleted.ID))
	running, err := oc.Responses.New(ctx, backgroundParams("[[sim tokens=2000]] Still running. (item reference)"))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = oc.Responses.Cancel(rig.Context(t, 2*time.Minute), running.ID) })

	item := func(id string) string { return "msg_" + strings.TrimPrefix(id, "resp_") }
	for _, c := range []struct {
		name, tok, tenant string
		ref               any
		status            int
		code, says        string
	}{
		{"unknown", tokAcme, "acme", "msg_llm-0123456789abcdef", 404, "item_not_found", "no item"},
		{"another tenant's", tokGlobex, "globex", msgID, 404, "item_not_found", "no item"},
		{"not an output item ID", tokAcme, "acme", "rs_" + strings.TrimPrefix(r1.ID, "resp_"), 404, "item_not_found", "msg_… or fc_…"},
		{"a function call not made", tokAcme, "acme", "fc_" + wid3 + "_1", 404, "item_not_found", "made 1 function call"},
		{"the message of a response that only called a function", tokAcme, "acme", "msg_" + wid3, 404, "item_not_found", "function calls only"},
		{"store: false", tokAcme, "acme", item(unstored.ID), 404, "item_not_found", "store: false"},
		{"deleted", tokAcme, "acme", item(deleted.ID), 404, "item_not_found", "no item"},
		{"still running", tokAcme, "acme", item(running.ID), 400, "response_not_completed", "has not completed"},
		{"no id", tokAcme, "acme", nil, 400, "invalid_value", "missing"},
		{"an id that is not a string", tokAcme, "acme", 7, 400, "invalid_value", "string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := fmt.Sprintf("itemref-%d", time.Now().UnixNano())
			ref := map[string]any{"type": "item_reference"}
			if c.ref != nil {
				ref["id"] = c.ref
			}
			code, body := d.doorHTTP(t, c.tok, http.MethodPost, "/v1/responses", key, map[string]any{"model": "auto", "input": []any{
				map[string]any{"role": "user", "content": q1}, ref, map[string]any{"role": "user", "content": q2}}})
			require.Equal(t, c.status, code, "%v", body)
			e := body["error"].(map[string]any)
			require.Equal(t, "input[1].id", e["param"], "%v", e)
			require.Equal(t, c.code, e["code"], "%v", e)
			require.Equal(t, "invalid_request_error", e["type"], "%v", e)
			require.Contains(t, e["message"], c.says)
			require.NotContains(t, e["message"], r1.OutputText(), "nothing of the response is told")
			d.requireNoWorkflow(request.ScopedKey(c.tenant, key))
		})
	}
}

// outputText is the text of a response object's message items.
func outputText(o map[string]any) string {
	var b strings.Builder
	for _, it := range o["output"].([]any) {
		item := it.(map[string]any)
		if item["type"] != "message" {
			continue
		}
		for _, p := range item["content"].([]any) {
			b.WriteString(fmt.Sprint(p.(map[string]any)["text"]))
		}
	}
	return b.String()
}

// TestVercelAISDKMultiTurnChat: the Vercel AI SDK's ordinary multi-turn
// chat. Its second generateText sends the conversation so far, the
// question and the first turn's response.messages, where the assistant's answer is an item_reference to the first
// response's message (store: true is the SDK's default); the second turn
// is answered as the conversation's second turn. Across the turns of a
// tool loop likewise: the second turn calls the tool for its own
// question and answers from that call's output only.
func TestVercelAISDKMultiTurnChat(t *testing.T) {
	node, dir := requireTS(t, "the Vercel AI SDK", "@ai-sdk", "openai")
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	out := runTS(t, ctx, node, dir, nil, "ai-sdk-chat.mjs", d.ts.URL+"/v1", tokAcme, "u-ai-sdk-chat")
	t.Logf("%s", out)
	type turn struct {
		Text, ID   string
		Steps      int
		References []string
	}
	var got struct {
		Chat  []turn
		Tools struct {
			Turns []turn
			Calls []string
		}
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	answer := func(rid string) string {
		t.Helper()
		res, err := (&llmclient.Client{Temporal: d.Client}).Result(ctx, strings.TrimPrefix(rid, "resp_"))
		require.NoError(t, err)
		return res.Content
	}
	item := func(rid string) string { return "msg_" + strings.TrimPrefix(rid, "resp_") }

	require.Len(t, got.Chat, 2)
	first, second := got.Chat[0], got.Chat[1]
	require.Empty(t, first.References)
	require.Equal(t, []string{item(first.ID)}, second.References, "the SDK names the first answer by its item ID")
	q1, q2 := "Where is my parcel? (ai sdk chat)", "And when will it arrive? (ai sdk chat)"
	require.Equal(t, answer(first.ID), first.Text)
	require.Equal(t, answer(second.ID), second.Text)
	require.Equal(t, llmsim.Answer("qwen-72b", q2), second.Text, "answered as the conversation's second turn")
	require.Equal(t, []turnOf{{"user", q1}, {"assistant", first.Text}, {"user", q2}}, d.inputTurns(t, second.ID))

	tools := got.Tools
	require.Len(t, tools.Turns, 2)
	require.Equal(t, []string{"42", "43"}, tools.Calls, "each turn called the tool for its own question")
	require.Equal(t, 2, tools.Turns[0].Steps)
	require.Equal(t, "[qwen-72b] lookup_order says order 42 shipped on Monday.", tools.Turns[0].Text)
	require.Equal(t, 2, tools.Turns[1].Steps)
	require.Equal(t, "[qwen-72b] lookup_order says order 43 shipped on Monday.", tools.Turns[1].Text)
	require.NotEmpty(t, tools.Turns[1].References)
	for _, ref := range tools.Turns[1].References {
		require.Equal(t, item(tools.Turns[0].ID), ref, "the second turn names the first turn's answer")
	}
}
