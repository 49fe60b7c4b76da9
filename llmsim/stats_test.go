package llmsim_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

func TestStatsBucketsAreExact(t *testing.T) {
	clk := newFakeClock()
	srv := start(t, llmsim.Options{Clock: clk.Now})
	ctx := context.Background()
	send := func(model, key, q string) {
		cl, _ := goClient(srv, 5*time.Second, "Idempotency-Key", key)
		_, _ = cl.CreateChatCompletion(ctx, ask(model, q))
	}
	// t=0: two arrivals; t=50ms: one (same bucket); t=150ms: one;
	// t=1050ms: two, one of them a 429.
	send("qwen-72b", "a/1", "q")
	send("qwen-14b", "b/1", "q")
	clk.Advance(50 * time.Millisecond)
	send("qwen-72b", "a/2", "q")
	clk.Advance(100 * time.Millisecond)
	send("qwen-72b", "c/1", "q")
	clk.Advance(900 * time.Millisecond)
	send("qwen-72b", "a/3", "q [[sim fault=rate_limited]]")
	send("llama-8b", "d/1", "q")

	st := srv.Stats()
	if st.Totals.Arrivals != 6 || st.Totals.Responses["200"] != 5 || st.Totals.Responses["429"] != 1 || st.Totals.Completions != 5 {
		t.Errorf("totals %+v", st.Totals)
	}
	if st.ElapsedMS != 1050 || st.BucketMS != 100 {
		t.Errorf("elapsed %d bucket %d", st.ElapsedMS, st.BucketMS)
	}
	want := []int{3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2}
	if len(st.Buckets) != len(want) {
		t.Fatalf("%d buckets, want %d", len(st.Buckets), len(want))
	}
	sum := 0
	for i, b := range st.Buckets {
		if b.Arrivals != want[i] || b.StartMS != int64(i*100) {
			t.Errorf("bucket %d: t=%d arrivals %d, want t=%d arrivals %d", i, b.StartMS, b.Arrivals, i*100, want[i])
		}
		sum += b.Arrivals
	}
	if sum != st.Totals.Arrivals {
		t.Errorf("buckets sum to %d, totals say %d", sum, st.Totals.Arrivals)
	}
	b0 := st.Buckets[0]
	if b0.Models["qwen-72b"].Arrivals != 2 || b0.Models["qwen-14b"].Arrivals != 1 || b0.Responses["200"] != 3 || b0.Completions != 3 {
		t.Errorf("bucket 0 %+v", b0)
	}
	b10 := st.Buckets[10]
	if b10.Responses["429"] != 1 || b10.Models["qwen-72b"].Responses["429"] != 1 || b10.Models["llama-8b"].Responses["200"] != 1 {
		t.Errorf("bucket 10 %+v", b10)
	}
	if m := st.Models["qwen-72b"]; m.Arrivals != 4 || m.Responses["200"] != 3 || m.Responses["429"] != 1 {
		t.Errorf("qwen-72b %+v", m)
	}
	if cv := st.Conversations["a"]; cv.Attempts != 3 || cv.Requests[2].Outcome != "429" || cv.Requests[2].Fault != "rate_limited" || cv.Requests[1].AtMS != 50 {
		t.Errorf("conversation a %+v", cv)
	}
	if st.Faults["rate_limited"] != 1 {
		t.Errorf("faults %v", st.Faults)
	}
	// 6 attempts for 4 conversations; peak 3 over a mean of 6/11.
	if got := st.Amplification(); got != 1.5 {
		t.Errorf("amplification %v", got)
	}
	if got := st.PeakToMean(); math.Abs(got-3/(6.0/11)) > 1e-9 {
		t.Errorf("peak to mean %v", got)
	}

	srv.ResetStats()
	st = srv.Stats()
	if st.Totals.Arrivals != 0 || len(st.Buckets) != 0 || len(st.Conversations) != 0 || st.Amplification() != 0 || st.PeakToMean() != 0 {
		t.Errorf("after reset %+v", st)
	}
	clk.Advance(250 * time.Millisecond)
	send("qwen-72b", "e/1", "q")
	if st := srv.Stats(); len(st.Buckets) != 3 || st.Buckets[2].Arrivals != 1 {
		t.Errorf("buckets after reset start at the reset: %+v", st.Buckets)
	}
}

