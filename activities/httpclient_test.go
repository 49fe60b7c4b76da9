package activities

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

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
			out, err := withContinuation(req, c.style)
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
				c.check(t, b)
			}
		})
	}
}
