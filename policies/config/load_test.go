package config

import (
	"bytes"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
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

func ptr[T any](v T) *T { return &v }

// minimal is a valid file that the cases below extend or break.
const minimal = `
models:
  - name: a
    base_url: http://127.0.0.1:8000/v1
  - name: b
    base_url: https://api.example.com/v1
    api_key_env: EXAMPLE_KEY
`

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := ParseConfig([]byte(src), "test.yaml")
	if err != nil {
		t.Fatalf("ParseConfig:\n%v", err)
	}
	return cfg
}

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.Source != DefaultSource {
		t.Errorf("Source = %q, want %q", cfg.Source, DefaultSource)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for _, cl := range failure.AllClasses {
		if _, ok := cfg.Classes[cl]; !ok {
			t.Errorf("class %s missing from default_policy.yaml", cl)
		}
	}
	if len(cfg.Classes) != len(failure.AllClasses) {
		t.Errorf("default_policy.yaml has %d classes, want the %d of failure.AllClasses", len(cfg.Classes), len(failure.AllClasses))
	}
	if len(cfg.Models) == 0 || len(cfg.Rules) == 0 || cfg.Placeholder == "" {
		t.Errorf("default ladder, rules or placeholder missing: %d models, %d rules, placeholder %q", len(cfg.Models), len(cfg.Rules), cfg.Placeholder)
	}
	for _, r := range cfg.Rules {
		if strings.Contains(r.Message, "， ") || strings.Contains(r.Message, "  ") {
			t.Errorf("rule %s message has stray spaces from YAML folding: %q", r.ID, r.Message)
		}
	}
	if m, ok := cfg.Model(cfg.Models[1].Name); !ok || !reflect.DeepEqual(m, cfg.Models[1]) {
		t.Errorf("Model(%s) = %+v, %v", cfg.Models[1].Name, m, ok)
	}
	if _, ok := cfg.Model("gpt-9"); ok {
		t.Error("Model(gpt-9) found")
	}
	if !bytes.Equal(DefaultPolicyYAML(), defaultPolicyYAML) {
		t.Error("DefaultPolicyYAML differs from the embedded file")
	}

	// Fresh deep copies: changing one must not change the next.
	cfg.Models[0].Name = "changed"
	cfg.Classes[failure.Connect] = ClassPolicy{Action: ActionFail}
	cfg.Classes[failure.OutputTruncated].Waits[0] = 0
	*cfg.Classes[failure.OutputTruncated].Temperature = 2
	cfg.Rules[0].Keywords[0] = "changed"
	again := DefaultConfig()
	if !reflect.DeepEqual(again, embeddedDefault()) || again.Models[0].Name == "changed" {
		t.Error("DefaultConfig shares state between calls")
	}
}

// TestDefaultPolicyYAMLSpellsOutEveryField: default_policy.yaml is the
// only source of defaults and its reference for users, so every field of
// every section appears in it (a new Go field must be added there, or it
// would silently default to zero).
func TestDefaultPolicyYAMLSpellsOutEveryField(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal(defaultPolicyYAML, &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	var check func(n *yaml.Node, typ reflect.Type, path string)
	check = func(n *yaml.Node, typ reflect.Type, path string) {
		names, index := yamlFields(typ)
		set := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			set[n.Content[i].Value] = n.Content[i+1]
		}
		for _, name := range names {
			p := joinPath(path, name)
			v, ok := set[name]
			// model_defaults.name has no meaning; breaker.probe_fraction is
			// no longer read (a policy that sets it still loads).
			if p == "model_defaults.name" || p == "breaker.probe_fraction" {
				if ok {
					t.Errorf("%s must not be set", p)
				}
				continue
			}
			if !ok {
				t.Errorf("default_policy.yaml lacks %s", p)
				continue
			}
			if ft := typ.Field(index[name]).Type; ft.Kind() == reflect.Struct && ft != durationType {
				check(v, ft, p)
			}
		}
	}
	check(root, configType, "")
	for i, m := range DefaultConfig().Models {
		if m.BaseURL == "" || m.InputPrice == 0 {
			t.Errorf("models[%d] of the default ladder should spell out its endpoint and prices: %+v", i, m)
		}
	}
}

// TestYAMLRoundTrip decodes every field of a Config through the decoder:
// the default policy written out as YAML reads back as itself.
func TestYAMLRoundTrip(t *testing.T) {
	out, err := yaml.Marshal(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := mustParse(t, string(out))
	again, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(out) {
		t.Errorf("round trip changed the policy:\n%s\nwant\n%s", again, out)
	}
}

func TestParseConfigEmptyFileIsDefault(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		cfg, err := ParseConfig([]byte(src), "empty.yaml")
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		def := DefaultConfig()
		def.Source = "empty.yaml"
		if !reflect.DeepEqual(cfg, def) {
			t.Errorf("%q: empty file differs from the defaults:\n got %+v\nwant %+v", src, cfg, def)
		}
	}
}

