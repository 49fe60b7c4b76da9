package llmsim_test

import (
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

func TestEstimateTokens(t *testing.T) {
	cases := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abcd", 1},
		{"abcde", 2},
		{"Hello, world!", 4},
		{"你好", 2},
		{"你好abcd", 3},
		{"こんにちは", 5},
		{"カタカナ", 4},
		{"한국어", 3},
		{"，。「」", 4},
		{"ＡＢＣ", 3},
		{"café", 1},
		{"重置密码 reset password", 4 + 4},
	}
	for _, c := range cases {
		if got := llmsim.EstimateTokens(c.in); got != c.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", c.in, got, c.want)
		}
	}
	msgs := []llmsim.Message{{Role: "system", Content: "abcd"}, {Role: "user", Content: "你好", Name: "bob"}}
	// 3 priming + (4 + 1) + (4 + 2 + 1)
	if got := llmsim.EstimatePromptTokens(msgs); got != 15 {
		t.Errorf("EstimatePromptTokens = %d, want 15", got)
	}
}

func TestParseDirectives(t *testing.T) {
	ds, err := llmsim.ParseDirectives("Hi [[sim fault=rate_limited times=2 model=qwen-72b retry_after=2s latency=3s]] and " +
		"[[sim fault=stream_break chunks=4 times=always]] [[sim kind=queue_full status=503 retry_after_ms=1500]]")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 3 {
		t.Fatalf("%d directives", len(ds))
	}
	d := ds[0]
	if d.Spec.Kind != llmsim.FaultRateLimited || d.Times != 2 || d.Spec.Model != "qwen-72b" ||
		d.Spec.RetryAfter.D() != 2*time.Second || d.Spec.Latency.Sample(nil) != 3*time.Second ||
		d.Raw != "[[sim fault=rate_limited times=2 model=qwen-72b retry_after=2s latency=3s]]" {
		t.Errorf("first %+v", d)
	}
	if ds[1].Spec.Kind != llmsim.FaultStreamBreak || ds[1].Spec.Chunks != 4 || ds[1].Times != llmsim.TimesAlways {
		t.Errorf("second %+v", ds[1])
	}
	if s := ds[2].Spec; s.Kind != llmsim.FaultQueueFull || s.Status != 503 || s.RetryAfter.D() != 1500*time.Millisecond || s.RetryHeader != "ms" || ds[2].Times != 1 {
		t.Errorf("third %+v", ds[2])
	}
	bad := []struct{ in, want string }{
		{"[[sim times=2]]", "fault=<name>, tokens=<n> or recall=<fact> is required"},
		{"[[sim fault=rate_limt]]", `unknown fault "rate_limt" (did you mean rate_limited?)`},
		{"[[sim fault=hang tims=2]]", "tims: unknown attribute (did you mean times?)"},
		{"[[sim fault=hang times=0]]", "times must be at least 1"},
		{"[[sim fault=hang latency=soon]]", `expected a duration like "1.5s" or "250ms", got "soon"`},
		{"[[sim fault=hang status=503]]", "status: status 503 not allowed for fault hang"},
		{"[[sim fault=hang times]]", `"times" is not key=value`},
		{"[[sim tokens=0]]", "tokens: must be at least 1, got 0"},
		{"[[sim tokens=many]]", `tokens: strconv.Atoi: parsing "many"`},
		{"[[sim fault=cut_stream after=-3]]", "after: must not be negative, got -3"},
		{"[[sim fault=stall aftr=3]]", "aftr: unknown attribute (did you mean after?)"},
	}
	for _, b := range bad {
		_, err := llmsim.ParseDirectives(b.in)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParseDirectives(%q) = %v, want %q", b.in, err, b.want)
		}
	}
	ds, err = llmsim.ParseDirectives("Long please [[sim tokens=800]] [[sim fault=cut_stream after=100 tokens=50]]")
	if err != nil || len(ds) != 2 || ds[0].Tokens != 800 || ds[0].Spec.Kind != llmsim.FaultNone ||
		ds[1].Tokens != 50 || ds[1].Spec.Kind != llmsim.FaultCutStream || ds[1].Spec.After == nil || *ds[1].Spec.After != 100 {
		t.Errorf("tokens and after: %+v %v", ds, err)
	}
	if ds, err := llmsim.ParseDirectives("no directive [[simulate]] [sim fault=hang]"); err != nil || len(ds) != 0 {
		t.Errorf("false positives: %v %v", ds, err)
	}
}

