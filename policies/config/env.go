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
}

// RedactURL is a base URL as logs, messages and traces show it: without
// its user, password, query and fragment, which may carry a key.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparsable URL>"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
