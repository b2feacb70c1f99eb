package scaling

import (
	"fmt"
	"log/slog"
	"strings"
)

// Action is what the Machine asks the runtime to do.
type Action interface {
	fmt.Stringer
	action()
}

// Rescale: stop the job at a checkpoint and restart it from there with
// the parallelism To (by vertex index), then report Running (or
// RescaleFailed).
type Rescale struct {
	From, To []int
	Cause    string
}

// Log is a line for the job's logger.
type Log struct {
	Level slog.Level
	Msg   string
	Attrs []any
}

func (Rescale) action() {}
func (Log) action()     {}

func (a Rescale) String() string {
	return fmt.Sprintf("rescale %v -> %v cause=%q", a.From, a.To, a.Cause)
}

func (a Log) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log %s %q", strings.ToLower(a.Level.String()), a.Msg)
	for i := 0; i+1 < len(a.Attrs); i += 2 {
		fmt.Fprintf(&b, " %v=%v", a.Attrs[i], a.Attrs[i+1])
	}
	return b.String()
}
