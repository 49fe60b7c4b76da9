package config

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/durable-llm/durable-llm/internal/yamlnode"
	"github.com/durable-llm/durable-llm/policies/failure"
	"go.yaml.in/yaml/v3"
)

//go:embed default_policy.yaml
var defaultPolicyYAML []byte

// DefaultSource is Config.Source of the embedded default policy.
const DefaultSource = "<embedded default>"

// DefaultPolicyYAML returns a copy of the embedded default policy file, the
// reference users copy and edit.
func DefaultPolicyYAML() []byte {
	return bytes.Clone(defaultPolicyYAML)
}

// embeddedDefault is default_policy.yaml decoded once over the zero Config.
// Nothing may change it: DefaultConfig and ClassPolicy hand out copies.
var embeddedDefault = sync.OnceValue(func() *Config {
	cfg, err := load(defaultPolicyYAML, DefaultSource, "", &Config{})
	if err != nil {
		panic("config: the embedded default policy is invalid: " + err.Error())
	}
	// Its models name their windows; a model that starts from its
	// model_defaults (LLM_MODELS, a file's models entry) gets an assumed one.
	cfg.ModelDefaults.WindowAssumed = true
	return cfg
})

// DefaultConfig returns the embedded default policy (default_policy.yaml),
// the one source of every default. Each call returns a fresh deep copy the
// caller may change (then call Validate). It panics if the embedded file is
// invalid, which a unit test rules out.
func DefaultConfig() *Config {
	return clone(embeddedDefault())
}

// LoadConfig reads and validates the policy file at path (see ParseConfig).
// A relative faq.file is resolved against the policy file's folder and must
// exist. Every problem found is reported at once in an *Error naming the
// file, the field path, what is expected and the line.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy file: %w", err)
	}
	return load(data, path, filepath.Dir(path), DefaultConfig())
}

// LoadConfigOrDefault loads the policy file at path, or returns the
// embedded default policy when path is empty.
func LoadConfigOrDefault(path string) (*Config, error) {
	if path == "" {
		return DefaultConfig(), nil
	}
	return LoadConfig(path)
}

// ParseConfig parses a policy file's bytes over a copy of DefaultConfig and
// validates the result; source names the file in error messages and becomes
// Config.Source. "Merging" in the package documentation (and docs/policy.md)
// says how the file's values meet the defaults. A faq.file given here is
// checked relative to the working directory; use LoadConfig for a file on
// disk.
func ParseConfig(data []byte, source string) (*Config, error) {
	return load(data, source, "", DefaultConfig())
}

