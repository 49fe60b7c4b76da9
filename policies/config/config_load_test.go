package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/policies/failure"
	"go.yaml.in/yaml/v3"
)

func ms(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }

func TestDefaultConfigHasSpecDefaults(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.Source != DefaultSource {
		t.Errorf("Source = %q, want %q", cfg.Source, DefaultSource)
	}

	wantModels := []struct {
		name   string
		window int
		sp     SystemPromptSupport
	}{{"qwen-72b", 32768, SystemPromptFull}, {"qwen-14b", 8192, SystemPromptPartial}, {"llama-8b", 4096, SystemPromptNone}}
	if len(cfg.Models) != len(wantModels) {
		t.Fatalf("got %d models, want %d", len(cfg.Models), len(wantModels))
	}
	for i, w := range wantModels {
		m := cfg.Models[i]
		if m.Name != w.name || m.ContextWindow != w.window || m.SystemPrompt != w.sp {
			t.Errorf("models[%d] = %s/%d/%s, want %s/%d/%s", i, m.Name, m.ContextWindow, m.SystemPrompt, w.name, w.window, w.sp)
		}
		if m.BaseURL != "http://127.0.0.1:8000/v1" || m.APIKeyEnv != "LLM_API_KEY" {
			t.Errorf("models[%d] endpoint = %s (key from %s)", i, m.BaseURL, m.APIKeyEnv)
		}
		if m.Timeout <= 0 || m.InputPrice <= 0 || m.OutputPrice <= 0 {
			t.Errorf("models[%d] timeout/prices not set: %+v", i, m)
		}
	}

	// The YAML spells out every class; it must agree with the built-in
	// defaults used for classes a user file leaves out.
	if !reflect.DeepEqual(cfg.Classes, builtinClassPolicies()) {
		t.Errorf("classes of default_policy.yaml differ from builtinClassPolicies:\n yaml:    %+v\n builtin: %+v", cfg.Classes, builtinClassPolicies())
	}
	for _, cl := range failure.AllClasses {
		if _, ok := cfg.Classes[cl]; !ok {
			t.Errorf("class %s missing", cl)
		}
	}

	// README "Failure classes", row by row.
	temp := 0.3
	spec := map[failure.Class]ClassPolicy{
		failure.ClassConnect:               {Action: ActionSwitchModel},
		failure.ClassReadTimeout:           {Action: ActionPruneRetry, Max: 1, SwitchAfter: 1},
		failure.ClassTimeout:               {Action: ActionPruneRetry, Max: -1},
		failure.ClassQueueFull:             {Action: ActionSwitchModel, Max: 1, Waits: []Duration{ms(200)}},
		failure.ClassRateLimited:           {Action: ActionRetryAfter, Max: 1},
		failure.ClassContextLengthExceeded: {Action: ActionPruneResend, Max: 1, KeepRounds: 3},
		failure.ClassOutputTruncated:       {Action: ActionBumpTokens, Max: 2, Waits: []Duration{ms(500), ms(1200)}, MaxTokensIncrease: 256, Temperature: &temp},
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
	for cl, want := range spec {
		if got := cfg.ClassPolicy(cl); !reflect.DeepEqual(got, want) {
			t.Errorf("ClassPolicy(%s) = %+v, want %+v", cl, got, want)
		}
	}

	checks := []struct {
		name      string
		got, want any
	}{
		{"backoff.base", cfg.Backoff.Base, ms(500)},
		{"backoff.cap", cfg.Backoff.Cap, ms(8000)},
		{"backoff.retry_after_cap", cfg.Backoff.RetryAfterCap, ms(60000)},
		{"backoff.connect_base", cfg.Backoff.ConnectBase, ms(300)},
		{"backoff.connect_retries", cfg.Backoff.ConnectRetries, 2},
		{"budget.window", cfg.Budget.Window, ms(60000)},
		{"budget.ratio", cfg.Budget.Ratio, 0.1},
		{"budget.floor", cfg.Budget.Floor, 10},
		{"breaker.consecutive_failures", cfg.Breaker.ConsecutiveFailures, 5},
		{"breaker.window", cfg.Breaker.Window, 20},
		{"breaker.open_for", cfg.Breaker.OpenFor, ms(30000)},
		{"breaker.probe_fraction", cfg.Breaker.ProbeFraction, 0.1},
		{"breaker.close_threshold", cfg.Breaker.CloseThreshold, 0.9},
		{"breaker.class_failure_rate", cfg.Breaker.ClassFailureRate, 0.15},
		{"pruning.factor", cfg.Pruning.Factor, 0.5},
		{"pruning.encoding", cfg.Pruning.Encoding, "cl100k_base"},
		{"call.max_attempts", cfg.Call.MaxAttempts, 4},
		{"call.deadline", cfg.Call.Deadline, ms(60000)},
		{"call.fallback_reserve", cfg.Call.FallbackReserve, ms(2000)},
		{"http.header_timeout", cfg.HTTP.HeaderTimeout, ms(8000)},
		{"http.connect_timeout", cfg.HTTP.ConnectTimeout, ms(3000)},
		{"limits.max_prompt_bytes", cfg.Limits.MaxPromptBytes, 1 << 20},
		{"faq.threshold", cfg.FAQ.Threshold, 0.35},
		{"placeholder", cfg.Placeholder, DefaultPlaceholder},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}

	// Seed 003 §5.3 rules.
	if len(cfg.Rules) < 2 {
		t.Fatalf("want the medical and finance rules, got %d rules", len(cfg.Rules))
	}
	med, fin := cfg.Rules[0], cfg.Rules[1]
	if med.Scenario != "medical" || med.Action != RuleHandoff || !slicesHave(med.Keywords, "出血", "胸痛", "chest pain", "bleeding") {
		t.Errorf("medical rule = %+v", med)
	}
	if fin.Scenario != "finance" || fin.Action != RuleSafeMessage || fin.Flag != "risk_review" || !slicesHave(fin.Keywords, "转账", "密码", "password", "transfer") {
		t.Errorf("finance rule = %+v", fin)
	}
	for _, r := range cfg.Rules {
		if strings.Contains(r.Message, "， ") || strings.Contains(r.Message, "  ") {
			t.Errorf("rule %s message has stray spaces from YAML folding: %q", r.ID, r.Message)
		}
	}

	if m, ok := cfg.Model("qwen-14b"); !ok || m.ContextWindow != 8192 {
		t.Errorf("Model(qwen-14b) = %+v, %v", m, ok)
	}
	if _, ok := cfg.Model("gpt-9"); ok {
		t.Error("Model(gpt-9) found")
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	// Fresh copies: changing one must not change the next.
	cfg.Models[0].Name = "changed"
	cfg.Classes[failure.ClassConnect] = ClassPolicy{Action: ActionFail}
	if again := DefaultConfig(); again.Models[0].Name != "qwen-72b" || again.Classes[failure.ClassConnect].Action != ActionSwitchModel {
		t.Error("DefaultConfig shares state between calls")
	}
	if !strings.Contains(string(DefaultPolicyYAML()), "qwen-72b") {
		t.Error("DefaultPolicyYAML lacks the ladder")
	}
}

func slicesHave(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func TestParseConfigEmptyFileIsDefault(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "---\n"} {
		cfg, err := ParseConfig([]byte(src), "empty.yaml")
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		def := DefaultConfig()
		cfg.Source, def.Source = "", ""
		// The default YAML also carries rules; an empty file has none.
		def.Rules = nil
		if !reflect.DeepEqual(cfg, def) {
			t.Errorf("%q: empty file differs from the defaults:\n got %+v\nwant %+v", src, cfg, def)
		}
	}
}

// minimal is a valid file that the bad cases below break one field at a time.
const minimal = `
models:
  - name: a
    base_url: http://127.0.0.1:8000/v1
  - name: b
    base_url: https://api.example.com/v1
    api_key_env: EXAMPLE_KEY
`

func TestParseConfigMinimal(t *testing.T) {
	cfg, err := ParseConfig([]byte(minimal), "ok.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Models[0]; m.ContextWindow != 8192 || m.Timeout != ms(30000) || m.SystemPrompt != SystemPromptFull {
		t.Errorf("model defaults not applied: %+v", m)
	}
	if cfg.Source != "ok.yaml" || cfg.Call.MaxAttempts != 4 || cfg.ClassPolicy(failure.ClassRateLimited).Action != ActionRetryAfter {
		t.Errorf("defaults not applied: %+v", cfg)
	}
}

func TestParseConfigRefusesBadFiles(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // substrings of the error
		not  string   // must not appear
	}{
		{"negative context window", minimal + "    context_window: -5\n",
			[]string{"bad.yaml: models[1].context_window: must be a positive number of tokens, got -5 (line 8)"}, ""},
		{"no models", "models: []\n", []string{"bad.yaml: models: must list at least one model"}, ""},
		{"empty name", "models:\n  - base_url: http://x/v1\n", []string{"models[0].name: must be the model name"}, ""},
		{"duplicate name", "models:\n  - {name: a, base_url: http://x/v1}\n  - {name: a, base_url: http://y/v1}\n",
			[]string{`models[1].name: must be unique, got "a" (also models[0])`}, ""},
		{"relative base_url", "models:\n  - {name: a, base_url: /v1}\n", []string{`models[0].base_url: must be an absolute http(s) URL`, `got "/v1"`}, ""},
		{"ftp base_url", "models:\n  - {name: a, base_url: 'ftp://x/v1'}\n", []string{`models[0].base_url:`}, ""},
		{"system prompt", "models:\n  - {name: a, base_url: http://x/v1, system_prompt: some}\n", []string{`models[0].system_prompt: must be one of full, partial, none, got "some"`}, ""},
		{"key pasted instead of variable name", "models:\n  - {name: a, base_url: http://x/v1, api_key_env: sk-secret-123}\n",
			[]string{"models[0].api_key_env: must be the NAME of the environment variable"}, "sk-secret"},
		{"bare number duration", "models:\n  - {name: a, base_url: http://x/v1, timeout: 30}\n",
			[]string{`models[0].timeout: must be a duration with a unit such as "500ms", "8s" or "1m", got 30`}, ""},
		{"garbage duration", minimal + "backoff:\n  cap: soon\n", []string{`backoff.cap: must be a duration with a unit`, `got "soon" (line 9)`}, ""},
		{"negative duration", minimal + "http:\n  header_timeout: -1s\n", []string{"http.header_timeout: must be a positive duration", "got -1s"}, ""},
		{"price", "models:\n  - {name: a, base_url: http://x/v1, input_price: -1}\n", []string{"models[0].input_price: must be a price"}, ""},
		{"wrong type", "models:\n  - {name: a, base_url: http://x/v1, context_window: big}\n", []string{`models[0].context_window: must be a whole number, got "big" (line 2)`}, ""},
		{"list for a section", minimal + "budget: [1, 2]\n", []string{"budget: must be a mapping, got a list"}, ""},
		{"unknown class", minimal + "classes:\n  teapot: {action: retry}\n", []string{`classes.teapot: must be a failure class`, `got "teapot" (line 9)`}, ""},
		{"unknown action", minimal + "classes:\n  timeout: {action: explode}\n", []string{`classes.timeout.action: must be one of resend, retry`, `got "explode"`}, ""},
		{"max too large", minimal + "classes:\n  timeout: {max: 11}\n", []string{"classes.timeout.max: must be -1 (up to the attempts cap), 0 (never) or a count up to 10, got 11"}, ""},
		{"negative wait", minimal + "classes:\n  queue_full: {waits: [-5ms]}\n", []string{"classes.queue_full.waits[0]: must be a duration between 0s and 10m, got -5ms"}, ""},
		{"breaker_open cannot retry", minimal + "classes:\n  breaker_open: {action: retry}\n", []string{"classes.breaker_open.action: must be switch_model, fallback or fail"}, ""},
		{"ratio above one", minimal + "budget:\n  ratio: 1.5\n", []string{"budget.ratio: must be a fraction in [0,1], got 1.5"}, ""},
		{"failure rate negative", minimal + "breaker:\n  failure_rate: -0.1\n", []string{"breaker.failure_rate: must be a fraction in (0,1], got -0.1"}, ""},
		{"probe fraction", minimal + "breaker:\n  probe_fraction: 2\n", []string{"breaker.probe_fraction: must be a fraction in (0,1], got 2"}, ""},
		{"breaker numbers", minimal + "breaker:\n  consecutive_failures: -1\n  min_calls: 50\n",
			[]string{"breaker.consecutive_failures: must be a positive number of failures, got -1", "breaker.min_calls: must be at most breaker.window (20), got 50"}, ""},
		{"cap below base", minimal + "backoff:\n  base: 2s\n  cap: 1s\n", []string{"backoff.cap: must be at least backoff.base (2s), got 1s"}, ""},
		{"max attempts", minimal + "call:\n  max_attempts: 11\n", []string{"call.max_attempts: must be from 1 to 10 attempts, got 11"}, ""},
		{"negative max attempts", minimal + "call:\n  max_attempts: -1\n", []string{"call.max_attempts: must be from 1 to 10 attempts, got -1"}, ""},
		{"fallback reserve", minimal + "call:\n  deadline: 5s\n  fallback_reserve: 5s\n", []string{"call.fallback_reserve: must be shorter than call.deadline (5s), got 5s"}, ""},
		{"prompt limit", minimal + "limits:\n  max_prompt_bytes: 3000000\n", []string{"limits.max_prompt_bytes: must be a positive size up to"}, ""},
		{"encoding", minimal + "pruning:\n  encoding: utf8\n", []string{`pruning.encoding: must be one of cl100k_base`, `got "utf8"`}, ""},
		{"faq threshold", minimal + "faq:\n  threshold: 1.5\n", []string{"faq.threshold: must be a fraction in (0,1], got 1.5"}, ""},
		{"faq file missing", minimal + "faq:\n  file: /nonexistent/faq.yaml\n", []string{`faq.file: must be a readable FAQ file, got "/nonexistent/faq.yaml"`}, ""},
		{"rule without id", minimal + "rules:\n  - {keywords: [x], action: no_retry}\n", []string{`rules[0].id: must be a non-empty rule id`}, ""},
		{"rule unknown action", minimal + "rules:\n  - {id: r, keywords: [x], action: shout}\n", []string{`rules[0].action: must be one of handoff, safe_message, no_retry, got "shout"`}, ""},
		{"rule without keywords", minimal + "rules:\n  - {id: r, action: no_retry}\n", []string{`rules[0].keywords: must list at least one keyword, got none`}, ""},
		{"rule blank keyword", minimal + "rules:\n  - {id: r, action: no_retry, keywords: [' ']}\n", []string{`rules[0].keywords[0]: must be a non-empty keyword`}, ""},
		{"handoff without message", minimal + "rules:\n  - {id: r, action: handoff, keywords: [x]}\n", []string{`rules[0].message: must be the text the user sees for a handoff rule`}, ""},
		{"duplicate rule id", minimal + "rules:\n  - {id: r, action: no_retry, keywords: [x]}\n  - {id: r, action: no_retry, keywords: [y]}\n", []string{`rules[1].id: must be unique, got "r" (also rules[0])`}, ""},
		{"duplicate key", minimal + "budget:\n  ratio: 0.1\n  ratio: 0.2\n", []string{`bad.yaml: budget.ratio: mapping key "ratio" already defined at line 9 (line 10)`}, ""},
		{"two documents", minimal + "---\nmodels: []\n", []string{"must hold one YAML document"}, ""},
		{"not a mapping", "- a\n- b\n", []string{"bad.yaml: line 1: must be a mapping of policy sections"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.yaml), "bad.yaml")
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Source != "bad.yaml" || len(ce.Problems) == 0 {
				t.Fatalf("error %T %v is not a *ConfigError for bad.yaml", err, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if c.not != "" && strings.Contains(err.Error(), c.not) {
				t.Errorf("error leaks %q:\n%v", c.not, err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "bad.yaml: ") {
					t.Errorf("line does not name the file: %q", line)
				}
			}
		})
	}
}

func TestParseConfigReportsAllProblems(t *testing.T) {
	src := minimal + "budget:\n  ratio: 2\ncall:\n  max_attempts: 20\nfaq:\n  threshold: -1\n"
	_, err := ParseConfig([]byte(src), "bad.yaml")
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	var paths []string
	for _, p := range ce.Problems {
		paths = append(paths, p.Path)
	}
	if want := []string{"budget.ratio", "call.max_attempts", "faq.threshold"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("problem paths = %v, want %v\n%v", paths, want, err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
		t.Errorf("want one line per problem, got %d lines:\n%v", n, err)
	}
}

func TestParseConfigRefusesUnknownFields(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"top level", minimal + "modles: []\n", "bad.yaml: modles: unknown field; expected one of models, classes, backoff"},
		{"in a model", "models:\n  - name: a\n    base_url: http://x/v1\n    contxt_window: 5\n", "bad.yaml: models[0].contxt_window: unknown field; expected one of name, base_url, api_key_env, context_window"},
		{"in a class", minimal + "classes:\n  timeout:\n    retries: 3\n", "bad.yaml: classes.timeout.retries: unknown field; expected one of action, max, waits"},
		{"in a rule", minimal + "rules:\n  - {id: r, action: no_retry, keywords: [x], scenarios: [a]}\n", "bad.yaml: rules[0].scenarios: unknown field"},
		{"the Source field is not read", minimal + "source: x\n", "bad.yaml: source: unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.yaml), "bad.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
	// The line of the unknown field is reported.
	_, err := ParseConfig([]byte("models:\n  - name: a\n    base_url: http://x/v1\n    contxt_window: 5\n"), "bad.yaml")
	if !strings.Contains(err.Error(), "(line 4)") {
		t.Errorf("unknown field without its line: %v", err)
	}
}

func TestParseConfigSyntaxErrorNamesLine(t *testing.T) {
	// yaml reports the line where the enclosing collection began; the
	// message must point at the line to fix.
	cases := []struct {
		name, yaml, want string
	}{
		{"bad indent in a list", "models:\n  - name: a\n   base_url: x\n", "p.yaml: line 3: did not find expected '-' indicator"},
		{"unclosed bracket", "budget: {window: 1m}\nclasses:\n  queue_full: {waits: [1s, 2s}\nfaq: {}\n", "p.yaml: line 3: "},
		{"unclosed quote", "placeholder: 'sorry\nfaq: {}\n", "p.yaml: line 1: found unexpected end of stream"},
		{"after a multi-line flow list", "w: [1,\n 2]\nx:\n  - a\n  b: 2\n", "p.yaml: line 5: did not find expected '-' indicator"},
		{"tab", "budget:\n  window: 1m\n\tratio: 0.1\n", "p.yaml: line 3: found a tab character"},
		{"dedented key", "budget:\n  window: 1m\n ratio: 0.1\n", "p.yaml: line 3: did not find expected key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.yaml), "p.yaml")
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Line == 0 {
				t.Fatalf("want one problem with a line, got %#v", err)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error = %q, want prefix %q", err, c.want)
			}
		})
	}
}

func TestParseConfigClassMerge(t *testing.T) {
	src := minimal + `
classes:
  rate_limited: {max: 2}
  output_truncated: {max: 1}
  queue_full: {waits: []}
  server_error: {action: switch_model}
  body_error: {action: bump_tokens, max: 1}
  timeout: {action: prune_resend}
  connect:
`
	cfg, err := ParseConfig([]byte(src), "merge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	temp := 0.3
	want := map[failure.Class]ClassPolicy{
		// Same action: field-by-field merge over the default.
		failure.ClassRateLimited:     {Action: ActionRetryAfter, Max: 2},
		failure.ClassOutputTruncated: {Action: ActionBumpTokens, Max: 1, Waits: []Duration{ms(500), ms(1200)}, MaxTokensIncrease: 256, Temperature: &temp},
		failure.ClassQueueFull:       {Action: ActionSwitchModel, Max: 1, Waits: []Duration{}},
		// New action: the entry stands alone, plus the action's own defaults.
		failure.ClassServerError: {Action: ActionSwitchModel},
		failure.ClassBodyError:   {Action: ActionBumpTokens, Max: 1, MaxTokensIncrease: 256, Temperature: &temp},
		failure.ClassTimeout:     {Action: ActionPruneResend, KeepRounds: 3},
		// Present but empty: the default.
		failure.ClassConnect: {Action: ActionSwitchModel},
		// Left out: the default.
		failure.ClassAuth: {Action: ActionSwitchModel, TripBreaker: true},
	}
	for cl, w := range want {
		if got := cfg.ClassPolicy(cl); !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %+v, want %+v", cl, got, w)
		}
	}
	// The merge must not alias the built-in waits.
	if cfg.ClassPolicy(failure.ClassQueueFull).Waits == nil {
		t.Error("explicit empty waits lost")
	}
}

func TestParseConfigAnchorsAndMergeKeys(t *testing.T) {
	src := minimal + `
classes:
  server_error: &quick
    max: 3
    switch_after: 2
  body_error:
    <<: *quick
    waits: [1s]
  timeout: *quick
`
	cfg, err := ParseConfig([]byte(src), "anchors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[failure.Class]ClassPolicy{
		failure.ClassServerError: {Action: ActionRetry, Max: 3, SwitchAfter: 2},
		failure.ClassBodyError:   {Action: ActionRetry, Max: 3, SwitchAfter: 2, Waits: []Duration{ms(1000)}},
		failure.ClassTimeout:     {Action: ActionPruneRetry, Max: 3, SwitchAfter: 2},
	}
	for cl, w := range want {
		if got := cfg.ClassPolicy(cl); !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %+v, want %+v", cl, got, w)
		}
	}
	_, err = ParseConfig([]byte(minimal+"classes:\n  timeout:\n    <<: {retries: 1}\n"), "bad.yaml")
	if err == nil || !strings.Contains(err.Error(), "classes.timeout.retries: unknown field") {
		t.Errorf("unknown field behind a merge key: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "faq.yaml"), []byte("entries: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte(minimal+"faq:\n  file: faq.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source != path || cfg.FAQ.File != filepath.Join(dir, "faq.yaml") {
		t.Errorf("Source %q, FAQ.File %q", cfg.Source, cfg.FAQ.File)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(minimal+"faq:\n  file: missing.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(bad); err == nil || !strings.Contains(err.Error(), bad+": faq.file: must be a readable FAQ file") {
		t.Errorf("missing FAQ file: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "nope.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("missing policy file: %v", err)
	}
}

func TestOverrideEndpoint(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OverrideEndpoint("https://llm.internal:9443/v1", "CORP_LLM_KEY")
	for _, m := range cfg.Models {
		if m.BaseURL != "https://llm.internal:9443/v1" || m.APIKeyEnv != "CORP_LLM_KEY" {
			t.Errorf("%s not overridden: %s %s", m.Name, m.BaseURL, m.APIKeyEnv)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	cfg.OverrideEndpoint("", "")
	if cfg.Models[0].BaseURL != "https://llm.internal:9443/v1" {
		t.Error("empty override changed the URL")
	}
	cfg.OverrideEndpoint("llm.internal", "")
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "<embedded default>: models[0].base_url: must be an absolute http(s) URL") {
		t.Errorf("Validate after a bad override: %v", err)
	}
}

func TestConfigBuiltInCode(t *testing.T) {
	cfg := &Config{Models: []ModelConfig{{Name: "m", BaseURL: "http://x/v1"}}}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cp := cfg.ClassPolicy(failure.ClassOutputTruncated); cp.MaxTokensIncrease != 256 || cp.Temperature == nil || *cp.Temperature != 0.3 {
		t.Errorf("output_truncated = %+v", cp)
	}
	var bare Config
	if cp := bare.ClassPolicy(failure.ClassTimeout); cp.Action != ActionPruneRetry {
		t.Errorf("ClassPolicy without defaults = %+v", cp)
	}
	if cp := bare.ClassPolicy(failure.Class("bogus")); cp.Action != ActionFail {
		t.Errorf("unknown class = %+v, want fail", cp)
	}
	if cp := bare.ClassPolicy(failure.ClassNone); cp.Action != ActionFail {
		t.Errorf("ClassNone = %+v, want fail", cp)
	}
	bare.ApplyDefaults()
	if len(bare.Models) != 3 {
		t.Errorf("nil models should become the default ladder, got %d", len(bare.Models))
	}
}

func TestDurationYAML(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{`"500ms"`, 500 * time.Millisecond, ""},
		{`8s`, 8 * time.Second, ""},
		{`1m`, time.Minute, ""},
		{`1m30s`, 90 * time.Second, ""},
		{`0s`, 0, ""},
		{`8`, 0, "got 8 (a bare number: add a unit)"},
		{`0.5`, 0, "got 0.5 (a bare number: add a unit)"},
		{`soon`, 0, `got "soon"`},
		{`[1s]`, 0, "got a list"},
		{`true`, 0, "must be a duration"},
	}
	for _, c := range cases {
		var v struct {
			D Duration `yaml:"d"`
		}
		err := yaml.Unmarshal([]byte("d: "+c.in), &v)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "line 1") {
				t.Errorf("%s: err = %v, want %q with the line", c.in, err, c.err)
			}
			continue
		}
		if err != nil || v.D.D() != c.want {
			t.Errorf("%s = %v, %v; want %v", c.in, v.D, err, c.want)
		}
	}
	out, err := yaml.Marshal(struct {
		D Duration `yaml:"d"`
	}{ms(1500)})
	if err != nil || string(out) != "d: 1.5s\n" {
		t.Errorf("marshal = %q, %v", out, err)
	}
}
