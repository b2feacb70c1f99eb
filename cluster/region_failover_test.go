package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
)

// A pipeline of forward edges at parallelism 2 on two workers of one
// slot: each worker runs one failover region (a subtask of the source,
// the map and the sink). A failure of the map's subtask 0 restarts its
// region on its worker only, from the latest completed checkpoint, while
// the other worker's region runs on (its map is opened once, in attempt
// 0); with the full strategy both restart. The committed output is every
// record once either way.
func TestRegionFailoverOnWorkers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy sluice.FailoverStrategy
		// opens and attempts as in failingMapOnWorkers, want.
		opens, attempts [2]int
		// restoredIn is the attempt the coordinator's restore listeners
		// hear of the restart's restore in: a region restarts within 0.
		restoredIn int
	}{
		{"region", sluice.FailoverRegion, [2]int{2, 1}, [2]int{1, 0}, 0},
		{"full", sluice.FailoverFull, [2]int{2, 2}, [2]int{1, 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const records = 6000
			fm := &failingMapOnWorkers{at: records / 3, shared: &mapShared{}}
			j := forwardJob{records: records, rate: 6000, cpDir: t.TempDir(), out: t.TempDir(), fm: fm, strategy: tc.strategy}
			restores := runOnTwoWorkers(t, j.env, fm.shared)
			opens, attempts, gap, pause1 := fm.shared.counts()
			if opens != tc.opens || attempts != tc.attempts {
				t.Errorf("the map's subtasks were opened %v times, last in attempts %v; want %v times, in %v", opens, attempts, tc.opens, tc.attempts)
			}
			if len(restores) != 1 || restores[0].Attempt != tc.restoredIn || restores[0].CheckpointID == 0 {
				t.Errorf("restores reported: %+v; want one of a checkpoint, in attempt %d", restores, tc.restoredIn)
			}
			got, err := filesink.ReadCommitted(j.out, codec.JSON[int64]{})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if len(got) != records {
				t.Errorf("%d records committed, want %d", len(got), records)
			}
			for i, v := range got {
				if v != int64(i) {
					t.Fatalf("committed record %d is %d: not every record once", i, v)
				}
			}
			// Not asserted (the machine is noisy): the figure the report
			// quotes, with -v.
			t.Logf("%s: injected failure to the restarted subtask's first record: %v; the other subtask's longest pause between records: %v", tc.name, gap, pause1)
		})
	}
}

// forwardJob is what every process of TestRegionFailoverOnWorkers builds:
// datagen -> map -> file sink, forward edges only, no chaining (three
// tasks a region).
type forwardJob struct {
	records    int64
	rate       float64
	cpDir, out string
	fm         *failingMapOnWorkers
	strategy   sluice.FailoverStrategy
}

func (j forwardJob) env(c cluster.Config, more ...sluice.Option) *sluice.Environment {
	env := regionsEnv("clustered-regions", j.cpDir, j.strategy, c, more...)
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(j.records), source.DatagenRate(j.rate))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen", sluice.UID("gen"))
	s = sluice.RichMap(s, j.fm, sluice.Name("fail"), sluice.UID("fail"))
	sluice.SinkTo(s, filesink.New[int64](j.out, codec.JSON[int64]{}), sluice.Name("files"), sluice.UID("files"))
	return env
}

// failingMapOnWorkers fails once, in subtask 0 (datagen's subtask 0
// reads the even indexes), at the first record at or past at, and counts
// how many times each subtask is opened, in which attempt last, the time
// from the failure to the first record the reopened subtask 0 maps, and
// subtask 1's longest pause between two records.
// Every process of the test (in one test process) clones it: what they
// share is behind a pointer.
type failingMapOnWorkers struct {
	at      int64
	shared  *mapShared
	subtask int
	// reopened: this clone was opened after the failure fired.
	reopened bool
	first    bool
}

