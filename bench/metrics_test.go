package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/durable-llm/durable-llm/llmsim"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of odd", ms(5, 1, 3), 0.5, 3 * time.Millisecond},
		{"median of even is the lower", ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(seq(100)...), 0.99, 99 * time.Millisecond},
		{"p100 is the max", ms(seq(100)...), 1, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.in, tt.q); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.in, tt.q, got, tt.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[n-1-i] = i + 1 // descending, so sorting matters
	}
	return out
}

// calls returns one call per 100 ms for d, good unless bad says otherwise.
func calls(d time.Duration, bad func(start time.Duration) bool) []Outcome {
	var outs []Outcome
	for i, s := 0, time.Duration(0); s < d; i, s = i+1, s+100*time.Millisecond {
		ok := !bad(s)
		outs = append(outs, Outcome{I: i, Start: s, Latency: time.Second, Result: Result{Key: fmt.Sprint(i), Answered: ok, ByModel: ok}})
	}
	return outs
}

func TestRecoveryTime(t *testing.T) {
	good := func(o Outcome) bool { return o.ByModel }
	tests := []struct {
		name   string
		bad    func(time.Duration) bool
		want   time.Duration
		wantOK bool
	}{
		{"never failed", func(time.Duration) bool { return false }, 0, true},
		// From 12.9 s on, 1 of 171 calls failed: within the 1 % allowance.
		{"failed until 13 s", func(s time.Duration) bool { return s < 13*time.Second }, 2900 * time.Millisecond, true},
		{"failed before the incident ended only", func(s time.Duration) bool { return s < 9*time.Second }, 0, true},
		{"never recovered", func(s time.Duration) bool { return s >= 5*time.Second }, 0, false},
		{"recovered too late to judge", func(s time.Duration) bool { return s < 29*time.Second }, 0, false},
		// One failure in 200 later calls is within the 1 % allowance.
		{"one straggler", func(s time.Duration) bool { return s < 11*time.Second || s == 20*time.Second }, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RecoveryTime(calls(30*time.Second, tt.bad), 10*time.Second, good, 100*time.Millisecond, 20)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RecoveryTime = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	c := StormCase{Rate: 10, Duration: 30 * time.Second, Deadline: 20 * time.Second,
		IncidentStart: 10 * time.Second, IncidentEnd: 15 * time.Second, Tail: 10 * time.Second}
	// Calls in the incident fail and make 4 attempts; the others make one.
	outs := calls(c.Duration, func(s time.Duration) bool { return s >= 10*time.Second && s < 15*time.Second })
	st := llmsim.Stats{Conversations: map[string]llmsim.Conversation{}}
	for _, o := range outs {
		n := 1
		if !o.ByModel {
			n = 4
		}
		st.Conversations[o.Key] = llmsim.Conversation{Attempts: n}
		st.Totals.Arrivals += n
	}
	// Upstream arrivals: 1 per bucket, 4 per bucket during the incident.
	for i := 0; i < 300; i++ {
		a := 1
		if i >= 100 && i < 150 {
			a = 4
		}
		st.Buckets = append(st.Buckets, llmsim.Bucket{StartMS: int64(i * 100), Counts: llmsim.Counts{Arrivals: a}})
	}
	outs[0].Latency = 25 * time.Second // past the deadline: not answered in time

	s := Summarize(outs, st, c)
	if s.Calls != 300 || s.IncidentCalls != 50 {
		t.Fatalf("calls %d, incident calls %d; want 300, 50", s.Calls, s.IncidentCalls)
	}
	if s.AmpIncident != 4 {
		t.Errorf("AmpIncident = %v, want 4", s.AmpIncident)
	}
	if want := float64(250+200) / 300; s.AmpOverall != want {
		t.Errorf("AmpOverall = %v, want %v", s.AmpOverall, want)
	}
	if want := 100 * 249.0 / 300; s.ByModelPct != want || s.AnsweredPct != want {
		t.Errorf("answered %v, by model %v; want %v", s.AnsweredPct, s.ByModelPct, want)
	}
	if s.PeakOverOffered != 4 {
		t.Errorf("PeakOverOffered = %v, want 4", s.PeakOverOffered)
	}
	if want := 4.0 / (450.0 / 300); s.PeakToMean != want {
		t.Errorf("PeakToMean = %v, want %v", s.PeakToMean, want)
	}
	if !s.Recovered || s.Recovery != 0 {
		t.Errorf("recovery %v, %v; want 0, true", s.Recovery, s.Recovered)
	}
	if s.TailByModelPct != 100 || s.State() != "recovered" {
		t.Errorf("tail %v %%, state %s; want 100 %%, recovered", s.TailByModelPct, s.State())
	}
}

func TestTableMarkdown(t *testing.T) {
	got := Table{Columns: []string{"name", "value"}, Rows: [][]string{{"a", "1"}, {"longer", "22.5 %"}}}.Markdown()
	want := "" +
		"| name   |  value |\n" +
		"| ------ | -----: |\n" +
		"| a      |      1 |\n" +
		"| longer | 22.5 % |\n"
	if got != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", got, want)
	}
}

func TestFmtDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0 s", 450 * time.Microsecond: "0.45 ms", 5 * time.Millisecond: "5.0 ms", 850 * time.Millisecond: "850 ms",
		1270 * time.Millisecond: "1.27 s", 12345 * time.Millisecond: "12.3 s",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestLoadStormCases(t *testing.T) {
	for _, name := range StormCaseNames {
		for _, short := range []bool{false, true} {
			c, err := LoadStormCase(name, 30*time.Second, short)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if c.Rate <= 0 || c.ClientTimeout <= 0 || c.IncidentEnd <= c.IncidentStart || c.Duration <= c.IncidentEnd {
				t.Errorf("%s (short %v): bad case %+v", name, short, c)
			}
			if _, err := c.scenario(); err != nil {
				t.Errorf("%s (short %v): %v", name, short, err)
			}
		}
	}
	if _, err := LoadStormCase("nope", time.Second, false); err == nil || !strings.Contains(err.Error(), "spike") {
		t.Errorf("unknown case: %v", err)
	}
}