// TestParseConfigKeepsWrittenValues: a value written in the file is the
// user's, 0, false and "" included; leaving a field out or writing it
// with no value keeps the default.
func TestParseConfigKeepsWrittenValues(t *testing.T) {
	def := DefaultConfig()
	cases := []struct {
		name string
		yaml string
		got  func(*Config) any
		want any
	}{
		{"connect_retries 0 stays 0", "backoff:\n  connect_retries: 0\n", func(c *Config) any { return c.Backoff.ConnectRetries }, 0},
		{"budget ratio 0 stays 0 (only the floor)", "budget:\n  ratio: 0\n", func(c *Config) any { return c.Budget }, BudgetConfig{Window: def.Budget.Window, Ratio: 0, Floor: def.Budget.Floor, TenantShare: def.Budget.TenantShare}},
		{"budget floor 0 stays 0", "budget:\n  floor: 0\n", func(c *Config) any { return c.Budget.Floor }, 0},
		{"budget tenant_share 0 stays 0 (no share)", "budget:\n  tenant_share: 0\n", func(c *Config) any { return c.Budget.TenantShare }, 0.0},
		{"budget ratio and floor 0: no retries", "budget: {ratio: 0, floor: 0}\n", func(c *Config) any { return [2]any{c.Budget.Ratio, c.Budget.Floor} }, [2]any{0.0, 0}},
		{"class max 0 stays 0", "classes:\n  server_error: {max: 0}\n", func(c *Config) any { return c.Classes[failure.ServerError].Max }, 0},
		{"switch_after 0 stays 0", "classes:\n  server_error: {switch_after: 0}\n", func(c *Config) any { return c.Classes[failure.ServerError].SwitchAfter }, 0},
		{"trip_breaker false stays false", "classes:\n  auth: {trip_breaker: false}\n", func(c *Config) any { return c.Classes[failure.Auth].TripBreaker }, false},
		{"temperature 0 stays 0", "classes:\n  output_truncated: {temperature: 0}\n", func(c *Config) any { return *c.Classes[failure.OutputTruncated].Temperature }, 0.0},
		{"empty waits stay empty", "classes:\n  queue_full: {waits: []}\n", func(c *Config) any { return c.Classes[failure.QueueFull].Waits }, []Duration{}},
		{"wait 0s stays 0s", "classes:\n  queue_full: {waits: [0s]}\n", func(c *Config) any { return c.Classes[failure.QueueFull].Waits }, []Duration{0}},
		{"price 0 stays 0", minimal + "    input_price: 0\n", func(c *Config) any { return c.Models[1].InputPrice }, 0.0},
		{"empty api_key_env stays empty", "model_defaults: {api_key_env: LLM_API_KEY}\nmodels:\n  - {name: a, base_url: http://x/v1, api_key_env: ''}\n", func(c *Config) any { return c.Models[0].APIKeyEnv }, ""},
		{"empty faq file stays empty", "faq:\n  file: ''\n", func(c *Config) any { return c.FAQ.File }, ""},
		{"empty rules list: no rules", "rules: []\n", func(c *Config) any { return c.Rules }, []Rule{}},
		{"rules left out: the default rules", minimal, func(c *Config) any { return c.Rules }, def.Rules},
		{"models left out: the default ladder", "budget: {floor: 3}\n", func(c *Config) any { return c.Models }, def.Models},
		{"a key with no value keeps the default", "budget:\n  ratio:\nplaceholder:\nmodels:\n", func(c *Config) any { return [3]any{c.Budget.Ratio, c.Placeholder, len(c.Models)} },
			[3]any{def.Budget.Ratio, def.Placeholder, len(def.Models)}},
		{"a section with no value keeps its defaults", "breaker:\n", func(c *Config) any { return c.Breaker }, def.Breaker},
		{"a section laid over its defaults", "breaker:\n  window: 40\n", func(c *Config) any { return c.Breaker.MinCalls }, def.Breaker.MinCalls},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, c.yaml)
			if got := c.got(cfg); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %#v, want %#v", got, c.want)
			}
		})
	}
}