type mapShared struct {
	// checkpointed: a checkpoint completed; the failure waits for it, so
	// that the restart restores one.
	checkpointed atomic.Bool
	fired        atomic.Bool
	mu           sync.Mutex
	opens        [2]int
	attempts     [2]int
	failedAt     time.Time
	gap          time.Duration
	// last1 is when subtask 1 last mapped a record, pause1 its longest
	// pause between two records.
	last1  time.Time
	pause1 time.Duration
}

func (m *failingMapOnWorkers) Open(ctx *sluice.OperatorContext) error {
	s := m.shared
	s.mu.Lock()
	defer s.mu.Unlock()
	m.subtask = ctx.Subtask
	s.opens[ctx.Subtask]++
	s.attempts[ctx.Subtask] = ctx.Attempt
	m.reopened = ctx.Subtask == 0 && s.fired.Load()
	return nil
}

func (m *failingMapOnWorkers) Map(v int64) (int64, error) {
	s := m.shared
	if m.reopened && !m.first {
		m.first = true
		s.mu.Lock()
		s.gap = time.Since(s.failedAt)
		s.mu.Unlock()
	}
	if m.subtask == 1 {
		now := time.Now()
		s.mu.Lock()
		if !s.last1.IsZero() {
			s.pause1 = max(s.pause1, now.Sub(s.last1))
		}
		s.last1 = now
		s.mu.Unlock()
	}
	if v%2 == 0 && v >= m.at && s.checkpointed.Load() && s.fired.CompareAndSwap(false, true) {
		s.mu.Lock()
		s.failedAt = time.Now()
		s.mu.Unlock()
		return v, fmt.Errorf("map of %d: %w", v, errInjected)
	}
	return v, nil
}

func (s *mapShared) counts() (opens, attempts [2]int, gap, pause1 time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens, s.attempts, s.gap, s.pause1
}

// Two pipelines at parallelism 2 on two workers of one slot, each with an
// all-to-all (rebalance) edge, so each pipeline is one failover region that
// spans both workers. A failure in pipeline a's map restarts region a on
// both workers, from the latest completed checkpoint, while pipeline b
// runs on (its map opened once on each worker, in attempt 0); with the
// full strategy both pipelines restart. The committed output of each
// pipeline is every record once either way.
func TestRegionSpanningWorkersFailsOver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy sluice.FailoverStrategy
		// opens and attempts of pipeline b's map, as in
		// failingMapOnWorkers; pipeline a's are [2 2] and [1 1] either way.
		bOpens, bAttempts [2]int
		restoredIn        int
	}{
		{"region", sluice.FailoverRegion, [2]int{1, 1}, [2]int{0, 0}, 0},
		{"full", sluice.FailoverFull, [2]int{2, 2}, [2]int{1, 1}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const records = 6000
			a := &failingMapOnWorkers{at: records / 3, shared: &mapShared{}}
			// b never fails (its failure point is past the input): it only
			// counts its opens.
			b := &failingMapOnWorkers{at: 1 << 62, shared: &mapShared{}}
			j := spanningJob{records: records, rate: 6000, cpDir: t.TempDir(), outA: t.TempDir(), outB: t.TempDir(), a: a, b: b, strategy: tc.strategy}
			restores := runOnTwoWorkers(t, j.env, a.shared)
			if opens, attempts, _, _ := a.shared.counts(); opens != [2]int{2, 2} || attempts != [2]int{1, 1} {
				t.Errorf("pipeline a's map subtasks were opened %v times, last in attempts %v; want [2 2] times, in [1 1]: its region spans both workers", opens, attempts)
			}
			if opens, attempts, _, _ := b.shared.counts(); opens != tc.bOpens || attempts != tc.bAttempts {
				t.Errorf("pipeline b's map subtasks were opened %v times, last in attempts %v; want %v times, in %v", opens, attempts, tc.bOpens, tc.bAttempts)
			}
			if len(restores) != 1 || restores[0].Attempt != tc.restoredIn || restores[0].CheckpointID == 0 {
				t.Errorf("restores reported: %+v; want one of a checkpoint, in attempt %d", restores, tc.restoredIn)
			}
			for name, dir := range map[string]string{"a": j.outA, "b": j.outB} {
				got, err := filesink.ReadCommitted(dir, codec.JSON[int64]{})
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(got)
				if len(got) != records {
					t.Errorf("pipeline %s: %d records committed, want %d", name, len(got), records)
				}
				for i, v := range got {
					if v != int64(i) {
						t.Fatalf("pipeline %s: committed record %d is %d: not every record once", name, i, v)
					}
				}
			}
		})
	}
}

