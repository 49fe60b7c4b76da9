package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

func TestHelpListsFaultsAndScenarios(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out, &errb, nil); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	for _, f := range llmsim.Faults() {
		if !strings.Contains(help, "\n  "+string(f)+" ") {
			t.Errorf("--help lacks fault %s", f)
		}
	}
	for _, n := range llmsim.BuiltinScenarios() {
		if !strings.Contains(help, "\n  "+n+" ") {
			t.Errorf("--help lacks scenario %s", n)
		}
	}
	for _, s := range []string{"--addr", "-scenario", "[[sim fault="} {
		if !strings.Contains(help, s) {
			t.Errorf("--help lacks %q", s)
		}
	}
}

func TestBadScenarioRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spike.yaml")
	if err := os.WriteFile(path, []byte("phases: [{faults: [{kind: rate_limit}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"--scenario", path, "--addr", "127.0.0.1:0"}, &bytes.Buffer{}, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "spike.yaml: phases[0].faults[0].kind: unknown fault \"rate_limit\" (did you mean rate_limited?)") {
		t.Errorf("err = %v", err)
	}
	if err := run(context.Background(), []string{"--scenario", "nope"}, &bytes.Buffer{}, &bytes.Buffer{}, nil); err == nil {
		t.Error("unknown built-in accepted")
	}
}

// TestServeLogAndShutDown serves a request, checks the one log line, and
// shuts down promptly even with a request hanging.
func TestServeLogAndShutDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--scenario", "class-read_timeout"}, &bytes.Buffer{}, &logs,
			func(a net.Addr) { addrc <- a })
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	base := "http://" + addr.String()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"qwen-14b","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("request: %v %v", err, resp)
	}
	resp.Body.Close()
	if n := strings.Count(logs.String(), "\trequest\t"); n != 1 || !strings.Contains(logs.String(), `"model": "qwen-14b"`) {
		t.Errorf("%d request log lines, want 1 naming the model:\n%s", n, logs.String())
	}
	hung := make(chan error, 1)
	go func() {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"qwen-72b","messages":[{"role":"user","content":"hang"}]}`))
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	time.Sleep(100 * time.Millisecond)
	begin := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run returned %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("shutdown blocked by the hanging request")
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("shutdown took %v", took)
	}
	if err := <-hung; err == nil {
		t.Error("the hanging request got a response")
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serve runs the command with args until the test ends and returns its
// base URL.
func serve(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--addr", "127.0.0.1:0", "--log-level", "warn"}, args...), &bytes.Buffer{}, &syncBuffer{},
			func(a net.Addr) { addrc <- a })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addrc:
		return "http://" + a.String()
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	return ""
}

func TestGenerationFlags(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		model     string
		ttft, itl string
	}{
		{"scenario as written", []string{"--scenario", "class-timeout"}, "qwen-14b", "15ms", "0s"},
		{"ttft and speed", []string{"--scenario", "healthy", "--ttft", "10ms", "--tokens-per-second", "1000"}, "qwen-72b", "10ms", "1ms"},
		{"speed on a latency-only scenario", []string{"--scenario", "class-timeout", "--tokens-per-second", "500"}, "qwen-14b", "15ms", "2ms"},
		{"instant", []string{"--scenario", "healthy", "--instant"}, "llama-8b", "0s", "0s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := serve(t, append(c.args, "--keep-generations", "5")...)
			resp, err := http.Post(base+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"`+c.model+`","messages":[{"role":"user","content":"hi [[sim tokens=20]]"}]}`))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("request: %v %v", err, resp)
			}
			resp.Body.Close()
			var st struct {
				Generations []struct {
					TTFT, ITL        string
					CompletionTokens int `json:"completion_tokens"`
				} `json:"generations"`
			}
			resp, err = http.Get(base + "/stats?generations=1")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if len(st.Generations) != 1 || st.Generations[0].TTFT != c.ttft || st.Generations[0].ITL != c.itl || st.Generations[0].CompletionTokens != 20 {
				t.Errorf("generations %+v, want ttft %s itl %s", st.Generations, c.ttft, c.itl)
			}
		})
	}
	err := run(context.Background(), []string{"--addr", "127.0.0.1:0", "--tokens-per-second", "-4"}, &bytes.Buffer{}, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "--tokens-per-second must be positive") {
		t.Errorf("negative speed: %v", err)
	}
}

// TestModelsFlag: --models serves a provider's names instead of the
// scenario's: /v1/models lists exactly them, a request for one is
// answered, one for a scenario name is model_not_found, and the
// scenario's faults follow the renamed models.
func TestModelsFlag(t *testing.T) {
	base := serve(t, "--scenario", "healthy", "--models", "gpt-4o,gpt-4o-mini")
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Data) != 2 || list.Data[0].ID != "gpt-4o" || list.Data[1].ID != "gpt-4o-mini" {
		t.Fatalf("models %+v, %v", list.Data, err)
	}
	for model, want := range map[string]int{"gpt-4o-mini": 200, "qwen-72b": 404} {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: HTTP %d, want %d", model, resp.StatusCode, want)
		}
	}
	sc, err := llmsim.BuiltinScenario("mixed")
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.RenameModels([]string{"gpt-4o", "gpt-4o-mini"}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range sc.Phases {
		for _, f := range p.Faults {
			seen[f.Model] = true
		}
		for m := range p.ModelLatency {
			seen[m] = true
		}
	}
	if !seen["gpt-4o"] || !seen["gpt-4o-mini"] || seen["qwen-72b"] || seen["qwen-14b"] || seen["llama-8b"] {
		t.Errorf("the faults' models after the rename: %v", seen)
	}
	err = run(context.Background(), []string{"--addr", "127.0.0.1:0", "--models", "a,,b"}, &bytes.Buffer{}, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "--models: an empty name") {
		t.Errorf("empty name: %v", err)
	}
}
