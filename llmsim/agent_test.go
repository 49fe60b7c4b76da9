package llmsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/llmsim"
)

// TestToolRoundTrip: offered a tool, the model calls it with arguments
// from the question; sent the result, it answers from it. Streamed and not.
func TestToolRoundTrip(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl, _ := goClient(srv, 5*time.Second)
	for _, streamed := range []bool{false, true} {
		req := ask("qwen-72b", "Where is order 42?")
		offerTools(&req)
		c := complete(t, cl, req, streamed)
		if c.FinishReason != openai.FinishReasonToolCalls || c.Message.Content != "" || len(c.Message.ToolCalls) != 1 {
			t.Fatalf("stream=%v: finish %q content %q calls %+v, want one tool call", streamed, c.FinishReason, c.Message.Content, c.Message.ToolCalls)
		}
		call := c.Message.ToolCalls[0]
		if call.ID == "" || call.Function.Name != "lookup_order" || call.Function.Arguments != `{"order_id":"42"}` {
			t.Errorf("stream=%v: call %+v, want lookup_order {\"order_id\":\"42\"} with an id", streamed, call)
		}
		call.Index = nil
		req.Messages = append(req.Messages,
			openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{call}},
			openai.ChatCompletionMessage{Role: "tool", ToolCallID: call.ID, Content: "shipped on Monday"})
		c = complete(t, cl, req, streamed)
		if c.FinishReason != openai.FinishReasonStop || c.Message.Content != "[qwen-72b] lookup_order says shipped on Monday." {
			t.Errorf("stream=%v: after the result: finish %q content %q", streamed, c.FinishReason, c.Message.Content)
		}
	}
}

// complete sends req, streamed or not, and returns the first choice.
func complete(t *testing.T, cl *openai.Client, req openai.ChatCompletionRequest, streamed bool) openai.ChatCompletionChoice {
	t.Helper()
	if !streamed {
		resp, err := cl.CreateChatCompletion(context.Background(), req)
		if err != nil || len(resp.Choices) == 0 {
			t.Fatalf("err %v resp %+v", err, resp)
		}
		return resp.Choices[0]
	}
	req.Stream = true
	s, err := cl.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out openai.ChatCompletionChoice
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunk.Choices {
			out.Message.Content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				i := *tc.Index
				for len(out.Message.ToolCalls) <= i {
					out.Message.ToolCalls = append(out.Message.ToolCalls, openai.ToolCall{})
				}
				o := &out.Message.ToolCalls[i]
				if tc.ID != "" {
					o.ID, o.Type = tc.ID, tc.Type
				}
				o.Function.Name += tc.Function.Name
				o.Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				out.FinishReason = ch.FinishReason
			}
		}
	}
}

func TestToolChoice(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl, _ := goClient(srv, 5*time.Second)
	two := func(choice any) openai.ChatCompletionRequest {
		req := ask("qwen-72b", "Please cancel order 7")
		offerTools(&req)
		req.Tools = append(req.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "cancel_order"}})
		req.ToolChoice = choice
		return req
	}
	cases := []struct {
		name   string
		choice any
		want   string // the tool called, "" for a text answer
	}{
		{"auto picks the tool the question names", "auto", "cancel_order"},
		{"none answers in text", "none", ""},
		{"a named function", openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: "lookup_order"}}, "lookup_order"},
	}
	for _, c := range cases {
		ch := complete(t, cl, two(c.choice), false)
		got := ""
		if len(ch.Message.ToolCalls) > 0 {
			got = ch.Message.ToolCalls[0].Function.Name
		}
		if got != c.want || (c.want == "" && ch.Message.Content == "") {
			t.Errorf("%s: called %q (content %q), want %q", c.name, got, ch.Message.Content, c.want)
		}
	}
	// required calls even once the turn holds results.
	req := two("required")
	req.Messages = append(req.Messages,
		openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: "c1", Type: "function", Function: openai.FunctionCall{Name: "cancel_order", Arguments: "{}"}}}},
		openai.ChatCompletionMessage{Role: "tool", ToolCallID: "c1", Content: "done"})
	if ch := complete(t, cl, req, false); len(ch.Message.ToolCalls) != 1 {
		t.Errorf("required with results: %+v, want a tool call", ch.Message)
	}
}

func TestStructuredOutput(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl, _ := goClient(srv, 5*time.Second)
	req := ask("qwen-72b", "Status of order 42?")
	req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
		JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "order", Strict: true, Schema: json.RawMessage(
			`{"type":"object","properties":{"order_id":{"type":"string"},"status":{"type":"string","enum":["shipped","pending"]},"items":{"type":"array","items":{"type":"integer"}}},"required":["order_id","status","items"]}`)}}
	for _, streamed := range []bool{false, true} {
		c := complete(t, cl, req, streamed)
		var got struct {
			OrderID string `json:"order_id"`
			Status  string `json:"status"`
			Items   []int  `json:"items"`
		}
		if err := json.Unmarshal([]byte(c.Message.Content), &got); err != nil || got.OrderID != "42" || got.Status != "shipped" || len(got.Items) != 1 {
			t.Errorf("stream=%v: content %q (%v), want JSON matching the schema", streamed, c.Message.Content, err)
		}
	}
	askJSON(&req)
	if c := complete(t, cl, req, false); !json.Valid([]byte(c.Message.Content)) || c.Message.Content[0] != '{' {
		t.Errorf("json_object: content %q", c.Message.Content)
	}
}

// TestUnknownFieldsRecorded: fields the simulator does not know are kept
// as received, so a test can see a passthrough field arrive.
func TestUnknownFieldsRecorded(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl, _ := goClient(srv, 5*time.Second)
	req := ask("qwen-72b", "hello there")
	req.ChatTemplateKwargs = map[string]any{"enable_thinking": false}
	if _, err := cl.CreateChatCompletion(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the generation", func() bool { return len(srv.Generations("")) == 1 })
	g := srv.Generations("")[0]
	if string(g.Extra["chat_template_kwargs"]) != `{"enable_thinking":false}` || g.Last != "hello there" {
		t.Errorf("extra %s last %q", g.Extra, g.Last)
	}
}