func TestParseConfigRefusesBadFiles(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // substrings of the error
		not  string   // must not appear
	}{
		// Values that make no sense, zeros included: refused, never defaulted.
		{"negative context window", minimal + "    context_window: -5\n",
			[]string{"bad.yaml: models[1].context_window: must be a positive number of tokens, got -5 (line 8)"}, ""},
		{"zero context window", minimal + "    context_window: 0\n",
			[]string{"bad.yaml: models[1].context_window: must be a positive number of tokens, got 0 (line 8)"}, ""},
		{"zero timeout", "models:\n  - {name: a, base_url: http://x/v1, timeout: 0s}\n", []string{"models[0].timeout: must be a positive duration", "got 0s (line 2)"}, ""},
		{"empty system prompt", "models:\n  - {name: a, base_url: http://x/v1, system_prompt: ''}\n", []string{`models[0].system_prompt: must be one of full, partial, none, got "" (line 2)`}, ""},
		{"empty placeholder", minimal + "placeholder: ''\n", []string{`placeholder: must be a non-empty answer, got "" (line 8)`}, ""},
		{"zero max attempts", minimal + "call:\n  max_attempts: 0\n", []string{"call.max_attempts: must be from 1 to 10 attempts, got 0 (line 9)"}, ""},
		{"zero breaker window", minimal + "breaker:\n  window: 0\n", []string{"breaker.window: must be a positive number of calls, got 0 (line 9)"}, ""},
		{"zero connect timeout", minimal + "http:\n  connect_timeout: 0s\n", []string{"http.connect_timeout: must be a positive duration", "got 0s (line 9)"}, ""},
		{"empty encoding", minimal + "pruning:\n  encoding: ''\n", []string{`pruning.encoding: must be one of cl100k_base`, `got "" (line 9)`}, ""},
		{"zero faq threshold", minimal + "faq:\n  threshold: 0\n", []string{"faq.threshold: must be a fraction in (0,1], got 0 (line 9)"}, ""},
		{"prune_resend keeping no rounds", minimal + "classes:\n  context_length_exceeded: {keep_rounds: 0}\n",
			[]string{"classes.context_length_exceeded.keep_rounds: must be a positive number of rounds for action prune_resend, got 0 (line 9)"}, ""},
		{"bump_tokens adding no tokens", minimal + "classes:\n  output_truncated: {max_tokens_increase: 0}\n",
			[]string{"classes.output_truncated.max_tokens_increase: must be a positive number of tokens for action continue, got 0 (line 9)"}, ""},
		{"resend without a count", minimal + "classes:\n  worker_lost: {max: -1}\n",
			[]string{"classes.worker_lost.max: must be 0 (never) or a count up to 10 for action resend", "got -1 (line 9)"}, ""},

		{"no models", "models: []\n", []string{"bad.yaml: models: must list at least one model (the ladder), got none (line 1)"}, ""},
		{"empty name", "models:\n  - base_url: http://x/v1\n", []string{`models[0].name: must be the model name sent upstream, got "" (line 2)`}, ""},
		{"duplicate name", "models:\n  - {name: a, base_url: http://x/v1}\n  - {name: a, base_url: http://y/v1}\n",
			[]string{`models[1].name: must be unique, got "a" (also models[0]) (line 3)`}, ""},
		{"relative base_url", "models:\n  - {name: a, base_url: /v1}\n", []string{`models[0].base_url: must be an absolute http(s) URL`, `got "/v1"`}, ""},
		{"ftp base_url", "models:\n  - {name: a, base_url: 'ftp://x/v1'}\n", []string{`models[0].base_url:`}, ""},
		{"system prompt", "models:\n  - {name: a, base_url: http://x/v1, system_prompt: some}\n", []string{`models[0].system_prompt: must be one of full, partial, none, got "some"`}, ""},
		{"key pasted instead of variable name", "models:\n  - {name: a, base_url: http://x/v1, api_key_env: sk-secret-123}\n",
			[]string{"models[0].api_key_env: must be the NAME of the environment variable"}, "sk-secret"},
		{"key pasted into a pool", "models:\n  - {name: a, base_url: http://x/v1, api_key_envs: [KEY_A, sk-secret-456]}\n",
			[]string{"models[0].api_key_envs[1]: must be the NAME of the environment variable"}, "sk-secret"},
		{"a pool naming a key twice", "models:\n  - {name: a, base_url: http://x/v1, api_key_envs: [GSK_LIVE_KEY_1, GSK_LIVE_KEY_1]}\n",
			[]string{"models[0].api_key_envs[1]: names the same variable as api_key_envs[0]"}, "GSK_LIVE"},
		{"price", "models:\n  - {name: a, base_url: http://x/v1, input_price: -1}\n", []string{"models[0].input_price: must be a price"}, ""},
		{"model_defaults with a name", "model_defaults: {name: x}\n" + minimal, []string{`model_defaults.name: must be left out (each model names itself), got "x" (line 1)`}, ""},
		{"bad model_defaults", "model_defaults:\n  context_window: 0\n" + minimal,
			[]string{"model_defaults.context_window: must be a positive number of tokens, got 0 (line 2)", "models[0].context_window: must be a positive number of tokens, got 0 (line 5)"}, ""},

		// Durations.
		{"bare number duration", "models:\n  - {name: a, base_url: http://x/v1, timeout: 30}\n",
			[]string{`models[0].timeout: must be a duration with a unit such as "500ms", "8s" or "1m", got 30 (a bare number: add a unit) (line 2)`}, ""},
		{"garbage duration", minimal + "backoff:\n  cap: soon\n", []string{`backoff.cap: must be a duration with a unit`, `got "soon" (line 9)`}, ""},
		{"duration as a list", minimal + "backoff:\n  cap: [8s]\n", []string{`backoff.cap: must be a duration with a unit`, `got a list (line 9)`}, ""},
		{"negative duration", minimal + "http:\n  connect_timeout: -1s\n", []string{"http.connect_timeout: must be a positive duration", "got -1s (line 9)"}, ""},
		{"bad wait", minimal + "classes:\n  queue_full: {waits: [1s, 2]}\n", []string{"classes.queue_full.waits[1]: must be a duration with a unit", "got 2 (a bare number: add a unit) (line 9)"}, ""},
		{"negative wait", minimal + "classes:\n  queue_full: {waits: [-5ms]}\n", []string{"classes.queue_full.waits[0]: must be a duration between 0s and 10m, got -5ms (line 9)"}, ""},

		// Wrong kinds of value, named for people.
		{"text for a number", "models:\n  - {name: a, base_url: http://x/v1, context_window: big}\n", []string{`models[0].context_window: must be a whole number, got "big" (line 2)`}, ""},
		{"fraction for a whole number", minimal + "budget:\n  floor: 1.5\n", []string{"budget.floor: must be a whole number, got 1.5 (line 9)"}, ""},
		{"quoted number", minimal + "budget:\n  ratio: '0.1'\n", []string{`budget.ratio: must be a number, got "0.1" (line 9)`}, ""},
		{"text for true or false", minimal + "classes:\n  auth: {trip_breaker: maybe}\n", []string{`classes.auth.trip_breaker: must be true or false, got "maybe" (line 9)`}, ""},
		{"list for a section", minimal + "budget: [1, 2]\n", []string{"bad.yaml: budget: must be a mapping, got a list (line 8)"}, ""},
		{"text for a section", minimal + "budget: lots\n", []string{`bad.yaml: budget: must be a mapping, got "lots" (line 8)`}, ""},
		{"mapping for a list", "models: {name: a}\n", []string{"bad.yaml: models: must be a list, got a mapping (line 1)"}, ""},
		{"number for a class entry", minimal + "classes:\n  timeout: 3\n", []string{"classes.timeout: must be a mapping, got 3 (line 9)"}, ""},
		{"mapping for a text", minimal + "placeholder: {a: b}\n", []string{"placeholder: must be a text, got a mapping (line 8)"}, ""},
		{"list for the classes", minimal + "classes: [timeout]\n", []string{"classes: must be a mapping, got a list (line 8)"}, ""},

		// Classes and actions.
		{"unknown class", minimal + "classes:\n  teapot: {action: retry}\n", []string{`classes.teapot: must be a failure class`, `got "teapot" (line 9)`}, ""},
		{"unknown action", minimal + "classes:\n  timeout: {action: explode}\n", []string{`classes.timeout.action: must be one of resend, retry`, `got "explode" (line 9)`}, ""},
		{"max too large", minimal + "classes:\n  timeout: {max: 11}\n", []string{"classes.timeout.max: must be -1 (up to the attempts cap), 0 (never) or a count up to 10, got 11 (line 9)"}, ""},
		{"breaker_open cannot retry", minimal + "classes:\n  breaker_open: {action: retry}\n", []string{"classes.breaker_open.action: must be switch_model, fallback or fail"}, ""},
		{"invalid_request cannot retry", minimal + "classes:\n  invalid_request: {action: retry}\n", []string{"classes.invalid_request.action: must be fail or fallback"}, ""},

		// Other sections.
		{"ratio above one", minimal + "budget:\n  ratio: 1.5\n", []string{"budget.ratio: must be a fraction in [0,1], got 1.5 (line 9)"}, ""},
		{"negative floor", minimal + "budget:\n  floor: -1\n", []string{"budget.floor: must be a number of retries ≥ 0, got -1"}, ""},
		{"connect retries", minimal + "backoff:\n  connect_retries: 11\n", []string{"backoff.connect_retries: must be a count from 0 to 10, got 11"}, ""},
		{"failure rate negative", minimal + "breaker:\n  failure_rate: -0.1\n", []string{"breaker.failure_rate: must be a fraction in (0,1], got -0.1"}, ""},
		{"probe fraction", minimal + "breaker:\n  probe_fraction: 2\n", []string{"breaker.probe_fraction: must be a fraction in (0,1], got 2"}, ""},
		{"open_for_max below open_for", minimal + "breaker:\n  open_for: 2s\n  open_for_max: 1s\n", []string{"breaker.open_for_max: must be 0 (the open period never grows) or at least breaker.open_for (2s), got 1s"}, ""},
		{"heal_after negative", minimal + "breaker:\n  heal_after: -1s\n", []string{"breaker.heal_after: must be a duration ≥ 0"}, ""},
		{"breaker numbers", minimal + "breaker:\n  consecutive_failures: -1\n  min_calls: 50\n",
			[]string{"breaker.consecutive_failures: must be a positive number of failures, got -1 (line 9)", "breaker.min_calls: must be at most breaker.window (20), got 50 (line 10)"}, ""},
		{"cap below base", minimal + "backoff:\n  base: 2s\n  cap: 1s\n", []string{"backoff.cap: must be at least backoff.base (2s), got 1s (line 10)"}, ""},
		{"cap below the default base", minimal + "backoff:\n  cap: 100ms\n", []string{"backoff.cap: must be at least backoff.base (500ms), got 100ms (line 9)"}, ""},
		{"max attempts", minimal + "call:\n  max_attempts: 11\n", []string{"call.max_attempts: must be from 1 to 10 attempts, got 11"}, ""},
		{"fallback reserve", minimal + "call:\n  deadline: 5s\n  fallback_reserve: 5s\n", []string{"call.fallback_reserve: must be shorter than call.deadline (5s), got 5s (line 10)"}, ""},
		{"prompt limit", minimal + "limits:\n  max_prompt_bytes: 3000000\n", []string{"limits.max_prompt_bytes: must be a positive size up to"}, ""},
		{"encoding", minimal + "pruning:\n  encoding: utf8\n", []string{`pruning.encoding: must be one of cl100k_base`, `got "utf8"`}, ""},
		{"faq threshold", minimal + "faq:\n  threshold: 1.5\n", []string{"faq.threshold: must be a fraction in (0,1], got 1.5"}, ""},
		{"faq file missing", minimal + "faq:\n  file: /nonexistent/faq.yaml\n", []string{`faq.file: must be a readable FAQ file, got "/nonexistent/faq.yaml" (line 9)`}, ""},
		{"rule without id", minimal + "rules:\n  - {keywords: [x], action: no_retry}\n", []string{`rules[0].id: must be a non-empty rule id`, "(line 9)"}, ""},
		{"rule unknown action", minimal + "rules:\n  - {id: r, keywords: [x], action: shout}\n", []string{`rules[0].action: must be one of handoff, safe_message, no_retry, step_by_step, got "shout"`}, ""},
		{"rule without keywords", minimal + "rules:\n  - {id: r, action: no_retry}\n", []string{`rules[0].keywords: must list at least one keyword, got none`}, ""},
		{"rule blank keyword", minimal + "rules:\n  - {id: r, action: no_retry, keywords: [' ']}\n", []string{`rules[0].keywords[0]: must be a non-empty keyword`}, ""},
		{"handoff without message", minimal + "rules:\n  - {id: r, action: handoff, keywords: [x]}\n", []string{`rules[0].message: must be the text the user sees for a handoff rule`}, ""},
		{"duplicate rule id", minimal + "rules:\n  - {id: r, action: no_retry, keywords: [x]}\n  - {id: r, action: no_retry, keywords: [y]}\n", []string{`rules[1].id: must be unique, got "r" (also rules[0]) (line 10)`}, ""},

		// request: scenarios and image hosts.
		{"empty scenario", minimal + "request:\n  scenarios: ['']\n", []string{`request.scenarios[0]: must be a scenario name (or "*" for any), got "" (line 9)`}, ""},
		{"scenario twice", minimal + "request:\n  scenarios: [shop, Shop]\n", []string{`request.scenarios[1]: names "Shop" a second time (also request.scenarios[0]; case is ignored) (line 9)`}, ""},
		{"scenarios a string", minimal + "request:\n  scenarios: shop\n", []string{`request.scenarios: must be a list`}, ""},
		{"image host a URL", minimal + "request:\n  allow_image_hosts: ['http://images.corp.example/']\n", []string{`request.allow_image_hosts[0]: must be a host name`, `got "http://images.corp.example/" (line 9)`}, ""},
		{"image host with a port", minimal + "request:\n  allow_image_hosts: [images.corp.example, 'images.corp.example:8080']\n", []string{`request.allow_image_hosts[1]: must be a host name`}, ""},
		{"image host with a space", minimal + "request:\n  allow_image_hosts: ['images corp']\n", []string{`request.allow_image_hosts[0]: must be a host name`}, ""},
		{"unknown request field", minimal + "request:\n  allow_image_host: [x.example]\n", []string{`request.allow_image_host: unknown field; expected one of scenarios, allow_image_hosts (line 9)`}, ""},

		// The file as a whole.
		{"duplicate key", minimal + "budget:\n  ratio: 0.1\n  ratio: 0.2\n", []string{`bad.yaml: budget.ratio: mapping key "ratio" already defined at line 9 (line 10)`}, ""},
		{"two documents", minimal + "---\nmodels: []\n", []string{"bad.yaml: line 9: must hold one YAML document, got a second one (---)"}, ""},
		{"not a mapping", "- a\n- b\n", []string{"bad.yaml: line 1: must be a mapping of policy sections"}, ""},
		{"list key", minimal + "? [a]\n: 1\n", []string{"bad.yaml: line 8: must have field names as keys, got a list"}, ""},
		{"bad merge", minimal + "budget:\n  <<: 5\n", []string{"bad.yaml: budget: must merge (<<) a mapping or a list of mappings, got 5 (line 9)"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.yaml), "bad.yaml")
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Source != "bad.yaml" || len(ce.Problems) == 0 {
				t.Fatalf("error %T %v is not an *Error for bad.yaml", err, err)
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
				if strings.Contains(line, "config.") || strings.Contains(line, "float64") || strings.Contains(line, "!!") {
					t.Errorf("line names a Go or YAML type instead of a kind of value: %q", line)
				}
			}
		})
	}
}

