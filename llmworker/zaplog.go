package llmworker

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ZapLogger adapts a zap.Logger to Temporal's log.Logger.
type ZapLogger struct {
	z *zap.Logger
}

// NewZapLogger wraps z for the Temporal SDK.
func NewZapLogger(z *zap.Logger) *ZapLogger {
	return &ZapLogger{z: z.WithOptions(zap.AddCallerSkip(1))}
}

func fields(keyvals []any) []zap.Field {
	fs := make([]zap.Field, 0, len(keyvals)/2+1)
	for i := 0; i < len(keyvals); i += 2 {
		if i+1 == len(keyvals) {
			fs = append(fs, zap.Any("_extra", keyvals[i]))
			break
		}
		key, ok := keyvals[i].(string)
		if !ok {
			key = fmt.Sprint(keyvals[i])
		}
		fs = append(fs, zap.Any(key, keyvals[i+1]))
	}
	return fs
}

// Debug implements log.Logger.
func (l *ZapLogger) Debug(msg string, keyvals ...any) { l.z.Debug(msg, fields(keyvals)...) }

// Info implements log.Logger.
func (l *ZapLogger) Info(msg string, keyvals ...any) { l.z.Info(msg, fields(keyvals)...) }

// Warn implements log.Logger.
func (l *ZapLogger) Warn(msg string, keyvals ...any) { l.z.Warn(msg, fields(keyvals)...) }

// Error implements log.Logger.
func (l *ZapLogger) Error(msg string, keyvals ...any) { l.z.Error(msg, fields(keyvals)...) }

// With implements log.WithLogger.
func (l *ZapLogger) With(keyvals ...any) log.Logger {
	return &ZapLogger{z: l.z.With(fields(keyvals)...)}
}

// WithCallerSkip implements log.WithSkipCallers.
func (l *ZapLogger) WithCallerSkip(skip int) log.Logger {
	return &ZapLogger{z: l.z.WithOptions(zap.AddCallerSkip(skip))}
}

// NewLogger builds the process's zap logger at level ("debug", "info",
// "warn" or "error"): console encoding with ISO-8601 times.
func NewLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Encoding = "console"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return zc.Build()
}
