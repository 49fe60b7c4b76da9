package llmworker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/llmsim"
	"github.com/durable-llm/durable-llm/policies/config"
	"github.com/durable-llm/durable-llm/policies/failure"
	"github.com/durable-llm/durable-llm/testkit/rig"
	"github.com/durable-llm/durable-llm/workflows"
)

// authGateway stands in front of llmsim like a real provider's edge: it
// checks the bearer key, answers OpenAI's 401 invalid_api_key for a wrong
// one (quoting it masked, as OpenAI does), and records what it saw, so the
// test knows the key was really used.
type authGateway struct {
	key string

	mu   sync.Mutex
	seen map[string]int // Authorization header → requests
}

func (g *authGateway) handler(upstream *url.URL) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		g.mu.Lock()
		g.seen[auth]++
		g.mu.Unlock()
		if auth != "Bearer "+g.key {
			// Some gateways quote the refused key in full: the worker must
			// redact it before it reaches history or logs.
			got := strings.TrimPrefix(auth, "Bearer ")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
				"message": "Incorrect API key provided: " + got + ". You can find your API key at https://platform.openai.com/account/api-keys.",
				"type":    "invalid_request_error", "param": nil, "code": "invalid_api_key",
			}})
			return
		}
		proxy.ServeHTTP(w, r)
	})
}

func (g *authGateway) count(auth string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen[auth]
}

func randomKey(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// TestIntegrationAPIKeysNeverLeak runs calls that succeed, meet a 401 for a
// wrong key, fall back when every model refuses, and fail on bad input,
// then looks for the API keys everywhere Temporal and the worker keep
// text: every event of every history (JSON and wire bytes), search
// attributes, memo, the results and the worker's zap log at debug level.
func TestIntegrationAPIKeysNeverLeak(t *testing.T) {
	srv := shared.Server(t)
	key := randomKey("sk-test-SECRET-123-")
	stale := randomKey("sk-test-STALE-456-") // a rotated-out key still configured for one model
	t.Setenv("LLM_API_KEY", key)
	t.Setenv("LLM_API_KEY_STALE", stale)

	sim := rig.Sim(t, llmsim.Options{})
	up, err := url.Parse(sim.URL)
	require.NoError(t, err)
	gw := &authGateway{key: key, seen: map[string]int{}}
	edge := httptest.NewServer(gw.handler(up))
	t.Cleanup(edge.Close)

	// The worker's logs, everything from debug up, into a buffer.
	var logs syncBuf
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logs), zapcore.DebugLevel)
	c, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Logger: log.NewStructuredLogger(slog.New(zapslog.NewHandler(core)))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s := rig.New(t, rig.Options{Client: c, Endpoint: edge.URL + "/v1", QueuePrefix: "llm-secrets-", Policy: func(cfg *config.Config) {
		cfg.OverrideEndpoint("", "LLM_API_KEY")       // every model's key
		cfg.Models[1].APIKeyEnv = "LLM_API_KEY_STALE" // qwen-14b: the gateway refuses it
		cfg.Breaker.ConsecutiveFailures = 1000        // keep breakers out of this test
		cfg.Breaker.MinCalls, cfg.Breaker.Window = 1000, 1000
	}})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var ids []string
	var results []string
	call := func(req workflows.CallRequest) (workflows.CallResult, error) {
		id, err := llmclient.Key(req)
		require.NoError(t, err)
		ids = append(ids, id)
		res, err := s.Calls.Call(ctx, req)
		b, _ := json.Marshal(res)
		results = append(results, string(b))
		if err != nil {
			results = append(results, err.Error())
		}
		return res, err
	}

	// 1. Success: qwen-72b answers with the right key.
	res, err := call(question("Where is my order? (secrets test)"))
	require.NoError(t, err)
	require.Equal(t, workflows.SourceModel, res.Source)

	// 2. A 401 path: qwen-72b answers 502 (retried, then left), qwen-14b's
	// key is refused, llama-8b answers.
	res, err = call(question("[[sim fault=bad_gateway model=qwen-72b times=always]] Can I change my address? (secrets test)"))
	require.NoError(t, err)
	require.Equal(t, []string{"qwen-72b:server_error:retry", "qwen-72b:server_error:switch_model", "qwen-14b:auth:switch_model", "llama-8b:ok:answer"},
		workflows.CallResult.Decisions(res))
	require.Equal(t, http.StatusUnauthorized, res.Attempts[2].Status)

	// 3. Every model refuses (llmsim's own 401): the FAQ answers. The
	// refusal in 2 tripped qwen-14b's breaker, open for 1 s and then
	// half-open: unless let through as a trial, the call skips it (no request).
	res, err = call(question("[[sim fault=invalid_api_key times=always]] How do I get a refund for my order? (secrets test)"))
	require.NoError(t, err)
	require.True(t, res.Degraded)
	for _, a := range res.Attempts {
		if a.Class == string(failure.BreakerOpen) && a.Status == 0 {
			continue
		}
		require.Equal(t, "auth", a.Class, "attempt %+v", a)
	}

	// 4. Bad input: the call fails at once.
	bad := question("Which model? (secrets test)")
	bad.Model = "no-such-model"
	_, err = call(bad)
	require.Error(t, err)

	// The key was really used: the gateway saw it, and saw the stale one.
	require.Positive(t, gw.count("Bearer "+key), "the API key never reached the upstream")
	require.Positive(t, gw.count("Bearer "+stale), "qwen-14b did not use its own key variable")

	// Now look for both keys everywhere.
	var haystacks []string
	for _, id := range ids {
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			js, err := protojson.Marshal(ev)
			require.NoError(t, err)
			wire, err := proto.Marshal(ev)
			require.NoError(t, err)
			haystacks = append(haystacks, string(js), string(wire))
		}
		desc, err := c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: "default", Execution: &commonpb.WorkflowExecution{WorkflowId: id},
		})
		require.NoError(t, err)
		info := desc.GetWorkflowExecutionInfo()
		require.NotEmpty(t, info.GetSearchAttributes().GetIndexedFields(), "sanity: search attributes were read")
		for _, m := range []proto.Message{info.GetSearchAttributes(), info.GetMemo(), desc} {
			js, err := protojson.Marshal(m)
			require.NoError(t, err)
			haystacks = append(haystacks, string(js))
		}
	}
	haystacks = append(haystacks, results...)
	require.NoError(t, core.Sync())
	log := logs.String()
	require.Contains(t, log, "Activity error", "sanity: the worker's log was captured (the 401 attempt is logged)")
	haystacks = append(haystacks, log)

	for _, secret := range []string{key, stale} {
		for _, part := range []string{secret, secret[len("sk-test-"):], secret[len(secret)-16:]} {
			for i, h := range haystacks {
				if strings.Contains(h, part) {
					at := strings.Index(h, part)
					t.Fatalf("API key material %q… found in haystack %d: …%s…", part[:12], i, h[max(0, at-120):min(len(h), at+40)])
				}
			}
		}
	}
	t.Logf("%d calls, %d haystacks (%d KiB) searched; gateway saw the key %d times, the stale key %d times",
		len(ids), len(haystacks), totalLen(haystacks)>>10, gw.count("Bearer "+key), gw.count("Bearer "+stale))
}

func totalLen(ss []string) int {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	return n
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var _ io.Writer = (*syncBuf)(nil)