func TestParseConfigRefusesUnknownFields(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"top level", minimal + "modles: []\n", "bad.yaml: modles: unknown field; expected one of model_defaults, models, classes, backoff, budget, breaker, rate_limit, pruning, call, http, limits, request, idempotency, faq, stream, hedge, cache, store, spend, diagnose, rules, learn, placeholder (line 8)"},
		{"in a model", "models:\n  - name: a\n    base_url: http://x/v1\n    contxt_window: 5\n", "bad.yaml: models[0].contxt_window: unknown field; expected one of name, base_url, api, api_key_env, api_key_envs, deployments, key_park, context_window, timeout, stream, first_token_timeout, idle_timeout, stops_on_disconnect, continuation, system_prompt, rate_limit_scope, rpm, tpm, capabilities, passthrough, input_price, output_price (line 4)"},
		{"in model_defaults", "model_defaults: {context: 5}\n", "bad.yaml: model_defaults.context: unknown field; expected one of name, base_url"},
		{"in a class", minimal + "classes:\n  timeout:\n    retries: 3\n", "bad.yaml: classes.timeout.retries: unknown field; expected one of action, max, waits, switch_after, trip_breaker, max_tokens_increase, temperature, keep_rounds, summarize (line 10)"},
		{"in a section", minimal + "budget:\n  ratios: 0.2\n", "bad.yaml: budget.ratios: unknown field; expected one of window, ratio, floor, tenant_share (line 9)"},
		{"in a rule", minimal + "rules:\n  - {id: r, action: no_retry, keywords: [x], scenarios: [a]}\n", "bad.yaml: rules[0].scenarios: unknown field"},
		{"the Source field is not read", minimal + "source: x\n", "bad.yaml: source: unknown field"},
		{"behind a merge key", minimal + "classes:\n  timeout:\n    <<: {retries: 1}\n", "bad.yaml: classes.timeout.retries: unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.yaml), "bad.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// TestParseConfigSyntaxErrorLine: the line is where the YAML parser
// stopped, not the start of the enclosing block that yaml.v3 names.
func TestParseConfigSyntaxErrorLine(t *testing.T) {
	def := string(DefaultPolicyYAML())
	at := strings.Index(def, "  cap: 8s\n") + len("  cap: 8s\n")
	deep := def[:at] + " retry_cap: 9s\n" + def[at:]
	deepLine := strings.Count(def[:at], "\n") + 1

	cases := []struct {
		name, yaml, want string
	}{
		{"bad indent in a list", "models:\n  - name: a\n   base_url: x\n", "p.yaml: line 3: did not find expected '-' indicator"},
		{"dedented key", "budget:\n  window: 1m\n ratio: 0.1\n", "p.yaml: line 3: did not find expected key"},
		{"tab", "budget:\n  window: 1m\n\tratio: 0.1\n", "p.yaml: line 3: found a tab character that violates indentation"},
		{"after a multi-line flow list", "w: [1,\n 2]\nx:\n  - a\n  b: 2\n", "p.yaml: line 5: did not find expected '-' indicator"},
		{"unclosed bracket on the last line", "budget: {window: 1m}\nclasses:\n  queue_full: {waits: [1s, 2s}\n", "p.yaml: line 3: did not find expected ',' or ']'"},
		// Inside an unclosed flow collection the parser reads one token
		// further before it gives up.
		{"unclosed bracket before more lines", "budget: {window: 1m}\nclasses:\n  queue_full: {waits: [1s, 2s}\nfaq: {}\n", "p.yaml: line 4: did not find expected ',' or ']'"},
		// An unclosed quote is found at the end of the file.
		{"unclosed quote", "placeholder: 'sorry\nfaq: {}\n", "p.yaml: line 2: found unexpected end of stream"},
		{"mapping in a plain value", "budget:\n  window: 1m\nplaceholder: a: b\n", "p.yaml: line 3: mapping values are not allowed in this context"},
		{"unknown anchor", "budget:\n  window: 1m\nplaceholder: *nothing\n", "p.yaml: line 3: unknown anchor 'nothing' referenced"},
		{"in the second document", "budget: {}\n---\nx: [\n", "p.yaml: line 3: "},
		{"deep in a long file", deep, fmt.Sprintf("p.yaml: line %d: did not find expected key", deepLine)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.yaml), "p.yaml")
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Line == 0 {
				t.Fatalf("want one problem with a line, got %#v", err)
			}
			if !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("error = %q, want prefix %q", err, c.want)
			}
			if strings.Contains(err.Error(), ": yaml: ") || strings.Count(err.Error(), "line ") != 1 {
				t.Errorf("error keeps the library's prefix: %q", err)
			}
		})
	}
}

