package llmsim

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Scenario is everything the simulator does: its models and their
// capacity, and a timeline of phases with faults. It is read from YAML or
// JSON (ParseScenario, LoadScenario, BuiltinScenario) or built in Go and
// given to Options.Scenario or Sim.SetScenario. The zero value is a valid
// scenario: the default models, unlimited capacity, no latency, no faults.
type Scenario struct {
	// Name identifies the scenario in stats and logs.
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Description says what the scenario reproduces.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Seed seeds the RNG that draws fault probabilities and latencies.
	Seed uint64 `json:"seed,omitempty" yaml:"seed,omitempty"`
	// ContinueOnDisconnect keeps a request's simulated work (and its slot)
	// going after the client gave up, as on a GPU server; nil means true.
	ContinueOnDisconnect *bool `json:"continue_on_disconnect,omitempty" yaml:"continue_on_disconnect,omitempty"`
	// Models lists the served models; empty means DefaultModels().
	Models []ModelSpec `json:"models,omitempty" yaml:"models,omitempty"`
	// Phases is the timeline, measured from the moment the scenario was set
	// or reset. Outside every phase the models are healthy.
	Phases []Phase `json:"phases,omitempty" yaml:"phases,omitempty"`
	// Loop repeats the timeline once its last phase ends (every phase then
	// needs an end).
	Loop bool `json:"loop,omitempty" yaml:"loop,omitempty"`
	// Load describes the load the scenario is meant to be driven with
	// (benchmarks read it; the simulator does not).
	Load *LoadHint `json:"load,omitempty" yaml:"load,omitempty"`

	// Source names where the scenario came from (a file name) for errors.
	Source string `json:"-" yaml:"-"`
}

// ModelSpec is one served model and its capacity.
type ModelSpec struct {
	// Name is the model id clients send.
	Name string `json:"name" yaml:"name"`
	// DefaultMaxTokens is the server's own limit on a request that sets no
	// max_tokens, as real servers have one (an Ollama Modelfile's
	// num_predict, a gateway's default): an answer longer than it is cut
	// with finish_reason "length". 0 means DefaultServerMaxTokens; -1 none.
	DefaultMaxTokens int `json:"default_max_tokens,omitempty" yaml:"default_max_tokens,omitempty"`
	// ContextWindow in tokens; 0 means the default for a known name
	// (qwen-72b 32768, qwen-14b 8192, llama-8b 4096), else 8192.
	ContextWindow int `json:"context_window,omitempty" yaml:"context_window,omitempty"`
	// Slots is the number of requests served at once; 0 means unlimited.
	Slots int `json:"slots,omitempty" yaml:"slots,omitempty"`
	// Queue is how many requests may wait for a slot; beyond it requests are
	// refused at once with queue_full. 0 means unlimited, -1 means none.
	Queue int `json:"queue,omitempty" yaml:"queue,omitempty"`
	// RejectStatus is the status of a queue_full refusal: 429 (default) or
	// 503.
	RejectStatus int `json:"reject_status,omitempty" yaml:"reject_status,omitempty"`
	// TTFT is the time to first token once a slot is free (a duration or a
	// distribution, like Latency). nil means Latency when that is set, else
	// DefaultTTFT() (about 300 ms with seeded jitter); an explicit 0 means
	// the first token comes at once.
	TTFT *Latency `json:"ttft,omitempty" yaml:"ttft,omitempty"`
	// Latency is the old name of TTFT (give one or the other). A model that
	// sets Latency and neither TokensPerSecond nor ITL keeps the meaning
	// Latency had before generation was simulated: the whole service time,
	// tokens take no time (ITL 0).
	Latency Latency `json:"latency,omitzero" yaml:"latency,omitempty"`
	// TokensPerSecond is the decode speed: the inter-token latency is
	// 1/TokensPerSecond. 0 means ITL when set, else DefaultTokensPerSecond
	// (40, 25 ms per token), except for the Latency-only models above.
	TokensPerSecond float64 `json:"tokens_per_second,omitempty" yaml:"tokens_per_second,omitempty"`
	// ITL is the inter-token latency, the time per generated token (another
	// way to give TokensPerSecond; not both). An explicit 0 makes tokens
	// free: the answer comes at TTFT.
	ITL *Duration `json:"itl,omitempty" yaml:"itl,omitempty"`
	// Reasoning makes the model a reasoning model: it generates
	// ReasoningTokens of reasoning_content before the answer (streamed as
	// reasoning_content deltas first). Continuations skip the reasoning.
	Reasoning bool `json:"reasoning,omitempty" yaml:"reasoning,omitempty"`
	// ReasoningTokens is the length of the reasoning; 0 means
	// DefaultReasoningTokens (64). Only with Reasoning.
	ReasoningTokens int `json:"reasoning_tokens,omitempty" yaml:"reasoning_tokens,omitempty"`
	// Continuation says what the model does with a request that asks it to
	// continue its last assistant message (vLLM's continue_final_message,
	// DeepSeek's prefix): "prefix" (the default) continues the text,
	// "none" ignores the flags and answers from scratch (as OpenAI's
	// models do), "reject" refuses them with 400 (as OpenAI's API refuses
	// unknown arguments).
	Continuation string `json:"continuation,omitempty" yaml:"continuation,omitempty"`
	// LoadFactor stretches the generation time (TTFT and every token) with
	// occupancy, as batching on a GPU does: × (1 + LoadFactor × busy/slots),
	// busy counted when the request gets its slot. 0 means none.
	LoadFactor float64 `json:"load_factor,omitempty" yaml:"load_factor,omitempty"`
	// StreamInterval is an extra pause between SSE chunks, on top of the
	// inter-token latency (the slot stays busy meanwhile); 0 means none.
	StreamInterval Duration `json:"stream_interval,omitempty" yaml:"stream_interval,omitempty"`
	// RateLimit is the gateway's request rate limit in requests per second
	// (token bucket on the simulator's clock); beyond it requests get 429
	// rate_limited with Retry-After. 0 means no limit.
	RateLimit float64 `json:"rate_limit,omitempty" yaml:"rate_limit,omitempty"`
	// Burst is the token bucket's size; 0 means max(1, RateLimit).
	Burst int `json:"burst,omitempty" yaml:"burst,omitempty"`
	// RateLimitPerKey gives every API key (the Authorization bearer
	// token) a bucket of its own, as providers count per key, so a pool
	// of keys has a pool of limits; false: one bucket for every caller.
	RateLimitPerKey bool `json:"rate_limit_per_key,omitempty" yaml:"rate_limit_per_key,omitempty"`
}

