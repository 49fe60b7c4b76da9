package main

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/durable-llm/durable-llm/policies/config"
)

// upstream is where the worker's models go, and whether llmsim must run
// for them. The rule: a real endpoint is never replaced by the simulator.
//
//   - LLM_BASE_URL set: every model goes there (the worker applies it);
//     no llmsim.
//   - POLICY_FILE set: each model goes where the policy names it (its
//     base_url or deployments), as written; llmsim runs only when one of
//     those endpoints is llmsim's address (a policy copied from the
//     default one), and then serves the names of the models sent to it.
//   - neither: nothing names an endpoint, so every model goes to llmsim
//     (LLM_BASE_URL is set for the worker to llmsim's address).
type upstream struct {
	// sim: start llmsim; simModels are the names it serves (empty: its
	// scenario's own).
	sim       bool
	simModels string
	// workerEnv is added to the worker's environment.
	workerEnv []string
	// why says which setting chose the endpoints.
	why string
	// routes are the models in ladder order, each with its endpoints.
	routes []route
}

// route is one model of the ladder and where its requests go.
type route struct {
	model     string
	endpoints []string // redacted base URLs: one, or a deployment's each
}

// planUpstream decides the upstream of make run from the environment
// (read with getenv) and llmsim's address, loading the policy file the
// worker will load and applying LLM_MODELS and LLM_BASE_URL as the worker
// does, so that what it prints is where the worker's requests go.
func planUpstream(getenv func(string) string, simAddr string) (upstream, error) {
	simURL := "http://" + simAddr + "/v1"
	policy := strings.TrimSpace(getenv("POLICY_FILE"))
	base := strings.TrimSpace(getenv(config.EnvBaseURL))
	fromPolicy := base == "" && policy != ""
	var u upstream
	env := getenv
	switch {
	case base != "":
		u.why = config.EnvBaseURL + " (every model goes to it; llmsim not started)"
	case fromPolicy:
		u.why = "the base_url of each model in POLICY_FILE " + policy + " (LLM_BASE_URL is not set)"
	default:
		u.sim, u.simModels = true, strings.TrimSpace(getenv(config.EnvModels))
		u.workerEnv = []string{config.EnvBaseURL + "=" + simURL}
		u.why = "llmsim: neither LLM_BASE_URL nor POLICY_FILE names an endpoint"
		env = func(k string) string {
			if k == config.EnvBaseURL {
				return simURL
			}
			return getenv(k)
		}
	}
	cfg, err := config.LoadConfigOrDefault(policy)
	if err != nil {
		return upstream{}, err // names the file, the field and what is expected
	}
	if err := cfg.ApplyEnv(env); err != nil {
		return upstream{}, err
	}
	var atSim []string
	for _, m := range cfg.Models {
		r := route{model: m.Name}
		urls := []string{m.BaseURL}
		if len(m.Deployments) > 0 {
			urls = urls[:0]
			for _, d := range m.Deployments {
				urls = append(urls, d.BaseURL)
			}
		}
		for _, b := range urls {
			r.endpoints = append(r.endpoints, config.RedactURL(b))
			if fromPolicy && sameHost(b, simAddr) && !slices.Contains(atSim, m.Name) {
				atSim = append(atSim, m.Name)
			}
		}
		u.routes = append(u.routes, r)
	}
	if len(atSim) > 0 {
		// The policy names llmsim's address itself: run llmsim there,
		// serving those names.
		u.sim, u.simModels = true, strings.Join(atSim, ",")
		u.why += "; llmsim started at " + simAddr + ", which the policy names"
	}
	return u, nil
}

// sameHost reports whether base's host and port are addr's, taking
// localhost and 127.0.0.1 as one.
func sameHost(base, addr string) bool {
	b, err := url.Parse(strings.TrimSpace(base))
	if err != nil || b.Host == "" {
		return false
	}
	host, port := b.Hostname(), b.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[b.Scheme]
	}
	ah, ap, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	local := func(h string) string {
		if h == "localhost" || h == "" || h == "0.0.0.0" {
			return "127.0.0.1"
		}
		return h
	}
	return local(host) == local(ah) && port == ap
}

// String is the plan as make run prints it at start: which setting chose
// the endpoints, then each model and its endpoints.
func (u upstream) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "endpoints: %s\n", u.why)
	w := 0
	for _, r := range u.routes {
		w = max(w, len(r.model))
	}
	for _, r := range u.routes {
		fmt.Fprintf(&b, "  %-*s → %s\n", w, r.model, strings.Join(r.endpoints, ", "))
	}
	return b.String()
}