func TestParseConfigReportsAllProblemsInLineOrder(t *testing.T) {
	src := minimal + "faq:\n  threshold: -1\nbudget:\n  ratio: 2\n  window: 5\ncall:\n  max_attempts: 20\nplacehldr: x\n"
	_, err := ParseConfig([]byte(src), "bad.yaml")
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	var paths []string
	for _, p := range ce.Problems {
		paths = append(paths, fmt.Sprintf("%s@%d", p.Path, p.Line))
	}
	want := []string{"faq.threshold@9", "budget.ratio@11", "budget.window@12", "call.max_attempts@14", "placehldr@15"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("problems = %v, want %v\n%v", paths, want, err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("want one line per problem, got %d lines:\n%v", n, err)
	}
}

func TestParseConfigModelDefaults(t *testing.T) {
	def := DefaultConfig()
	md := def.ModelDefaults
	cases := []struct {
		name string
		yaml string
		want []ModelConfig
	}{
		{"entries start from model_defaults", minimal, []ModelConfig{
			{Name: "a", BaseURL: "http://127.0.0.1:8000/v1", API: md.API, ContextWindow: md.ContextWindow, WindowAssumed: true, Timeout: md.Timeout, Stream: md.Stream, FirstTokenTimeout: md.FirstTokenTimeout, IdleTimeout: md.IdleTimeout, Continuation: md.Continuation, SystemPrompt: md.SystemPrompt, RateLimitScope: md.RateLimitScope, RPM: md.RPM, TPM: md.TPM, Capabilities: md.Capabilities, Passthrough: md.Passthrough, APIKeyEnvs: md.APIKeyEnvs, Deployments: md.Deployments, KeyPark: md.KeyPark},
			{Name: "b", BaseURL: "https://api.example.com/v1", APIKeyEnv: "EXAMPLE_KEY", API: md.API, ContextWindow: md.ContextWindow, WindowAssumed: true, Timeout: md.Timeout, Stream: md.Stream, FirstTokenTimeout: md.FirstTokenTimeout, IdleTimeout: md.IdleTimeout, Continuation: md.Continuation, SystemPrompt: md.SystemPrompt, RateLimitScope: md.RateLimitScope, RPM: md.RPM, TPM: md.TPM, Capabilities: md.Capabilities, Passthrough: md.Passthrough, APIKeyEnvs: md.APIKeyEnvs, Deployments: md.Deployments, KeyPark: md.KeyPark},
		}},
		{"the file's model_defaults, written after the models", `
models:
  - name: a
  - name: b
    context_window: 1000
    system_prompt: none
model_defaults:
  base_url: https://gw.example.com/v1
  api_key_env: GW_KEY
  timeout: 5s
`, []ModelConfig{
			{Name: "a", BaseURL: "https://gw.example.com/v1", API: md.API, APIKeyEnv: "GW_KEY", ContextWindow: md.ContextWindow, WindowAssumed: true, Timeout: Duration(5 * time.Second), Stream: md.Stream, FirstTokenTimeout: md.FirstTokenTimeout, IdleTimeout: md.IdleTimeout, Continuation: md.Continuation, SystemPrompt: md.SystemPrompt, RateLimitScope: md.RateLimitScope, RPM: md.RPM, TPM: md.TPM, Capabilities: md.Capabilities, Passthrough: md.Passthrough, APIKeyEnvs: md.APIKeyEnvs, Deployments: md.Deployments, KeyPark: md.KeyPark},
			{Name: "b", BaseURL: "https://gw.example.com/v1", API: md.API, APIKeyEnv: "GW_KEY", ContextWindow: 1000, Timeout: Duration(5 * time.Second), Stream: md.Stream, FirstTokenTimeout: md.FirstTokenTimeout, IdleTimeout: md.IdleTimeout, Continuation: md.Continuation, SystemPrompt: SystemPromptNone, RateLimitScope: md.RateLimitScope, RPM: md.RPM, TPM: md.TPM, Capabilities: md.Capabilities, Passthrough: md.Passthrough, APIKeyEnvs: md.APIKeyEnvs, Deployments: md.Deployments, KeyPark: md.KeyPark},
		}},
		{"the default ladder is as written, whatever model_defaults says", "model_defaults: {timeout: 1s, base_url: https://gw.example.com/v1}\n", def.Models},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, c.yaml)
			if !reflect.DeepEqual(cfg.Models, c.want) {
				t.Errorf("models =\n %+v\nwant\n %+v", cfg.Models, c.want)
			}
		})
	}
}

