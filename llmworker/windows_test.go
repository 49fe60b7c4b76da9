package llmworker_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
)

const windowKey = "sk-window-0123456789abcdefghij"

// fakeServer answers the paths of routes (method and path → JSON body)
// and 404 to any other, and records each request with whether it carried
// the key.
type fakeServer struct {
	*httptest.Server
	mu    sync.Mutex
	asked []string // "GET /v1/models key" or "POST /api/show"
}

func newFake(t *testing.T, routes map[string]string) *fakeServer {
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := r.Method + " " + r.URL.Path
		if r.Header.Get("Authorization") == "Bearer "+windowKey {
			line += " key"
		}
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			var body struct{ Model string }
			_ = json.Unmarshal(b, &body)
			line += " " + body.Model
		}
		f.mu.Lock()
		f.asked = append(f.asked, line)
		f.mu.Unlock()
		body, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// ladder is the quick start's configuration: LLM_MODELS on LLM_BASE_URL
// with LLM_API_KEY, every window assumed.
func ladder(t *testing.T, base, models string) *config.Config {
	t.Helper()
	cfg := config.DefaultConfig()
	env := map[string]string{config.EnvBaseURL: base, config.EnvModels: models, config.EnvAPIKey: windowKey}
	require.NoError(t, cfg.ApplyEnv(func(k string) string { return env[k] }))
	return cfg
}

func learn(t *testing.T, cfg *config.Config) []llmworker.Window {
	t.Helper()
	start := time.Now()
	ws := llmworker.LearnWindows(context.Background(), cfg, func(k string) string {
		if k == config.EnvAPIKey {
			return windowKey
		}
		return ""
	}, llmworker.WindowProbeTimeout)
	require.Less(t, time.Since(start), llmworker.WindowProbeTimeout+time.Second)
	for _, w := range ws {
		t.Log(w)
		require.NotContains(t, w.String(), windowKey)
	}
	return ws
}

const ollamaShow = `{"parameters":"num_predict                    128\nnum_thread                     1","model_info":{"general.architecture":"llama","llama.context_length":2048,"llama.block_count":2}}`

