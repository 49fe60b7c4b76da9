package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/testkit/rig"
)

// doctorRun runs `starter doctor args…` and returns its output and error.
func doctorRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, append([]string{"doctor", "--timeout", "3s"}, args...), &out)
	t.Logf("doctor said:\n%s", out.String())
	return out.String(), err
}

// requireRow finds the line of a check and requires its verdict and detail.
func requireRow(t *testing.T, out, check, verdict, detail string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, check) {
			f := strings.Fields(strings.TrimPrefix(line, check))
			require.NotEmpty(t, f, line)
			require.Equal(t, verdict, f[0], line)
			require.Contains(t, line, detail)
			return
		}
	}
	t.Fatalf("no row %q in\n%s", check, out)
}

// TestDoctorReady: with the stack up (dev server, llmsim, a worker) every
// check passes; the unset key is a warning, not a failure; --probe asks
// every rung for one token.
func TestDoctorReady(t *testing.T) {
	srv, sim := askStack(t)
	t.Setenv("LLM_BASE_URL", sim.BaseURL)
	t.Setenv("LLM_API_KEY", "")
	out, err := doctorRun(t, "--probe")
	require.NoError(t, err)
	requireRow(t, out, "temporal "+srv.FrontendHostPort(), "ok", "reachable")
	requireRow(t, out, "namespace default", "ok", "exists")
	requireRow(t, out, "search attributes", "ok", "registered")
	requireRow(t, out, "workers on llm-calls (workflow)", "ok", "1 polling")
	requireRow(t, out, "workers on llm-calls (activity)", "ok", "1 polling")
	requireRow(t, out, "workers on llm-reviews (workflow)", "ok", "1 polling")
	requireRow(t, out, "endpoint "+sim.BaseURL, "ok", "offers qwen-72b, qwen-14b, llama-8b")
	requireRow(t, out, "key LLM_API_KEY", "warn", "not set")
	requireRow(t, out, "probe qwen-72b", "ok", "1 completion tokens")
	require.Contains(t, out, "a real provider bills these")
	require.Contains(t, out, "ready, with 1 warning(s)")
}

// TestDoctorFindsWhatIsWrong: each thing a first user gets wrong fails its
// row, names the fix, and makes the command fail.
func TestDoctorFindsWhatIsWrong(t *testing.T) {
	t.Run("Temporal down", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		t.Setenv("TEMPORAL_ADDRESS", addr)
		sim := rig.Sim(t, llmsim.Options{})
		t.Setenv("LLM_BASE_URL", sim.BaseURL)
		out, err := doctorRun(t)
		require.ErrorIs(t, err, errChecksFailed)
		requireRow(t, out, "temporal "+addr, "FAIL", "set TEMPORAL_ADDRESS")
		requireRow(t, out, "endpoint "+sim.BaseURL, "ok", "offers" /* the rest is still checked */)
	})
	srv, sim := askStack(t)
	t.Setenv("LLM_BASE_URL", sim.BaseURL)
	t.Run("no worker", func(t *testing.T) {
		out, err := doctorRun(t, "--task-queue", "nobody-polls-this")
		require.ErrorIs(t, err, errChecksFailed)
		requireRow(t, out, "workers on nobody-polls-this (workflow)", "FAIL", "no worker polls it")
		requireRow(t, out, "temporal "+srv.FrontendHostPort(), "ok", "reachable")
	})
	t.Run("model not offered", func(t *testing.T) {
		t.Setenv("LLM_MODELS", "qwen-72b,gpt-5")
		out, err := doctorRun(t)
		require.ErrorIs(t, err, errChecksFailed)
		requireRow(t, out, "endpoint "+sim.BaseURL, "FAIL", "does not offer gpt-5 (it offers: llama-8b, qwen-14b, qwen-72b)")
	})
	t.Run("key missing", func(t *testing.T) {
		// A provider that wants a key: without one it refuses the list.
		target, _ := url.Parse(sim.BaseURL)
		gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer sk-right" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`))
				return
			}
			httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host}).ServeHTTP(w, r)
		}))
		t.Cleanup(gw.Close)
		t.Setenv("LLM_BASE_URL", gw.URL+"/v1")
		t.Setenv("LLM_API_KEY", "")
		out, err := doctorRun(t)
		require.ErrorIs(t, err, errChecksFailed)
		requireRow(t, out, "endpoint "+gw.URL+"/v1", "FAIL", "HTTP 401")
		requireRow(t, out, "endpoint "+gw.URL+"/v1", "FAIL", "check the key in LLM_API_KEY")
		requireRow(t, out, "key LLM_API_KEY", "warn", "not set")

		t.Setenv("LLM_API_KEY", "sk-right")
		out, err = doctorRun(t)
		require.NoError(t, err)
		requireRow(t, out, "key LLM_API_KEY", "ok", "set (8 characters; not shown)")
		require.NotContains(t, out, "sk-right", "the key was printed")
	})
}

// TestDoctorSaysWindows: per model, the context window and where it
// comes from: learned from an Ollama server for a model named only in
// LLM_MODELS (the worker does the same at its start), assumed, with how
// to set it, where the server does not say.
func TestDoctorSaysWindows(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	t.Setenv("TEMPORAL_ADDRESS", addr) // down: the model checks run all the same
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"tiny:latest","object":"model"},{"id":"other:latest","object":"model"}]}`))
		case "GET /api/ps":
			_, _ = w.Write([]byte(`{"models":[{"name":"tiny:latest","model":"tiny:latest","context_length":2048}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ollama.Close)
	t.Setenv("LLM_BASE_URL", ollama.URL+"/v1")
	t.Setenv("LLM_MODELS", "tiny,other")
	out, err := doctorRun(t)
	require.ErrorIs(t, err, errChecksFailed) // Temporal is down
	requireRow(t, out, "window tiny", "ok", "2048 tokens, from the server's /api/ps")
	requireRow(t, out, "window other", "warn", "8192 tokens, assumed 8192: "+ollama.URL+"/v1 does not say it")
	requireRow(t, out, "window other", "warn", "set models[].context_window in a policy file")
}
