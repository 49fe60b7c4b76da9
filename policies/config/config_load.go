package config

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
	"go.yaml.in/yaml/v3"
)

//go:embed default_policy.yaml
var defaultPolicyYAML []byte

// DefaultSource is Config.Source of the embedded default policy.
const DefaultSource = "<embedded default>"

// DefaultPlaceholder is the last-resort answer when neither the FAQ nor a
// rule card answers (Config.Placeholder's default).
const DefaultPlaceholder = "We are handling a lot of questions right now and could not answer yours in time. " +
	"Please try again in a moment. / 当前咨询人数较多，暂时无法回答您的问题，请稍后再试。"

// DefaultPolicyYAML returns a copy of the embedded default policy file, the
// reference users copy and edit.
func DefaultPolicyYAML() []byte {
	return bytes.Clone(defaultPolicyYAML)
}

// DefaultConfig returns the embedded default policy (default_policy.yaml),
// parsed and with every default applied. Each call returns a fresh Config
// that the caller may change. It panics if the embedded file is invalid,
// which a unit test rules out.
func DefaultConfig() *Config {
	cfg, err := ParseConfig(defaultPolicyYAML, DefaultSource)
	if err != nil {
		panic("policies: the embedded default policy is invalid: " + err.Error())
	}
	return cfg
}

// LoadConfig reads, defaults and validates the policy file at path. A
// relative faq.file is resolved against the policy file's folder and must
// exist. Every problem found is reported at once in a *ConfigError naming
// the file, the field path and what is expected.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy file: %w", err)
	}
	return parseConfig(data, path, filepath.Dir(path))
}

// ParseConfig parses a policy file's bytes; source names the file in error
// messages and becomes Config.Source. Unknown fields are refused. Fields
// left out or zero take their defaults (see the field comments in config.go
// and default_policy.yaml); an empty document is the default policy, and a
// file without models: uses the default ladder (the local llmsim), while an
// explicit empty list is refused.
//
// A class under classes: that keeps its default action is merged over the
// default field by field, so "rate_limited: {max: 2}" keeps the action
// retry_after. A class that names a different action replaces its default
// entirely: fields it leaves out are zero (max 0: no retry of that class)
// except the action's own defaults (bump_tokens: +256 tokens, temperature
// 0.3; prune_resend: keep 3 rounds). Classes not in the file keep their
// defaults.
//
// A faq.file given here is checked relative to the working directory; use
// LoadConfig for a file on disk.
func ParseConfig(data []byte, source string) (*Config, error) {
	return parseConfig(data, source, "")
}

func parseConfig(data []byte, source, dir string) (*Config, error) {
	if source == "" {
		source = "<policy>"
	}
	cfgErr := &ConfigError{Source: source}

	// Pass 1: the node tree, for syntax errors with lines, unknown fields
	// with their paths, and which keys each class entry sets.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		ps := yamlErrorProblems(err, nil)
		if len(ps) == 1 {
			if line := syntaxErrorLine(data, ps[0].Message); line > 0 {
				ps[0].Line = line
			}
		}
		cfgErr.add(ps...)
		return nil, cfgErr
	}
	ix := newPolicyIndex()
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind != 0 && doc.Kind != yaml.MappingNode && doc.ShortTag() != "!!null" {
		cfgErr.add(ConfigProblem{Line: doc.Line, Message: "must be a mapping of policy sections (models, classes, backoff, …), got " + nodeKindWord(doc)})
		return nil, cfgErr
	}
	if doc.Kind == yaml.MappingNode {
		ix.walk(doc, reflect.TypeOf(Config{}), "")
	}
	cfgErr.add(ix.problems...)

	// Pass 2: the real decode, strict about fields and types.
	cfg := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		cfgErr.add(yamlErrorProblems(err, ix)...)
	} else if err == nil {
		var extra yaml.Node
		if err := dec.Decode(&extra); err == nil {
			cfgErr.add(ConfigProblem{Line: extra.Line, Message: "must hold one YAML document, got a second one (---)"})
		}
	}
	cfg.Source = source
	cfg.applyDefaults(ix.classKeys)

	if dir != "" && cfg.FAQ.File != "" && !filepath.IsAbs(cfg.FAQ.File) {
		cfg.FAQ.File = filepath.Join(dir, cfg.FAQ.File)
	}
	problems := cfg.validate()
	if cfg.FAQ.File != "" {
		if st, err := os.Stat(cfg.FAQ.File); err != nil || st.IsDir() {
			problems = append(problems, ConfigProblem{Path: "faq.file", Message: fmt.Sprintf("must be a readable FAQ file, got %q", cfg.FAQ.File)})
		}
	}
	decoded := map[string]bool{}
	for _, p := range cfgErr.Problems {
		decoded[p.Path] = true
	}
	for _, p := range problems {
		if decoded[p.Path] {
			continue // already reported as a decode problem; the value was not read
		}
		p.Line = ix.lineOf(p.Path)
		cfgErr.add(p)
	}
	if len(cfgErr.Problems) > 0 {
		return nil, cfgErr
	}
	return cfg, nil
}

