package logging_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/log"

	"github.com/durable-llm/durable-llm/internal/logging"
)

func TestNewWritesZapConsoleLines(t *testing.T) {
	var buf bytes.Buffer
	l, flush, err := logging.New(logging.Options{Level: "info", Out: &buf})
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("hidden")
	l.Info("started", "task_queue", "llm-calls")
	log.NewStructuredLogger(l).Warn("from the SDK", "Attempt", 2)
	l.Error("failed", "error", errors.New("boom"))
	flush()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, want := range []string{
		"\tinfo\tlogging/logging_test.go:", "\tstarted\t" + `{"task_queue": "llm-calls"}`,
		"\twarn\tlogging/logging_test.go:", "\tfrom the SDK\t" + `{"Attempt": 2}`,
		"\terror\t", "\tfailed\t" + `{"error": "boom"}`,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), "hidden") {
		t.Errorf("debug line logged at info:\n%s", buf.String())
	}
	if !strings.HasPrefix(lines[0], "20") || !strings.Contains(lines[0][:30], "T") {
		t.Errorf("first line does not start with an ISO-8601 time: %q", lines[0])
	}
	if !strings.Contains(buf.String(), "logging_test.TestNewWritesZapConsoleLines") {
		t.Errorf("the error line has no stack trace:\n%s", buf.String())
	}
}

func TestNewSamplesUnlessEveryLine(t *testing.T) {
	count := func(every bool) int {
		var buf bytes.Buffer
		l, flush, err := logging.New(logging.Options{Out: &buf, EveryLine: every})
		if err != nil {
			t.Fatal(err)
		}
		for range 150 {
			l.Info("request")
		}
		flush()
		return strings.Count(buf.String(), "\trequest")
	}
	if n := count(false); n != 100 {
		t.Errorf("sampled: %d lines, want 100", n)
	}
	if n := count(true); n != 150 {
		t.Errorf("every line: %d lines, want 150", n)
	}
}

func TestNewRefusesAnUnknownLevel(t *testing.T) {
	_, _, err := logging.New(logging.Options{Level: "loud"})
	if err == nil || !strings.HasPrefix(err.Error(), "--log-level: ") {
		t.Errorf("err = %v", err)
	}
}
