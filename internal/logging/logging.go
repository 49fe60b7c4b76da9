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
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

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
	return slog.New(zapslog.NewHandler(core, zapslog.WithCaller(true))), func() { _ = core.Sync() }, nil
}