// load decodes data over base (which it takes and changes), resolves
// faq.file against dir (when not empty) and validates the result.
func load(data []byte, source, dir string, base *Config) (*Config, error) {
	source = cmp.Or(source, "<policy>")
	cfgErr := &Error{Source: source}
	root, syntax := parseDocument(data)
	if syntax != nil {
		cfgErr.add(*syntax)
		return nil, cfgErr
	}
	cfg := base
	cfg.Source = source
	d := newDecoder(base.Classes)
	if root != nil {
		d.config(root, cfg)
	}

	if dir != "" && cfg.FAQ.File != "" && !cfg.FAQ.Off() && !filepath.IsAbs(cfg.FAQ.File) {
		cfg.FAQ.File = filepath.Join(dir, cfg.FAQ.File)
	}
	invalid := cfg.validate()
	if cfg.FAQ.File != "" && !cfg.FAQ.Off() {
		if st, err := os.Stat(cfg.FAQ.File); err != nil || st.IsDir() {
			invalid = append(invalid, Problem{Path: "faq.file", Message: fmt.Sprintf("must be a readable FAQ file, got %q", cfg.FAQ.File)})
		}
	}
	cfgErr.add(d.problems...)
	for _, p := range invalid {
		if d.refused(p.Path) {
			continue // the file's value was refused and not read; the default stands
		}
		p.Line = d.lineOf(p.Path)
		cfgErr.add(p)
	}
	if len(cfgErr.Problems) > 0 {
		slices.SortStableFunc(cfgErr.Problems, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
		return nil, cfgErr
	}
	return cfg, nil
}

// parseDocument parses data into its one YAML document: the root node, nil
// for an empty document, or the problem that stops the load (a syntax
// error, a second document, a root that is not a mapping).
func parseDocument(data []byte) (*yaml.Node, *Problem) {
	r := &countingReader{data: data}
	dec := yaml.NewDecoder(r)
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, syntaxProblem(err, r.line())
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		line := extra.Line
		if len(extra.Content) > 0 {
			line = extra.Content[0].Line
		}
		return nil, &Problem{Line: line, Message: "must hold one YAML document, got a second one (---)"}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxProblem(err, r.line())
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	root = resolve(root)
	switch {
	case isNull(root) || root.Kind == yaml.DocumentNode:
		return nil, nil
	case root.Kind != yaml.MappingNode:
		return nil, &Problem{Line: root.Line, Message: "must be a mapping of policy sections (models, classes, backoff, …), got " + yamlnode.Describe(root)}
	}
	return root, nil
}

// syntaxProblem is a YAML syntax error, placed where the parser stopped
// reading. yaml.v3 gives syntax errors only as text (no type, no position
// field), and the line in that text is mostly where the enclosing block
// began, counted from 0 (go-yaml/yaml#1066): "yaml: line 1: did not find
// expected '-' indicator" for a mistake on line 3. So only the text after
// that prefix is kept, and the line is the parser's read position: the line
// of the token it could not use; the end of the file for an unclosed quote;
// inside an unclosed [ or { possibly the line of the token after.
func syntaxProblem(err error, line int) *Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if _, err := strconv.Atoi(n); err == nil {
				msg = after
			}
		}
	}
	return &Problem{Line: line, Message: msg}
}

// countingReader hands the YAML parser one byte per Read, so the bytes
// read when the parser fails tell where it stopped. A policy file is small;
// the parser reads ahead only as far as it must.
type countingReader struct {
	data []byte
	n    int
}

func (r *countingReader) Read(p []byte) (int, error) {
	if r.n >= len(r.data) {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.data[r.n]
	r.n++
	return 1, nil
}

// line is the 1-based line of the last byte read.
func (r *countingReader) line() int {
	return bytes.Count(r.data[:max(r.n-1, 0)], []byte("\n")) + 1
}

// Problem is one thing wrong in a policy file.
type Problem struct {
	// Path of the field, e.g. "models[1].context_window"; empty for a
	// problem of the whole file (YAML syntax).
	Path string
	// Line in the file (1-based), 0 when unknown.
	Line int
	// Message says what is expected and what was found:
	// "must be a positive number of tokens, got -5".
	Message string
}

func (p Problem) format(source string) string {
	var b strings.Builder
	b.WriteString(source)
	b.WriteString(": ")
	switch {
	case p.Path != "":
		b.WriteString(p.Path)
		b.WriteString(": ")
		b.WriteString(p.Message)
		if p.Line > 0 {
			fmt.Fprintf(&b, " (line %d)", p.Line)
		}
	case p.Line > 0:
		fmt.Fprintf(&b, "line %d: %s", p.Line, p.Message)
	default:
		b.WriteString(p.Message)
	}
	return b.String()
}

// Error is every problem found in one policy file. Its message has
// one line per problem, each "<file>: <field path>: <what is expected>, got
// <value> (line N)", so the worker can print it and refuse to start.
type Error struct {
	// Source is the file (or DefaultSource, or the source given to
	// ParseConfig).
	Source   string
	Problems []Problem
}

// Error lists the problems, one per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.format(e.Source)
	}
	return strings.Join(lines, "\n")
}

func (e *Error) add(ps ...Problem) { e.Problems = append(e.Problems, ps...) }

// Model returns the ladder rung named name.
func (c *Config) Model(name string) (ModelConfig, bool) {
	for _, m := range c.Models {
		if m.Name == name {
			return m, true
		}
	}
	return ModelConfig{}, false
}

// base is the base URL of m's requests: its own, or for the model as a
// whole (no key chosen) its first deployment's.
func (m ModelConfig) base() string {
	if len(m.Deployments) > 0 && m.KeyID == "" {
		return m.Deployments[0].BaseURL
	}
	return m.BaseURL
}

