package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmworker"
	"github.com/durable-llm/durable-llm/policies/config"
)

const simAddr = "127.0.0.1:8000"

// env is a getenv over vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// writePolicy writes a policy file whose ladder is models, each at the
// base URL that follows its name.
func writePolicy(t *testing.T, models ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("models:\n")
	for i := 0; i < len(models); i += 2 {
		b.WriteString("  - name: " + models[i] + "\n    base_url: " + models[i+1] + "\n    context_window: 8192\n")
	}
	b.WriteString("hedge: {model: " + models[len(models)-2] + "}\ndiagnose: {model: " + models[len(models)-2] + "}\n")
	p := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// workerConfig is the ladder the worker builds from the environment make
// run gives it: its own (getenv) plus the plan's workerEnv.
func workerConfig(t *testing.T, getenv func(string) string, u upstream) *config.Config {
	t.Helper()
	added := map[string]string{}
	for _, kv := range u.workerEnv {
		k, v, _ := strings.Cut(kv, "=")
		added[k] = v
	}
	wenv := func(k string) string {
		if v, ok := added[k]; ok {
			return v
		}
		return getenv(k)
	}
	cfg, err := config.LoadConfigOrDefault(wenv("POLICY_FILE"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ApplyEnv(wenv); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestAPolicysEndpointsAreThePolicys: POLICY_FILE=mine.yaml make run with
// a policy whose models name their own endpoints starts no llmsim, sets no
// LLM_BASE_URL for the worker, and the worker's requests (its model check
// at start) reach the policy's servers, each model its own.
func TestAPolicysEndpointsAreThePolicys(t *testing.T) {
	var hits [2]atomic.Int32
	servers := make([]*httptest.Server, 2)
	for i, name := range []string{"gpt-4o", "claude-sonnet"} {
		servers[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"` + name + `","object":"model"}]}`))
		}))
		t.Cleanup(servers[i].Close)
	}
	policy := writePolicy(t, "gpt-4o", servers[0].URL+"/v1", "claude-sonnet", servers[1].URL+"/v1")
	getenv := env(map[string]string{"POLICY_FILE": policy})

	u, err := planUpstream(getenv, simAddr)
	if err != nil {
		t.Fatal(err)
	}
	if u.sim {
		t.Error("llmsim is started, though the policy names every model's endpoint")
	}
	for _, kv := range u.workerEnv {
		if strings.HasPrefix(kv, config.EnvBaseURL+"=") {
			t.Errorf("the worker gets %s, which would send every model to it", kv)
		}
	}
	out := u.String()
	for _, want := range []string{"POLICY_FILE " + policy, "gpt-4o        → " + servers[0].URL + "/v1", "claude-sonnet → " + servers[1].URL + "/v1"} {
		if !strings.Contains(out, want) {
			t.Errorf("make run prints\n%s\nwithout %q", out, want)
		}
	}

	cfg := workerConfig(t, getenv, u)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends := llmworker.AskModels(ctx, cfg, getenv, 5*time.Second)
	if _, err := llmworker.CheckModels(ends, false); err != nil {
		t.Fatalf("the worker's model check: %v", err)
	}
	for i, s := range servers {
		if hits[i].Load() == 0 {
			t.Errorf("no request reached %s, the policy's endpoint of its model", s.URL)
		}
	}
}

// TestUpstreamPlan: llmsim runs only when nothing names an endpoint, or a
// policy names llmsim's own address; LLM_BASE_URL sends every model to it.
func TestUpstreamPlan(t *testing.T) {
	simURL := "http://" + simAddr + "/v1"
	atSim := writePolicy(t, "gpt-4o", "http://localhost:8000/v1", "gpt-4o-mini", "http://localhost:8000/v1")
	mixed := writePolicy(t, "gpt-4o", "https://api.openai.com/v1", "local-8b", simURL)
	for _, c := range []struct {
		name      string
		env       map[string]string
		sim       bool
		simModels string
		workerEnv string
		routes    string
		why       string
	}{
		{name: "nothing names an endpoint", env: nil, sim: true, workerEnv: "LLM_BASE_URL=" + simURL,
			routes: "qwen-72b@" + simURL + " qwen-14b@" + simURL + " llama-8b@" + simURL, why: "neither LLM_BASE_URL nor POLICY_FILE"},
		{name: "LLM_MODELS rehearsed on llmsim", env: map[string]string{"LLM_MODELS": "gpt-4o,gpt-4o-mini"}, sim: true,
			simModels: "gpt-4o,gpt-4o-mini", workerEnv: "LLM_BASE_URL=" + simURL, routes: "gpt-4o@" + simURL + " gpt-4o-mini@" + simURL},
		{name: "LLM_BASE_URL", env: map[string]string{"LLM_BASE_URL": "https://api.openai.com/v1", "LLM_MODELS": "gpt-4o"},
			routes: "gpt-4o@https://api.openai.com/v1", why: "LLM_BASE_URL"},
		{name: "LLM_BASE_URL over a policy", env: map[string]string{"LLM_BASE_URL": "https://api.openai.com/v1", "POLICY_FILE": mixed},
			routes: "gpt-4o@https://api.openai.com/v1 local-8b@https://api.openai.com/v1", why: "LLM_BASE_URL"},
		{name: "a policy that names llmsim's address", env: map[string]string{"POLICY_FILE": atSim}, sim: true, simModels: "gpt-4o,gpt-4o-mini",
			routes: "gpt-4o@http://localhost:8000/v1 gpt-4o-mini@http://localhost:8000/v1", why: "which the policy names"},
		{name: "a policy with a real endpoint and llmsim's", env: map[string]string{"POLICY_FILE": mixed}, sim: true, simModels: "local-8b",
			routes: "gpt-4o@https://api.openai.com/v1 local-8b@" + simURL, why: "POLICY_FILE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, err := planUpstream(env(c.env), simAddr)
			if err != nil {
				t.Fatal(err)
			}
			var routes []string
			for _, r := range u.routes {
				routes = append(routes, r.model+"@"+strings.Join(r.endpoints, ","))
			}
			if u.sim != c.sim || u.simModels != c.simModels || strings.Join(u.workerEnv, " ") != c.workerEnv || strings.Join(routes, " ") != c.routes {
				t.Errorf("got sim %v (%q), worker env %q, routes %q\nwant sim %v (%q), worker env %q, routes %q",
					u.sim, u.simModels, u.workerEnv, routes, c.sim, c.simModels, c.workerEnv, c.routes)
			}
			if !strings.Contains(u.why, c.why) {
				t.Errorf("why %q, want it to contain %q", u.why, c.why)
			}
			// The worker, given make run's environment, sends each model
			// where make run says.
			cfg := workerConfig(t, env(c.env), u)
			var got []string
			for _, m := range cfg.Models {
				got = append(got, m.Name+"@"+m.BaseURL)
			}
			if strings.Join(got, " ") != c.routes {
				t.Errorf("the worker's ladder is %q, make run says %q", got, c.routes)
			}
		})
	}
}

// TestUpstreamPlanRefusesABadPolicy: a policy file the worker would refuse
// stops make run before anything starts, with the file and the field.
func TestUpstreamPlanRefusesABadPolicy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("models:\n  - name: gpt-4o\n    base_url: not a url\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := planUpstream(env(map[string]string{"POLICY_FILE": p}), simAddr)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "base_url") {
		t.Fatalf("got %v, want an error naming bad.yaml and base_url", err)
	}
}
