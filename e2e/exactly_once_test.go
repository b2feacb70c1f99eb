package e2e

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
)

func TestExactlyOnceUnderFailures(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for i, mode := range []string{"aligned", "unaligned", "mixed"} {
		t.Run(mode, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			const records, keys = 20000, 50
			r := crashCount(t, mode, records, keys, 15*time.Millisecond, 0)
			r.mapCrash, r.opCrash, r.commitCrash = newCrashes(rng, 2, records), newCrashes(rng, 2, records), newCrashes(rng, 1, 20)
			restarts := r.run(t).Restarts()
			crashes := r.crashed()
			if crashes < 3 {
				t.Fatalf("only %d crashes were injected; the test needs several", crashes)
			}
			// Two crashes in one attempt (before it stops) cost one restart.
			if restarts < 1 || restarts > crashes {
				t.Errorf("job restarted %d times for %d crashes", restarts, crashes)
			}
			got := r.output(t)
			checkExactCounts(t, got, expectedCounts(records, keys))
			t.Logf("%s: %d crashes, %d restarts, %d committed records", mode, crashes, restarts, len(got))
		})
	}
}

// At least once: after crashes no record is lost; some may be repeated.
func TestAtLeastOnceUnderFailures(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 99))
	const records, keys = 20000, 50
	r := crashCount(t, "aligned", records, keys, 15*time.Millisecond, 0)
	r.mapCrash, r.extra = newCrashes(rng, 3, records), []sluice.Option{sluice.WithCheckpointingMode(sluice.AtLeastOnce)}
	r.run(t)
	if r.mapCrash.count() < 3 {
		t.Fatalf("only %d crashes injected", r.mapCrash.count())
	}
	got := r.output(t)
	highest := map[int64]int64{}
	for _, kc := range got {
		highest[kc.Key] = max(highest[kc.Key], kc.Count)
	}
	for k, n := range expectedCounts(records, keys) {
		if highest[k] < n {
			t.Errorf("key %d reached count %d, want at least %d: records lost", k, highest[k], n)
		}
	}
	if len(got) < records {
		t.Errorf("committed %d records, want at least %d", len(got), records)
	}
}

// slowCount is runningCount with a fixed cost per record, so that in-flight
// data piles up, unaligned checkpoints persist a lot of it, and replaying
// it after a restore takes long enough for new checkpoints to happen
// during the replay.
type slowCount struct {
	runningCount
	cost time.Duration
}

func (s *slowCount) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, out sluice.Collector[KeyCount]) error {
	time.Sleep(s.cost)
	return s.runningCount.ProcessElement(ctx, v, out)
}

// Unaligned checkpoints with much in-flight data (small buffers, a
// counting side slower than its rate-limited source) and crashes after
// checkpoints have completed, so that restores replay the persisted
// channel state while new checkpoints are taken: the output stays exact.
// (The SIGKILL chaos test of integration/ is what showed records lost when
// such a checkpoint missed the channels not replayed yet.)
func TestCheckpointsDuringChannelStateReplay(t *testing.T) {
	const records, keys = 3000, 20
	cr := &crashes{thresholds: []int64{900, 1700, 2400}}
	var mu sync.Mutex
	persisted := map[int64]int64{} // completed checkpoint -> in-flight bytes it persisted
	var completed []checkpoint.Stats
	var restores []sluice.RestoreInfo
	r := &job[KeyCount]{records: records, rate: 3000, outDir: t.TempDir(), timeout: 2 * time.Minute,
		opts: []sluice.Option{sluice.WithParallelism(2), sluice.WithCheckpointing(20*time.Millisecond, t.TempDir()),
			sluice.WithUnalignedCheckpoints(0), sluice.WithBufferSize(4096),
			sluice.WithRestartStrategy(sluice.FixedDelayRestart(10, time.Millisecond)),
			sluice.WithCheckpointListener(func(s checkpoint.Stats) {
				if s.Status == checkpoint.StatusCompleted {
					mu.Lock()
					persisted[s.ID] = s.PersistedData
					completed = append(completed, s)
					mu.Unlock()
				}
			}),
			sluice.WithRestoreListener(func(ri sluice.RestoreInfo) {
				mu.Lock()
				restores = append(restores, ri)
				mu.Unlock()
			})},
		// 1 ms a record against 1500 records/s a subtask: the input
		// piles up in the channels.
		build: counting(keys, func(*job[KeyCount]) sluice.KeyedProcessFunction[int64, int64, KeyCount] {
			return &slowCount{runningCount: runningCount{crash: cr}, cost: time.Millisecond}
		})}
	r.run(t)
	if cr.count() != 3 {
		t.Fatalf("%d crashes, want 3", cr.count())
	}
	checkExactCounts(t, r.output(t), expectedCounts(records, keys))

	mu.Lock()
	defer mu.Unlock()
	withChannelState, during := 0, 0
	for _, ri := range restores {
		if persisted[ri.CheckpointID] > 0 {
			withChannelState++
		}
		end := ri.Start.Add(ri.StateRestore + ri.ChannelStateReplay)
		for _, c := range completed {
			if c.ID > ri.CheckpointID && c.TriggerTime.Before(end) && c.TriggerTime.After(ri.Start) {
				during++
			}
		}
		t.Logf("restored checkpoint %d (%d bytes in flight), replay %v", ri.CheckpointID, persisted[ri.CheckpointID], ri.ChannelStateReplay)
	}
	// What the test is for: restores that put in-flight data back, and
	// checkpoints completed while it was replayed (a replay lasts hundreds
	// of checkpoint intervals: 1 ms for each record in flight).
	if withChannelState == 0 || during == 0 {
		t.Fatalf("%d restores, %d of a checkpoint with in-flight data, %d checkpoints during a replay; the test needs both",
			len(restores), withChannelState, during)
	}
	t.Logf("%d restores with channel state, %d checkpoints triggered during a replay", withChannelState, during)
}