// TestLearnWindows: the window of each kind of server, learned where it
// says it, an upper bound where it says only that, and the assumed one
// (said so, with how to set it) where it says nothing or cannot be asked.
func TestLearnWindows(t *testing.T) {
	assumed := config.DefaultConfig().ModelDefaults.ContextWindow

	t.Run("vLLM", func(t *testing.T) {
		f := newFake(t, map[string]string{
			"GET /v1/models": `{"object":"list","data":[{"id":"Qwen/Qwen2.5-7B-Instruct","object":"model","max_model_len":32768}]}`,
		})
		cfg := ladder(t, f.URL+"/v1", "Qwen/Qwen2.5-7B-Instruct")
		ws := learn(t, cfg)
		require.Equal(t, llmworker.Window{Model: "Qwen/Qwen2.5-7B-Instruct", Tokens: 32768, Source: llmworker.WindowServer,
			From: "from the server's /models (max_model_len)"}, ws[0])
		llmworker.ApplyWindows(cfg, ws)
		require.Equal(t, 32768, cfg.Models[0].ContextWindow, "pruned for the window learned")
		require.False(t, cfg.Models[0].WindowAssumed)
	})

	t.Run("llama.cpp", func(t *testing.T) {
		f := newFake(t, map[string]string{
			"GET /v1/models": `{"object":"list","data":[{"id":"qwen2.5-0.5b-instruct-q4_k_m.gguf","object":"model","meta":{"n_ctx_train":32768}}]}`,
			"GET /props":     `{"default_generation_settings":{"n_ctx":4096,"params":{}},"total_slots":1}`,
		})
		ws := learn(t, ladder(t, f.URL+"/v1", "qwen2.5-0.5b-instruct-q4_k_m.gguf"))
		require.Equal(t, 4096, ws[0].Tokens)
		require.Equal(t, llmworker.WindowServer, ws[0].Source)
		require.Equal(t, "from the server's /props (n_ctx)", ws[0].From)
	})

	t.Run("Ollama, model loaded", func(t *testing.T) {
		f := newFake(t, map[string]string{
			"GET /v1/models": `{"object":"list","data":[{"id":"tiny:latest","object":"model","owned_by":"library"}]}`,
			"GET /api/ps":    `{"models":[{"name":"tiny:latest","model":"tiny:latest","size":1,"context_length":1024}]}`,
			"POST /api/show": ollamaShow,
		})
		cfg := ladder(t, f.URL+"/v1", "tiny")
		ws := learn(t, cfg)
		require.Equal(t, llmworker.Window{Model: "tiny", Tokens: 1024, Source: llmworker.WindowServer,
			From: "from the server's /api/ps (the loaded model's context_length)"}, ws[0])
		llmworker.ApplyWindows(cfg, ws)
		require.Equal(t, 1024, cfg.Models[0].ContextWindow)

		// The key goes only where a call sends it (under the base URL), never
		// to the server's own endpoints.
		for _, r := range f.requests() {
			if strings.HasSuffix(r, " key") {
				require.True(t, strings.HasPrefix(r, "GET /v1/models"), r)
			}
		}
		require.Contains(t, f.requests(), "GET /v1/models key")
		require.Contains(t, f.requests(), "POST /api/show tiny")
	})

	t.Run("Ollama, not loaded, num_ctx", func(t *testing.T) {
		f := newFake(t, map[string]string{
			"GET /api/ps":    `{"models":[]}`,
			"POST /api/show": `{"parameters":"num_ctx                        8192\nnum_predict 128","model_info":{"general.architecture":"qwen2","qwen2.context_length":4096}}`,
		})
		ws := learn(t, ladder(t, f.URL+"/v1", "qwen"))
		require.Equal(t, 4096, ws[0].Tokens, "num_ctx beyond the trained context is capped to it")
		require.Equal(t, llmworker.WindowServer, ws[0].Source)
		require.Equal(t, "from the server's /api/show (num_ctx 8192, trained context 4096)", ws[0].From)
	})

	t.Run("Ollama, not loaded, no num_ctx", func(t *testing.T) {
		f := newFake(t, map[string]string{
			"GET /api/ps":    `{"models":[]}`,
			"POST /api/show": ollamaShow,
		})
		ws := learn(t, ladder(t, f.URL+"/v1", "tiny"))
		require.Equal(t, min(2048, assumed), ws[0].Tokens, "no more than the trained context")
		require.Equal(t, llmworker.WindowBound, ws[0].Source)
		require.Contains(t, ws[0].From, "at most 2048")
		require.Contains(t, ws[0].From, "not said until the model is loaded")
	})

	t.Run("unknown server", func(t *testing.T) {
		f := newFake(t, map[string]string{"GET /v1/models": `{"object":"list","data":[{"id":"gpt-4o"}]}`})
		cfg := ladder(t, f.URL+"/v1", "gpt-4o")
		ws := learn(t, cfg)
		require.Equal(t, assumed, ws[0].Tokens)
		require.Equal(t, llmworker.WindowAssumed, ws[0].Source)
		require.Contains(t, ws[0].From, "does not say it")
		require.Contains(t, ws[0].From, "set models[].context_window")
		llmworker.ApplyWindows(cfg, ws)
		require.Equal(t, assumed, cfg.Models[0].ContextWindow)
		require.True(t, cfg.Models[0].WindowAssumed)
	})

	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		ws := learn(t, ladder(t, "http://"+addr+"/v1", "tiny"))
		require.Equal(t, llmworker.WindowAssumed, ws[0].Source)
		require.Equal(t, assumed, ws[0].Tokens)
		require.Contains(t, ws[0].From, "could not be asked")
	})

	t.Run("a server that does not answer", func(t *testing.T) {
		stop := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(stop) })
		ws := learn(t, ladder(t, srv.URL+"/v1", "tiny")) // within the timeout, checked by learn
		require.Equal(t, llmworker.WindowAssumed, ws[0].Source)
	})

	t.Run("the policy's window is not asked", func(t *testing.T) {
		f := newFake(t, map[string]string{"GET /api/ps": `{"models":[{"name":"qwen-14b:latest","context_length":1024}]}`})
		cfg := ladder(t, f.URL+"/v1", "qwen-14b") // the default policy names qwen-14b's window
		ws := learn(t, cfg)
		require.Equal(t, llmworker.Window{Model: "qwen-14b", Tokens: 8192, Source: llmworker.WindowPolicy, From: "set by the policy"}, ws[0])
		require.Empty(t, f.requests())
	})
}
