package llmsim_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	openai "github.com/sashabaranov/go-openai"

	"github.com/durable-llm/durable-llm/llmsim"
)

// recvAll reads a go-openai stream to its end and returns the content,
// reasoning, finish reason, chunk count and the error that ended it
// (io.EOF for a proper [DONE]).
func recvAll(s *openai.ChatCompletionStream) (content, reasoning, finish string, n int, err error) {
	for {
		var c openai.ChatCompletionStreamResponse
		c, err = s.Recv()
		if err != nil {
			return
		}
		n++
		for _, ch := range c.Choices {
			content += ch.Delta.Content
			reasoning += ch.Delta.ReasoningContent
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
	}
}

func TestStreamGoOpenAI(t *testing.T) {
	srv := start(t, llmsim.Options{})
	cl, cap := goClient(srv, 5*time.Second)
	ctx := context.Background()

	t.Run("ok", func(t *testing.T) {
		q := "Stream me an answer about jitter."
		s, err := cl.CreateChatCompletionStream(ctx, ask("qwen-72b", q))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		content, _, finish, n, err := recvAll(s)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("stream ended with %v, want io.EOF after [DONE]", err)
		}
		if content != llmsim.Answer("qwen-72b", q) || finish != "stop" || n < 4 {
			t.Errorf("content %q finish %q chunks %d", content, finish, n)
		}
		if _, h := cap.last(); h.Get("Content-Type") != "text/event-stream" {
			t.Errorf("Content-Type %q", h.Get("Content-Type"))
		}
	})
	t.Run("usage chunk", func(t *testing.T) {
		req := ask("qwen-14b", "usage please")
		req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
		s, err := cl.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var u *openai.Usage
		for {
			c, err := s.Recv()
			if err != nil {
				break
			}
			if c.Usage != nil {
				u = c.Usage
			}
		}
		if u == nil || u.CompletionTokens != llmsim.EstimateTokens(llmsim.Answer("qwen-14b", "usage please")) {
			t.Errorf("usage %+v", u)
		}
	})
	t.Run("break mid-way", func(t *testing.T) {
		s, err := cl.CreateChatCompletionStream(ctx, ask("qwen-72b", "break it [[sim fault=stream_break chunks=3]]"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		content, _, finish, n, err := recvAll(s)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("stream ended with %v, want unexpected EOF", err)
		}
		full := llmsim.Answer("qwen-72b", "break it")
		if n != 3 || finish != "" || content == "" || content == full || !strings.HasPrefix(full, content) {
			t.Errorf("got %d chunks, finish %q, content %q (full %q)", n, finish, content, full)
		}
	})
	t.Run("error object in stream", func(t *testing.T) {
		s, err := cl.CreateChatCompletionStream(ctx, ask("qwen-72b", "err [[sim fault=error_body]]"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Recv()
		var e *openai.APIError
		if !errors.As(err, &e) || e.Code != "internal_error" {
			t.Errorf("err %T %v, want an APIError from the stream", err, err)
		}
	})
	t.Run("malformed chunk", func(t *testing.T) {
		s, err := cl.CreateChatCompletionStream(ctx, ask("qwen-72b", "bad [[sim fault=malformed_json]]"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Recv()
		if err == nil || errors.Is(err, io.EOF) {
			t.Errorf("err %v, want a decoding error", err)
		}
	})
	t.Run("reasoning only", func(t *testing.T) {
		s, err := cl.CreateChatCompletionStream(ctx, ask("qwen-72b", "think [[sim fault=reasoning_only]]"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		content, reasoning, finish, _, err := recvAll(s)
		if !errors.Is(err, io.EOF) || content != "" || !strings.HasPrefix(reasoning, "Let me think") || finish != "stop" {
			t.Errorf("err %v content %q reasoning %q finish %q", err, content, reasoning, finish)
		}
	})
	t.Run("status error before the stream", func(t *testing.T) {
		_, err := cl.CreateChatCompletionStream(ctx, ask("qwen-72b", "limit [[sim fault=rate_limited retry_after=3s]]"))
		apiError(t, err, 429, "rate_limit_exceeded")
		if _, h := cap.last(); h.Get("Retry-After") != "3" {
			t.Errorf("Retry-After %q", h.Get("Retry-After"))
		}
	})
	t.Run("slow drip", func(t *testing.T) {
		begin := time.Now()
		s, err := cl.CreateChatCompletionStream(ctx, ask("qwen-72b", "drip [[sim fault=slow_drip duration=400ms]]"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		content, _, _, _, err := recvAll(s)
		if !errors.Is(err, io.EOF) || content != llmsim.Answer("qwen-72b", "drip") || time.Since(begin) < 300*time.Millisecond {
			t.Errorf("err %v content %q after %v", err, content, time.Since(begin))
		}
	})
}

// TestStreamWireFormat checks the raw SSE framing.
func TestStreamWireFormat(t *testing.T) {
	srv := start(t, llmsim.Options{})
	resp, err := http.Post(srv.BaseURL+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"llama-8b","stream":true,"messages":[{"role":"user","content":"wire"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 6 {
		t.Fatalf("lines %q", lines)
	}
	for i, l := range lines {
		if i%2 == 1 && l != "" {
			t.Errorf("line %d = %q, want the blank line after an event", i, l)
		}
		if i%2 == 0 && !strings.HasPrefix(l, "data: ") {
			t.Errorf("line %d = %q, want data: …", i, l)
		}
	}
	if lines[len(lines)-2] != "data: [DONE]" {
		t.Errorf("last event %q", lines[len(lines)-2])
	}
}

func TestOpenAIGoClient(t *testing.T) {
	srv := start(t, llmsim.Options{})
	ctx := context.Background()
	client := oai.NewClient(option.WithBaseURL(srv.BaseURL+"/"), option.WithAPIKey("sk-test"),
		option.WithHeader("Idempotency-Key", "oai-go/1"))
	params := func(model, q string) oai.ChatCompletionNewParams {
		return oai.ChatCompletionNewParams{Model: model, Messages: []oai.ChatCompletionMessageParamUnion{
			oai.SystemMessage("Be brief."), oai.UserMessage(q)}}
	}

	t.Run("plain", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, params("qwen-72b", "Hello from openai-go"))
		if err != nil {
			t.Fatal(err)
		}
		want := llmsim.Answer("qwen-72b", "Hello from openai-go")
		if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != want || resp.Choices[0].FinishReason != "stop" {
			t.Fatalf("resp %+v", resp)
		}
		if resp.Usage.CompletionTokens != int64(llmsim.EstimateTokens(want)) || resp.Model != "qwen-72b" {
			t.Errorf("usage %+v model %q", resp.Usage, resp.Model)
		}
	})
	t.Run("stream", func(t *testing.T) {
		p := params("qwen-14b", "Stream from openai-go")
		p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
		stream := client.Chat.Completions.NewStreaming(ctx, p)
		acc := oai.ChatCompletionAccumulator{}
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		want := llmsim.Answer("qwen-14b", "Stream from openai-go")
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want || acc.Choices[0].FinishReason != "stop" {
			t.Errorf("accumulated %+v", acc.ChatCompletion)
		}
		if acc.Usage.PromptTokens == 0 {
			t.Errorf("usage %+v", acc.Usage)
		}
	})
	t.Run("stream break", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, params("qwen-14b", "break [[sim fault=stream_break]]"))
		n := 0
		for stream.Next() {
			n++
		}
		if stream.Err() == nil || n != 2 {
			t.Errorf("err %v after %d chunks, want an error after 2", stream.Err(), n)
		}
	})
	t.Run("error types and retries", func(t *testing.T) {
		// openai-go retries 429 twice by default, honouring retry-after-ms:
		// the directive fails the first two attempts, the third succeeds.
		q := "retry me [[sim fault=rate_limited times=2 retry_after_ms=10]]"
		c2 := oai.NewClient(option.WithBaseURL(srv.BaseURL+"/"), option.WithAPIKey("sk-test"),
			option.WithHeader("Idempotency-Key", "oai-retry/1"))
		resp, err := c2.Chat.Completions.New(ctx, params("qwen-72b", q))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Choices[0].Message.Content != llmsim.Answer("qwen-72b", q) {
			t.Errorf("content %q", resp.Choices[0].Message.Content)
		}
		if cv := srv.Stats().Conversations["oai-retry"]; cv.Attempts != 3 || cv.Requests[0].Outcome != "429" || cv.Requests[2].Outcome != "200" {
			t.Errorf("conversation %+v", cv)
		}
		_, err = client.Chat.Completions.New(ctx, params("qwen-72b", "no [[sim fault=maintenance]]"), option.WithMaxRetries(0))
		var e *oai.Error
		if !errors.As(err, &e) || e.StatusCode != 503 || e.Message != "Service under maintenance" || e.Code != "maintenance" {
			t.Errorf("err %T %v", err, err)
		}
	})
	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 3 || page.Data[0].ID != "qwen-72b" {
			t.Errorf("models %+v", page.Data)
		}
		m, err := client.Models.Get(ctx, "llama-8b")
		if err != nil || m.ID != "llama-8b" {
			t.Errorf("get: %v %+v", err, m)
		}
	})
}
