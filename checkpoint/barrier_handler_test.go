package checkpoint

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/datadriven"
)

// TestBarrierHandlerScenarios runs testdata/barrier_handler/*: events in,
// actions out. Times (t=, ts=) are milliseconds since the epoch.
//
//	new mode=(exactly-once|at-least-once) channels=N
//	barrier ch= id= [ts=] [align=aligned|unaligned|timeout] [timeout=ms] [kind=] [prio] [overtaken=n] [t=]
//	buffer ch= size= | cancel ch= id= | eop ch= | trigger id= [ts=] [align=] [timeout=] [kind=]
//	timer t= | promoted ch= id= | aborted id= | completed id= | state
func TestBarrierHandlerScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/barrier_handler", func(t *testing.T, path string) {
		var h BarrierHandler
		var now time.Time
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Has("t") {
				now = time.UnixMilli(d.Int(t, "t", 0))
			}
			if d.Cmd == "new" {
				mode, err := ParseMode(d.Str(t, "mode", "exactly-once"))
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				h = NewBarrierHandler(mode, int(d.Int(t, "channels", 1)))
				now = time.UnixMilli(0)
				return h.String()
			}
			if h == nil {
				d.Fatalf(t, "no handler: start with new")
			}
			var ev Event
			switch d.Cmd {
			case "barrier":
				ev = BarrierReceived{
					Channel:   int(d.Int(t, "ch", 0)),
					Barrier:   scanBarrier(t, d),
					Priority:  d.Bool(t, "prio", false),
					Overtaken: int(d.Int(t, "overtaken", 0)),
				}
			case "buffer":
				return formatActions(h.OnBuffer(int(d.Int(t, "ch", 0)), int(d.Int(t, "size", 0))))
			case "cancel":
				ev = CancelReceived{Channel: int(d.Int(t, "ch", 0)), ID: d.Int(t, "id", 0)}
			case "eop":
				ev = ChannelEnded{Channel: int(d.Int(t, "ch", 0))}
			case "trigger":
				ev = TriggerReceived{Barrier: scanBarrier(t, d)}
			case "timer":
				ev = TimerFired{}
			case "promoted":
				ev = InputBarrierPromoted{Channel: int(d.Int(t, "ch", 0)), ID: d.Int(t, "id", 0)}
			case "aborted":
				ev = CheckpointAborted{ID: d.Int(t, "id", 0)}
			case "completed":
				ev = CheckpointCompleted{ID: d.Int(t, "id", 0)}
			case "state":
				return h.String()
			default:
				d.Fatalf(t, "unknown command")
			}
			return formatActions(h.Step(now, ev))
		})
	})
}

func scanBarrier(t *testing.T, d *datadriven.TestData) Barrier {
	b := Barrier{ID: d.Int(t, "id", 0), Timestamp: d.Int(t, "ts", 0)}
	switch k := d.Str(t, "kind", "checkpoint"); k {
	case "checkpoint":
		b.Options.Kind = KindCheckpoint
	case "savepoint":
		b.Options.Kind = KindSavepoint
	case "full-checkpoint":
		b.Options.Kind = KindFullCheckpoint
	default:
		d.Fatalf(t, "kind %q", k)
	}
	switch a := d.Str(t, "align", "aligned"); a {
	case "aligned":
	case "unaligned":
		b.Options.Alignment = Unaligned
	case "timeout":
		b.Options.Alignment = AlignedWithTimeout
		b.Options.AlignedTimeout = d.Duration(t, "timeout", time.Second)
	default:
		d.Fatalf(t, "align %q", a)
	}
	return b
}

func formatActions(acts []Action) string {
	if len(acts) == 0 {
		return "(none)"
	}
	var b strings.Builder
	for _, a := range acts {
		fmt.Fprintln(&b, a)
	}
	return b.String()
}

func TestBarrierHandlerPanicsOnBadInput(t *testing.T) {
	for name, f := range map[string]func(){
		"channel out of range": func() {
			NewBarrierHandler(ExactlyOnce, 2).Step(time.UnixMilli(0), BarrierReceived{Channel: 2, Barrier: Barrier{ID: 1}})
		},
		"trigger with open inputs": func() {
			NewBarrierHandler(ExactlyOnce, 1).Step(time.UnixMilli(0), TriggerReceived{Barrier: Barrier{ID: 1}})
		},
		"trigger with open inputs, at-least-once": func() {
			NewBarrierHandler(AtLeastOnce, 1).Step(time.UnixMilli(0), TriggerReceived{Barrier: Barrier{ID: 1}})
		},
		"priority barrier of a savepoint": func() {
			h := NewBarrierHandler(ExactlyOnce, 2)
			h.Step(time.UnixMilli(0), BarrierReceived{Channel: 0, Barrier: Barrier{ID: 1, Options: SavepointOptions()}})
			h.Step(time.UnixMilli(0), BarrierReceived{Channel: 1, Barrier: Barrier{ID: 1, Options: SavepointOptions()}, Priority: true})
		},
		"negative channels": func() { NewBarrierHandler(ExactlyOnce, -1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}