// spanningJob is what every process of TestRegionSpanningWorkersFailsOver
// builds: two pipelines datagen -> rebalance -> map -> file sink, no
// chaining.
type spanningJob struct {
	records    int64
	rate       float64
	cpDir      string
	outA, outB string
	a, b       *failingMapOnWorkers
	strategy   sluice.FailoverStrategy
}

func (j spanningJob) env(c cluster.Config, more ...sluice.Option) *sluice.Environment {
	env := regionsEnv("spanning-regions", j.cpDir, j.strategy, c, more...)
	for _, p := range []struct {
		name string
		fm   *failingMapOnWorkers
		out  string
	}{{"a", j.a, j.outA}, {"b", j.b, j.outB}} {
		gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(j.records), source.DatagenRate(j.rate))
		s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen-"+p.name, sluice.UID("gen-"+p.name))
		s = sluice.RichMap(s.Rebalance(), p.fm, sluice.Name("map-"+p.name), sluice.UID("map-"+p.name))
		sluice.SinkTo(s, filesink.New[int64](p.out, codec.JSON[int64]{}), sluice.Name("files-"+p.name), sluice.UID("files-"+p.name))
	}
	return env
}

// runOnTwoWorkers runs the job env builds on a coordinator and two workers
// of one slot, in this process, until it ends: the injected failure of
// shared must have fired once and restarted the job (or its region) once.
// It returns the restores the coordinator's listeners heard of.
func runOnTwoWorkers(t *testing.T, env func(cluster.Config, ...sluice.Option) *sluice.Environment, shared *mapShared) []sluice.RestoreInfo {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.SafetyNet)
	defer cancel()
	var restoresMu sync.Mutex
	var restores []sluice.RestoreInfo
	jb, err := env(cluster.Config{Role: cluster.RoleCoordinator, Listen: addr,
		HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second, SlotTimeout: 20 * time.Second},
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				shared.checkpointed.Store(true)
			}
		}),
		sluice.WithRestoreListener(func(r sluice.RestoreInfo) {
			restoresMu.Lock()
			defer restoresMu.Unlock()
			restores = append(restores, r)
		})).ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			c := cluster.Config{Role: cluster.RoleWorker, Coordinator: addr, Slots: 1,
				WorkerID: fmt.Sprintf("w%d", i), DataListen: "127.0.0.1:0", Host: "127.0.0.1",
				HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second}
			errs[i] = env(c).Execute(ctx)
		})
	}
	if err := jb.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	if !shared.fired.Load() {
		t.Fatal("the injected failure never fired")
	}
	if n := jb.Restarts(); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
	restoresMu.Lock()
	defer restoresMu.Unlock()
	return slices.Clone(restores)
}

// regionsEnv is the environment of the region failover tests' jobs on a
// cluster process c: parallelism 2, no chaining, 50 ms checkpoints into
// cpDir, 5 restarts 50 ms apart under strategy.
func regionsEnv(name, cpDir string, strategy sluice.FailoverStrategy, c cluster.Config, more ...sluice.Option) *sluice.Environment {
	return sluice.NewEnvironment(append([]sluice.Option{
		sluice.WithParallelism(2),
		sluice.WithJobName(name),
		sluice.WithChaining(false),
		sluice.WithBufferTimeout(2 * time.Millisecond),
		sluice.WithCheckpointing(50*time.Millisecond, cpDir),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(5, 50*time.Millisecond)),
		sluice.WithFailoverStrategy(strategy),
		cluster.With(c),
	}, more...)...)
}