// Phase is one stretch of the timeline. A phase starts at Start, or when
// the previous phase ends (the first at 0), and lasts Duration; a phase
// without Duration lasts until the next phase's start, or forever.
type Phase struct {
	// Name is shown in stats and logs.
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Start is the offset from the scenario's start; nil means right after
	// the previous phase.
	Start *Duration `json:"start,omitempty" yaml:"start,omitempty"`
	// Duration of the phase; 0 means until the next phase (or forever).
	Duration Duration `json:"duration,omitempty" yaml:"duration,omitempty"`
	// Latency, when set, replaces every model's time to first token (TTFT)
	// in this phase; the tokens keep their model's speed.
	Latency *Latency `json:"latency,omitempty" yaml:"latency,omitempty"`
	// ModelLatency replaces the time to first token of the named models (it wins
	// over Latency).
	ModelLatency map[string]Latency `json:"model_latency,omitempty" yaml:"model_latency,omitempty"`
	// RateLimit replaces the named models' gateway rate limit (requests
	// per second) in this phase, as when another workload takes most of a
	// provider's quota: a token bucket of the phase's own, full at the
	// phase's start, as large as one second of the rate (at least 1); one
	// bucket for every caller. Beyond it requests get 429 rate_limited
	// with Retry-After and x-ratelimit-* headers.
	RateLimit map[string]float64 `json:"rate_limit,omitempty" yaml:"rate_limit,omitempty"`
	// Faults are tried in order for each request: latency rules that fire
	// add up; the first other rule that fires decides the answer.
	Faults []FaultSpec `json:"faults,omitempty" yaml:"faults,omitempty"`
}

