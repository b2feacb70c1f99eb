package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
)

// A pipeline of forward edges has a failover region per subtask: a
// subtask's failure restarts its region only, from the latest completed
// checkpoint, while the other region's tasks run on (their map is opened
// once); with an all-to-all exchange (rebalance, keyBy) the job is one region and
// restarts whole, as every job does with the full strategy. The committed
// output is exact either way.
func TestRegionFailover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy sluice.FailoverStrategy
		// exchange is the all-to-all exchange after the map: "",
		// "rebalance" or "keyBy".
		exchange string
		// opens is how many times the map's subtasks 0 and 1 are opened:
		// once, and once more for each restart of their task; attempts
		// the operator context's Attempt at their last open.
		opens, attempts [2]int
		// restoredIn is the attempt the restore listeners hear of the
		// restart's restore in: a region restarts within attempt 0.
		restoredIn int
	}{
		{"forward-only", sluice.FailoverRegion, "", [2]int{2, 1}, [2]int{1, 0}, 0},
		{"forward-only-full", sluice.FailoverFull, "", [2]int{2, 2}, [2]int{1, 1}, 1},
		{"rebalance", sluice.FailoverRegion, "rebalance", [2]int{2, 2}, [2]int{1, 1}, 1},
		{"keyBy", sluice.FailoverRegion, "keyBy", [2]int{2, 2}, [2]int{1, 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const records = 6000
			// The failure waits for a completed checkpoint: the restart
			// restores one, which the restore listeners hear of.
			checkpointed := &atomic.Bool{}
			fm := &failingMap{at: records / 3, failures: &failures{}, after: checkpointed}
			var restoresMu sync.Mutex
			var restores []sluice.RestoreInfo
			j := &job[int64]{
				opts: crashOptions(t.TempDir(), 20*time.Millisecond,
					sluice.WithChaining(false), sluice.WithFailoverStrategy(tc.strategy),
					sluice.WithCheckpointListener(func(s checkpoint.Stats) {
						if s.Status == checkpoint.StatusCompleted {
							checkpointed.Store(true)
						}
					}),
					sluice.WithRestoreListener(func(r sluice.RestoreInfo) {
						restoresMu.Lock()
						defer restoresMu.Unlock()
						restores = append(restores, r)
					})),
				records: records, rate: 6000, outDir: t.TempDir(), timeout: time.Minute,
				build: func(j *job[int64], env *sluice.Environment) *sluice.Stream[int64] {
					s := datagen(j, env, "gen", index, nil, sluice.NoWatermarks[int64]())
					s = sluice.RichMap(s, fm, sluice.Name("fail"), sluice.UID("fail"))
					switch tc.exchange {
					case "rebalance":
						s = sluice.Map(s.Rebalance(), func(v int64) (int64, error) { return v, nil }, sluice.Name("after"), sluice.UID("after"))
					case "keyBy":
						s = sluice.Process(sluice.KeyBy(s, func(v int64) int64 { return v % 7 }), passThrough{}, sluice.Name("after"), sluice.UID("after"))
					}
					return s
				},
			}
			job := j.run(t)
			if !fm.fired.Load() {
				t.Fatal("the injected failure never fired")
			}
			if n := job.Restarts(); n != 1 {
				t.Errorf("%d restarts, want 1", n)
			}
			if opens, attempts := fm.openCounts(); opens != tc.opens || attempts != tc.attempts {
				t.Errorf("the map's subtasks were opened %v times, last in attempts %v; want %v times, in %v", opens, attempts, tc.opens, tc.attempts)
			}
			restoresMu.Lock()
			if len(restores) != 1 || restores[0].Attempt != tc.restoredIn || restores[0].CheckpointID == 0 {
				t.Errorf("restores reported: %+v; want one of a checkpoint, in attempt %d", restores, tc.restoredIn)
			}
			restoresMu.Unlock()
			want := make([]int64, records)
			for i := range want {
				want[i] = int64(i)
			}
			got := j.output(t)
			slices.Sort(got)
			if d := sameMultiset(got, want); d != "" {
				t.Errorf("committed output is not every record once: %s", d)
			}
			for _, d := range job.Downtimes() {
				t.Logf("%s: failure to tasks running %v, to the next completed checkpoint %v", tc.name, d.Running, d.Checkpointed)
			}
		})
	}
}

// Region restarts count against the restart strategy as the job's do: a
// subtask that fails at every try restarts its region as often as the
// strategy allows, then the job fails with its error; the other region's
// map is never reopened.
func TestRegionFailoverExhaustsRestarts(t *testing.T) {
	const records, attempts = 6000, 3
	fm := &failingMap{at: records / 3, always: true, failures: &failures{}}
	j := &job[int64]{
		opts: crashOptions(t.TempDir(), 20*time.Millisecond,
			sluice.WithChaining(false), sluice.WithRestartStrategy(sluice.FixedDelayRestart(attempts, 5*time.Millisecond))),
		records: records, rate: 6000, outDir: t.TempDir(),
		build: func(j *job[int64], env *sluice.Environment) *sluice.Stream[int64] {
			return sluice.RichMap(datagen(j, env, "gen", index, nil, sluice.NoWatermarks[int64]()), fm, sluice.Name("fail"), sluice.UID("fail"))
		},
	}
	// Bounded: restarts that the strategy did not count would go on.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := j.env().ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); !errors.Is(err, errInjectedCrash) {
		t.Fatalf("job ended with %v, want the injected failure", err)
	}
	if n := job.Restarts(); n != attempts {
		t.Errorf("%d restarts, want %d", n, attempts)
	}
	if opens, _ := fm.openCounts(); opens != [2]int{attempts + 1, 1} {
		t.Errorf("the map's subtasks were opened %v times, want [%d 1]", opens, attempts+1)
	}
}

// passThrough is a keyed process function that emits what it reads.
type passThrough struct{}

func (passThrough) ProcessElement(_ *sluice.KeyedContext[int64], v int64, out sluice.Collector[int64]) error {
	out.Collect(v)
	return nil
}

// failingMap fails once (always: at every try), in subtask 0, at the
// first record at or past at, and counts how many times each subtask is
// opened. The job clones it for
// every subtask: what they share is behind a pointer.
type failingMap struct {
	at     int64
	always bool
	// after, when set, holds the failure back until it is true.
	after *atomic.Bool
	*failures
}

type failures struct {
	fired    atomic.Bool
	mu       sync.Mutex
	opens    [2]int
	attempts [2]int
}

func (m *failingMap) Open(ctx *sluice.OperatorContext) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opens[ctx.Subtask]++
	m.attempts[ctx.Subtask] = ctx.Attempt
	return nil
}

func (m *failingMap) openCounts() (opens, attempts [2]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.opens, m.attempts
}

func (m *failingMap) Map(v int64) (int64, error) {
	// Datagen's subtask 0 reads the even indexes.
	if v%2 == 0 && v >= m.at && (m.after == nil || m.after.Load()) && (m.fired.CompareAndSwap(false, true) || m.always) {
		return v, fmt.Errorf("map of %d: %w", v, errInjectedCrash)
	}
	return v, nil
}
