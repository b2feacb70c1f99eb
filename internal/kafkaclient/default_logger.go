package kafkaclient

import (
	"context"
	"log/slog"
)

// defaultHandler logs through whatever slog.Default() is when a record
// is logged, not when the connector was made: a job runner that sets the
// default logger after the pipeline was built (from log.level and
// log.format) gets the connectors' logs too.
type defaultHandler struct {
	wrap []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (h *defaultHandler) current() slog.Handler {
	cur := slog.Default().Handler()
	for _, w := range h.wrap {
		cur = w(cur)
	}
	return cur
}

func (h *defaultHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.current().Enabled(ctx, l)
}

func (h *defaultHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.current().Handle(ctx, r)
}

func (h *defaultHandler) with(w func(slog.Handler) slog.Handler) *defaultHandler {
	return &defaultHandler{wrap: append(append([]func(slog.Handler) slog.Handler(nil), h.wrap...), w)}
}

func (h *defaultHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(n slog.Handler) slog.Handler { return n.WithAttrs(attrs) })
}

func (h *defaultHandler) WithGroup(name string) slog.Handler {
	return h.with(func(n slog.Handler) slog.Handler { return n.WithGroup(name) })
}

// isDefault reports whether l is Log's stand-in for slog.Default().
func isDefault(l *slog.Logger) bool {
	_, ok := l.Handler().(*defaultHandler)
	return ok
}
