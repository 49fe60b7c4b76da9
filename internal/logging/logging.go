// Package logging builds the logger of every command of the module (worker,
// starter, llmsim; devstack and bench print progress, not logs), so all of
// them log the same way: zap with console encoding, ISO-8601 times, the
// caller, and a stack trace on errors.
//
// The logger is handed out as a *slog.Logger backed by zap (through
// go.uber.org/zap/exp/zapslog): library packages take a *slog.Logger
// (frontdoor.Options.Logger, llmworker.StartMetrics) and never see zap, and
// the Temporal SDK gets the same logger through
// go.temporal.io/sdk/log.NewStructuredLogger.
//
// With Options.Private (payload encryption on), no line carries the text
// of a Temporal application error: an upstream's error message can quote
// the prompt, and the SDK logs every failed activity with its message.
package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/durable-llm/durable-llm/policies/failure"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
)

// Options configure New.
type Options struct {
	// Level is "debug", "info", "warn" or "error"; empty means info.
	Level string
	// Out receives the log lines; nil means standard error.
	Out io.Writer
	// EveryLine turns sampling off. By default, as in zap's production
	// configuration, a message logged more than 100 times in a second is
	// sampled (one in 100 of the rest are kept). A process whose log is a
	// record of every event (llmsim's line per request) sets it.
	EveryLine bool
	// Private withholds the text of every error that holds a Temporal
	// application error (an activity's failure, a call that failed): the
	// line keeps its error types and failure class, never the message,
	// which may quote the prompt. Set it when payloads are encrypted
	// (codec.EnvKeys is set). Default off.
	Private bool
}

// New builds the process's logger. Call flush before the process exits.
func New(o Options) (logger *slog.Logger, flush func(), err error) {
	lvl := zapcore.InfoLevel
	if o.Level != "" {
		if lvl, err = zapcore.ParseLevel(o.Level); err != nil {
			return nil, nil, fmt.Errorf("--log-level: %w", err)
		}
	}
	var out zapcore.WriteSyncer = zapcore.Lock(os.Stderr)
	if o.Out != nil {
		out = zapcore.Lock(zapcore.AddSync(o.Out))
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), out, lvl)
	if !o.EveryLine {
		core = zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
	}
	var h slog.Handler = zapslog.NewHandler(core, zapslog.WithCaller(true))
	h = expectedHandler{h}
	if o.Private {
		h = privateHandler{h}
	}
	return slog.New(h), func() { _ = core.Sync() }, nil
}

// expectedHandler logs the SDK's "Activity error." line of an attempt
// that failed as classified (its error is an application error whose type
// is a failure class: a 429, a truncated answer) at debug level, without
// the error level's stack trace: the policy handled it as designed, and
// the call's decision logs one info or warn line of its own with the
// class, the model and the decision (activities.DecideNext). Unexpected
// errors stay errors.
type expectedHandler struct{ slog.Handler }

func (e expectedHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelError && r.Message == "Activity error." && classified(r) {
		out := slog.NewRecord(r.Time, slog.LevelDebug, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool { out.AddAttrs(a); return true })
		if !e.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		return e.Handler.Handle(ctx, out)
	}
	return e.Handler.Handle(ctx, r)
}

func (e expectedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return expectedHandler{e.Handler.WithAttrs(attrs)}
}

func (e expectedHandler) WithGroup(name string) slog.Handler {
	return expectedHandler{e.Handler.WithGroup(name)}
}

// classified reports whether a record's error is an application error
// whose type is a failure class.
func classified(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Resolve().Any().(error); ok {
			var appErr *temporal.ApplicationError
			if errors.As(err, &appErr) && failure.Class(appErr.Type()).Valid() && failure.Class(appErr.Type()) != failure.None {
				found = true
				return false
			}
		}
		return true
	})
	return found
}

// privateHandler replaces, in every attribute, an error that holds a
// Temporal application error by Withheld's text.
type privateHandler struct{ slog.Handler }

func (p privateHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(withhold(a))
		return true
	})
	return p.Handler.Handle(ctx, out)
}

func (p privateHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	kept := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		kept[i] = withhold(a)
	}
	return privateHandler{p.Handler.WithAttrs(kept)}
}

func (p privateHandler) WithGroup(name string) slog.Handler {
	return privateHandler{p.Handler.WithGroup(name)}
}

func withhold(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		g := v.Group()
		kept := make([]any, len(g))
		for i, ga := range g {
			kept[i] = withhold(ga)
		}
		return slog.Group(a.Key, kept...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			if text, withheld := Withheld(err); withheld {
				return slog.String(a.Key, text)
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// Withheld is what a private log shows of err: when err holds a Temporal
// application error, its error types and failure class with the message
// left out (withheld is then true); else err's own text.
func Withheld(err error) (text string, withheld bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		return err.Error(), false
	}
	var kinds []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch e.(type) {
		case *temporal.WorkflowExecutionError:
			kinds = append(kinds, "workflow execution error")
		case *temporal.ActivityError:
			kinds = append(kinds, "activity error")
		case *temporal.ChildWorkflowExecutionError:
			kinds = append(kinds, "child workflow error")
		case *temporal.ApplicationError:
			kinds = append(kinds, fmt.Sprintf("application error (type: %s)", e.(*temporal.ApplicationError).Type()))
		}
	}
	if len(kinds) == 0 {
		kinds = append(kinds, fmt.Sprintf("application error (type: %s)", appErr.Type()))
	}
	return strings.Join(kinds, " ← ") + ": message withheld (payloads are encrypted; it may quote the prompt)", true
}