// TestParseConfigClassEntryMergesEveryField sets one ClassPolicy field at
// a time in a class entry and checks that every other field keeps the
// class's default: the merge follows the Go type, so a field added to
// ClassPolicy merges without new code (the test then needs only a sample
// value for a new kind of field).
func TestParseConfigClassEntryMergesEveryField(t *testing.T) {
	def := DefaultConfig()
	names, index := yamlFields(reflect.TypeFor[ClassPolicy]())
	for _, cl := range failure.AllClasses {
		for _, name := range names {
			if name == "action" {
				continue // changing the action has its own rule (TestParseConfigClassActionChange)
			}
			t.Run(string(cl)+"/"+name, func(t *testing.T) {
				base := def.Classes[cl]
				field := reflect.ValueOf(base).Field(index[name])
				text, want := sampleValue(t, field)
				cfg := mustParse(t, fmt.Sprintf("classes:\n  %s:\n    %s: %s\n", cl, name, text))
				got := cfg.Classes[cl]
				wantCP := clone(base)
				reflect.ValueOf(&wantCP).Elem().Field(index[name]).Set(want)
				if !reflect.DeepEqual(got, wantCP) {
					t.Errorf("%s: {%s: %s} gave\n %+v\nwant\n %+v", cl, name, text, got, wantCP)
				}
			})
		}
	}
}

// sampleValue is a valid YAML value for a field like v that differs from
// v, and the Go value it decodes to.
func sampleValue(t *testing.T, v reflect.Value) (string, reflect.Value) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeFor[int]():
		n := 7
		if v.Int() == 7 {
			n = 6
		}
		return fmt.Sprint(n), reflect.ValueOf(n)
	case reflect.TypeFor[bool]():
		return fmt.Sprint(!v.Bool()), reflect.ValueOf(!v.Bool())
	case reflect.TypeFor[*float64]():
		return "1.25", reflect.ValueOf(ptr(1.25))
	case reflect.TypeFor[[]Duration]():
		return "[3s, 4s]", reflect.ValueOf([]Duration{ms(3000), ms(4000)})
	}
	t.Fatalf("no sample value for a ClassPolicy field of type %s: add one", v.Type())
	return "", reflect.Value{}
}

func TestParseConfigClassActionChange(t *testing.T) {
	def := DefaultConfig()
	cases := []struct {
		name  string
		entry string
		class failure.Class
		want  ClassPolicy
	}{
		{"same action written out: laid over the default", "rate_limited: {action: retry_after, max: 2}", failure.RateLimited,
			func() ClassPolicy { cp := clone(def.Classes[failure.RateLimited]); cp.Max = 2; return cp }()},
		{"new action: starts from the class that has it", "timeout: {action: prune_resend}", failure.Timeout,
			def.Classes[failure.ContextLengthExceeded]},
		{"new action with fields of its own", "body_error: {action: bump_tokens, max: 1}", failure.BodyError,
			func() ClassPolicy {
				// bump_tokens starts from continue's entry (output_truncated's), its sibling.
				cp := clone(def.Classes[failure.OutputTruncated])
				cp.Action, cp.Max = ActionBumpTokens, 1
				return cp
			}()},
		{"the old output_truncated action back", "output_truncated: {action: bump_tokens}", failure.OutputTruncated,
			func() ClassPolicy {
				cp := clone(def.Classes[failure.OutputTruncated])
				cp.Action = ActionBumpTokens
				return cp
			}()},
		{"new action keeps the class's trip_breaker", "auth: {action: fail}", failure.Auth,
			ClassPolicy{Action: ActionFail, TripBreaker: def.Classes[failure.Auth].TripBreaker}},
		{"trip_breaker given with the new action", "auth: {action: fallback, trip_breaker: false}", failure.Auth,
			ClassPolicy{Action: ActionFallback}},
		{"switch to switch_model drops the old retry counts", "server_error: {action: switch_model}", failure.ServerError,
			def.Classes[failure.Connect]},
		{"the action behind an alias", "server_error: &s {action: switch_model}\n  body_error: *s", failure.BodyError,
			def.Classes[failure.Connect]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, "classes:\n  "+c.entry+"\n")
			if got := cfg.Classes[c.class]; !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s = %+v, want %+v", c.class, got, c.want)
			}
			for _, cl := range failure.AllClasses {
				if !strings.Contains(c.entry, string(cl)+":") && !reflect.DeepEqual(cfg.Classes[cl], def.Classes[cl]) {
					t.Errorf("untouched class %s changed: %+v", cl, cfg.Classes[cl])
				}
			}
		})
	}
	// The template is a copy: changing the class that was copied from
	// does not change the other.
	cfg := mustParse(t, "classes:\n  timeout: {action: prune_resend, keep_rounds: 5}\n")
	if cfg.Classes[failure.ContextLengthExceeded].KeepRounds != def.Classes[failure.ContextLengthExceeded].KeepRounds {
		t.Error("changing timeout changed context_length_exceeded")
	}
}

