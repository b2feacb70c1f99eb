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

// Triggers and evictors that cannot work are refused, each named.
func TestTriggerOptionErrors(t *testing.T) {
	env := testjob.NewEnv()
	src := sluice.FromSource(env, source.FromSlice(tenNumbers), sluice.NoWatermarks[int64](), "numbers")
	ks := sluice.KeyBy(src, identity)
	sum := func(a, b int64) (int64, error) { return a + b, nil }
	sluice.SinkTo(sluice.ReduceWindow(sluice.CountWindow(ks, 0), sum), sink.NewDiscard[int64]())
	sluice.SinkTo(sluice.ReduceWindow(sluice.CountWindowAll(src, 2), sum, sluice.Parallelism(2)), sink.NewDiscard[int64]())
	sluice.SinkTo(sluice.ReduceWindow(sluice.Window(ks, sluice.GlobalWindows()).Evictor(sluice.DeltaEvictor[int64](1, nil)), sum), sink.NewDiscard[int64]())
	sluice.SinkTo(sluice.ReduceWindow(sluice.Window(ks, sluice.EventTimeSessionWindows(time.Second)).Trigger(nonMerging{sluice.CountTrigger[int64](2)}), sum), sink.NewDiscard[int64]())
	err := testjob.Execute(t, env)
	if err == nil {
		t.Fatal("invalid triggers and evictors accepted")
	}
	for _, want := range []string{"CountTrigger(0): the count must be positive", "runs with parallelism 1, got 2", "DeltaEvictor without a delta function", "cannot merge"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// nonMerging is a trigger that cannot merge.
type nonMerging struct{ sluice.Trigger[int64] }

func (nonMerging) CanMerge() bool { return false }
