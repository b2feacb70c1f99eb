package e2e

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// stopJob is datagen -> map (counting calls) -> rebalance -> a collect
// sink: an at-least-once sink, which keeps whatever reaches it.
func stopJob(records int64, rate float64, out *sink.Collect[int64], calls *atomic.Int64, fn sluice.MapFunction[int64, int64], opts ...sluice.Option) *sluice.Environment {
	env := newEnv(append([]sluice.Option{sluice.WithParallelism(2)}, opts...)...)
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(records), source.DatagenRate(rate))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen", sluice.UID("gen"))
	if fn == nil {
		fn = countCalls{calls}
	}
	m := sluice.RichMap(s, fn, sluice.UID("calls"))
	sluice.SinkTo(m.Rebalance(), out, sluice.UID("collect"))
	return env
}

type countCalls struct{ calls *atomic.Int64 }

func (c countCalls) Map(v int64) (int64, error) { c.calls.Add(1); return v, nil }

// A stop-with-savepoint is the job's last state: nothing is processed
// after its barrier, so an at-least-once sink gets every record once
// across the stop and the resume from the savepoint. (The sources used
// to go on reading until the stop reached them; the restored job read
// those records again.)
func TestStopWithSavepointIsTheLastState(t *testing.T) {
	const records = 3000
	calls := &atomic.Int64{}
	first, second := sink.NewCollect[int64](), sink.NewCollect[int64]()
	cp := t.TempDir()
	job := mustStart(t, stopJob(records, 2000, first, calls, nil, sluice.WithCheckpointing(15*time.Millisecond, cp)))
	await(t, "a third of the input", func() bool { return calls.Load() > records/3 })
	sp := stopWithSavepoint(t, job)
	if n := calls.Load(); n >= records {
		t.Fatalf("the first run read all %d records; the test needs a stop midway", n)
	}
	mustExecute(t, stopJob(records, 0, second, &atomic.Int64{}, nil, sluice.WithCheckpointing(15*time.Millisecond, cp), sluice.WithRestoreFrom(sp)))
	got := append(first.Values(), second.Values()...)
	if d := sameMultiset(got, ints(0, records)); d != "" {
		t.Fatalf("first run %d records, second %d: %s", len(first.Values()), len(second.Values()), d)
	}
}

// failFirstSnapshot declines the first checkpoint its subtask takes.
type failFirstSnapshot struct {
	calls  *atomic.Int64
	failed *atomic.Int64
}

var errSnapshotRefused = errors.New("snapshot refused")

func (f *failFirstSnapshot) Map(v int64) (int64, error) { f.calls.Add(1); return v, nil }

func (f *failFirstSnapshot) SnapshotState(int64) error {
	if f.failed.CompareAndSwap(0, 1) {
		return errSnapshotRefused
	}
	return nil
}

// A stop-with-savepoint that fails leaves the job running: the sources,
// which stopped at its barrier, carry on, and the job ends with all its
// input.
func TestFailedStopWithSavepointCarriesOn(t *testing.T) {
	const records = 2000
	calls, failed := &atomic.Int64{}, &atomic.Int64{}
	out := sink.NewCollect[int64]()
	// No periodic checkpoint in the test's time: the savepoint is the
	// first snapshot, and it is declined.
	job := mustStart(t, stopJob(records, 2000, out, calls, &failFirstSnapshot{calls: calls, failed: failed},
		sluice.WithCheckpointing(time.Hour, t.TempDir())))
	await(t, "a quarter of the input", func() bool { return calls.Load() > records/4 })
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	if _, err := job.StopWithSavepoint(ctx, t.TempDir(), false); err == nil {
		t.Fatal("the stop-with-savepoint succeeded; its snapshot was to be declined")
	}
	if calls.Load() >= records {
		t.Fatalf("the job read all %d records before the savepoint failed; the test needs a failure midway", calls.Load())
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job after the failed stop: %v", err)
	}
	if d := sameMultiset(out.Values(), ints(0, records)); d != "" {
		t.Fatal(d)
	}
	if job.Restarts() != 0 {
		t.Fatalf("%d restarts", job.Restarts())
	}
}
