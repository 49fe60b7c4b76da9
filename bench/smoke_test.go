package bench

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tinySpike is a storm in miniature: 0.5 s healthy, a 2 s phase in which
// qwen-72b answers after 1.5 s, then healthy again.
const tinySpike = `
name: tiny-spike
seed: 1
models:
  - {name: qwen-72b, slots: 64, queue: 64, latency: 20ms}
phases:
  - {name: healthy, duration: 500ms}
  - {name: spike, duration: 2s, model_latency: {qwen-72b: 1500ms}}
  - {name: recovered}
`

// TestStormHarness runs the storm harness on the baselines that need no
// Temporal server: a naive loop must multiply its upstream requests during
// the spike, openai-go (no timeout) must not, and the report and chart must
// be written.
func TestStormHarness(t *testing.T) {
	c := StormCase{
		Name: "tiny", Title: "tiny spike", Scenario: []byte(tinySpike),
		Rate: 10, Duration: 3500 * time.Millisecond, ClientTimeout: 400 * time.Millisecond,
		StartToClose: time.Second, Deadline: 10 * time.Second,
		IncidentStart: 500 * time.Millisecond, IncidentEnd: 2500 * time.Millisecond, Tail: time.Second,
	}
	rep, err := RunStorm(context.Background(), c, StormOptions{Contenders: []string{KeyNaive, KeyOpenAIGo, KeyLiteLLM}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(rep.Runs))
	}
	naive, oai, lite := rep.Runs[0].Summary, rep.Runs[1].Summary, rep.Runs[2].Summary
	if naive.Calls != 35 || oai.Calls != 35 {
		t.Errorf("calls %d and %d, want 35 each", naive.Calls, oai.Calls)
	}
	// Naive attempts during the spike time out and are resent at once.
	if naive.AmpIncident < 3 {
		t.Errorf("naive amplification over the incident = %.2f, want ≥ 3", naive.AmpIncident)
	}
	if naive.ByModelPct == 100 {
		t.Errorf("naive answered every call, want the spike's calls to fail")
	}
	// The LiteLLM-style router retries the spike's timeouts with backoff,
	// then falls back to the next model, which answers.
	if lite.AmpIncident <= 1 || lite.ByModelPct != 100 {
		t.Errorf("LiteLLM style: amplification %.2f over the incident, by model %.1f %%; want > 1, 100 %%", lite.AmpIncident, lite.ByModelPct)
	}
	// openai-go waits for the slow answers: one request per call.
	if oai.AmpIncident != 1 || oai.AmpOverall != 1 || oai.ByModelPct != 100 {
		t.Errorf("openai-go: amplification %.2f/%.2f, by model %.1f %%; want 1, 1, 100 %%", oai.AmpIncident, oai.AmpOverall, oai.ByModelPct)
	}

	dir := t.TempDir()
	chart := filepath.Join(dir, "storm.png")
	if err := WriteStormChart(chart, rep); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(chart)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("chart is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 300 {
		t.Errorf("chart is %v, too small to read", b)
	}
	md := rep.Markdown(rep.Header("go test", ThisMachine(), time.Now()), "storm.png")
	for _, want := range []string{"| naive loop", "| openai-go defaults", "| LiteLLM-Router style", "naive loop amplification over the incident ≥ 3", "![upstream arrivals per 100 ms](storm.png)", "phases: healthy"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// TestStormSporadicOneShot runs the sporadic case (short) with the one-shot
// client and the naive loop: one-shot sends exactly one request per call and
// answers precisely the calls whose request did not fail (its self-heal is
// 0), the naive loop's immediate retries heal every call whose first request
// failed.
func TestStormSporadicOneShot(t *testing.T) {
	c, err := LoadStormCase("sporadic", 2*time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	c.Duration = 5 * time.Second
	rep, err := RunStorm(context.Background(), c, StormOptions{Contenders: []string{KeyOneShot, KeyNaive}})
	if err != nil {
		t.Fatal(err)
	}
	one, naive := rep.Runs[0].Summary, rep.Runs[1].Summary
	if rep.Runs[0].Name != NameOneShot || one.Calls != 50 || naive.Calls != 50 {
		t.Fatalf("runs %s (%d calls), %s (%d calls); want one-shot and 50 calls each", rep.Runs[0].Name, one.Calls, rep.Runs[1].Name, naive.Calls)
	}
	if one.AmpOverall != 1 {
		t.Errorf("one-shot amplification %.2f, want 1", one.AmpOverall)
	}
	if want := 100 * float64(one.Calls-one.FirstFailed) / float64(one.Calls); one.ByModelPct != want || one.Healed != 0 {
		t.Errorf("one-shot: %v %% by a model, %d of %d failed first requests healed; want %v %%, none", one.ByModelPct, one.Healed, one.FirstFailed, want)
	}
	if naive.Healed != naive.FirstFailed || naive.ByModelPct != 100 {
		t.Errorf("naive loop: %d of %d failed first requests healed, %v %% by a model; want all, 100 %%", naive.Healed, naive.FirstFailed, naive.ByModelPct)
	}
	if len(one.Recoveries) != 0 || one.WorkingCalls != 0 {
		t.Errorf("one-shot: %d recoveries, %d calls while the endpoint works; want none in a sporadic case", len(one.Recoveries), one.WorkingCalls)
	}
	md := rep.Markdown(rep.Header("go test", ThisMachine(), time.Now()), "")
	for _, want := range []string{"| one-shot", "incident window: the whole run", "self-heal"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
