package classify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/policies/failure"
	openai "github.com/sashabaranov/go-openai"
)

// canned answers every request with one fixed response, in memory: the
// fuzzer's status, header and body reach go-openai as from a server.
type canned struct {
	status int
	header http.Header
	body   []byte
}

func (c canned) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: c.status, Status: http.StatusText(c.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: c.header.Clone(), Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)),
		Request: req,
	}, nil
}

// observeCanned makes one attempt, plain or streamed, through a real
// go-openai client against canned, and fills the Observation the way the
// call activity does.
func observeCanned(c canned, stream bool) Observation {
	rec := &recorder{base: c}
	cfg := openai.DefaultConfig("test-key")
	cfg.BaseURL = "http://upstream.invalid/v1"
	cfg.HTTPClient = &http.Client{Transport: rec}
	client := openai.NewClientWithConfig(cfg)
	req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hello"}}}
	obs := Observation{Now: classifyNow}
	if !stream {
		resp, err := client.CreateChatCompletion(context.Background(), req)
		obs.Err = err
		if err == nil {
			obs.Response = &resp
		}
	} else {
		s, err := client.CreateChatCompletionStream(context.Background(), req)
		if err != nil {
			obs.Err = err
		} else {
			st := &Stream{}
			var content strings.Builder
			var finish openai.FinishReason
			for {
				chunk, err := s.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					st.Err = err
					break
				}
				for _, ch := range chunk.Choices {
					if ch.Delta.Content != "" || ch.Delta.ReasoningContent != "" || len(ch.Delta.ToolCalls) > 0 {
						st.Chunks++
						st.Tokens++
					}
					content.WriteString(ch.Delta.Content)
					if ch.FinishReason != "" {
						finish, st.Finished = ch.FinishReason, true
					}
				}
			}
			s.Close()
			obs.Stream = st
			obs.Response = &openai.ChatCompletionResponse{Choices: []openai.ChatCompletionChoice{{
				Message: openai.ChatCompletionMessage{Role: "assistant", Content: content.String()}, FinishReason: finish,
			}}}
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	obs.Status, obs.Header, obs.Body = rec.status, rec.header, bytes.Clone(rec.body.Bytes())
	return obs
}

// FuzzClassify sends arbitrary upstream replies (status, Retry-After,
// body; plain or streamed) through go-openai to Classify, and checks what
// the retry logic relies on, beyond not panicking:
//   - the class is a known one, or None only for a 2xx reply with an
//     answer (text or a tool call);
//   - an error status is never a success, nor is an HTTP 200 whose body
//     is an error object;
//   - the verdict's texts are one line, bounded, and valid UTF-8 (they
//     become a Temporal failure message, a protobuf string);
//   - Retry-After is never negative.
//
// The seed corpus is in testdata/fuzz/FuzzClassify; plain go test runs it.
func FuzzClassify(f *testing.F) {
	f.Add(200, "", []byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`), false)
	f.Add(200, "", []byte(`{"error":{"message":"engine overloaded","type":"server_error","code":"queue_full"}}`), false)
	f.Add(200, "", []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"), true)
	f.Fuzz(func(t *testing.T, status int, retryAfter string, body []byte, stream bool) {
		if status < 100 || status > 999 {
			status = 200 + (status%800+800)%800 // net/http's range of codes
		}
		h := http.Header{"Content-Type": {"application/json"}}
		if stream && status < 300 {
			h.Set("Content-Type", "text/event-stream")
		}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		obs := observeCanned(canned{status: status, header: h, body: body}, stream)
		v := Classify(obs)

		if v.Class != failure.None && !v.Class.Valid() {
			t.Fatalf("unknown class %q (%s)", v.Class, v.Reason)
		}
		if v.Class == failure.None {
			if status < 200 || status >= 300 {
				t.Fatalf("HTTP %d classified as a success: %s", status, v.Reason)
			}
			if obs.Response == nil || len(obs.Response.Choices) == 0 {
				t.Fatalf("success without an answer: %s", v.Reason)
			}
			msg := obs.Response.Choices[0].Message
			if strings.TrimSpace(msg.Content) == "" && len(msg.ToolCalls) == 0 && msg.FunctionCall == nil {
				t.Fatalf("success with an empty answer: %s", v.Reason)
			}
			if errorObject(body) {
				t.Fatalf("HTTP %d with an error object in the body classified as a success: %s", status, v.Reason)
			}
		}
		if v.Canceled {
			t.Fatalf("nothing cancelled the attempt, yet Canceled: %s", v.Reason)
		}
		if v.Reason == "" || strings.ContainsAny(v.Reason, "\r\n") || utf8.RuneCountInString(v.Reason) > 240 {
			t.Fatalf("reason is empty, not one line or too long: %q", v.Reason)
		}
		if utf8.RuneCountInString(v.Message) > maxMessageLen {
			t.Fatalf("message of %d runes: %q", utf8.RuneCountInString(v.Message), v.Message)
		}
		for name, s := range map[string]string{"reason": v.Reason, "message": v.Message, "code": v.Code, "type": v.Type} {
			if !utf8.ValidString(s) {
				t.Fatalf("%s is not valid UTF-8: %q", name, s)
			}
		}
		if v.RetryAfter < 0 || (!v.HasRetryAfter && v.RetryAfter != 0) {
			t.Fatalf("Retry-After %v (has %v) from %q", v.RetryAfter, v.HasRetryAfter, retryAfter)
		}
	})
}

// errorObject reports whether body is a JSON object with a non-null
// "error" member: an error reply, whatever its status.
func errorObject(body []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	e, ok := top["error"]
	return ok && string(bytes.TrimSpace(e)) != "null"
}