// LoadHint is the load a scenario is designed for.
type LoadHint struct {
	// Rate is an open-loop arrival rate in logical calls per second.
	Rate float64 `json:"rate,omitempty" yaml:"rate,omitempty"`
	// Agents is a closed-loop number of concurrent callers.
	Agents int `json:"agents,omitempty" yaml:"agents,omitempty"`
	// Duration of the run.
	Duration Duration `json:"duration,omitempty" yaml:"duration,omitempty"`
	// ClientTimeout is the naive baseline's fixed per-attempt timeout.
	ClientTimeout Duration `json:"client_timeout,omitempty" yaml:"client_timeout,omitempty"`
	// Note explains the scaling from the incident.
	Note string `json:"note,omitempty" yaml:"note,omitempty"`
}

// Default model names.
const (
	ModelQwen72B = "qwen-72b"
	ModelQwen14B = "qwen-14b"
	ModelLlama8B = "llama-8b"
)

var defaultWindows = map[string]int{ModelQwen72B: 32768, ModelQwen14B: 8192, ModelLlama8B: 4096}

// Generation defaults of a model that sets none of TTFT, Latency,
// TokensPerSecond and ITL.
const (
	// DefaultTokensPerSecond is the default decode speed (ITL 25 ms).
	DefaultTokensPerSecond = 40
	// DefaultReasoningTokens is the default reasoning length of a
	// reasoning model.
	DefaultReasoningTokens = 64
)

// DefaultTTFT returns the default time to first token: lognormal with a
// median of 300 ms (sigma 0.2, at most 1 s), drawn from the scenario's
// seeded RNG.
func DefaultTTFT() Latency {
	return Latency{Dist: DistLognormal, Median: Duration(300 * time.Millisecond), Sigma: 0.2, Max: Duration(time.Second)}
}

// Continuation modes of ModelSpec.Continuation.
const (
	ContinuationPrefix = "prefix"
	ContinuationNone   = "none"
	ContinuationReject = "reject"
)

var continuations = []string{ContinuationPrefix, ContinuationNone, ContinuationReject}

// DefaultModels returns the default model set: qwen-72b (32768 tokens),
// qwen-14b (8192) and llama-8b (4096), unlimited capacity, and the default
// generation: DefaultTTFT() to the first token, then DefaultTokensPerSecond.
func DefaultModels() []ModelSpec {
	return []ModelSpec{
		{Name: ModelQwen72B, ContextWindow: 32768},
		{Name: ModelQwen14B, ContextWindow: 8192},
		{Name: ModelLlama8B, ContextWindow: 4096},
	}
}

// InstantModels returns DefaultModels with instant generation (TTFT 0, ITL
// 0): every answer comes at once, as before generation was simulated. For
// tests and benchmarks that measure something else than the upstream's
// speed: Options{Scenario: &Scenario{Models: InstantModels()}}.
func InstantModels() []ModelSpec {
	ms := DefaultModels()
	for i := range ms {
		ms[i].TTFT = &Latency{}
		ms[i].ITL = new(Duration)
	}
	return ms
}

// ttft returns the resolved time to first token (after resolve).
// DefaultServerMaxTokens is a model's own limit when its spec sets none.
const DefaultServerMaxTokens = 512

// serverLimit is the limit m applies to a request that sets none.
func (m ModelSpec) serverLimit() int {
	switch {
	case m.DefaultMaxTokens < 0:
		return 0
	case m.DefaultMaxTokens == 0:
		return DefaultServerMaxTokens
	}
	return m.DefaultMaxTokens
}

func (m ModelSpec) ttft() Latency {
	if m.TTFT != nil {
		return *m.TTFT
	}
	return m.Latency
}

// itl returns the resolved inter-token latency (after resolve).
func (m ModelSpec) itl() time.Duration {
	if m.ITL != nil {
		return m.ITL.D()
	}
	return 0
}

