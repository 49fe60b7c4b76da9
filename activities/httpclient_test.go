package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
)

func TestWithContinuation(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"The answer st"}],"stream":true}`
	cases := []struct {
		style config.Continuation
		check func(t *testing.T, b map[string]any)
	}{
		{config.ContinueVLLM, func(t *testing.T, b map[string]any) {
			if b["continue_final_message"] != true || b["add_generation_prompt"] != false {
				t.Errorf("vLLM flags missing: %v", b)
			}
		}},
		{config.ContinueDeepSeek, func(t *testing.T, b map[string]any) {
			msgs := b["messages"].([]any)
			last := msgs[len(msgs)-1].(map[string]any)
			if last["prefix"] != true || last["content"] != "The answer st" || msgs[0].(map[string]any)["prefix"] != nil {
				t.Errorf("prefix not on the final message only: %v", msgs)
			}
			if _, ok := b["continue_final_message"]; ok {
				t.Error("vLLM flag sent to a DeepSeek-style server")
			}
		}},
	}
	for _, c := range cases {
		t.Run(string(c.style), func(t *testing.T) {
			req, _ := http.NewRequest("POST", "http://x/v1/chat/completions", bytes.NewBufferString(body))
			out, err := rewriteBody(req, c.style, map[string]json.RawMessage{"top_k": json.RawMessage(`40`), "guided": json.RawMessage(`{"regex":"<a&b>"}`)})
			if err != nil {
				t.Fatal(err)
			}
			for i, rc := range []func() (io.ReadCloser, error){func() (io.ReadCloser, error) { return out.Body, nil }, out.GetBody} {
				r, _ := rc()
				raw, _ := io.ReadAll(r)
				if int64(len(raw)) != out.ContentLength {
					t.Errorf("read %d: %d bytes, Content-Length %d", i, len(raw), out.ContentLength)
				}
				var b map[string]any
				if err := json.Unmarshal(raw, &b); err != nil {
					t.Fatal(err)
				}
				if b["model"] != "m" || b["stream"] != true {
					t.Errorf("other fields lost: %v", b)
				}
				if !bytes.Contains(raw, []byte(`"top_k":40`)) || !bytes.Contains(raw, []byte(`"guided":{"regex":"<a&b>"}`)) {
					t.Errorf("passthrough fields not sent as written: %s", raw)
				}
				c.check(t, b)
			}
		})
	}
}

// TestNoHiddenResend: a reused keep-alive connection that fails after the
// request was written surfaces as an error of this attempt; net/http does
// not resend it behind the workflow's back, although the request carries
// an idempotency key (the upstream counts one arrival, and still reads the
// key).
func TestNoHiddenResend(t *testing.T) {
	srv, err := llmsim.NewServer(llmsim.Options{Scenario: &llmsim.Scenario{Models: llmsim.InstantModels()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cl := newHTTPClient(config.DefaultConfig(), nil, rand.Float64)
	post := func(rid, question string) error {
		body, _ := json.Marshal(map[string]any{"model": "qwen-72b", "messages": []map[string]string{{"role": "user", "content": question}}})
		ctx := withExchange(context.Background(), &exchange{requestID: rid})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.BaseURL+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := cl.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := post("warm/1", "warm the connection"); err != nil {
		t.Fatal(err)
	}
	srv.ResetStats()
	err = post("conv-reset/1", "reset once [[sim fault=reset times=1]]")
	st := srv.Stats()
	if got := st.Models["qwen-72b"].Arrivals; err == nil || got != 1 {
		t.Fatalf("reset on a reused connection: err %v, %d upstream arrivals; want the error and 1 arrival", err, got)
	}
	if cv := st.Conversations["conv-reset"]; cv.Attempts != 1 || len(cv.Requests) != 1 || cv.Requests[0].IdempotencyKey != "conv-reset/1" {
		t.Errorf("conversation conv-reset upstream: %+v; want one request that carried idempotency key conv-reset/1", cv)
	}
}
