package main

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// TestFailover: q4 fails once, after two checkpoints completed (or, on a
// machine too slow for them, at three quarters of the input) and restarts
// from the latest: the sources resume at their checkpointed event numbers
// and the state at the checkpoint's, so the final averages are the plain
// evaluation's (a lost or doubled event would change the number of
// winning auctions), on the heap and on RocksDB.
func TestFailover(t *testing.T) {
	cfg := testConfig()
	cfg.Events = 20_000
	cfg.WallRate = 40_000 // half a second, so checkpoints come before the end
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := refQ4(allEvents(t, g))
	for _, backend := range []string{"heap", "rocksdb"} {
		t.Run(backend, func(t *testing.T) {
			var completed, failed, restored atomic.Int64
			opts := []sluice.Option{
				sluice.WithCheckpointing(50*time.Millisecond, t.TempDir()),
				sluice.WithRestartStrategy(sluice.FixedDelayRestart(3, 10*time.Millisecond)),
				sluice.WithCheckpointListener(func(cs checkpoint.Stats) {
					if cs.Status == checkpoint.StatusCompleted {
						completed.Add(1)
					}
				}),
				sluice.WithRestoreListener(func(sluice.RestoreInfo) { restored.Add(1) }),
			}
			if backend == "rocksdb" {
				opts = append(opts, sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{})))
			}
			failOnce := func(events *sluice.Stream[Event]) *sluice.Stream[Q4Result] {
				crashing := sluice.Map(events, func(e Event) (Event, error) {
					late := e.Timestamp() >= cfg.BaseTime+cfg.Events*3/4*1000/int64(cfg.Rate)
					if (completed.Load() >= 2 || late) && failed.CompareAndSwap(0, 1) {
						return e, errors.New("injected failure")
					}
					return e, nil
				}, sluice.Name("fail-once"), sluice.WithCodec(EventCodec))
				return Q4(crashing)
			}
			got := runQuery(t, g, failOnce, opts...)
			if failed.Load() != 1 {
				t.Fatalf("failed %d times, want once", failed.Load())
			}
			t.Logf("restored from a checkpoint %d times (%d checkpoints completed)", restored.Load(), completed.Load())
			final := map[int64]Q4Result{}
			for _, r := range got {
				if r.Auctions > final[r.Category].Auctions {
					final[r.Category] = r
				}
			}
			var f, w []Q4Result
			for _, r := range final {
				f = append(f, r)
			}
			for _, r := range want {
				w = append(w, r)
			}
			sameMultiset(t, "q4 final averages after a restore", f, w)
		})
	}
}