// resolveGeneration checks the generation fields of m (at field f) and
// fills TTFT, ITL and ReasoningTokens with their defaults.
func (m *ModelSpec) resolveGeneration(f string, errs *errList) {
	legacy := m.TTFT == nil && !m.Latency.IsZero() && m.ITL == nil && m.TokensPerSecond == 0
	switch {
	case m.TTFT != nil && !m.Latency.IsZero():
		errs.add(f+".ttft", "give ttft or its old name latency, not both")
	case m.TTFT != nil:
		m.TTFT.validate(f+".ttft", errs)
	case !m.Latency.IsZero():
		m.Latency.validate(f+".latency", errs)
		l := m.Latency
		m.TTFT = &l
	default:
		l := DefaultTTFT()
		m.TTFT = &l
	}
	switch {
	case m.TokensPerSecond < 0:
		errs.add(f+".tokens_per_second", "must be positive (write itl: 0 for tokens that take no time), got %v", m.TokensPerSecond)
	case m.TokensPerSecond > 0 && m.ITL != nil:
		errs.add(f+".tokens_per_second", "give tokens_per_second or itl, not both")
	case m.TokensPerSecond > 0:
		d := Duration(float64(time.Second) / m.TokensPerSecond)
		m.ITL = &d
	case m.ITL != nil:
		if *m.ITL < 0 {
			errs.add(f+".itl", "must not be negative")
		}
	case legacy:
		m.ITL = new(Duration)
	default:
		d := Duration(time.Second / DefaultTokensPerSecond)
		m.ITL = &d
	}
	switch {
	case m.ReasoningTokens < 0:
		errs.add(f+".reasoning_tokens", "must not be negative")
	case m.ReasoningTokens > 0 && !m.Reasoning:
		errs.add(f+".reasoning_tokens", "needs reasoning: true")
	case m.Reasoning && m.ReasoningTokens == 0:
		m.ReasoningTokens = DefaultReasoningTokens
	}
	switch m.Continuation {
	case "":
		m.Continuation = ContinuationPrefix
	case ContinuationPrefix, ContinuationNone, ContinuationReject:
	default:
		errs.add(f+".continuation", "unknown mode %q (one of %s)%s", m.Continuation, strings.Join(continuations, ", "), suggest(m.Continuation, continuations))
	}
}

// span is a phase placed on the timeline; end < 0 means open-ended.
type span struct {
	phase      *Phase
	index      int
	start, end time.Duration
}

// resolved is a validated scenario with defaults applied.
type resolved struct {
	sc          *Scenario
	models      map[string]ModelSpec
	order       []string
	spans       []span
	keepWorking bool
	period      time.Duration // loop period, 0 without loop
}

// Validate checks the scenario and reports every problem with the field's
// path (see ScenarioError).
func (sc *Scenario) Validate() error {
	_, err := sc.resolve()
	return err
}

