package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// The environment variables that point the policy at a provider without
// a policy file (README "Quick start"): the worker, the front door, the
// doctor, `make run` and compose all read them.
const (
	// EnvBaseURL is the OpenAI-compatible endpoint of every model.
	EnvBaseURL = "LLM_BASE_URL"
	// EnvAPIKey holds the key of that endpoint.
	EnvAPIKey = "LLM_API_KEY"
	// EnvModels is the model ladder, in order: "gpt-4o,gpt-4o-mini".
	EnvModels = "LLM_MODELS"
)

// ApplyEnv applies LLM_MODELS, LLM_BASE_URL and LLM_API_KEY (read with
// getenv) to c, then validates it; an error names the variable. Without
// any of them c is unchanged.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	base, list := strings.TrimSpace(getenv(EnvBaseURL)), getenv(EnvModels)
	if base == "" && strings.TrimSpace(list) == "" {
		return nil
	}
	if strings.TrimSpace(list) != "" {
		names, err := ParseModelList(list)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvModels, err)
		}
		c.UseModels(names)
	}
	keyVar := ""
	if base != "" && getenv(EnvAPIKey) != "" {
		// The key goes with the endpoint: without LLM_BASE_URL the
		// policy's own keys (pools, per-model keys) stay as written.
		keyVar = EnvAPIKey
	}
	c.OverrideEndpoint(base, keyVar)
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%s, %s: %w", EnvBaseURL, EnvModels, err)
	}
	return nil
}

// ParseModelList reads "gpt-4o, gpt-4o-mini": names separated by commas,
// none empty, none twice.
func ParseModelList(s string) ([]string, error) {
	var names []string
	for i, f := range strings.Split(s, ",") {
		n := strings.TrimSpace(f)
		switch {
		case n == "":
			return nil, fmt.Errorf("model %d of %q is empty (want names separated by commas, such as gpt-4o,gpt-4o-mini)", i+1, s)
		case strings.ContainsAny(n, " \t\"'"):
			return nil, fmt.Errorf("model %d, %q, holds a space or a quote (want names separated by commas, such as gpt-4o,gpt-4o-mini)", i+1, n)
		case slices.Contains(names, n):
			return nil, fmt.Errorf("model %q is named twice", n)
		}
		names = append(names, n)
	}
	return names, nil
}

// UseModels makes names the ladder, in order. A name already in the ladder
// keeps its settings; another starts from model_defaults, on the first
// model's endpoint and key unless model_defaults names one. The hedge and
// diagnosis rungs, when no longer in the ladder, become its last model
// (the smallest, by the ladder's convention).
func (c *Config) UseModels(names []string) {
	first := ModelConfig{}
	if len(c.Models) > 0 {
		first = c.Models[0]
	}
	ladder := make([]ModelConfig, 0, len(names))
	for _, n := range names {
		if m, ok := c.Model(n); ok {
			ladder = append(ladder, m)
			continue
		}
		m := c.ModelDefaults
		m.Name = n
		if m.BaseURL == "" && len(m.Deployments) == 0 {
			m.BaseURL, m.Deployments = first.BaseURL, first.Deployments
		}
		if m.APIKeyEnv == "" && len(m.APIKeyEnvs) == 0 {
			m.APIKeyEnv, m.APIKeyEnvs = first.APIKeyEnv, first.APIKeyEnvs
		}
		ladder = append(ladder, m)
	}
	c.Models = ladder
	last := names[len(names)-1]
	if _, ok := c.Model(c.Hedge.Model); !ok {
		c.Hedge.Model = last
	}
	for i := range c.Hedge.Scenarios {
		if _, ok := c.Model(c.Hedge.Scenarios[i].Model); c.Hedge.Scenarios[i].Model != "" && !ok {
			c.Hedge.Scenarios[i].Model = last
		}
	}
	if _, ok := c.Model(c.Diagnose.Model); !ok {
		c.Diagnose.Model = last
	}
	if _, ok := c.Model(c.Pruning.Summary.Model); c.Pruning.Summary.Model != "" && !ok {
		c.Pruning.Summary.Model = last
	}
}

// RedactURL is a base URL as logs, messages and traces show it: scheme,
// host and path, without the user, password, query, fragment and path
// parameters that may carry a key, and with any path segment that looks
// like a key (see secretSegment) replaced by "[redacted]". A value that is
// not an absolute http(s) URL (without a scheme, "key@host/v1" parses as a
// path) is shown only when it holds none of '@', ':', '?', '#', ';' and no
// segment that looks like a key, so that a configuration error can still
// quote "/v1".
func RedactURL(s string) string {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		if strings.ContainsAny(s, "@:?#;") || slices.ContainsFunc(strings.Split(s, "/"), secretSegment) {
			return "<not an http(s) URL, not shown>"
		}
		return s
	}
	segs := strings.Split(u.Path, "/")
	for i, seg := range segs {
		seg, _, _ = strings.Cut(seg, ";") // path parameters
		if secretSegment(seg) {
			segs[i] = "[redacted]"
			continue
		}
		segs[i] = url.PathEscape(seg)
	}
	return u.Scheme + "://" + u.Host + strings.Join(segs, "/")
}

// secretSegment reports whether a path segment looks like a key rather
// than a name: a known key prefix (sk-, key-, "AIza") with 8 or more
// characters after it, or 20 or more characters mixing upper case, lower
// case and digits with few separators (a model name such as
// Meta-Llama-3.1-70B-Instruct has more).
func secretSegment(seg string) bool {
	for _, p := range []string{"sk-", "key-", "AIza"} {
		if strings.HasPrefix(seg, p) && len(seg) >= len(p)+8 {
			return true
		}
	}
	if len(seg) < 20 {
		return false
	}
	var upper, lower, digit bool
	seps := 0
	for _, r := range seg {
		switch {
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= '0' && r <= '9':
			digit = true
		case r == '-' || r == '_' || r == '.':
			seps++
		}
	}
	return upper && lower && digit && seps <= 3
}
