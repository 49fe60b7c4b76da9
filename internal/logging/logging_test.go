package logging_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

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

// TestPrivateLogsWithholdApplicationErrors: with payloads encrypted, the
// SDK's line for a failed activity — whose message quotes what the
// upstream said, and so may quote the prompt — keeps the failure class
// and loses the text; the same line without Private shows it (the test
// sees what it guards against).
func TestPrivateLogsWithholdApplicationErrors(t *testing.T) {
	const prompt = "my card ending 4242 was charged twice"
	failing := func(ctx context.Context) error {
		return temporal.NewApplicationError("invalid_request on qwen-72b: HTTP 400: cannot answer "+prompt, "invalid_request")
	}
	run := func(private bool) string {
		var buf bytes.Buffer
		l, flush, err := logging.New(logging.Options{Level: "debug", Out: &buf, Private: private})
		if err != nil {
			t.Fatal(err)
		}
		var s testsuite.WorkflowTestSuite
		s.SetLogger(log.NewStructuredLogger(l))
		env := s.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions(failing, activity.RegisterOptions{Name: "CallModel"})
		if _, err := env.ExecuteActivity("CallModel"); err == nil {
			t.Fatal("the activity did not fail")
		}
		// The front door's line for a call that failed, and a logger with
		// the error among its attributes.
		wrapped := fmt.Errorf("waiting for the call: %w", temporal.NewApplicationError("upstream: "+prompt, "server_error"))
		l.Error("a call failed", "workflow_id", "llm-1", "error", wrapped)
		l.With("error", wrapped).WithGroup("call").Warn("still failing", "cause", wrapped)
		l.Warn("Temporal unreachable", "error", errors.New("dial tcp 127.0.0.1:7233: connection refused"))
		flush()
		return buf.String()
	}
	open := run(false)
	if !strings.Contains(open, "Activity error.") || !strings.Contains(open, prompt) {
		t.Fatalf("without Private the SDK's line should quote the failure:\n%s", open)
	}
	private := run(true)
	if strings.Contains(private, "4242") {
		t.Fatalf("a private log quotes the prompt:\n%s", private)
	}
	for _, want := range []string{"Activity error.", "application error (type: invalid_request): message withheld", "application error (type: server_error): message withheld", "connection refused"} {
		if !strings.Contains(private, want) {
			t.Errorf("the private log lacks %q:\n%s", want, private)
		}
	}
}

// TestClassifiedAttemptFailuresAreNotErrors: the SDK's "Activity error."
// line of an attempt that failed as classified (a 429) is no error line
// with a stack; an activity's unexpected error stays one.
func TestClassifiedAttemptFailuresAreNotErrors(t *testing.T) {
	for _, c := range []struct {
		name, typ string
		isError   bool
	}{
		{"classified", "rate_limited", false},
		{"unexpected", "panic", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, flush, err := logging.New(logging.Options{Level: "info", Out: &buf})
			if err != nil {
				t.Fatal(err)
			}
			fail := temporal.NewApplicationError("rate_limited on qwen-72b: HTTP 429", c.typ)
			log.NewStructuredLogger(l).Error("Activity error.", "ActivityType", "CallModel", "Error", fail)
			flush()
			if got := strings.Contains(buf.String(), "\terror\t"); got != c.isError {
				t.Errorf("error line = %v, want %v:\n%s", got, c.isError, buf.String())
			}
		})
	}
}