// ConfigProblem is one thing wrong in a policy file.
type ConfigProblem struct {
	// Path of the field, e.g. "models[1].context_window"; empty for a
	// problem of the whole file (YAML syntax).
	Path string
	// Line in the file (1-based), 0 when unknown.
	Line int
	// Message says what is expected and what was found:
	// "must be a positive number of tokens, got -5".
	Message string
}

func (p ConfigProblem) format(source string) string {
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

// ConfigError is every problem found in one policy file. Its message has
// one line per problem, each "<file>: <field path>: <what is expected>, got
// <value> (line N)", so the worker can print it and refuse to start.
type ConfigError struct {
	// Source is the file (or DefaultSource, or the source given to
	// ParseConfig).
	Source   string
	Problems []ConfigProblem
}

// Error lists the problems, one per line.
func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.format(e.Source)
	}
	return strings.Join(lines, "\n")
}

func (e *ConfigError) add(ps ...ConfigProblem) { e.Problems = append(e.Problems, ps...) }

// Validate checks a Config whose defaults are applied (ParseConfig and
// LoadConfig call it; call it after changing a Config in code, e.g. after
// OverrideEndpoint). It returns nil or a *ConfigError listing every
// problem (without line numbers).
func (c *Config) Validate() error {
	ps := c.validate()
	if len(ps) == 0 {
		return nil
	}
	return &ConfigError{Source: cmp.Or(c.Source, "<config>"), Problems: ps}
}

// Model returns the ladder rung named name.
func (c *Config) Model(name string) (ModelConfig, bool) {
	for _, m := range c.Models {
		if m.Name == name {
			return m, true
		}
	}
	return ModelConfig{}, false
}

// ClassPolicy returns the policy of failure class cl: the configured one,
// else the built-in default of README "Failure classes" (for a Config built in code without
// that class). An unknown class (or ClassNone) gets ActionFail, so a
// classification bug can never cause a retry loop.
func (c *Config) ClassPolicy(cl failure.Class) ClassPolicy {
	if cp, ok := c.Classes[cl]; ok {
		return cp
	}
	if cp, ok := builtinClassPolicies()[cl]; ok {
		return cp
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
			c.Models[i].BaseURL = baseURL
		}
		if apiKeyEnv != "" {
			c.Models[i].APIKeyEnv = apiKeyEnv
		}
	}
}

// ApplyDefaults replaces zero values with their defaults (the comments in
// config.go), for a Config built in code; nil Models become the default
// ladder. ParseConfig already applies them.
// A class missing from Classes gets its README "Failure classes" default; a class present
// keeps its fields and only gets its action's own defaults.
func (c *Config) ApplyDefaults() { c.applyDefaults(nil) }

// builtinClassPolicies are the defaults of README "Failure classes" (seed 003 §3.2).
func builtinClassPolicies() map[failure.Class]ClassPolicy {
	t := 0.3
	ms := func(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }
	return map[failure.Class]ClassPolicy{
		failure.ClassConnect:               {Action: ActionSwitchModel},
		failure.ClassReadTimeout:           {Action: ActionPruneRetry, Max: 1, SwitchAfter: 1},
		failure.ClassTimeout:               {Action: ActionPruneRetry, Max: -1},
		failure.ClassQueueFull:             {Action: ActionSwitchModel, Max: 1, Waits: []Duration{ms(200)}},
		failure.ClassRateLimited:           {Action: ActionRetryAfter, Max: 1},
		failure.ClassContextLengthExceeded: {Action: ActionPruneResend, Max: 1, KeepRounds: 3},
		failure.ClassOutputTruncated:       {Action: ActionBumpTokens, Max: 2, Waits: []Duration{ms(500), ms(1200)}, MaxTokensIncrease: 256, Temperature: &t},
		failure.ClassServiceUnavailable:    {Action: ActionFallback},
		failure.ClassServerError:           {Action: ActionRetry, Max: -1, SwitchAfter: 2},
		failure.ClassBodyError:             {Action: ActionRetry, Max: -1},
		failure.ClassInvalidRequest:        {Action: ActionFail},
		failure.ClassAuth:                  {Action: ActionSwitchModel, TripBreaker: true},
		failure.ClassModelNotFound:         {Action: ActionSwitchModel},
		failure.ClassContentFilter:         {Action: ActionFallback},
		failure.ClassBreakerOpen:           {Action: ActionSwitchModel},
		failure.ClassWorkerLost:            {Action: ActionResend, Max: 2},
	}
}