func TestStatsInFlightPerBucket(t *testing.T) {
	srv := startScenario(t, `models: [{name: m, slots: 2, latency: 500ms}]`, llmsim.Options{})
	fire(t, srv, "m", 4, 0, 5*time.Second)
	st := srv.Stats()
	if st.Totals.PeakInFlight != 2 || st.Totals.PeakQueued != 2 || st.Totals.InFlight != 0 || st.Totals.Queued != 0 {
		t.Errorf("totals %+v", st.Totals)
	}
	if b := st.Buckets[3]; b.InFlight != 2 || b.Queued != 2 || b.Models["m"].InFlight != 2 || b.Arrivals != 0 {
		t.Errorf("bucket 3 (work in progress, no events) %+v", b)
	}
	last := st.Buckets[len(st.Buckets)-1]
	peak, done := 0, 0
	for _, b := range st.Buckets {
		peak = max(peak, b.PeakInFlight)
		done += b.Completions
	}
	if last.InFlight != 0 || peak != 2 || done != 4 {
		t.Errorf("last bucket %+v, peak over buckets %d, completions %d", last, peak, done)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func post(t *testing.T, url, ctype, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, ctype, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStatsAndAdminOverHTTP(t *testing.T) {
	clk := newFakeClock()
	srv := start(t, llmsim.Options{Clock: clk.Now})
	cl, _ := goClient(srv, 5*time.Second, "Idempotency-Key", "h/1")
	if _, err := cl.CreateChatCompletion(context.Background(), ask("qwen-72b", "over http")); err != nil {
		t.Fatal(err)
	}
	var st llmsim.Stats
	getJSON(t, srv.URL+"/stats", &st)
	if st.Totals.Arrivals != 1 || len(st.Buckets) != 1 || st.Conversations["h"].Attempts != 1 || st.Models["qwen-72b"].Responses["200"] != 1 {
		t.Errorf("GET /stats %+v", st)
	}
	var lean llmsim.Stats
	getJSON(t, srv.URL+"/stats?buckets=0&conversations=0", &lean)
	if lean.Totals.Arrivals != 1 || lean.Buckets != nil || lean.Conversations != nil {
		t.Errorf("lean stats %+v", lean)
	}
	if code, _ := post(t, srv.URL+"/stats/reset", "", ""); code != 200 || srv.Stats().Totals.Arrivals != 0 {
		t.Errorf("POST /stats/reset: %d", code)
	}

	// Set a scenario by YAML body, by JSON body and by name.
	code, body := post(t, srv.URL+"/admin/scenario", "application/yaml", "name: posted\nmodels: [{name: solo}]\n")
	if code != 200 || srv.Scenario().Name != "posted" {
		t.Fatalf("POST yaml: %d %s", code, body)
	}
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	getJSON(t, srv.BaseURL+"/models", &models)
	if len(models.Data) != 1 || models.Data[0].ID != "solo" {
		t.Errorf("models %+v", models)
	}
	code, body = post(t, srv.URL+"/admin/scenario", "application/json", `{"name":"j","phases":[{"faults":[{"kind":"rate_limit"}]}]}`)
	if code != 400 || !strings.Contains(body, `phases[0].faults[0].kind: unknown fault \"rate_limit\" (did you mean rate_limited?)`) {
		t.Errorf("bad JSON scenario: %d %s", code, body)
	}
	if srv.Scenario().Name != "posted" {
		t.Errorf("a refused scenario replaced the current one")
	}
	if code, body = post(t, srv.URL+"/admin/scenario?name=spike-5s", "", ""); code != 200 || srv.Scenario().Name != "spike-5s" {
		t.Errorf("by name: %d %s", code, body)
	}
	if code, body = post(t, srv.URL+"/admin/scenario?name=spike", "", ""); code != 400 || !strings.Contains(body, "did you mean") {
		t.Errorf("unknown name: %d %s", code, body)
	}
	// GET /admin/scenario round-trips through ParseScenario.
	resp, err := http.Get(srv.URL + "/admin/scenario")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	again, err := llmsim.ParseScenario(raw, "roundtrip.json")
	if err != nil {
		t.Fatalf("round trip: %v\n%s", err, raw)
	}
	orig, _ := llmsim.BuiltinScenario("spike-5s")
	a, _ := json.Marshal(orig)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Errorf("round trip differs:\n%s\n%s", a, b)
	}
	clk.Advance(12 * time.Second)
	if srv.Phase() != "spike" {
		t.Errorf("phase %q", srv.Phase())
	}
	if code, _ := post(t, srv.URL+"/admin/reset", "", ""); code != 200 || srv.Phase() != "healthy" {
		t.Errorf("POST /admin/reset: %d, phase %q", code, srv.Phase())
	}
	resp, err = http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz: %v", err)
	}
	resp.Body.Close()
}
