package activities

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/durable-llm/durable-llm/policies/callstate"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/request"
)

// TestCallersLimitIsAnAnswer: an answer that stops at the max_tokens the
// caller set is the caller's answer (finish_reason length, as OpenAI
// gives it), not output_truncated; a request that sets none is sent the
// policy's default limit, so a server's own small default cannot cut it,
// and an answer cut at that default is output_truncated.
func TestCallersLimitIsAnAnswer(t *testing.T) {
	var mu sync.Mutex
	var sent []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		sent = append(sent, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Your parcel left the depot"},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":64}}`)
	}))
	defer srv.Close()
	cfg := config.DefaultConfig()
	cfg.OverrideEndpoint(srv.URL+"/v1", "")
	for i := range cfg.Models {
		cfg.Models[i].Stream = false
	}
	a, err := New(Options{Config: cfg, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	attempt := func(maxTokens int) (CallOutcome, error) {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		env.RegisterActivity(a)
		m := a.cfg.Models[0]
		req := request.Request{Messages: []request.Message{{Role: request.RoleUser, Content: "Where is my parcel?"}}, MaxTokens: maxTokens}
		sh := callstate.Shape{MaxTokens: maxTokens}
		v, err := env.ExecuteActivity(a.CallModel, CallInput{Request: req, Model: m.Name, Attempt: 1, Shape: sh, Prompt: a.fitPrompt(req, m, sh), Timeout: 5 * time.Second})
		var out CallOutcome
		if err == nil {
			_ = v.Get(&out)
		}
		return out, err
	}

	out, err := attempt(64)
	if err != nil {
		t.Fatalf("the caller's max_tokens reached failed the attempt: %v", err)
	}
	if out.FinishReason != "length" || out.Content != "Your parcel left the depot" {
		t.Errorf("got %q with finish_reason %q; want the model's text with finish_reason length", out.Content, out.FinishReason)
	}
	if got := sent[0]["max_tokens"]; got != float64(64) {
		t.Errorf("sent max_tokens %v, want the caller's 64", got)
	}

	// Cut at 64 tokens under the caller's 100: the server's own limit,
	// not the caller's, cut it.
	if _, err := attempt(100); err == nil {
		t.Error("an answer the server cut short of the caller's max_tokens was taken as whole")
	}
	sent = sent[:1]

	if _, err := attempt(0); err == nil {
		t.Error("an answer cut at the policy's default limit was taken as whole")
	}
	if got := sent[1]["max_tokens"]; got != float64(cfg.Limits.DefaultMaxTokens) {
		t.Errorf("a request without max_tokens was sent max_tokens %v, want the policy's default %d", got, cfg.Limits.DefaultMaxTokens)
	}
}

func TestDefaultMaxTokensFitsTheWindow(t *testing.T) {
	for _, tc := range []struct{ def, window, prompt, reserve, want int }{
		{4096, 32768, 1000, 256, 4096},
		{4096, 8192, 6000, 256, 2192},
		{4096, 8192, 8100, 256, 256}, // the cut kept the reserve free
		{4096, 0, 1000, 256, 4096},   // window unknown
	} {
		if got := defaultMaxTokens(tc.def, tc.window, tc.prompt, tc.reserve); got != tc.want {
			t.Errorf("defaultMaxTokens(%d, window %d, prompt %d, reserve %d) = %d, want %d", tc.def, tc.window, tc.prompt, tc.reserve, got, tc.want)
		}
	}
}