// applyActionDefaults fills the zero fields an action needs.
func (cp *ClassPolicy) applyActionDefaults() {
	switch cp.Action {
	case ActionBumpTokens:
		if cp.MaxTokensIncrease == 0 {
			cp.MaxTokensIncrease = 256
		}
		if cp.Temperature == nil {
			t := 0.3
			cp.Temperature = &t
		}
	case ActionPruneResend:
		if cp.KeepRounds == 0 {
			cp.KeepRounds = 3
		}
	}
}

// mergeClassPolicy lays the fields the file set (keys) over def, unless the
// file changes the action: then the file's entry stands alone.
func mergeClassPolicy(def, file ClassPolicy, keys map[string]bool) ClassPolicy {
	if keys["action"] && file.Action != def.Action {
		return file
	}
	out := def
	out.Waits = append([]Duration(nil), def.Waits...)
	if keys["max"] {
		out.Max = file.Max
	}
	if keys["waits"] {
		out.Waits = file.Waits
	}
	if keys["switch_after"] {
		out.SwitchAfter = file.SwitchAfter
	}
	if keys["trip_breaker"] {
		out.TripBreaker = file.TripBreaker
	}
	if keys["max_tokens_increase"] {
		out.MaxTokensIncrease = file.MaxTokensIncrease
	}
	if keys["temperature"] {
		out.Temperature = file.Temperature
	}
	if keys["keep_rounds"] {
		out.KeepRounds = file.KeepRounds
	}
	return out
}

// applyDefaults resolves every zero value. classKeys says which fields each
// class entry of a file set (nil for a Config built in code).
func (c *Config) applyDefaults(classKeys map[failure.Class]map[string]bool) {
	if c.Models == nil { // left out; an explicit "models: []" stays empty and is refused
		c.Models = embeddedModels()
	}
	for i := range c.Models {
		m := &c.Models[i]
		defaultIfZero(&m.ContextWindow, 8192)
		defaultIfZero(&m.Timeout, Duration(30*time.Second))
		defaultIfZero(&m.SystemPrompt, SystemPromptFull)
	}

	builtin := builtinClassPolicies()
	classes := make(map[failure.Class]ClassPolicy, len(builtin))
	for cl, cp := range c.Classes {
		if def, ok := builtin[cl]; ok && classKeys != nil {
			cp = mergeClassPolicy(def, cp, classKeys[cl])
		}
		cp.applyActionDefaults()
		classes[cl] = cp
	}
	for cl, def := range builtin {
		if _, ok := classes[cl]; !ok {
			classes[cl] = def
		}
	}
	c.Classes = classes

	b := &c.Backoff
	defaultIfZero(&b.Base, Duration(500*time.Millisecond))
	defaultIfZero(&b.Cap, Duration(8*time.Second))
	defaultIfZero(&b.RetryAfterCap, Duration(60*time.Second))
	defaultIfZero(&b.ConnectBase, Duration(300*time.Millisecond))
	defaultIfZero(&b.ConnectRetries, 2)

	defaultIfZero(&c.Budget.Window, Duration(60*time.Second))
	defaultIfZero(&c.Budget.Ratio, 0.1)
	defaultIfZero(&c.Budget.Floor, 10)

	br := &c.Breaker
	defaultIfZero(&br.ConsecutiveFailures, 5)
	defaultIfZero(&br.FailureRate, 0.5)
	defaultIfZero(&br.Window, 20)
	defaultIfZero(&br.MinCalls, 10)
	defaultIfZero(&br.OpenFor, Duration(30*time.Second))
	defaultIfZero(&br.ProbeFraction, 0.1)
	defaultIfZero(&br.CloseThreshold, 0.9)
	defaultIfZero(&br.Probes, 5)
	defaultIfZero(&br.ClassFailureRate, 0.15)
	defaultIfZero(&br.ClassWindow, Duration(60*time.Second))
	defaultIfZero(&br.ClassMinRetries, 20)

	defaultIfZero(&c.Pruning.Factor, 0.5)
	defaultIfZero(&c.Pruning.ReserveOutputTokens, 256)
	defaultIfZero(&c.Pruning.Encoding, "cl100k_base")

	ca := &c.Call
	defaultIfZero(&ca.MaxAttempts, 4)
	defaultIfZero(&ca.Deadline, Duration(60*time.Second))
	defaultIfZero(&ca.MaxDeadline, Duration(10*time.Minute))
	defaultIfZero(&ca.FallbackReserve, Duration(2*time.Second))
	defaultIfZero(&ca.HeartbeatTimeout, Duration(10*time.Second))

	defaultIfZero(&c.HTTP.HeaderTimeout, Duration(8*time.Second))
	defaultIfZero(&c.HTTP.ConnectTimeout, Duration(3*time.Second))

	l := &c.Limits
	defaultIfZero(&l.MaxPromptBytes, 1<<20)
	defaultIfZero(&l.MaxMessages, 1000)
	defaultIfZero(&l.MaxTokens, 32768)
	defaultIfZero(&l.MaxTemperature, 2)

	defaultIfZero(&c.FAQ.Threshold, 0.35)
	defaultIfZero(&c.Placeholder, DefaultPlaceholder)
}

