package config

import (
	"cmp"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
)

// Validate checks c field by field and across fields (ParseConfig and
// LoadConfig call it; call it after changing a Config in code, e.g. after
// OverrideEndpoint). It returns nil or an *Error listing every problem
// (without line numbers). A value that makes no sense is refused, never
// replaced by a default.
func (c *Config) Validate() error {
	ps := c.validate()
	if len(ps) == 0 {
		return nil
	}
	return &Error{Source: cmp.Or(c.Source, "<config>"), Problems: ps}
}

// Known values of the enumerations, for validation messages.
var (
	knownRuleActions = []RuleAction{RuleHandoff, RuleSafeMessage, RuleNoRetry, RuleStepByStep}
	knownEncodings   = []string{"cl100k_base", "o200k_base", "p50k_base", "r50k_base", "p50k_edit"}
	envNameRE        = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	passthroughRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
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

// validate returns every problem of c.
func (c *Config) validate() []Problem {
	var ps []Problem
	bad := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
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
	if c.ModelDefaults.Name != "" {
		bad("model_defaults.name", "must be left out (each model names itself), got %q", c.ModelDefaults.Name)
	}
	c.ModelDefaults.validate("model_defaults", true, bad)
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
		m.validate(p, false, bad)
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
		if (cp.Action == ActionResend || cp.Action == ActionHold) && cp.Max < 0 {
			bad(p+".max", "must be 0 (never) or a count up to 10 for action %s, got %d", cp.Action, cp.Max)
		}
		switch {
		case (cp.Action == ActionBumpTokens || cp.Action == ActionContinue) && cp.MaxTokensIncrease < 1:
			bad(p+".max_tokens_increase", "must be a positive number of tokens for action %s, got %d", cp.Action, cp.MaxTokensIncrease)
		case cp.MaxTokensIncrease < 0:
			bad(p+".max_tokens_increase", "must be a positive number of tokens, got %d", cp.MaxTokensIncrease)
		}
		if cp.Temperature != nil && (*cp.Temperature < 0 || *cp.Temperature > 2 || math.IsNaN(*cp.Temperature)) {
			bad(p+".temperature", "must be a temperature in [0,2], got %v", *cp.Temperature)
		}
		switch {
		case cp.Action == ActionRepair && cp.Temperature == nil:
			bad(p+".temperature", "must be the highest temperature of a repair (for example 0.3) for action repair")
		}
		switch {
		case cp.Action == ActionPruneResend && cp.KeepRounds < 1:
			bad(p+".keep_rounds", "must be a positive number of rounds for action prune_resend, got %d", cp.KeepRounds)
		case cp.KeepRounds < 0:
			bad(p+".keep_rounds", "must be a positive number of rounds, got %d", cp.KeepRounds)
		}
		switch {
		case cl == failure.BreakerOpen && slices.Contains([]Action{ActionResend, ActionRetry, ActionPruneRetry, ActionPruneResend, ActionRetryAfter, ActionBumpTokens, ActionContinue, ActionResume, ActionHold}, cp.Action):
			bad(p+".action", "must be switch_model, fallback or fail (the breaker refused the model, retrying it cannot help), got %q", cp.Action)
		case cl == failure.InvalidRequest && cp.Action != ActionFail && cp.Action != ActionFallback:
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
	fraction("budget.tenant_share", c.Budget.TenantShare, false)
	if !(c.Spend.DailyCap >= 0) {
		bad("spend.daily_cap", "must be an amount ≥ 0 (0: no cap), got %v", c.Spend.DailyCap)
	}
	seenTenant := map[string]bool{}
	for i, t := range c.Spend.Tenants {
		switch {
		case t.Name == "":
			bad(fmt.Sprintf("spend.tenants[%d].name", i), "is required")
		case seenTenant[t.Name]:
			bad(fmt.Sprintf("spend.tenants[%d].name", i), "%q is listed twice", t.Name)
		}
		seenTenant[t.Name] = true
		if !(t.DailyCap >= 0) {
			bad(fmt.Sprintf("spend.tenants[%d].daily_cap", i), "must be an amount ≥ 0 (0: no cap), got %v", t.DailyCap)
		}
	}
	if c.Spend.Capped() {
		priced := false
		for _, m := range c.Models {
			priced = priced || m.InputPrice > 0 || m.OutputPrice > 0
		}
		if !priced {
			bad("spend", "a daily cap is set but no model has an input_price or output_price: nothing would ever count against it")
		}
	}
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
	if br.OpenForMax != 0 && br.OpenForMax < br.OpenFor {
		bad("breaker.open_for_max", "must be 0 (the open period never grows) or at least breaker.open_for (%s), got %s", br.OpenFor, br.OpenForMax)
	}
	if br.HealAfter < 0 {
		bad("breaker.heal_after", "must be a duration ≥ 0 such as \"10s\" (0: the open period shrinks back as soon as the breaker closes), got %s", br.HealAfter)
	}
	if br.ProbeFraction != 0 { // no longer read; a policy that still sets it loads
		fraction("breaker.probe_fraction", br.ProbeFraction, true)
	}
	fraction("breaker.close_threshold", br.CloseThreshold, true)
	posInt("breaker.probes", br.Probes, "number of probes")
	fraction("breaker.class_failure_rate", br.ClassFailureRate, true)
	posDur("breaker.class_window", br.ClassWindow)
	posInt("breaker.class_min_retries", br.ClassMinRetries, "number of retries")

	// pruning
	fraction("pruning.factor", c.Pruning.Factor, true)
	posInt("pruning.reserve_output_tokens", c.Pruning.ReserveOutputTokens, "number of tokens")
	c.Pruning.Summary.validate(c, bad)
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
	if ca.MaxHistoryBytes < 0 || ca.MaxHistoryBytes > 40<<20 {
		bad("call.max_history_bytes", "must be from 0 (the default, 8 MiB) to 41943040 (40 MiB, below Temporal's 50 MB limit), got %d", ca.MaxHistoryBytes)
	}
	if ca.MaxHistoryEvents < 0 || ca.MaxHistoryEvents > 40000 {
		bad("call.max_history_events", "must be from 0 (the default, 8000) to 40000 (below Temporal's 51,200-event limit), got %d", ca.MaxHistoryEvents)
	}

	// http
	posDur("http.connect_timeout", c.HTTP.ConnectTimeout)
	if n := c.HTTP.MaxBodyBytes; n < MinBodyBytes || n > MaxBodyBytesLimit {
		bad("http.max_body_bytes", "must be from %d to %d bytes (an attempt's reply is recorded in history, and Temporal payloads are limited to 2 MB), got %d", MinBodyBytes, MaxBodyBytesLimit, n)
	}
	posDur("stream.batch_interval", c.Stream.BatchInterval)
	posDur("stream.linger", c.Stream.Linger)
	c.Hedge.validate(c, bad)
	c.Cache.validate(bad)
	c.Store.validate(bad)
	c.Diagnose.validate(c, bad)
	posDur("rate_limit.hold", c.RateLimit.Hold)
	posDur("rate_limit.breaker_after", c.RateLimit.BreakerAfter)

	// limits
	l := c.Limits
	if l.MaxPromptBytes <= 0 || l.MaxPromptBytes > maxPromptBytesLimit {
		bad("limits.max_prompt_bytes", "must be a positive size up to %d bytes (Temporal payloads are limited to 2 MB), got %d", maxPromptBytesLimit, l.MaxPromptBytes)
	}
	posInt("limits.max_messages", l.MaxMessages, "number of messages")
	posInt("limits.max_tokens", l.MaxTokens, "number of tokens")
	if c.Call.MaxWait.D() < 0 || c.Call.MaxWaitStream.D() < 0 {
		bad("call.max_wait", "must be a duration of 0 or more, got %s / %s (stream)", c.Call.MaxWait.D(), c.Call.MaxWaitStream.D())
	}
	for i, w := range c.Call.MaxWaitScenarios {
		if w.Scenario == "" || w.MaxWait.D() < 0 {
			bad(fmt.Sprintf("call.max_wait_scenarios[%d]", i), "must name a scenario and a duration of 0 or more, got %q and %s", w.Scenario, w.MaxWait.D())
		}
	}
	if l.DefaultMaxTokens < 0 || l.DefaultMaxTokens > l.MaxTokens {
		bad("limits.default_max_tokens", "must be 0 (send none) or a number of tokens up to limits.max_tokens (%d), got %d", l.MaxTokens, l.DefaultMaxTokens)
	}
	if !(l.MaxTemperature > 0 && l.MaxTemperature <= 2) {
		bad("limits.max_temperature", "must be a temperature in (0,2], got %v", l.MaxTemperature)
	}

	posInt("limits.max_images", l.MaxImages, "number of images")
	posInt("limits.max_image_bytes", l.MaxImageBytes, "size in bytes")

	c.Request.validate(bad)
	c.Idempotency.validate(bad)

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
		if a := r.After; a != nil {
			if a.Count < 1 {
				bad(p+".after.count", "must be the number of failed attempts (1 or more) after which the rule fires, got %d", a.Count)
			}
			for j, k := range a.Classes {
				if !k.Valid() || k == failure.None {
					bad(fmt.Sprintf("%s.after.classes[%d]", p, j), "must be a failure class (docs/how-it-works.md \"Failure classes\"), got %q", k)
				}
			}
			if r.Action == RuleNoRetry {
				bad(p+".action", "no_retry is decided before the first attempt: it cannot wait for failures (after); use handoff, safe_message or step_by_step")
			}
		} else if r.Action == RuleStepByStep {
			bad(p+".after", "a step_by_step rule needs its technical condition (after: {classes: [context_length_exceeded], count: 1}): the question is split only once a whole answer failed")
		}
		if r.MinPrecision < 0 || r.MinPrecision >= 1 {
			bad(p+".min_precision", "must be a precision in [0,1) (0: learn.min_precision), got %v", r.MinPrecision)
		}
	}
	if c.Learn.MinFeedback < 1 {
		bad("learn.min_feedback", "must be the number of feedbacks (1 or more) a rule needs before the learner may turn it off, got %d", c.Learn.MinFeedback)
	}
	if !(c.Learn.MinPrecision > 0 && c.Learn.MinPrecision < 1) {
		bad("learn.min_precision", "must be a precision in (0,1), got %v", c.Learn.MinPrecision)
	}
	if c.Learn.Refresh.D() <= 0 {
		bad("learn.refresh", "must be a positive duration such as \"5s\", got %s", c.Learn.Refresh.D())
	}
	if strings.TrimSpace(c.Placeholder) == "" {
		bad("placeholder", "must be a non-empty answer, got %q", c.Placeholder)
	}
	return ps
}

// validate checks one model (or model_defaults, where base_url and
// api_key_env may stay empty) at path p; its name is checked by the caller.
func (m ModelConfig) validate(p string, isDefault bool, bad func(path, format string, args ...any)) {
	if (!isDefault && len(m.Deployments) == 0) || m.BaseURL != "" {
		if !httpURL(m.BaseURL) {
			bad(p+".base_url", "must be an absolute http(s) URL such as \"http://127.0.0.1:8000/v1\", got %q", RedactURL(m.BaseURL))
		}
	}
	m.validateDeployments(p, bad)
	if m.APIKeyEnv != "" && !envNameRE.MatchString(m.APIKeyEnv) {
		// Never echo it: it may be a pasted key.
		bad(p+".api_key_env", "must be the NAME of the environment variable holding the key (letters, digits, _), not the key itself, got a %d-character value (not shown)", len(m.APIKeyEnv))
	}
	seenKeys := map[string]int{}
	for i, k := range m.APIKeyEnvs {
		// Never echo a value here: it may be a pasted key.
		switch j, dup := seenKeys[k]; {
		case !envNameRE.MatchString(k):
			bad(fmt.Sprintf("%s.api_key_envs[%d]", p, i), "must be the NAME of the environment variable holding a key (letters, digits, _), not the key itself, got a %d-character value (not shown)", len(k))
		case dup:
			bad(fmt.Sprintf("%s.api_key_envs[%d]", p, i), "names the same variable as api_key_envs[%d]", j)
		}
		seenKeys[k] = i
	}
	if m.KeyPark <= 0 {
		bad(p+".key_park", "must be a positive duration such as \"5m\", got %s", m.KeyPark)
	}
	if m.ContextWindow <= 0 {
		bad(p+".context_window", "must be a positive number of tokens, got %d", m.ContextWindow)
	}
	for _, d := range []struct {
		field string
		v     Duration
	}{{"timeout", m.Timeout}, {"first_token_timeout", m.FirstTokenTimeout}, {"idle_timeout", m.IdleTimeout}} {
		if d.v <= 0 {
			bad(p+"."+d.field, "must be a positive duration such as \"500ms\" or \"8s\", got %s", d.v)
		}
	}

	if !slices.Contains([]SystemPromptSupport{SystemPromptFull, SystemPromptPartial, SystemPromptNone}, m.SystemPrompt) {
		bad(p+".system_prompt", "must be one of full, partial, none, got %q", m.SystemPrompt)
	}
	if !slices.Contains([]API{"", APIOpenAI, APIAnthropic}, m.API) {
		bad(p+".api", "must be one of openai, anthropic, got %q", m.API)
	}
	switch {
	case !slices.Contains([]Continuation{ContinueAuto, ContinueNone, ContinueVLLM, ContinueDeepSeek, ContinueAnthropic}, m.Continuation):
		bad(p+".continuation", "must be one of auto, none, vllm, deepseek, anthropic, got %q", m.Continuation)
	case m.Wire() == APIAnthropic && (m.Continuation == ContinueVLLM || m.Continuation == ContinueDeepSeek):
		bad(p+".continuation", "must be auto, none or anthropic for api anthropic, got %q (a field of an OpenAI-compatible server)", m.Continuation)
	case m.Wire() == APIOpenAI && m.Continuation == ContinueAnthropic:
		bad(p+".continuation", "anthropic needs api: anthropic (the model is called through the OpenAI wire)")
	}
	if m.RPM < 0 {
		bad(p+".rpm", "must be a number of requests per minute ≥ 0 (0: no limit), got %d", m.RPM)
	}
	if m.TPM < 0 {
		bad(p+".tpm", "must be a number of tokens per minute ≥ 0 (0: no limit), got %d", m.TPM)
	}
	if !slices.Contains([]RateLimitScope{ScopeEndpoint, ScopeKey, ScopeModel, ScopeAuto}, m.RateLimitScope) {
		bad(p+".rate_limit_scope", "must be one of auto, endpoint, key, model, got %q", m.RateLimitScope)
	}
	for i, c := range m.Capabilities {
		if !slices.Contains(KnownCapabilities, c) {
			bad(fmt.Sprintf("%s.capabilities[%d]", p, i), "must be one of %s, got %q", joinEnum(KnownCapabilities), c)
		}
	}
	for i, f := range m.Passthrough {
		switch {
		case !passthroughRE.MatchString(f):
			bad(fmt.Sprintf("%s.passthrough[%d]", p, i), "must be a top-level request field name (letters, digits, _), got %q", f)
		case slices.Contains(StandardFields, f):
			bad(fmt.Sprintf("%s.passthrough[%d]", p, i), "%q is a field of the chat-completions request that the call already sends; list only provider-specific fields", f)
		}
	}
	if m.InputPrice < 0 || math.IsNaN(m.InputPrice) {
		bad(p+".input_price", "must be a price per million tokens ≥ 0, got %v", m.InputPrice)
	}
	if m.OutputPrice < 0 || math.IsNaN(m.OutputPrice) {
		bad(p+".output_price", "must be a price per million tokens ≥ 0, got %v", m.OutputPrice)
	}
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// deploymentNameRE is what a deployment's name may hold: it is shown in
// history, summaries and metric labels.
var deploymentNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func (m ModelConfig) validateDeployments(p string, bad func(path, format string, args ...any)) {
	if len(m.Deployments) > 0 && len(m.APIKeyEnvs) > 0 {
		bad(p+".deployments", "a model lists deployments (each with its key) or api_key_envs, not both")
	}
	seen := map[string]int{}
	for i, d := range m.Deployments {
		dp := fmt.Sprintf("%s.deployments[%d]", p, i)
		if j, dup := seen[d.Name]; dup {
			bad(dp+".name", "names %q as deployments[%d] does", d.Name, j)
		} else if !deploymentNameRE.MatchString(d.Name) {
			bad(dp+".name", "must be a short id of letters, digits, '_', '.' or '-' (shown in history and metrics), got %q", d.Name)
		}
		seen[d.Name] = i
		if !httpURL(d.BaseURL) {
			bad(dp+".base_url", "must be an absolute http(s) URL such as \"https://eastus.example.com/v1\", got %q", RedactURL(d.BaseURL))
		}
		if d.APIKeyEnv != "" && !envNameRE.MatchString(d.APIKeyEnv) {
			// Never echo it: it may be a pasted key.
			bad(dp+".api_key_env", "must be the NAME of the environment variable holding the key (letters, digits, _), not the key itself, got a %d-character value (not shown)", len(d.APIKeyEnv))
		}
	}
}