func TestParseConfigAnchorsAndMergeKeys(t *testing.T) {
	def := DefaultConfig()
	src := minimal + `
classes:
  server_error: &quick
    max: 3
    switch_after: 2
  body_error:
    <<: *quick
    waits: [1s]
    max: 4
  timeout: *quick
`
	cfg := mustParse(t, src)
	with := func(cl failure.Class, f func(*ClassPolicy)) ClassPolicy {
		cp := clone(def.Classes[cl])
		f(&cp)
		return cp
	}
	want := map[failure.Class]ClassPolicy{
		failure.ServerError: with(failure.ServerError, func(cp *ClassPolicy) { cp.Max, cp.SwitchAfter = 3, 2 }),
		failure.BodyError:   with(failure.BodyError, func(cp *ClassPolicy) { cp.Max, cp.SwitchAfter, cp.Waits = 4, 2, []Duration{ms(1000)} }),
		failure.Timeout:     with(failure.Timeout, func(cp *ClassPolicy) { cp.Max, cp.SwitchAfter = 3, 2 }),
	}
	for cl, w := range want {
		if got := cfg.Classes[cl]; !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %+v, want %+v", cl, got, w)
		}
	}
}

// TestParseConfigRefusesAliasBombs: aliases let a small file stand for a
// huge one; the decoder stops after maxNodes values.
func TestParseConfigRefusesAliasBombs(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n  - &r {id: r, action: no_retry, keywords: [" + strings.Repeat("x, ", 2000) + "x]}\n")
	b.WriteString(strings.Repeat("  - *r\n", maxNodes/2000+1))
	done := make(chan error, 1)
	go func() { _, err := ParseConfig([]byte(b.String()), "bomb.yaml"); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "must not expand to more than") {
			t.Errorf("error = %.500v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the aliases were expanded without a bound")
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
	if again, err := LoadConfigOrDefault(path); err != nil || !reflect.DeepEqual(again, cfg) {
		t.Errorf("LoadConfigOrDefault(%s) = %v", path, err)
	}
	if def, err := LoadConfigOrDefault(""); err != nil || def.Source != DefaultSource {
		t.Errorf("LoadConfigOrDefault(\"\") = %+v, %v", def, err)
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

	// faq.file: off turns the FAQ off; no file of that name is looked for.
	off := filepath.Join(dir, "off.yaml")
	if err := os.WriteFile(off, []byte(minimal+"faq:\n  file: off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := LoadConfig(off); err != nil || !cfg.FAQ.Off() || cfg.FAQ.Example() {
		t.Errorf("faq.file off: %+v, %v", cfg, err)
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

func TestValidateRefusesZerosInCode(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Source = ""
	cfg.Budget.Window = 0
	cfg.Call.MaxAttempts = 0
	err := cfg.Validate()
	for _, w := range []string{"<config>: budget.window: must be a positive duration", "<config>: call.max_attempts: must be from 1 to 10 attempts, got 0"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate = %v, want %q", err, w)
		}
	}
}

func TestClassPolicy(t *testing.T) {
	def := DefaultConfig()
	var bare Config // built in code, without classes
	cases := []struct {
		name string
		cfg  *Config
		cl   failure.Class
		want ClassPolicy
	}{
		{"configured", mustParse(t, "classes:\n  timeout: {max: 2}\n"), failure.Timeout,
			func() ClassPolicy { cp := clone(def.Classes[failure.Timeout]); cp.Max = 2; return cp }()},
		{"missing: the default", &bare, failure.OutputTruncated, def.Classes[failure.OutputTruncated]},
		{"unknown class: fail", &bare, failure.Class("bogus"), ClassPolicy{Action: ActionFail}},
		{"no class: fail", &bare, failure.None, ClassPolicy{Action: ActionFail}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.cfg.ClassPolicy(c.cl); !reflect.DeepEqual(got, c.want) {
				t.Errorf("ClassPolicy(%s) = %+v, want %+v", c.cl, got, c.want)
			}
		})
	}
	// The default handed out is a copy.
	bare.ClassPolicy(failure.OutputTruncated).Waits[0] = 0
	if bare.ClassPolicy(failure.OutputTruncated).Waits[0] == 0 {
		t.Error("ClassPolicy hands out the shared default")
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
		t.Run(c.in, func(t *testing.T) {
			var v struct {
				D Duration `yaml:"d"`
			}
			err := yaml.Unmarshal([]byte("d: "+c.in), &v)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "line 1") {
					t.Errorf("err = %v, want %q with the line", err, c.err)
				}
				return
			}
			if err != nil || v.D.D() != c.want {
				t.Errorf("= %v, %v; want %v", v.D, err, c.want)
			}
		})
	}
	out, err := yaml.Marshal(struct {
		D Duration `yaml:"d"`
	}{ms(1500)})
	if err != nil || string(out) != "d: 1.5s\n" {
		t.Errorf("marshal = %q, %v", out, err)
	}
}

// TestPackageImports keeps the package plain data: no Temporal, no LLM client.
func TestPackageImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); strings.Contains(p, "temporal") || strings.Contains(p, "openai") {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}

// TestRateLimitGrain: auto holds the model on a provider whose limits are
// per model, and the endpoint on any other server; a scope written out is
// taken as written.
func TestRateLimitGrain(t *testing.T) {
	for _, c := range []struct {
		base string
		sc   RateLimitScope
		want RateLimitScope
	}{
		{"https://api.openai.com/v1", ScopeAuto, ScopeModel},
		{"https://acme.openai.azure.com/openai/deployments/gpt-4o", ScopeAuto, ScopeModel},
		{"https://api.anthropic.com/v1", ScopeAuto, ScopeModel},
		{"http://127.0.0.1:11434/v1", ScopeAuto, ScopeEndpoint},
		{"https://llm.internal.example/v1", ScopeAuto, ScopeEndpoint},
		{"https://api.openai.com.evil.example/v1", ScopeAuto, ScopeEndpoint},
		{"https://api.openai.com/v1", ScopeEndpoint, ScopeEndpoint},
		{"http://127.0.0.1:11434/v1", ScopeModel, ScopeModel},
	} {
		m := ModelConfig{Name: "gpt-4o", BaseURL: c.base}
		if got := m.Grain(c.sc); got != c.want {
			t.Errorf("%s, %s: %s, want %s", c.base, c.sc, got, c.want)
		}
	}
	if d := DefaultConfig(); d.Models[0].RateLimitScope != ScopeAuto {
		t.Errorf("default rate_limit_scope %q, want auto", d.Models[0].RateLimitScope)
	}
}