// embeddedModels is the ladder of the embedded default policy.
func embeddedModels() []ModelConfig {
	var doc struct {
		Models []ModelConfig `yaml:"models"`
	}
	if err := yaml.Unmarshal(defaultPolicyYAML, &doc); err != nil {
		panic("policies: the embedded default policy is invalid: " + err.Error())
	}
	return doc.Models
}

func defaultIfZero[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Known values of the enumerations, for validation messages.
var (
	knownActions = []Action{ActionResend, ActionRetry, ActionPruneRetry, ActionPruneResend,
		ActionRetryAfter, ActionBumpTokens, ActionSwitchModel, ActionFallback, ActionFail}
	knownRuleActions = []RuleAction{RuleHandoff, RuleSafeMessage, RuleNoRetry}
	knownEncodings   = []string{"cl100k_base", "o200k_base", "p50k_base", "r50k_base", "p50k_edit"}
	envNameRE        = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// maxPromptBytesLimit keeps the prompt well under Temporal's 2 MB payload
// limit (the request is JSON inside the workflow input).
const maxPromptBytesLimit = 3 << 19 // 1.5 MiB

func joinEnum[T ~string](vals []T) string {
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// validate returns every problem of a defaulted Config.
func (c *Config) validate() []ConfigProblem {
	var ps []ConfigProblem
	bad := func(path, format string, args ...any) {
		ps = append(ps, ConfigProblem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	posDur := func(path string, d Duration) {
		if d <= 0 {
			bad(path, "must be a positive duration such as \"500ms\" or \"8s\", got %s", d)
		}
	}
	posInt := func(path string, n int, what string) {
		if n <= 0 {
			bad(path, "must be a positive %s, got %d", what, n)
		}
	}
	fraction := func(path string, f float64, openZero bool) {
		if math.IsNaN(f) || f > 1 || f < 0 || (openZero && f == 0) {
			if openZero {
				bad(path, "must be a fraction in (0,1], got %v", f)
			} else {
				bad(path, "must be a fraction in [0,1], got %v", f)
			}
		}
	}

	// models
	if len(c.Models) == 0 {
		bad("models", "must list at least one model (the ladder), got none")
	}
	seen := map[string]int{}
	for i, m := range c.Models {
		p := fmt.Sprintf("models[%d]", i)
		switch {
		case strings.TrimSpace(m.Name) == "":
			bad(p+".name", "must be the model name sent upstream, got %q", m.Name)
		case strings.TrimSpace(m.Name) != m.Name:
			bad(p+".name", "must not start or end with spaces, got %q", m.Name)
		default:
			if j, dup := seen[m.Name]; dup {
				bad(p+".name", "must be unique, got %q (also models[%d])", m.Name, j)
			} else {
				seen[m.Name] = i
			}
		}
		if u, err := url.Parse(m.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(p+".base_url", "must be an absolute http(s) URL such as \"http://127.0.0.1:8000/v1\", got %q", m.BaseURL)
		}
		if m.APIKeyEnv != "" && !envNameRE.MatchString(m.APIKeyEnv) {
			// Never echo it: it may be a pasted key.
			bad(p+".api_key_env", "must be the NAME of the environment variable holding the key (letters, digits, _), not the key itself, got a %d-character value (not shown)", len(m.APIKeyEnv))
		}
		posInt(p+".context_window", m.ContextWindow, "number of tokens")
		posDur(p+".timeout", m.Timeout)
		if !slices.Contains([]SystemPromptSupport{SystemPromptFull, SystemPromptPartial, SystemPromptNone}, m.SystemPrompt) {
			bad(p+".system_prompt", "must be one of full, partial, none, got %q", m.SystemPrompt)
		}
		if m.InputPrice < 0 || math.IsNaN(m.InputPrice) {
			bad(p+".input_price", "must be a price per million tokens ≥ 0, got %v", m.InputPrice)
		}
		if m.OutputPrice < 0 || math.IsNaN(m.OutputPrice) {
			bad(p+".output_price", "must be a price per million tokens ≥ 0, got %v", m.OutputPrice)
		}
	}

	// classes, in a stable order
	keys := make([]string, 0, len(c.Classes))
	for cl := range c.Classes {
		keys = append(keys, string(cl))
	}
	sort.Strings(keys)
	for _, k := range keys {
		cl := failure.Class(k)
		cp := c.Classes[cl]
		p := "classes." + k
		if !cl.Valid() {
			bad(p, "must be a failure class (%s), got %q", joinEnum(failure.AllClasses), k)
			continue
		}
		if !slices.Contains(knownActions, cp.Action) {
			bad(p+".action", "must be one of %s, got %q", joinEnum(knownActions), cp.Action)
		}
		if cp.Max < -1 || cp.Max > 10 {
			bad(p+".max", "must be -1 (up to the attempts cap), 0 (never) or a count up to 10, got %d", cp.Max)
		}
		for i, w := range cp.Waits {
			if w < 0 || w.D() > 10*time.Minute {
				bad(fmt.Sprintf("%s.waits[%d]", p, i), "must be a duration between 0s and 10m, got %s", w)
			}
		}
		if cp.SwitchAfter < 0 {
			bad(p+".switch_after", "must be 0 (never) or a positive count, got %d", cp.SwitchAfter)
		}
		if cp.MaxTokensIncrease < 0 {
			bad(p+".max_tokens_increase", "must be a positive number of tokens, got %d", cp.MaxTokensIncrease)
		}
		if cp.Temperature != nil && (*cp.Temperature < 0 || *cp.Temperature > 2 || math.IsNaN(*cp.Temperature)) {
			bad(p+".temperature", "must be a temperature in [0,2], got %v", *cp.Temperature)
		}
		if cp.KeepRounds < 0 {
			bad(p+".keep_rounds", "must be a positive number of rounds, got %d", cp.KeepRounds)
		}
		switch {
		case cl == failure.ClassBreakerOpen && slices.Contains([]Action{ActionResend, ActionRetry, ActionPruneRetry, ActionPruneResend, ActionRetryAfter, ActionBumpTokens}, cp.Action):
			bad(p+".action", "must be switch_model, fallback or fail (the breaker refused the model, retrying it cannot help), got %q", cp.Action)
		case cl == failure.ClassInvalidRequest && cp.Action != ActionFail && cp.Action != ActionFallback:
			bad(p+".action", "must be fail or fallback (the same request is refused again), got %q", cp.Action)
		}
	}

	// backoff
	posDur("backoff.base", c.Backoff.Base)
	posDur("backoff.cap", c.Backoff.Cap)
	if c.Backoff.Base > 0 && c.Backoff.Cap < c.Backoff.Base {
		bad("backoff.cap", "must be at least backoff.base (%s), got %s", c.Backoff.Base, c.Backoff.Cap)
	}
	posDur("backoff.retry_after_cap", c.Backoff.RetryAfterCap)
	posDur("backoff.connect_base", c.Backoff.ConnectBase)
	if c.Backoff.ConnectRetries < 0 || c.Backoff.ConnectRetries > 10 {
		bad("backoff.connect_retries", "must be a count from 0 to 10, got %d", c.Backoff.ConnectRetries)
	}

	// budget
	posDur("budget.window", c.Budget.Window)
	fraction("budget.ratio", c.Budget.Ratio, false)
	if c.Budget.Floor < 0 {
		bad("budget.floor", "must be a number of retries ≥ 0, got %d", c.Budget.Floor)
	}

	// breaker
	br := c.Breaker
	posInt("breaker.consecutive_failures", br.ConsecutiveFailures, "number of failures")
	fraction("breaker.failure_rate", br.FailureRate, true)
	posInt("breaker.window", br.Window, "number of calls")
	posInt("breaker.min_calls", br.MinCalls, "number of calls")
	if br.Window > 0 && br.MinCalls > br.Window {
		bad("breaker.min_calls", "must be at most breaker.window (%d), got %d", br.Window, br.MinCalls)
	}
	posDur("breaker.open_for", br.OpenFor)
	fraction("breaker.probe_fraction", br.ProbeFraction, true)
	fraction("breaker.close_threshold", br.CloseThreshold, true)
	posInt("breaker.probes", br.Probes, "number of probes")
	fraction("breaker.class_failure_rate", br.ClassFailureRate, true)
	posDur("breaker.class_window", br.ClassWindow)
	posInt("breaker.class_min_retries", br.ClassMinRetries, "number of retries")

	// pruning
	fraction("pruning.factor", c.Pruning.Factor, true)
	posInt("pruning.reserve_output_tokens", c.Pruning.ReserveOutputTokens, "number of tokens")
	if !slices.Contains(knownEncodings, c.Pruning.Encoding) {
		bad("pruning.encoding", "must be one of %s, got %q", strings.Join(knownEncodings, ", "), c.Pruning.Encoding)
	}

	// call
	ca := c.Call
	if ca.MaxAttempts < 1 || ca.MaxAttempts > 10 {
		bad("call.max_attempts", "must be from 1 to 10 attempts, got %d", ca.MaxAttempts)
	}
	posDur("call.deadline", ca.Deadline)
	posDur("call.max_deadline", ca.MaxDeadline)
	if ca.Deadline > 0 && ca.MaxDeadline < ca.Deadline {
		bad("call.max_deadline", "must be at least call.deadline (%s), got %s", ca.Deadline, ca.MaxDeadline)
	}
	posDur("call.fallback_reserve", ca.FallbackReserve)
	if ca.FallbackReserve > 0 && ca.Deadline > 0 && ca.FallbackReserve >= ca.Deadline {
		bad("call.fallback_reserve", "must be shorter than call.deadline (%s), got %s", ca.Deadline, ca.FallbackReserve)
	}
	posDur("call.heartbeat_timeout", ca.HeartbeatTimeout)

	// http
	posDur("http.header_timeout", c.HTTP.HeaderTimeout)
	posDur("http.connect_timeout", c.HTTP.ConnectTimeout)

	// limits
	l := c.Limits
	if l.MaxPromptBytes <= 0 || l.MaxPromptBytes > maxPromptBytesLimit {
		bad("limits.max_prompt_bytes", "must be a positive size up to %d bytes (Temporal payloads are limited to 2 MB), got %d", maxPromptBytesLimit, l.MaxPromptBytes)
	}
	posInt("limits.max_messages", l.MaxMessages, "number of messages")
	posInt("limits.max_tokens", l.MaxTokens, "number of tokens")
	if !(l.MaxTemperature > 0 && l.MaxTemperature <= 2) {
		bad("limits.max_temperature", "must be a temperature in (0,2], got %v", l.MaxTemperature)
	}

	// faq
	fraction("faq.threshold", c.FAQ.Threshold, true)

	// rules
	ids := map[string]int{}
	for i, r := range c.Rules {
		p := fmt.Sprintf("rules[%d]", i)
		if strings.TrimSpace(r.ID) == "" {
			bad(p+".id", "must be a non-empty rule id (it is recorded with the result), got %q", r.ID)
		} else if j, dup := ids[r.ID]; dup {
			bad(p+".id", "must be unique, got %q (also rules[%d])", r.ID, j)
		} else {
			ids[r.ID] = i
		}
		if !slices.Contains(knownRuleActions, r.Action) {
			bad(p+".action", "must be one of %s, got %q", joinEnum(knownRuleActions), r.Action)
		}
		if len(r.Keywords) == 0 {
			bad(p+".keywords", "must list at least one keyword, got none")
		}
		for j, k := range r.Keywords {
			if strings.TrimSpace(k) == "" {
				bad(fmt.Sprintf("%s.keywords[%d]", p, j), "must be a non-empty keyword, got %q", k)
			}
		}
		if (r.Action == RuleHandoff || r.Action == RuleSafeMessage) && strings.TrimSpace(r.Message) == "" {
			bad(p+".message", "must be the text the user sees for a %s rule, got %q", r.Action, r.Message)
		}
	}
	if strings.TrimSpace(c.Placeholder) == "" {
		bad("placeholder", "must be a non-empty answer, got %q", c.Placeholder)
	}
	return ps
}

// policyIndex remembers where each field path is in the file and what each
// class entry sets, and collects unknown fields.
type policyIndex struct {
	lines     map[string]int        // field path → line
	byLine    map[int][]indexedNode // line → the fields on it (several in flow style)
	classKeys map[failure.Class]map[string]bool
	problems  []ConfigProblem
}

// indexedNode is a field path with the position and text of its value.
type indexedNode struct {
	path   string
	column int
	value  string
}

func newPolicyIndex() *policyIndex {
	return &policyIndex{lines: map[string]int{}, byLine: map[int][]indexedNode{}, classKeys: map[failure.Class]map[string]bool{}}
}

// pathAt finds the field of a decode error on line: the one at column, or
// else the one whose value is value, or else the deepest on the line.
func (ix *policyIndex) pathAt(line, column int, value string) string {
	var best string
	for _, e := range ix.byLine[line] {
		if column > 0 && e.column == column {
			return e.path
		}
		if column == 0 && value != "" && e.value == value {
			return e.path
		}
		if len(e.path) > len(best) {
			best = e.path
		}
	}
	return best
}

var yamlUnmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// note records that the field path starts at key line (the line of its key,
// or of the item for list entries) and that its value is v.
func (ix *policyIndex) note(path string, line int, v *yaml.Node) {
	if path == "" || line <= 0 {
		return
	}
	if _, ok := ix.lines[path]; !ok {
		ix.lines[path] = line
	}
	ix.byLine[v.Line] = append(ix.byLine[v.Line], indexedNode{path: path, column: v.Column, value: v.Value})
}

// lineOf is the line of path, or of its nearest parent that is in the file.
func (ix *policyIndex) lineOf(path string) int {
	for path != "" {
		if l, ok := ix.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

func joinFieldPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFieldNames maps the yaml names of t's fields to their types.
func yamlFieldNames(t reflect.Type) (map[string]reflect.Type, []string) {
	fields := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
		names = append(names, name)
	}
	return fields, names
}

// walk follows n along the Go type t, noting lines and unknown fields.
func (ix *policyIndex) walk(n *yaml.Node, t reflect.Type, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type mismatch
		}
		fields, names := yamlFieldNames(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.ShortTag() == "!!merge" {
				for _, m := range mergedMappings(v) {
					ix.walk(m, t, path)
				}
				continue
			}
			p := joinFieldPath(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				ix.problems = append(ix.problems, ConfigProblem{Path: p, Line: k.Line,
					Message: fmt.Sprintf("unknown field; expected one of %s", strings.Join(names, ", "))})
				continue
			}
			ix.note(p, k.Line, v)
			ix.walk(v, ft, p)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			ix.note(p, item.Line, item)
			ix.walk(item, t.Elem(), p)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinFieldPath(path, k.Value)
			ix.note(p, k.Line, v)
			if path == "classes" {
				set := map[string]bool{}
				for _, m := range mergedMappings(v) {
					for j := 0; j+1 < len(m.Content); j += 2 {
						if key := m.Content[j]; key.ShortTag() == "!!merge" {
							for _, mm := range mergedMappings(m.Content[j+1]) {
								for h := 0; h+1 < len(mm.Content); h += 2 {
									set[mm.Content[h].Value] = true
								}
							}
						} else {
							set[key.Value] = true
						}
					}
				}
				ix.classKeys[failure.Class(k.Value)] = set
			}
			ix.walk(v, t.Elem(), p)
		}
	}
}

// mergedMappings resolves an alias, or a list of aliases (the value of a
// "<<" merge key), to the mappings it stands for.
func mergedMappings(n *yaml.Node) []*yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{n}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, c := range n.Content {
			out = append(out, mergedMappings(c)...)
		}
		return out
	}
	return nil
}

var (
	yamlLineRE   = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlTypeRE   = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	notFoundRE   = regexp.MustCompile(`^field .* not found in type `)
	yamlColumnRE = regexp.MustCompile(`^column (\d+): (.*)$`)
	yamlPrefixRE = regexp.MustCompile(`^yaml: (.*)$`)
	goTypeToWord = map[string]string{
		"int": "a whole number", "int64": "a whole number", "float64": "a number",
		"bool": "true or false", "string": "a text",
	}
)

// yamlErrorProblems turns a yaml error into problems with lines and, when
// ix knows the line, field paths.
func yamlErrorProblems(err error, ix *policyIndex) []ConfigProblem {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var ps []ConfigProblem
	for _, m := range msgs {
		p := ConfigProblem{Message: m}
		if sm := yamlPrefixRE.FindStringSubmatch(m); sm != nil {
			p.Message = sm[1]
		}
		if sm := yamlLineRE.FindStringSubmatch(m); sm != nil {
			p.Line, _ = strconv.Atoi(sm[1])
			p.Message = sm[2]
		}
		if notFoundRE.MatchString(p.Message) && ix != nil {
			continue // reported by the index walk, with its path
		}
		column, value := 0, ""
		if sm := yamlColumnRE.FindStringSubmatch(p.Message); sm != nil {
			column, _ = strconv.Atoi(sm[1])
			p.Message = sm[2]
		}
		if sm := yamlTypeRE.FindStringSubmatch(p.Message); sm != nil {
			value = sm[2]
			p.Message = "must be " + describeGoType(sm[3]) + ", got " + describeYAMLValue(sm[1], sm[2])
		}
		if ix != nil && p.Line > 0 {
			p.Path = ix.pathAt(p.Line, column, value)
		}
		ps = append(ps, p)
	}
	return ps
}

// syntaxErrorLine finds the line of a YAML syntax error. The parser
// reports the line where the enclosing block or flow collection started (and
// 0-based at that), which points users at the wrong line; the first prefix
// of the file that fails with the same problem ends on the right one.
func syntaxErrorLine(data []byte, problem string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > 5000 {
		return 0
	}
	var n yaml.Node
	end := 0
	for k, l := range lines {
		end += len(l)
		err := yaml.Unmarshal(data[:end], &n)
		if err == nil {
			continue
		}
		ps := yamlErrorProblems(err, nil)
		if len(ps) == 1 && ps[0].Message == problem {
			return k + 1
		}
	}
	return 0
}

func describeGoType(t string) string {
	if w, ok := goTypeToWord[t]; ok {
		return w
	}
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case strings.HasPrefix(t, "policies.") && (strings.HasSuffix(t, "Config") || t == "policies.Rule" || t == "policies.ClassPolicy"):
		return "a mapping"
	case strings.HasPrefix(t, "policies."):
		return "a text"
	case strings.HasPrefix(t, "*"):
		return describeGoType(t[1:])
	}
	return "a " + t
}

func describeYAMLValue(tag, val string) string {
	switch tag {
	case "map":
		return "a mapping"
	case "seq":
		return "a list"
	case "str":
		return strconv.Quote(val)
	}
	if val == "" {
		return "a " + tag
	}
	return val
}

func nodeKindWord(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// UnmarshalYAML reads a duration written with a unit: "500ms", "8s", "1m",
// "1m30s". Bare numbers are refused (is 5 seconds or nanoseconds?).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	fail := func() error {
		got := strconv.Quote(n.Value)
		if n.Kind != yaml.ScalarNode {
			got = nodeKindWord(n)
		} else if n.ShortTag() == "!!int" || n.ShortTag() == "!!float" {
			got = n.Value + " (a bare number: add a unit)"
		}
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: column %d: must be a duration with a unit such as \"500ms\", \"8s\" or \"1m\", got %s", n.Line, n.Column, got)}}
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return fail()
	}
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return fail()
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as "500ms", "8s", "1m0s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String is the duration as time.Duration prints it ("500ms", "1m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// LoadConfigOrDefault loads the policy file at path, or returns the
// embedded default policy when path is empty.
func LoadConfigOrDefault(path string) (*Config, error) {
	if path == "" {
		return DefaultConfig(), nil
	}
	return LoadConfig(path)
}