// Endpoint is the upstream endpoint of model m: the scheme, host and port
// of its base URL ("https://api.openai.com:443"). Every model on one
// endpoint shares its retry budget (guard.Budgets). A base URL that does
// not parse is its own endpoint (Validate refuses it anyway).
func (m ModelConfig) Endpoint() string {
	u, err := url.Parse(m.base())
	if err != nil || u.Host == "" {
		return m.base()
	}
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// Wire is the API the model is called through (openai when not set).
func (m ModelConfig) Wire() API {
	if m.API == "" {
		return APIOpenAI
	}
	return m.API
}

// ContinuationStyle is how the model continues a final assistant message:
// its continuation, with auto resolved by its API (anthropic for api
// anthropic, none otherwise).
func (m ModelConfig) ContinuationStyle() Continuation {
	switch {
	case m.Continuation == ContinueAuto && m.Wire() == APIAnthropic:
		return ContinueAnthropic
	case m.Continuation == ContinueAuto || m.Continuation == "":
		return ContinueNone
	}
	return m.Continuation
}

// Continues reports whether the model can continue text a broken stream
// delivered.
func (m ModelConfig) Continues() bool { return m.ContinuationStyle() != ContinueNone }

// Capacity names the capacity the guard counts m's requests against
// (its retry budget, outlier ejection, queue estimate, the endpoints a
// call has sent to): the model itself where the provider's capacity and
// limits are per model (rate_limit_scope model, or auto on such a
// provider: Grain), else its endpoint, whose capacity every model on it
// shares. A busy or failing model then never spends the budget, or
// ejects the endpoint, of a healthy sibling it does not share capacity
// with. A key grain, and any grain of a pooled model (whose attempts hold
// per key, WithKey), is judged as auto: the same for the model and for
// each of its attempts.
func (m ModelConfig) Capacity() string {
	g := m.Grain(m.RateLimitScope)
	if g == ScopeKey || m.Pooled() {
		g = m.Grain(ScopeAuto)
	}
	if g == ScopeModel {
		return m.Endpoint() + " model " + m.Name
	}
	return m.Endpoint()
}

// Scope names what a rate limit of m holds back at scope sc, as holds and
// reasons show it: "http://127.0.0.1:8000" (endpoint), "… key LLM_API_KEY"
// (key), "… model qwen-72b" (model).
func (m ModelConfig) Scope(sc RateLimitScope) string {
	switch m.Grain(sc) {
	case ScopeKey:
		if len(m.Deployments) > 0 {
			// Deployments on one host (and one key variable) still have
			// limits of their own.
			return m.Endpoint() + " deployment " + m.KeyID
		}
		return m.Endpoint() + " key " + m.APIKeyEnv
	case ScopeModel:
		return m.Endpoint() + " model " + m.Name
	}
	return m.Endpoint()
}

// perModelLimits are the hosts (and, with a leading dot, host suffixes)
// of providers whose rate limits are per model: OpenAI's, Azure OpenAI's
// per deployment, Anthropic's, Google's Gemini API.
var perModelLimits = []string{"api.openai.com", ".openai.azure.com", "api.anthropic.com", "generativelanguage.googleapis.com"}

// Grain is the scope sc means for m: sc itself, but for ScopeAuto, which
// is ScopeModel on a provider whose limits are per model (perModelLimits:
// a 429 on gpt-4o leaves gpt-4o-mini free, the fallback one wants then)
// and ScopeEndpoint on any other server, whose capacity its models share.
func (m ModelConfig) Grain(sc RateLimitScope) RateLimitScope {
	if sc != ScopeAuto {
		return sc
	}
	u, err := url.Parse(m.base())
	if err != nil {
		return ScopeEndpoint
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range perModelLimits {
		if host == h || strings.HasPrefix(h, ".") && strings.HasSuffix(host, h) {
			return ScopeModel
		}
	}
	return ScopeEndpoint
}

// EndpointLabel names m's endpoint for tenants, who read it in reasons:
// "the endpoint of qwen-72b" (its deployment's name with deployments),
// never its address, which is the network's inside (Endpoint).
func (m ModelConfig) EndpointLabel() string {
	if len(m.Deployments) > 0 && m.KeyID != "" {
		return "deployment " + m.KeyID + " of " + m.Name
	}
	return "the endpoint of " + m.Name
}

// ScopeLabel names what a rate limit of m holds back at scope sc, for
// tenants: as Scope, with EndpointLabel for the address.
func (m ModelConfig) ScopeLabel(sc RateLimitScope) string {
	switch m.Grain(sc) {
	case ScopeKey:
		if len(m.Deployments) > 0 {
			return "deployment " + m.KeyID + " of " + m.Name
		}
		return "key " + m.APIKeyEnv + " of " + m.Name
	case ScopeModel:
		return "model " + m.Name
	}
	return m.EndpointLabel()
}

// Keys are the ids of m's keys: its deployments' names (Deployments),
// else the names of the environment variables of its pool (APIKeyEnvs),
// else its one key (APIKeyEnv, "" for none).
func (m ModelConfig) Keys() []string {
	if len(m.Deployments) > 0 {
		ids := make([]string, len(m.Deployments))
		for i, d := range m.Deployments {
			ids[i] = d.Name
		}
		return ids
	}
	if len(m.APIKeyEnvs) > 0 {
		return m.APIKeyEnvs
	}
	return []string{m.APIKeyEnv}
}

// Pooled reports whether m has a pool of several keys or deployments.
func (m ModelConfig) Pooled() bool { return len(m.APIKeyEnvs) > 1 || len(m.Deployments) > 1 }

// WithKey is m as one attempt sends it, with the key (or deployment) id:
// a deployment's base URL and key; a pooled model's rate limits are then
// held per key (a pool exists to spread them), whatever its
// rate_limit_scope says.
func (m ModelConfig) WithKey(id string) ModelConfig {
	if m.Pooled() {
		m.RateLimitScope = ScopeKey
	}
	m.KeyID = id
	for _, d := range m.Deployments {
		if d.Name == id {
			m.BaseURL, m.APIKeyEnv = d.BaseURL, d.APIKeyEnv
			return m
		}
	}
	m.APIKeyEnv = id
	return m
}

// Endpoint is the endpoint of the named model ("" for an unknown one).
func (c *Config) Endpoint(model string) string {
	m, ok := c.Model(model)
	if !ok {
		return ""
	}
	return m.Endpoint()
}

// ClassPolicy returns the policy of failure class cl: the configured one,
// else the default of default_policy.yaml (for a Config built in code
// without that class). An unknown class (or failure.None) gets ActionFail,
// so a classification bug can never cause a retry loop.
func (c *Config) ClassPolicy(cl failure.Class) ClassPolicy {
	if cp, ok := c.Classes[cl]; ok {
		return cp
	}
	if cp, ok := embeddedDefault().Classes[cl]; ok {
		return clone(cp)
	}
	return ClassPolicy{Action: ActionFail}
}

// OverrideEndpoint points every model of the ladder at one OpenAI-compatible
// endpoint: the worker calls it when LLM_BASE_URL is set, e.g.
// cfg.OverrideEndpoint(os.Getenv("LLM_BASE_URL"), "LLM_API_KEY").
// apiKeyEnv is the NAME of the environment variable that holds the key,
// never the key itself. An empty argument leaves that field unchanged. Call
// Validate afterwards to check the URL.
func (c *Config) OverrideEndpoint(baseURL, apiKeyEnv string) {
	for i := range c.Models {
		if baseURL != "" {
			c.Models[i].BaseURL, c.Models[i].Deployments = baseURL, nil
			// The one endpoint is OpenAI-compatible: a rung of the file on
			// Anthropic's wire goes to it on the OpenAI wire.
			if c.Models[i].Wire() == APIAnthropic {
				c.Models[i].API = APIOpenAI
				if c.Models[i].Continuation == ContinueAnthropic {
					c.Models[i].Continuation = ContinueAuto
				}
			}
		}
		if apiKeyEnv != "" {
			c.Models[i].APIKeyEnv, c.Models[i].APIKeyEnvs = apiKeyEnv, nil
		}
	}
}
