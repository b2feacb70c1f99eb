package sluice_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// Window assigners and lateness that cannot work are refused, each named.
func TestWindowOptionErrors(t *testing.T) {
	env := testjob.NewEnv()
	src := sluice.FromSource(env, source.FromSlice(tenNumbers), sluice.NoWatermarks[int64](), "numbers")
	ks := sluice.KeyBy(src, identity)
	sum := func(a, b int64) (int64, error) { return a + b, nil }
	sluice.SinkTo(sluice.ReduceWindow(sluice.Window(ks, sluice.TumblingEventTimeWindows(0)), sum), sink.NewDiscard[int64]())
	sluice.SinkTo(sluice.ReduceWindow(sluice.Window(ks, sluice.SlidingEventTimeWindows(time.Second, 2*time.Second).WithOffset(3*time.Second)), sum), sink.NewDiscard[int64]())
	sluice.SinkTo(sluice.ReduceWindow(sluice.Window(ks, sluice.EventTimeSessionWindows(time.Microsecond)).AllowedLateness(-time.Second), sum), sink.NewDiscard[int64]())
	err := testjob.Execute(t, env)
	if err == nil {
		t.Fatal("invalid windows accepted")
	}
	for _, want := range []string{"TumblingEventTimeWindows(0s)", "SlidingEventTimeWindows(1s, 2s, offset 3s)", "EventTimeSessionWindows(-1ms)", "allowed lateness must not be negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
