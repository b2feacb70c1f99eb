package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// seenCounter counts the records its subtask saw in operator state, which
// it writes in SnapshotState and reads back when restored.
type seenCounter struct {
	st      state.OperatorListState[int64]
	seen    int64
	subtask int
	crash   *crashes
}

func (c *seenCounter) Open(ctx *sluice.OperatorContext) error {
	st, err := state.GetOperatorListState(ctx.OperatorState, state.ListStateDescriptor[int64]{Name: "seen"})
	if err != nil {
		return err
	}
	c.st, c.subtask = st, ctx.Subtask
	if ctx.Restored {
		vs, err := st.Get()
		if err != nil {
			return err
		}
		for _, v := range vs {
			c.seen += v
		}
	}
	return nil
}

func (c *seenCounter) SnapshotState(int64) error { return c.st.Update([]int64{c.seen}) }

func (c *seenCounter) ProcessElement(_ *sluice.KeyedContext[int64], v int64, out sluice.Collector[KeyCount]) error {
	c.seen++
	if c.crash.hit() {
		return fmt.Errorf("record %d: %w", v, errInjectedCrash)
	}
	out.Collect(KeyCount{Key: int64(c.subtask), Count: c.seen})
	return nil
}

// A user function's own operator state survives crashes exactly once.
func TestUserFunctionOperatorState(t *testing.T) {
	const records = 5000
	out := t.TempDir()
	cr := &crashes{thresholds: []int64{1200, 3100}}
	env := newEnv(sluice.WithParallelism(2), sluice.WithCheckpointing(15*time.Millisecond, t.TempDir()),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(10, time.Millisecond)))
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(records), source.DatagenRate(10000))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen", sluice.UID("gen"))
	seen := sluice.Process[int64, int64, KeyCount](sluice.KeyBy(s, func(v int64) int64 { return v }),
		&seenCounter{crash: cr}, sluice.UID("seen"))
	sluice.SinkTo(seen, filesink.New[KeyCount](out, codec.JSON[KeyCount]{}), sluice.UID("files"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if cr.fired.Load() != 2 {
		t.Fatalf("%d crashes, want 2", cr.fired.Load())
	}
	got := readCounts(t, out)
	last := map[int64]int64{}
	for _, kc := range got {
		last[kc.Key] = max(last[kc.Key], kc.Count)
	}
	if total := last[0] + last[1]; total != records || len(got) != records {
		t.Fatalf("subtasks counted %v (total %d) over %d committed records, want %d", last, total, len(got), records)
	}
}
