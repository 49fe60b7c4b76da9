package frontdoor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	oshared "github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// lookupOrder is the tool the agent tests offer.
func lookupOrder() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(oshared.FunctionDefinitionParam{
		Name:        "lookup_order",
		Description: openai.String("Find an order by its id"),
		Parameters: oshared.FunctionParameters{
			"type":       "object",
			"properties": map[string]any{"order_id": map[string]any{"type": "string"}},
			"required":   []string{"order_id"},
		},
	})
}

// lookupOrderResponsesTool is lookupOrder as a Responses API tool.
func lookupOrderResponsesTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "lookup_order",
		Description: openai.String("Find an order by its id"), Strict: openai.Bool(false),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []string{"order_id"}}}}
}

func agentParams(user, question string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "auto",
		User:     openai.String(user),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		Tools:    []openai.ChatCompletionToolUnionParam{lookupOrder()},
	}
}

// TestToolCallingRoundTrip: with the official client, an agent offers a
// tool, gets a tool call, sends the tool result and gets the final
// answer, streamed and not.
func TestToolCallingRoundTrip(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	for _, streamed := range []bool{false, true} {
		user := "u-agent-plain"
		if streamed {
			user = "u-agent-stream"
		}
		p := agentParams(user, "Where is order 42?")
		var msg openai.ChatCompletionMessage
		var finish string
		if streamed {
			a := accumulate(t, oc.Chat.Completions.NewStreaming(ctx, p), nil)
			msg, finish = a.acc.Choices[0].Message, a.acc.Choices[0].FinishReason
			require.Equal(t, "model", rig.Resilience(t, a.last.RawJSON()).Source)
		} else {
			resp, err := oc.Chat.Completions.New(ctx, p)
			require.NoError(t, err)
			msg, finish = resp.Choices[0].Message, resp.Choices[0].FinishReason
			require.Contains(t, resp.RawJSON(), `"content":null`, "a tool call has null content")
		}
		require.Equal(t, "tool_calls", finish, "streamed=%v", streamed)
		require.Empty(t, msg.Content)
		require.Len(t, msg.ToolCalls, 1)
		call := msg.ToolCalls[0]
		require.NotEmpty(t, call.ID)
		require.Equal(t, "lookup_order", call.Function.Name)
		require.JSONEq(t, `{"order_id":"42"}`, call.Function.Arguments)

		p.Messages = append(p.Messages, msg.ToParam(), openai.ToolMessage("shipped on Monday", call.ID))
		if streamed {
			a := accumulate(t, oc.Chat.Completions.NewStreaming(ctx, p), nil)
			msg, finish = a.acc.Choices[0].Message, a.acc.Choices[0].FinishReason
		} else {
			resp, err := oc.Chat.Completions.New(ctx, p)
			require.NoError(t, err)
			msg, finish = resp.Choices[0].Message, resp.Choices[0].FinishReason
		}
		require.Equal(t, "stop", finish)
		require.Equal(t, "[qwen-72b] lookup_order says shipped on Monday.", msg.Content)
		require.Empty(t, msg.ToolCalls)
	}
}

// TestPassthroughAndIgnoredFields: a policy passthrough field reaches the
// upstream as written; the fields stock SDKs send and that do not change
// the answer are accepted; an unknown field is refused by name.
func TestPassthroughAndIgnoredFields(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	p := params("u-pass", "Tell me about passthrough.")
	p.Store = openai.Bool(false)
	p.Metadata = oshared.Metadata{"trace": "abc"}
	resp, err := oc.Chat.Completions.New(ctx, p,
		option.WithJSONSet("top_k", 40), option.WithJSONSet("repetition_penalty", json.RawMessage(`{ "value" : 1.05 }`)))
	require.NoError(t, err)
	require.Equal(t, "model", rig.Resilience(t, resp.RawJSON()).Source)
	var gen *llmsim.Generation
	for _, g := range d.Sim.Generations("") {
		if g.Last == "Tell me about passthrough." {
			gen = &g
		}
	}
	require.NotNil(t, gen, "no generation for the request")
	require.Equal(t, "40", string(gen.Extra["top_k"]))
	require.Equal(t, `{"value":1.05}`, string(gen.Extra["repetition_penalty"]))
	require.NotContains(t, gen.Extra, "store", "an ignored field was sent upstream")
	require.NotContains(t, gen.Extra, "metadata")

	_, err = oc.Chat.Completions.New(ctx, params("u-pass", "x"), option.WithJSONSet("mirostat", 2))
	e := apiError(t, err)
	require.Equal(t, http.StatusBadRequest, e.StatusCode)
	require.Equal(t, "mirostat", e.Param)
	require.Contains(t, e.Message, "unknown field")
}