// TestDefaultSetting: a setting's default as the policy file writes it, a
// list as a flow list, and no answer for a key that is not a setting.
func TestDefaultSetting(t *testing.T) {
	for key, want := range map[string]string{
		"budget.ratio":                       "0.1",
		"model_defaults.first_token_timeout": "8s",
		"model_defaults.capabilities":        "[tools, json_schema]",
		"call.max_wait_scenarios":            "[]",
	} {
		if got, ok := DefaultSetting(key); !ok || got != want {
			t.Errorf("DefaultSetting(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
	for _, key := range []string{"budget", "budget.nope", "nope", "budget.ratio.x", ""} {
		if got, ok := DefaultSetting(key); ok {
			t.Errorf("DefaultSetting(%q) = %q: want no such setting", key, got)
		}
	}
}

// TestParseConfigAnthropicModels: api anthropic is a wire of its own;
// its continuation, left at auto, is Anthropic's prefill, and an
// OpenAI-compatible model's auto is none. Continuations of the other wire
// are refused with what to write.
func TestParseConfigAnthropicModels(t *testing.T) {
	cfg, err := ParseConfig([]byte(`models:
  - name: claude-a
    api: anthropic
    base_url: https://api.anthropic.com
    api_key_env: ANTHROPIC_API_KEY
  - name: qwen
    base_url: http://127.0.0.1:8000/v1
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	claude, qwen := cfg.Models[0], cfg.Models[1]
	if claude.Wire() != APIAnthropic || claude.ContinuationStyle() != ContinueAnthropic || !claude.Continues() {
		t.Errorf("claude-a: wire %q, continuation %q", claude.Wire(), claude.ContinuationStyle())
	}
	if qwen.Wire() != APIOpenAI || qwen.ContinuationStyle() != ContinueNone || qwen.Continues() {
		t.Errorf("qwen: wire %q, continuation %q", qwen.Wire(), qwen.ContinuationStyle())
	}
	for _, c := range []struct{ file, want string }{
		{"models:\n  - name: a\n    base_url: http://x\n    api: gemini\n", "models[0].api: must be one of openai, anthropic, got \"gemini\""},
		{"models:\n  - name: a\n    base_url: http://x\n    api: anthropic\n    continuation: vllm\n", "models[0].continuation: must be auto, none or anthropic for api anthropic"},
		{"models:\n  - name: a\n    base_url: http://x/v1\n    continuation: anthropic\n", "models[0].continuation: anthropic needs api: anthropic"},
	} {
		_, err := ParseConfig([]byte(c.file), "bad.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.file, err, c.want)
		}
	}
}

// TestCapacityIsTheProvidersGrain: the guard counts a model's requests
// against its endpoint on a server whose models share it, and against the
// model alone where the provider's capacity is per model (auto on
// api.anthropic.com, or rate_limit_scope model anywhere).
func TestCapacityIsTheProvidersGrain(t *testing.T) {
	for _, c := range []struct {
		m    ModelConfig
		want string
	}{
		{ModelConfig{Name: "qwen-72b", BaseURL: "http://127.0.0.1:8000/v1", RateLimitScope: ScopeAuto}, "http://127.0.0.1:8000"},
		{ModelConfig{Name: "qwen-72b", BaseURL: "http://127.0.0.1:8000/v1", RateLimitScope: ScopeEndpoint}, "http://127.0.0.1:8000"},
		{ModelConfig{Name: "qwen-72b", BaseURL: "http://127.0.0.1:8000/v1", RateLimitScope: ScopeModel}, "http://127.0.0.1:8000 model qwen-72b"},
		{ModelConfig{Name: "claude-opus-4-5", API: APIAnthropic, BaseURL: "https://api.anthropic.com", RateLimitScope: ScopeAuto}, "https://api.anthropic.com:443 model claude-opus-4-5"},
		{ModelConfig{Name: "gpt-4o", BaseURL: "https://api.openai.com/v1", RateLimitScope: ScopeKey}, "https://api.openai.com:443 model gpt-4o"},
		{ModelConfig{Name: "qwen-72b", BaseURL: "http://127.0.0.1:8000/v1", RateLimitScope: ScopeKey}, "http://127.0.0.1:8000"},
	} {
		if got := c.m.Capacity(); got != c.want {
			t.Errorf("%s on %s, scope %s: capacity %q, want %q", c.m.Name, c.m.BaseURL, c.m.RateLimitScope, got, c.want)
		}
	}
	// A model of deployments and its attempt on the first one count
	// against the same capacity, whatever the provider.
	azure := ModelConfig{Name: "gpt-4o", RateLimitScope: ScopeAuto, Deployments: []Deployment{
		{Name: "east", BaseURL: "https://east.openai.azure.com/openai/v1", APIKeyEnv: "EAST_KEY"},
		{Name: "west", BaseURL: "https://west.openai.azure.com/openai/v1", APIKeyEnv: "WEST_KEY"},
	}}
	if whole, first := azure.Capacity(), azure.WithKey("east").Capacity(); whole != first || whole != "https://east.openai.azure.com:443 model gpt-4o" {
		t.Errorf("deployments: the model counts against %q, its attempt on the first deployment %q", whole, first)
	}
}

// TestOverrideEndpointIsOpenAICompatible: LLM_BASE_URL points every rung
// at one OpenAI-compatible endpoint, a rung written for Anthropic's wire
// too.
func TestOverrideEndpointIsOpenAICompatible(t *testing.T) {
	cfg, err := ParseConfig([]byte("models:\n  - name: claude-a\n    api: anthropic\n    base_url: https://api.anthropic.com\n    continuation: anthropic\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.OverrideEndpoint("http://127.0.0.1:8000/v1", "")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if m := cfg.Models[0]; m.Wire() != APIOpenAI || m.BaseURL != "http://127.0.0.1:8000/v1" || m.Continues() {
		t.Errorf("after LLM_BASE_URL: %s on %s, continuation %s", m.Wire(), m.BaseURL, m.ContinuationStyle())
	}
}
