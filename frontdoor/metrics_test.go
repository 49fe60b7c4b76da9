package frontdoor_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/durable-llm/durable-llm/frontdoor"
	"github.com/durable-llm/durable-llm/llmclient"
	"github.com/durable-llm/durable-llm/policies/config"
)

// TestDoorMetrics: the front door counts what it answered by route
// pattern (never a path with an ID) and status, and its error answers by
// their code, as an operator's dashboard reads them.
func TestDoorMetrics(t *testing.T) {
	tok := strings.Repeat("m", frontdoor.MinTokenLen)
	tenants, err := frontdoor.ParseTokens(tok + "=acme")
	require.NoError(t, err)
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"}) // never dialled here
	require.NoError(t, err)
	defer c.Close()
	reg := prometheus.NewRegistry()
	h, err := frontdoor.New(frontdoor.Options{Client: &llmclient.Client{Temporal: c, TaskQueue: "q"}, Tenants: tenants,
		Config: config.DefaultConfig(), Metrics: reg})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path, token string) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, 200, get("/v1/models", tok))
	require.Equal(t, 401, get("/v1/models", ""))
	require.Equal(t, 401, get("/v1/models", "wrong-"+tok))
	require.Equal(t, 404, get("/v1/models/no-such-model", tok))
	require.Equal(t, 200, get("/healthz", "")) // not counted: a balancer's probe

	expect := `
# HELP durable_llm_frontdoor_refusals_total Error answers of the front door, by their error code (missing_api_key, rate_limit_exceeded, request_too_large, temporal_unavailable, …).
# TYPE durable_llm_frontdoor_refusals_total counter
durable_llm_frontdoor_refusals_total{code="invalid_api_key"} 1
durable_llm_frontdoor_refusals_total{code="missing_api_key"} 1
durable_llm_frontdoor_refusals_total{code="model_not_found"} 1
# HELP durable_llm_frontdoor_requests_total Requests the front door answered, by route pattern and HTTP status.
# TYPE durable_llm_frontdoor_requests_total counter
durable_llm_frontdoor_requests_total{route="/v1/models",status="200"} 1
durable_llm_frontdoor_requests_total{route="/v1/models",status="401"} 2
durable_llm_frontdoor_requests_total{route="/v1/models/{model}",status="404"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expect),
		"durable_llm_frontdoor_requests_total", "durable_llm_frontdoor_refusals_total"))
	n, err := testutil.GatherAndCount(reg, "durable_llm_frontdoor_streams_open")
	require.NoError(t, err)
	require.Equal(t, 1, n, "the open streams gauge is exported")
}