// TestJSONSchemaRepair: an answer that does not match the schema is
// repaired once on the same model, cooler and told what was wrong; the
// caller gets the valid answer, and the schema error is in the attempt's
// reason.
func TestJSONSchemaRepair(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	p := params("u-json", "Status of order 42? [[sim fault=bad_json times=1]]")
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &oshared.ResponseFormatJSONSchemaParam{
		JSONSchema: oshared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "order", Strict: openai.Bool(true), Schema: map[string]any{
			"type": "object", "required": []string{"order_id", "status"},
			"properties": map[string]any{"order_id": map[string]any{"type": "string"}, "status": map[string]any{"type": "string", "enum": []string{"shipped", "pending"}}},
		}}}}
	resp, err := oc.Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	var order struct {
		OrderID string `json:"order_id"`
		Status  string `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Choices[0].Message.Content), &order), resp.Choices[0].Message.Content)
	require.Equal(t, "42", order.OrderID)

	r := rig.Resilience(t, resp.RawJSON())
	require.Equal(t, "model", r.Source)
	require.Len(t, r.Attempts, 2, "%+v", r.Attempts)
	a := r.Attempts[0]
	require.Equal(t, "schema_mismatch", a.Class)
	require.Equal(t, "repair", a.Decision)
	require.Equal(t, "qwen-72b", r.Attempts[1].Model, "the repair stays on the model")

	gens := d.Sim.Generations("")
	last := gens[len(gens)-1]
	require.NotNil(t, last.Temperature)
	require.LessOrEqual(t, *last.Temperature, 0.3+1e-6)
	require.Contains(t, last.Last, "Your previous reply could not be used: the answer is not valid JSON")
}

// TestRequiredToolNeverGetsFAQText: when no model can answer a request
// that requires a tool call, the caller gets a retryable 503, not an FAQ
// text it would try to parse.
func TestRequiredToolNeverGetsFAQText(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	p := agentParams("u-required", "Where is order 42? [[sim fault=maintenance times=always]]")
	p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	_, err := oc.Chat.Completions.New(ctx, p)
	e := apiError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, e.StatusCode, e.RawJSON())
	require.Equal(t, "fallback_unavailable", e.Code)
	require.NotEmpty(t, e.Response.Header.Get("Retry-After"))
	require.Contains(t, e.Message, "a tool call (tool_choice required)")

	// Optional tools: the FAQ may still answer, as assistant content.
	// (Maintenance from a scenario: a directive's words in the question
	// would spoil the FAQ's match.)
	sc, err := llmsim.ParseScenario([]byte("name: maintenance\nphases:\n  - name: down\n    faults:\n      - {kind: maintenance}\n"), "maintenance")
	require.NoError(t, err)
	require.NoError(t, d.Sim.SetScenario(sc))
	p = agentParams("u-optional", "How do I reset my password?")
	resp, err := oc.Chat.Completions.New(ctx, p)
	require.NoError(t, err)
	require.Equal(t, "faq", rig.Resilience(t, resp.RawJSON()).Source)
	require.NotEmpty(t, resp.Choices[0].Message.Content)
}

// TestRungWithoutToolsIsSkipped: a request with tools never reaches a
// model that cannot call them; the call's record says why the ladder
// stopped before it.
func TestRungWithoutToolsIsSkipped(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	resp, err := oc.Chat.Completions.New(ctx, agentParams("u-skip", "Where is order 7? [[sim fault=model_not_found times=always]]"))
	require.NoError(t, err)
	r := rig.Resilience(t, resp.RawJSON())
	last := r.Attempts[len(r.Attempts)-1]
	require.Equal(t, "qwen-14b", last.Model, "%+v", r.Attempts)
	require.Equal(t, "fallback", last.Decision)
	require.Contains(t, last.Reason, "llama-8b cannot serve the request")
	for _, a := range r.Attempts {
		require.NotEqual(t, "llama-8b", a.Model, "llama-8b was tried: %+v", r.Attempts)
	}
	for _, g := range d.Sim.Generations("") {
		require.False(t, g.Model == "llama-8b" && strings.Contains(g.Last, "order 7"), "llama-8b got a request with tools")
	}
}

// TestAgentWithTypeScriptClient: the same tool round trip with the
// official OpenAI JavaScript client (testdata/openai-ts, pinned in its
// package-lock.json), streamed and not, through chat completions and
// through the Responses API.
func TestAgentWithTypeScriptClient(t *testing.T) {
	node, dir := requireTS(t, "the OpenAI JavaScript client", "openai")
	d := newDoor(t, nil)
	out := runTS(t, rig.Context(t, 2*time.Minute), node, dir, nil, "agent.mjs", d.ts.URL+"/v1", tokAcme, "u-ts-agent")
	var got map[string]struct {
		FirstFinish   string  `json:"first_finish"`
		FirstContent  *string `json:"first_content"`
		Tool          string  `json:"tool"`
		Arguments     string  `json:"arguments"`
		ID            string  `json:"id"`
		SecondFinish  string  `json:"second_finish"`
		SecondContent string  `json:"second_content"`
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	for _, mode := range []string{"plain", "streamed", "responses", "responses_streamed"} {
		r := got[mode]
		require.Equal(t, "tool_calls", r.FirstFinish, "%s: %s", mode, out)
		require.True(t, r.FirstContent == nil || *r.FirstContent == "", "%s: content %v", mode, r.FirstContent)
		require.Equal(t, "lookup_order", r.Tool, mode)
		require.JSONEq(t, `{"order_id":"42"}`, r.Arguments, mode)
		require.NotEmpty(t, r.ID, mode)
		require.Equal(t, "stop", r.SecondFinish, mode)
		require.Equal(t, "[qwen-72b] lookup_order says shipped on Monday.", r.SecondContent, mode)
	}
}

// TestResponsesAPIToolRoundTrip: the Responses API (the Agents SDK's
// default) with the official Go client: a function tool, its call, the
// call's output in the next input, the final answer; streamed and not.
func TestResponsesAPIToolRoundTrip(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	tool := lookupOrderResponsesTool()
	for _, streamed := range []bool{false, true} {
		question := "Where is order 42?"
		if streamed {
			question += " (streamed)"
		}
		input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(question, responses.EasyInputMessageRoleUser)}
		p := responses.ResponseNewParams{Model: "auto", Instructions: openai.String("You are a support agent."),
			Tools: []responses.ToolUnionParam{tool}, Store: openai.Bool(false),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
		send := func() *responses.Response {
			t.Helper()
			if !streamed {
				r, err := oc.Responses.New(ctx, p)
				require.NoError(t, err)
				return r
			}
			s := oc.Responses.NewStreaming(ctx, p)
			var done *responses.Response
			var types []string
			for s.Next() {
				ev := s.Current()
				types = append(types, ev.Type)
				if ev.Type == "response.completed" {
					r := ev.Response
					done = &r
				}
			}
			require.NoError(t, s.Err())
			require.NotNil(t, done, "no response.completed among %v", types)
			require.Equal(t, "response.created", types[0])
			return done
		}
		r := send()
		require.Equal(t, "completed", string(r.Status))
		var call *responses.ResponseFunctionToolCall
		for _, item := range r.Output {
			if item.Type == "function_call" {
				c := item.AsFunctionCall()
				call = &c
			}
		}
		require.NotNil(t, call, "streamed=%v: no function_call in %s", streamed, r.RawJSON())
		require.Equal(t, "lookup_order", call.Name)
		require.JSONEq(t, `{"order_id":"42"}`, call.Arguments)
		require.NotEmpty(t, call.CallID)

		out := responses.ResponseInputItemParamOfFunctionCallOutput("shipped on Monday")
		out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
		p.Input.OfInputItemList = append(input, responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name), out)
		r = send()
		require.Equal(t, "[qwen-72b] lookup_order says shipped on Monday.", r.OutputText(), "streamed=%v", streamed)
		require.Positive(t, r.Usage.OutputTokens)
	}
}

// TestStreamedToolCallSurvivesACutStream: the upstream cuts the stream
// after it sent a tool call's arguments but before finish_reason (as a
// dying server does); the call resends, and the streaming caller gets
// one whole tool call, never the cut one and the resent one both.
func TestStreamedToolCallSurvivesACutStream(t *testing.T) {
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	oc := d.openai(tokAcme)
	p := agentParams("u-agent-cut", "Where is order 42? [[sim fault=cut_stream times=1]]")
	a := accumulate(t, oc.Chat.Completions.NewStreaming(ctx, p), nil)
	msg := a.acc.Choices[0].Message
	require.Equal(t, "tool_calls", a.acc.Choices[0].FinishReason)
	require.Len(t, msg.ToolCalls, 1, "%+v", msg.ToolCalls)
	require.JSONEq(t, `{"order_id":"42"}`, msg.ToolCalls[0].Function.Arguments)
	r := rig.Resilience(t, a.last.RawJSON())
	require.Len(t, r.Attempts, 2, "%+v", r.Attempts)
	require.Equal(t, "stream_broken", r.Attempts[0].Class)
	require.Equal(t, "qwen-72b", r.Attempts[1].Model)
}

// TestVercelAISDKResponses: the Vercel AI SDK (ai with @ai-sdk/openai's
// Responses API model, openai.responses("auto")) gets the call's answer
// with generateText, and the same text piece by piece with streamText;
// with a tool, generateText's loop runs it and answers from its output.
func TestVercelAISDKResponses(t *testing.T) {
	node, dir := requireTS(t, "the Vercel AI SDK", "@ai-sdk", "openai")
	d := newDoor(t, nil)
	ctx := rig.Context(t, 2*time.Minute)
	out := runTS(t, ctx, node, dir, nil, "ai-sdk.mjs", d.ts.URL+"/v1", tokAcme, "u-ai-sdk")
	t.Logf("%s", out)
	var got struct {
		Generated struct {
			Text, ID, Finish string
			OutputTokens     int `json:"output_tokens"`
		}
		Streamed struct {
			Text, Final, ID, Finish string
			Deltas                  int
		}
		Tool struct {
			Text, ID string
			Steps    int
			Calls    []string
		}
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	answer := func(rid string) string {
		t.Helper()
		res, err := (&llmclient.Client{Temporal: d.Client}).Result(ctx, strings.TrimPrefix(rid, "resp_"))
		require.NoError(t, err)
		return res.Content
	}

	g := got.Generated
	require.NotEmpty(t, g.Text)
	require.Equal(t, answer(g.ID), g.Text, "generateText's text is the call's answer")
	require.Equal(t, "stop", g.Finish)
	require.Positive(t, g.OutputTokens)

	s := got.Streamed
	require.Equal(t, answer(s.ID), s.Text, "streamText's pieces add up to the call's answer")
	require.Equal(t, s.Text, s.Final)
	require.Greater(t, s.Deltas, 1, "the text arrives in pieces")
	require.Equal(t, "stop", s.Finish)

	require.Equal(t, []string{"42"}, got.Tool.Calls)
	require.Equal(t, 2, got.Tool.Steps)
	require.Equal(t, "[qwen-72b] lookup_order says shipped on Monday.", got.Tool.Text)
}

// requireTS is node and the testdata/openai-ts folder, skipping the test
// when node is not on PATH or the package at node_modules/path… (what, for
// the message) is not installed.
func requireTS(t *testing.T, what string, path ...string) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs("testdata/openai-ts")
	require.NoError(t, err)
	node, err = exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH (Node 20 or later is needed)")
	}
	if _, err := os.Stat(filepath.Join(append([]string{dir, "node_modules"}, path...)...)); err != nil {
		t.Skipf("%s is not installed: npm ci --prefix %s", what, dir)
	}
	return node, dir
}

// runTS runs node with args in dir, env added to its environment, and
// returns its standard output; a failure fails the test with its
// standard error.
func runTS(t *testing.T, ctx context.Context, node, dir string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	return out
}
