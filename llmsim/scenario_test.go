package llmsim_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

func TestBadScenariosNameFileAndField(t *testing.T) {
	cases := []struct {
		name, source, data string
		want               string // exact first line of the error
	}{
		{"unknown fault", "spike.yaml", `
phases:
  - {name: healthy, duration: 10s}
  - name: spike
    faults:
      - {kind: rate_limit}
`, `spike.yaml: phases[1].faults[0].kind: unknown fault "rate_limit" (did you mean rate_limited?)`},
		{"unknown field", "s.yaml", `
phases:
  - faults:
      - {kind: server_error, probabilty: 0.5}
`, `s.yaml: phases[0].faults[0].probabilty: unknown field (did you mean probability?) (known: kind, model, probability, first, latency, retry_after, retry_header, no_quota, status, chunks, duration, window, after)`},
		{"wrong type", "s.yaml", `models: [{name: m, slots: many}]`,
			`s.yaml: models[0].slots: expected a whole number, got "many"`},
		{"list expected", "s.yaml", `models: {name: m}`,
			`s.yaml: models: expected a list, got a mapping`},
		{"probability", "s.yaml", `phases: [{faults: [{kind: hang, probability: 1.5}]}]`,
			`s.yaml: phases[0].faults[0].probability: must be between 0 and 1, got 1.5`},
		{"unknown model", "s.yaml", `phases: [{faults: [{kind: hang, model: qwen-7b}]}]`,
			`s.yaml: phases[0].faults[0].model: unknown model "qwen-7b" (did you mean qwen-72b?)`},
		{"bad duration", "s.yaml", `phases: [{duration: soon}]`,
			`s.yaml: phases[0].duration: expected a duration like "1.5s" or "250ms", got "soon"`},
		{"negative duration", "s.yaml", `phases: [{duration: -1s}]`,
			`s.yaml: phases[0].duration: duration must not be negative, got "-1s"`},
		{"unknown distribution", "s.yaml", `models: [{name: m, latency: {dist: gaussian, mean: 1s}}]`,
			`s.yaml: models[0].latency.dist: unknown distribution "gaussian" (one of fixed, uniform, normal, lognormal)`},
		{"unknown latency field", "s.yaml", `models: [{name: m, latency: {dist: normal, mean: 1s, stdev: 1s}}]`,
			`s.yaml: models[0].latency.stdev: unknown field (did you mean stddev?) (known: dist, value, min, max, mean, stddev, median, sigma)`},
		{"uniform bounds", "s.yaml", `models: [{name: m, latency: {dist: uniform, min: 2s, max: 1s}}]`,
			`s.yaml: models[0].latency.max: uniform needs max >= min (min 2s, max 1s)`},
		{"overlap", "s.yaml", `phases: [{name: a, duration: 10s}, {name: b, start: 5s}]`,
			`s.yaml: phases[1].start: 5s is before the end of phases[0] (10s); phases must not overlap`},
		{"open phase then no start", "s.yaml", `phases: [{name: a}, {name: b}]`,
			`s.yaml: phases[0].duration: required: phases[1] has no start, so phases[0] must end`},
		{"status not allowed", "s.yaml", `phases: [{faults: [{kind: server_error, status: 418}]}]`,
			`s.yaml: phases[0].faults[0].status: status 418 not allowed for fault server_error (queue_full: 429|503; bad_request: 400|404|413|422)`},
		{"retry header", "s.yaml", `phases: [{faults: [{kind: rate_limited, retry_header: millis}]}]`,
			`s.yaml: phases[0].faults[0].retry_header: unknown style "millis" (one of seconds, ms, both, date, none)`},
		{"duplicate model", "s.yaml", `models: [{name: m}, {name: m}]`,
			`s.yaml: models[1].name: model "m" listed twice`},
		{"reject status", "s.yaml", `models: [{name: m, reject_status: 500}]`,
			`s.yaml: models[0].reject_status: must be 429 or 503, got 500`},
		{"loop needs an end", "s.yaml", `{loop: true, phases: [{name: a}]}`,
			`s.yaml: loop: needs phases whose last one has a duration`},
		{"top-level typo", "s.yaml", `phase: []`,
			`s.yaml: phase: unknown field (did you mean phases?) (known: name, description, seed, continue_on_disconnect, models, phases, loop, load)`},
		{"json", "spike.json", `{"phases":[{"faults":[{"kind":"rate_limit"}]}]}`,
			`spike.json: phases[0].faults[0].kind: unknown fault "rate_limit" (did you mean rate_limited?)`},
		{"json type", "s.json", `{"models":[{"name":"m","slots":"4"}]}`,
			`s.json: models[0].slots: expected a whole number, got "4"`},
		{"invalid json", "s.json", `{"models": [}`, `s.json: invalid JSON: invalid character '}' looking for beginning of value`},
		{"invalid yaml", "s.yaml", "\nname: x\nmodels: [\n", `s.yaml: invalid YAML: line 3: did not find expected node content`},
		{"empty", "s.yaml", "  \n", `s.yaml: empty scenario`},
		{"ttft and latency", "gen.yaml", `models: [{name: m, ttft: 300ms, latency: 300ms}]`,
			`gen.yaml: models[0].ttft: give ttft or its old name latency, not both`},
		{"bad ttft", "gen.yaml", `models: [{name: m, ttft: {dist: lognormal, sigma: 0.2}}]`,
			`gen.yaml: models[0].ttft.median: lognormal needs a positive median`},
		{"negative tokens_per_second", "gen.yaml", `models: [{name: m, tokens_per_second: -40}]`,
			`gen.yaml: models[0].tokens_per_second: must be positive (write itl: 0 for tokens that take no time), got -40`},
		{"tokens_per_second and itl", "gen.yaml", `models: [{name: m, tokens_per_second: 40, itl: 25ms}]`,
			`gen.yaml: models[0].tokens_per_second: give tokens_per_second or itl, not both`},
		{"negative itl", "gen.yaml", `models: [{name: m, itl: -25ms}]`,
			`gen.yaml: models[0].itl: duration must not be negative, got "-25ms"`},
		{"tokens_per_second type", "gen.json", `{"models":[{"name":"m","tokens_per_second":"fast"}]}`,
			`gen.json: models[0].tokens_per_second: expected a number, got "fast"`},
		{"continuation", "gen.yaml", `models: [{name: m, continuation: prefixed}]`,
			`gen.yaml: models[0].continuation: unknown mode "prefixed" (one of prefix, none, reject) (did you mean prefix?)`},
		{"reasoning_tokens without reasoning", "gen.yaml", `models: [{name: m, reasoning_tokens: 100}]`,
			`gen.yaml: models[0].reasoning_tokens: needs reasoning: true`},
		{"negative after", "gen.yaml", `phases: [{faults: [{kind: cut_stream, after: -1}]}]`,
			`gen.yaml: phases[0].faults[0].after: must not be negative, got -1`},
		{"unknown model field", "gen.yaml", `models: [{name: m, tokens_per_sec: 40}]`,
			`gen.yaml: models[0].tokens_per_sec: unknown field (did you mean tokens_per_second?) (known: name, default_max_tokens, context_window, slots, queue, reject_status, ttft, latency, tokens_per_second, itl, reasoning, reasoning_tokens, continuation, load_factor, stream_interval, rate_limit, burst, rate_limit_per_key)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := llmsim.ParseScenario([]byte(c.data), c.source)
			if err == nil {
				t.Fatal("accepted")
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if first != c.want {
				t.Errorf("error\n got: %s\nwant: %s", first, c.want)
			}
			var se *llmsim.ScenarioError
			if !errors.As(err, &se) || se.Source != c.source {
				t.Errorf("not a *ScenarioError for %s: %#v", c.source, err)
			}
		})
	}
}

func TestScenarioReportsEveryProblem(t *testing.T) {
	_, err := llmsim.ParseScenario([]byte(`
models: [{name: m, slots: -1}]
phases: [{faults: [{kind: nope}, {kind: hang, first: -2}]}]
`), "many.yaml")
	var fields []string
	for _, e := range strings.Split(err.Error(), "\n") {
		fields = append(fields, strings.SplitN(e, ": ", 3)[1])
	}
	if strings.Join(fields, " ") != "models[0].slots phases[0].faults[0].kind phases[0].faults[1].first" {
		t.Errorf("fields %v", fields)
	}
}

func TestLoadAndOpenScenario(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "spike.yaml")
	if err := os.WriteFile(bad, []byte("phases: [{faults: [{kind: rate_limit}]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := llmsim.LoadScenario(bad)
	if err == nil || !strings.HasPrefix(err.Error(), bad+": phases[0].faults[0].kind: unknown fault") {
		t.Errorf("LoadScenario: %v", err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"name":"g","seed":5,"models":[{"name":"m","latency":0.25}],"phases":[{"duration":2}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := llmsim.OpenScenario(good)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "g" || sc.Seed != 5 || sc.Models[0].Latency.Sample(nil) != 250*time.Millisecond || sc.Phases[0].Duration.D() != 2*time.Second {
		t.Errorf("parsed %+v", sc)
	}
	if sc, err := llmsim.OpenScenario("mixed"); err != nil || sc.Name != "mixed" {
		t.Errorf("OpenScenario(mixed): %v", err)
	}
	if _, err := llmsim.OpenScenario("mixd"); err == nil || !strings.Contains(err.Error(), "did you mean mixed?") {
		t.Errorf("OpenScenario(mixd): %v", err)
	}
	if _, err := llmsim.OpenScenario(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestYAMLAndJSONAgree(t *testing.T) {
	y, err := llmsim.ParseScenario([]byte(`
name: same
seed: 9
models: [{name: m, slots: 2, queue: -1, latency: {dist: lognormal, median: 300ms, sigma: 0.4}}]
phases:
  - {name: a, duration: 1.5s, latency: 2s, faults: [{kind: rate_limited, probability: 0.25, retry_after: 1500ms, retry_header: both}]}
`), "same.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := llmsim.ParseScenario([]byte(`{"name":"same","seed":9,
 "models":[{"name":"m","slots":2,"queue":-1,"latency":{"dist":"lognormal","median":"300ms","sigma":0.4}}],
 "phases":[{"name":"a","duration":"1.5s","latency":"2s","faults":[{"kind":"rate_limited","probability":0.25,"retry_after":"1.5s","retry_header":"both"}]}]}`), "same.json")
	if err != nil {
		t.Fatal(err)
	}
	y.Source, j.Source = "", ""
	if a, b := mustJSON(t, y), mustJSON(t, j); a != b {
		t.Errorf("YAML and JSON differ:\n%s\n%s", a, b)
	}
}

// TestBuiltinScenarios loads every shipped scenario and checks that there
// is one per upstream failure class whose faults belong to that class.
func TestBuiltinScenarios(t *testing.T) {
	names := llmsim.BuiltinScenarios()
	for _, want := range []string{"healthy", "mixed", "spike-5s", "vllm-slowdown", "metastable"} {
		if !contains(names, want) {
			t.Errorf("missing scenario %s", want)
		}
	}
	classOf := map[llmsim.Fault]string{}
	for _, f := range llmsim.FaultTable() {
		classOf[f.Fault] = f.Class
	}
	// connect failures (dial, DNS, TLS) happen before any server sees the
	// request, so no scenario can inject them: tests dial a closed port.
	upstream := []string{"read_timeout", "stream_broken", "timeout", "queue_full", "rate_limited", "context_length_exceeded",
		"output_truncated", "service_unavailable", "server_error", "body_error", "invalid_request", "auth",
		"model_not_found", "content_filter"}
	for _, class := range upstream {
		sc, err := llmsim.BuiltinScenario("class-" + class)
		if err != nil {
			t.Errorf("class %s: %v", class, err)
			continue
		}
		for _, p := range sc.Phases {
			for _, f := range p.Faults {
				if classOf[f.Kind] != class {
					t.Errorf("class-%s.yaml injects %s, whose class is %s", class, f.Kind, classOf[f.Kind])
				}
			}
		}
	}
	for _, n := range names {
		sc, err := llmsim.BuiltinScenario(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if sc.Name != n || sc.Description == "" {
			t.Errorf("%s: name %q, description %q", n, sc.Name, sc.Description)
		}
	}
	spike, _ := llmsim.BuiltinScenario("spike-5s")
	if spike.Seed != 0 || spike.Load == nil || spike.Load.Rate != 50 || spike.Phases[1].Duration.D() != 5*time.Second {
		t.Errorf("spike-5s %+v", spike)
	}
	vllm, _ := llmsim.BuiltinScenario("vllm-slowdown")
	if vllm.Seed != 2 || vllm.Load.Agents != 100 || vllm.Load.ClientTimeout.D() != 2*time.Second {
		t.Errorf("vllm-slowdown %+v", vllm)
	}
}

func TestDocumentationListsEveryFault(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	table := llmsim.FormatFaultTable()
	for _, f := range llmsim.FaultTable() {
		if !strings.Contains(string(doc), "//\t"+string(f.Fault)+" ") {
			t.Errorf("doc.go's fault table lacks %s", f.Fault)
		}
		if !strings.Contains(table, "\n"+string(f.Fault)+" ") {
			t.Errorf("FormatFaultTable lacks %s", f.Fault)
		}
		if f.Summary == "" || f.Class == "" {
			t.Errorf("%s is undocumented", f.Fault)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
