package testutil

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// LogRecorder is a slog.Handler that keeps every record, for tests that
// assert what a component logs. Safe for concurrent use; records at every
// level are kept.
type LogRecorder struct {
	mu      sync.Mutex
	records []slog.Record
	attrs   []slog.Attr // from WithAttrs, added to every record
	parent  *LogRecorder
}

// Logger returns a logger writing to r.
func (r *LogRecorder) Logger() *slog.Logger { return slog.New(r) }

func (r *LogRecorder) root() *LogRecorder {
	for r.parent != nil {
		r = r.parent
	}
	return r
}

// Enabled implements slog.Handler: every level is kept.
func (r *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (r *LogRecorder) Handle(_ context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(r.attrs...)
	root := r.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	root.records = append(root.records, rec)
	return nil
}

// WithAttrs implements slog.Handler.
func (r *LogRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &LogRecorder{parent: r.root(), attrs: append(append([]slog.Attr(nil), r.attrs...), as...)}
}

// WithGroup implements slog.Handler; groups are flattened.
func (r *LogRecorder) WithGroup(string) slog.Handler { return r }

// Find returns the records whose message contains msg, each as its
// message and its attributes ("key=value", in order).
func (r *LogRecorder) Find(msg string) []string {
	root := r.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	var out []string
	for _, rec := range root.records {
		if !strings.Contains(rec.Message, msg) {
			continue
		}
		line := rec.Level.String() + " " + rec.Message
		rec.Attrs(func(a slog.Attr) bool {
			line += fmt.Sprintf(" %s=%v", a.Key, a.Value)
			return true
		})
		out = append(out, line)
	}
	return out
}
