package testutil

import (
	"fmt"
	"log/slog"
	"strings"
)

// LogRecord is one record a LogRecorder kept, flattened for assertions:
// its level, message and attributes as strings.
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

// Records returns every record kept so far, in order.
func (r *LogRecorder) Records() []LogRecord {
	root := r.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	out := make([]LogRecord, 0, len(root.records))
	for _, rec := range root.records {
		lr := LogRecord{Level: rec.Level, Message: rec.Message, Attrs: map[string]string{}}
		rec.Attrs(func(a slog.Attr) bool {
			lr.Attrs[a.Key] = a.Value.Resolve().String()
			return true
		})
		out = append(out, lr)
	}
	return out
}

// Matching returns the records kept so far for which match is true.
func (r *LogRecorder) Matching(match func(LogRecord) bool) []LogRecord {
	var out []LogRecord
	for _, rec := range r.Records() {
		if match(rec) {
			out = append(out, rec)
		}
	}
	return out
}