func (sc *Scenario) resolve() (*resolved, error) {
	src := sc.Source
	if src == "" {
		src = "scenario"
	}
	errs := &errList{source: src}
	r := &resolved{sc: sc, models: map[string]ModelSpec{}, keepWorking: true}
	if sc.ContinueOnDisconnect != nil {
		r.keepWorking = *sc.ContinueOnDisconnect
	}
	models := sc.Models
	if len(models) == 0 {
		models = DefaultModels()
	}
	known := map[string]bool{}
	for i, m := range models {
		f := fmt.Sprintf("models[%d]", i)
		switch {
		case strings.TrimSpace(m.Name) == "":
			errs.add(f+".name", "required")
		case known[m.Name]:
			errs.add(f+".name", "model %q listed twice", m.Name)
		}
		known[m.Name] = true
		if m.ContextWindow < 0 {
			errs.add(f+".context_window", "must not be negative")
		}
		if m.ContextWindow == 0 {
			m.ContextWindow = defaultWindows[m.Name]
			if m.ContextWindow == 0 {
				m.ContextWindow = 8192
			}
		}
		if m.Slots < 0 {
			errs.add(f+".slots", "must not be negative (0 means unlimited)")
		}
		if m.Queue < -1 {
			errs.add(f+".queue", "must be -1 (no queue), 0 (unlimited) or a positive limit, got %d", m.Queue)
		}
		switch m.RejectStatus {
		case 0:
			m.RejectStatus = 429
		case 429, 503:
		default:
			errs.add(f+".reject_status", "must be 429 or 503, got %d", m.RejectStatus)
		}
		m.resolveGeneration(f, errs)
		if m.LoadFactor < 0 {
			errs.add(f+".load_factor", "must not be negative")
		}
		if m.StreamInterval < 0 {
			errs.add(f+".stream_interval", "must not be negative")
		}
		if m.RateLimit < 0 {
			errs.add(f+".rate_limit", "must not be negative")
		}
		if m.Burst < 0 {
			errs.add(f+".burst", "must not be negative")
		}
		if m.Burst == 0 {
			m.Burst = max(1, int(m.RateLimit))
		}
		if _, dup := r.models[m.Name]; !dup {
			r.order = append(r.order, m.Name)
		}
		r.models[m.Name] = m
	}
	var prevEnd time.Duration
	open := false // previous phase has no duration
	for i := range sc.Phases {
		p := &sc.Phases[i]
		f := fmt.Sprintf("phases[%d]", i)
		start := prevEnd
		if p.Start != nil {
			start = p.Start.D()
			if start < prevEnd && i > 0 && !open {
				errs.add(f+".start", "%s is before the end of phases[%d] (%s); phases must not overlap", start, i-1, prevEnd)
			}
			if open && i > 0 && start < r.spans[i-1].start {
				errs.add(f+".start", "%s is before the start of phases[%d] (%s)", start, i-1, r.spans[i-1].start)
			}
		} else if open {
			errs.add(fmt.Sprintf("phases[%d].duration", i-1), "required: phases[%d] has no start, so phases[%d] must end", i, i-1)
		}
		if open && i > 0 {
			r.spans[i-1].end = start
		}
		if p.Duration < 0 {
			errs.add(f+".duration", "must not be negative")
		}
		end := time.Duration(-1)
		open = p.Duration == 0
		if !open {
			end = start + p.Duration.D()
			prevEnd = end
		} else {
			prevEnd = start
		}
		r.spans = append(r.spans, span{phase: p, index: i, start: start, end: end})
		if p.Latency != nil {
			p.Latency.validate(f+".latency", errs)
		}
		for _, name := range keys(p.ModelLatency) {
			if !known[name] {
				errs.add(f+".model_latency."+name, "unknown model %q%s", name, suggest(name, keys(known)))
			}
			p.ModelLatency[name].validate(f+".model_latency."+name, errs)
		}
		for _, name := range keys(p.RateLimit) {
			switch {
			case !known[name]:
				errs.add(f+".rate_limit."+name, "unknown model %q%s", name, suggest(name, keys(known)))
			case p.RateLimit[name] <= 0:
				errs.add(f+".rate_limit."+name, "want requests per second above 0, got %v", p.RateLimit[name])
			}
		}
		for j, fs := range p.Faults {
			fs.validate(fmt.Sprintf("%s.faults[%d]", f, j), known, errs)
		}
	}
	if sc.Loop {
		if len(r.spans) == 0 || r.spans[len(r.spans)-1].end <= 0 {
			errs.add("loop", "needs phases whose last one has a duration")
		} else {
			r.period = r.spans[len(r.spans)-1].end
		}
	}
	if l := sc.Load; l != nil && (l.Rate < 0 || l.Agents < 0) {
		errs.add("load", "rate and agents must not be negative")
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return r, nil
}

// at returns the phase active at elapsed, or nil.
func (r *resolved) at(elapsed time.Duration) *span {
	if r.period > 0 && elapsed >= 0 {
		elapsed %= r.period
	}
	for i := len(r.spans) - 1; i >= 0; i-- {
		s := &r.spans[i]
		if elapsed >= s.start && (s.end < 0 || elapsed < s.end) {
			return s
		}
	}
	return nil
}

// untilEnd is the time from elapsed until the end of span sp (the phase
// active at elapsed); 0 for no span or one without an end.
func (r *resolved) untilEnd(sp *span, elapsed time.Duration) time.Duration {
	if sp == nil || sp.end < 0 {
		return 0
	}
	if r.period > 0 && elapsed >= 0 {
		elapsed %= r.period
	}
	return max(0, sp.end-elapsed)
}

// ParseScenario parses a scenario from YAML or JSON (JSON when source ends
// in ".json" or data is a JSON object) and validates it. Errors name source
// and the offending field (see ScenarioError).
func ParseScenario(data []byte, source string) (*Scenario, error) {
	if source == "" {
		source = "scenario"
	}
	var node yaml.Node
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, &ScenarioError{Source: source, Problem: "empty scenario"}
	}
	if strings.HasSuffix(source, ".json") || (trimmed[0] == '{' && json.Valid(trimmed)) {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		n, err := jsonNode(dec)
		if err == nil {
			if _, terr := dec.Token(); terr != io.EOF {
				err = fmt.Errorf("unexpected data after the top-level value")
			}
		}
		if err != nil {
			return nil, &ScenarioError{Source: source, Problem: "invalid JSON: " + err.Error()}
		}
		node = *n
	} else if err := yaml.Unmarshal(data, &node); err != nil {
		return nil, &ScenarioError{Source: source, Problem: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	sc := &Scenario{}
	if err := decodeStrict(&node, "", sc); err != nil {
		var se *ScenarioError
		if errors.As(err, &se) {
			se.Source = source
		}
		return nil, err
	}
	sc.Source = source
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

// jsonNode reads one JSON value from dec as a YAML node, keeping the order
// of object keys and the type of numbers.
func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				val, err := jsonNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.(string)}, val)
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				val, err := jsonNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, val)
			}
			_, err := dec.Token()
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", v)
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// LoadScenario reads and parses the scenario file at path.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return ParseScenario(data, path)
}

