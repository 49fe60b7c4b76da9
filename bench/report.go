package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durable-llm/durable-llm/llmsim"
)

// Machine describes the computer a benchmark ran on.
type Machine struct {
	Cores    int
	CPU      string
	OS, Arch string
	Go       string
}

// ThisMachine describes the running machine (the CPU model from
// /proc/cpuinfo where there is one).
func ThisMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// String is a one-line description.
func (m Machine) String() string {
	s := fmt.Sprintf("%d cores", m.Cores)
	if m.CPU != "" {
		s += " (" + m.CPU + ")"
	}
	return s + fmt.Sprintf(", %s/%s, %s", m.OS, m.Arch, m.Go)
}

// Header is what precedes every table: what ran, how, where and when.
type Header struct {
	Title   string
	Command string
	Machine Machine
	Date    time.Time
	// Params are the parameters, one line each.
	Params []string
}

// Markdown renders the header.
func (h Header) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", h.Title)
	fmt.Fprintf(&b, "- command: `%s`\n", h.Command)
	fmt.Fprintf(&b, "- machine: %s\n", h.Machine)
	fmt.Fprintf(&b, "- date: %s\n", h.Date.UTC().Format("2006-01-02 15:04 MST"))
	for _, p := range h.Params {
		if strings.HasPrefix(p, "  - ") {
			fmt.Fprintf(&b, "%s\n", p)
		} else {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	return b.String()
}

// Table is a Markdown table whose columns are padded, so it reads in a
// terminal too.
type Table struct {
	Columns []string
	Rows    [][]string
	// Left is the number of leading left-aligned columns (the others are
	// numbers, aligned right); 0 means 1.
	Left int
}

// Markdown renders the table.
func (t Table) Markdown() string {
	w := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		w[i] = max(3, utf8.RuneCountInString(c))
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(w) {
				w[i] = max(w[i], utf8.RuneCountInString(c))
			}
		}
	}
	left := max(1, t.Left)
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range w {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := w[i] - utf8.RuneCountInString(c)
			if i < left {
				fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", pad))
			} else {
				fmt.Fprintf(&b, " %s%s |", strings.Repeat(" ", pad), c)
			}
		}
		b.WriteString("\n")
	}
	line(t.Columns)
	b.WriteString("|")
	for i := range w {
		if i < left {
			b.WriteString(" " + strings.Repeat("-", w[i]) + " |")
		} else {
			b.WriteString(" " + strings.Repeat("-", w[i]-1) + ": |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		line(r)
	}
	return b.String()
}

// fmtDur formats a duration for tables: "850 ms", "1.27 s", "12.3 s".
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0 s"
	case d < time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func pct(p float64) string {
	if p >= 99.95 && p < 100 {
		return fmt.Sprintf("%.2f %%", p)
	}
	return fmt.Sprintf("%.1f %%", p)
}

func marshalScenario(sc *llmsim.Scenario) ([]byte, error) {
	return json.Marshal(sc)
}

// describeScenario lists a scenario's models and phases, one line each.
func describeScenario(sc *llmsim.Scenario) []string {
	var lines []string
	for _, m := range sc.Models {
		s := fmt.Sprintf("%s: %s", m.Name, m.Latency)
		if m.Slots > 0 {
			s += fmt.Sprintf(", %d slots", m.Slots)
		}
		if m.Queue > 0 {
			s += fmt.Sprintf(", queue %d", m.Queue)
		}
		if m.LoadFactor > 0 {
			s += fmt.Sprintf(", load factor %.1f", m.LoadFactor)
		}
		if m.RateLimit > 0 {
			s += fmt.Sprintf(", rate limit %g/s (burst %d)", m.RateLimit, m.Burst)
		}
		lines = append(lines, s)
	}
	var ph []string
	for _, p := range sc.Phases {
		s := p.Name
		if p.Duration > 0 {
			s += " " + fmtDur(p.Duration.D())
		}
		var lat []string
		if p.Latency != nil {
			lat = append(lat, "all models "+p.Latency.String())
		}
		for _, n := range sortedKeys(p.ModelLatency) {
			lat = append(lat, n+" "+p.ModelLatency[n].String())
		}
		if len(lat) > 0 {
			s += " (" + strings.Join(lat, ", ") + ")"
		}
		ph = append(ph, s)
	}
	cont := "continue_on_disconnect: abandoned requests keep their slot until their work is done"
	if sc.ContinueOnDisconnect != nil && !*sc.ContinueOnDisconnect {
		cont = "abandoned requests free their slot at once"
	}
	return append(lines, "phases: "+strings.Join(ph, " → "), cont)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// progressTo returns a printf that writes one line to w; nil w: silent.
func progressTo(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
}

// reportHead starts a report: its header, its table and its targets.
func reportHead(h Header, t Table, targets []string) *strings.Builder {
	b := &strings.Builder{}
	b.WriteString(h.Markdown())
	b.WriteString("\n" + t.Markdown())
	b.WriteString("\nTargets:\n\n")
	for _, t := range targets {
		b.WriteString("- " + t + "\n")
	}
	return b
}
