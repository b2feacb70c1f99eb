package etcd

import (
	"context"
	"log/slog"
	"slices"
	"sort"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog is a zap logger, as the etcd client takes, that writes its
// warnings and errors to l (its chatty info and debug lines are dropped).
// The client's warning for every failed attempt of a call (retried or
// not: a cancelled context, a lease already gone) is logged at debug
// level: the failures that matter reach this package's callers as errors,
// with context.
func zapToSlog(l *slog.Logger) *zap.Logger {
	return zap.New(slogCore{l: l.With("component", "etcd-client")})
}

// retryMessage is the etcd client's warning for a failed attempt.
const retryMessage = "retrying of unary invoker failed"

type slogCore struct {
	l     *slog.Logger
	attrs []slog.Attr
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l >= zapcore.WarnLevel:
		return slog.LevelWarn
	case l >= zapcore.InfoLevel:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

func (c slogCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.WarnLevel && c.l.Enabled(context.Background(), slogLevel(l))
}

func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{l: c.l, attrs: append(slices.Clip(c.attrs), attrsOf(fields)...)}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	level := slogLevel(e.Level)
	if e.Message == retryMessage && level == slog.LevelWarn {
		level = slog.LevelDebug
	}
	attrs := append(slices.Clip(c.attrs), attrsOf(fields)...)
	c.l.LogAttrs(context.Background(), level, e.Message, attrs...)
	return nil
}

func (c slogCore) Sync() error { return nil }

func attrsOf(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	return attrs
}