//go:embed scenarios/*.yaml
var builtinFS embed.FS

// BuiltinScenarios returns the names of the scenarios shipped in
// llmsim/scenarios (without ".yaml"), sorted.
func BuiltinScenarios() []string {
	entries, _ := fs.ReadDir(builtinFS, "scenarios")
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// BuiltinScenario parses the shipped scenario called name ("spike-5s" or
// "spike-5s.yaml").
func BuiltinScenario(name string) (*Scenario, error) {
	base := strings.TrimSuffix(path.Base(name), ".yaml")
	data, err := builtinFS.ReadFile("scenarios/" + base + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no built-in scenario %q%s (have: %s)", name, suggest(base, BuiltinScenarios()), strings.Join(BuiltinScenarios(), ", "))
	}
	return ParseScenario(data, base+".yaml")
}

// OpenScenario loads nameOrPath as a file when it exists, else as a
// built-in scenario name.
func OpenScenario(nameOrPath string) (*Scenario, error) {
	if _, err := os.Stat(nameOrPath); err == nil {
		return LoadScenario(nameOrPath)
	}
	if strings.ContainsAny(nameOrPath, `/\`) || strings.HasSuffix(nameOrPath, ".json") {
		return nil, fmt.Errorf("scenario: no such file %q", nameOrPath)
	}
	return BuiltinScenario(nameOrPath)
}

// RenameModels makes names the scenario's models, in order: the i-th name
// takes the i-th model's settings (the last model's beyond them), and the
// phases' faults and latencies that named the old model name the new one
// (the models beyond the names, the last name), so a scenario's failure
// mix follows its models. For demos and tests
// against a provider's model names (llmsim --models gpt-4o,gpt-4o-mini).
func (sc *Scenario) RenameModels(names []string) error {
	if len(names) == 0 {
		return errors.New("llmsim: at least one model name is required")
	}
	old := sc.Models
	if len(old) == 0 {
		old = DefaultModels()
	}
	rename := map[string]string{}
	for i, m := range old {
		rename[m.Name] = names[min(i, len(names)-1)] // models beyond the names fold into the last
	}
	models := make([]ModelSpec, len(names))
	for i, n := range names {
		m := old[min(i, len(old)-1)]
		m.Name = n
		models[i] = m
	}
	sc.Models = models
	for i := range sc.Phases {
		p := &sc.Phases[i]
		for j := range p.Faults {
			if n, ok := rename[p.Faults[j].Model]; ok {
				p.Faults[j].Model = n
			}
		}
		p.ModelLatency = renameKeys(p.ModelLatency, rename)
		p.RateLimit = renameKeys(p.RateLimit, rename)
	}
	return sc.Validate()
}

// renameKeys is m with its model names renamed (a name rename lacks
// stays); nil for an empty m.
func renameKeys[V any](m map[string]V, rename map[string]string) map[string]V {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		if n, ok := rename[k]; ok {
			k = n
		}
		out[k] = v
	}
	return out
}
