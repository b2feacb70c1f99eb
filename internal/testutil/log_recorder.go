package testutil

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// LogRecord is one record a LogRecorder received: its level, message and
// attributes (those of WithAttrs first), flattened to strings, groups
// joined with dots.
type LogRecord struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// String is the record as a text line, for failure messages.
func (r LogRecord) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", r.Level, r.Message)
	for k, v := range r.Attrs {
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	return b.String()
}

// LogRecorder is a slog.Handler that keeps every record at Level or
// above, for tests that assert on what was logged. It is safe for
// concurrent use; the handlers WithAttrs and WithGroup return share its
// records.
type LogRecorder struct {
	Level slog.Level

	shared *recorded
	attrs  []slog.Attr
	group  string
}

type recorded struct {
	mu   sync.Mutex
	recs []LogRecord
}

// NewLogRecorder returns a recorder of the records at level and above.
func NewLogRecorder(level slog.Level) *LogRecorder {
	return &LogRecorder{Level: level, shared: &recorded{}}
}

// Enabled reports whether l is at the recorder's level or above.
func (h *LogRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= h.Level }

// Handle keeps r.
func (h *LogRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := LogRecord{Level: r.Level, Message: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		flatten(rec.Attrs, "", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		flatten(rec.Attrs, h.group, a)
		return true
	})
	h.shared.mu.Lock()
	h.shared.recs = append(h.shared.recs, rec)
	h.shared.mu.Unlock()
	return nil
}

func flatten(m map[string]string, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	key := a.Key
	if prefix != "" {
		key = prefix + "." + key
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			flatten(m, key, g)
		}
		return
	}
	m[key] = a.Value.String()
}

// WithAttrs returns a handler adding attrs to every record.
func (h *LogRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range attrs {
		if c.group != "" {
			a.Key = c.group + "." + a.Key
		}
		c.attrs = append(c.attrs, a)
	}
	return &c
}

// WithGroup returns a handler putting later attributes under name.
func (h *LogRecorder) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}

// Records returns the records kept so far, in order.
func (h *LogRecorder) Records() []LogRecord {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	return append([]LogRecord(nil), h.shared.recs...)
}

// Matching returns the records kept so far for which match is true.
func (h *LogRecorder) Matching(match func(LogRecord) bool) []LogRecord {
	var out []LogRecord
	for _, r := range h.Records() {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}