func TestStripDirectives(t *testing.T) {
	cases := map[string]string{
		"Where is my order? [[sim fault=hang]]":                "Where is my order?",
		"[[sim fault=hang]] Where is my order?":                "Where is my order?",
		"A [[sim fault=hang]] B [[sim fault=reset times=2]] C": "A B C",
		"untouched [[other]]":                                  "untouched [[other]]",
	}
	for in, want := range cases {
		if got := llmsim.StripDirectives(in); got != want {
			t.Errorf("StripDirectives(%q) = %q, want %q", in, got, want)
		}
	}
	if llmsim.Answer("m", "Q [[sim fault=hang]]") != llmsim.Answer("m", "Q") {
		t.Error("Answer echoes the directive")
	}
	if llmsim.Answer("a", "Q")[len("[a]"):] != llmsim.Answer("b", "Q")[len("[b]"):] {
		t.Error("the model changes more than the prefix")
	}
	if llmsim.Answer("a", "Q1") == llmsim.Answer("a", "Q2") {
		t.Error("different questions, same answer")
	}
}

func TestLatencyDistributions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	draw := func(l llmsim.Latency) []time.Duration {
		out := make([]time.Duration, 2000)
		for i := range out {
			out[i] = l.Sample(r)
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	ms := time.Millisecond
	u := draw(llmsim.Latency{Dist: llmsim.DistUniform, Min: llmsim.Duration(100 * ms), Max: llmsim.Duration(200 * ms)})
	if u[0] < 100*ms || u[len(u)-1] > 200*ms || u[1000] < 140*ms || u[1000] > 160*ms {
		t.Errorf("uniform: min %v median %v max %v", u[0], u[1000], u[len(u)-1])
	}
	n := draw(llmsim.Latency{Dist: llmsim.DistNormal, Mean: llmsim.Duration(100 * ms), Stddev: llmsim.Duration(80 * ms), Max: llmsim.Duration(250 * ms)})
	if n[0] != 0 || n[len(n)-1] != 250*ms || n[1000] < 90*ms || n[1000] > 110*ms {
		t.Errorf("normal (cut at 0 and max): min %v median %v max %v", n[0], n[1000], n[len(n)-1])
	}
	l := draw(llmsim.Latency{Dist: llmsim.DistLognormal, Median: llmsim.Duration(300 * ms), Sigma: 0.5})
	if l[1000] < 270*ms || l[1000] > 330*ms || l[1900] < 600*ms {
		t.Errorf("lognormal: median %v p95 %v", l[1000], l[1900])
	}
	if got := llmsim.Fixed(5 * time.Second).Sample(nil); got != 5*time.Second {
		t.Errorf("fixed %v", got)
	}
}

func TestParseFault(t *testing.T) {
	for _, f := range llmsim.Faults() {
		if got, err := llmsim.ParseFault(string(f)); err != nil || got != f {
			t.Errorf("ParseFault(%s) = %v, %v", f, got, err)
		}
	}
	cases := map[string]string{
		"rate_limit":  "rate_limited",
		"timeout":     "gateway_timeout",
		"xyzzy":       "",
		"servererror": "server_error",
		"RESET":       "reset",
		"malformed":   "malformed_json",
	}
	for in, want := range cases {
		_, err := llmsim.ParseFault(in)
		if err == nil {
			t.Errorf("ParseFault(%q) accepted", in)
			continue
		}
		has := strings.Contains(err.Error(), "did you mean "+want+"?")
		if want == "" {
			has = !strings.Contains(err.Error(), "did you mean")
		}
		if !has {
			t.Errorf("ParseFault(%q) = %v, want suggestion %q", in, err, want)
		}
	}
}
