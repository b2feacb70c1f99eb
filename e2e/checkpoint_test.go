package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/checkpoint/storage/faultfs"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// A savepoint taken while the job runs, then stop-with-savepoint; the job
// resumed from that savepoint finishes the input, and the two runs
// together committed exactly the output of one run without a stop.
func TestStopWithSavepointAndResume(t *testing.T) {
	savepointStopResume(t)
}

// savepointStopResume runs a count job with opts (on top of checkpoints
// every 50 ms), takes a savepoint once records flow, stops it with a
// savepoint midway, resumes from that one with the default (heap) backend,
// and checks every count.
func savepointStopResume(t *testing.T, opts ...sluice.Option) {
	t.Helper()
	const records, keys = 6000, 20
	out, cpDir, spDir := t.TempDir(), t.TempDir(), t.TempDir()
	env, seen := countJob(out, records, keys, 4000, append(opts, sluice.WithCheckpointing(50*time.Millisecond, cpDir))...)
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	await(t, "records to flow", func() bool { return seen.Load() > 500 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sp1, err := job.TriggerSavepoint(ctx, spDir)
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := storage.LoadSnapshot(storage.OSFS{}, sp1); err != nil || snap.Metadata.Kind != storage.KindSavepoint {
		t.Fatalf("savepoint %s: %v (kind %v)", sp1, err, snap)
	}
	await(t, "more records", func() bool { return seen.Load() > 1500 })
	sp2, err := job.StopWithSavepoint(ctx, spDir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("stopped job: %v", err)
	}
	if job.Status().String() != "FINISHED" {
		t.Fatalf("status after stop-with-savepoint %s, want FINISHED", job.Status())
	}
	if n := seen.Load(); n >= records {
		t.Fatalf("the job read all %d records before it was stopped; the test needs a stop midway", n)
	}
	env2, _ := countJob(out, records, keys, 40000, sluice.WithCheckpointing(50*time.Millisecond, cpDir), sluice.WithRestoreFrom(sp2))
	mustExecute(t, env2)
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

// A job restored from an older checkpoint directory given by path.
func TestRestoreFromCheckpointPath(t *testing.T) {
	const records, keys = 4000, 10
	out, cpDir := t.TempDir(), t.TempDir()
	env, seen := countJob(out, records, keys, 4000, sluice.WithCheckpointing(30*time.Millisecond, cpDir),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Retention = checkpoint.RetainOnCancellation }))
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	await(t, "a checkpoint after some records", func() bool {
		st, ok := job.CheckpointStats()
		return ok && st.LatestCompleted != nil && seen.Load() > 300
	})
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, sluice.ErrJobCanceled) {
		t.Fatalf("cancel: %v", err)
	}
	// The checkpoint retained at the cancellation (later ones may have
	// subsumed the one seen above).
	st, ok := job.CheckpointStats()
	if !ok || st.LatestCompleted == nil {
		t.Fatal("no completed checkpoint in the statistics")
	}
	chk := filepath.Join(cpDir, job.ID(), "chk-"+itoa(st.LatestCompleted.ID))
	if _, err := os.Stat(filepath.Join(chk, "_metadata")); err != nil {
		t.Fatalf("retained checkpoint: %v", err)
	}
	env2, _ := countJob(out, records, keys, 40000, sluice.WithCheckpointing(30*time.Millisecond, cpDir), sluice.WithRestoreFrom(chk))
	mustExecute(t, env2)
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// When the newest checkpoint is corrupt, resuming refuses to fall back to
// the one before it (the newest one's transactions were committed) unless
// allowed, and then falls back.
func TestResumeFallsBackPastCorruptCheckpoint(t *testing.T) {
	const records, keys = 4000, 10
	out, cpDir := t.TempDir(), t.TempDir()
	env, seen := countJob(out, records, keys, 4000, sluice.WithCheckpointing(30*time.Millisecond, cpDir),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) {
			c.Retention = checkpoint.RetainOnCancellation
			c.RetainedCheckpoints = 2
		}))
	job := startUntil(t, context.Background(), env, "two retained checkpoints", seen, 3, 300)
	job.Cancel()
	_ = job.Wait()
	st, err := storage.New(storage.OSFS{}, cpDir, job.ID(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Recover()
	if err != nil || len(rec.Retained) < 2 {
		t.Fatalf("recover: %v, %d retained", err, len(rec.Retained))
	}
	newest, previous := rec.Retained[0], rec.Retained[1]
	// Tear the newest checkpoint's _metadata.
	md := filepath.Join(newest.Dir, "_metadata")
	data, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(md, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	// The torn checkpoint had committed transactions (the file sink's):
	// falling back past it would write their output again, so by default
	// the restore is refused, naming the checkpoint and the file.
	env1, _ := countJob(out, records, keys, 4000, sluice.WithCheckpointing(30*time.Millisecond, cpDir))
	_, err = env1.ExecuteAsync(context.Background())
	if !errors.Is(err, sluice.ErrFallbackPastCommitted) || !strings.Contains(err.Error(), "checkpoint "+itoa(newest.Metadata.CheckpointID)) ||
		!strings.Contains(err.Error(), md) {
		t.Fatalf("resume past a torn checkpoint: %v; want ErrFallbackPastCommitted naming checkpoint %d and %s", err, newest.Metadata.CheckpointID, md)
	}
	// Allowed, it falls back, logged and counted.
	env2, _ := countJob(out, records, keys, 4000, sluice.WithCheckpointing(30*time.Millisecond, cpDir), sluice.WithAllowFallbackPastCommitted())
	job2, err := env2.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := job2.FallbacksPastCommitted(); n != 1 {
		t.Fatalf("%d fallbacks past a committed checkpoint counted, want 1", n)
	}
	var restored int64 = -1
	await(t, "restore statistics", func() bool {
		s, ok := job2.CheckpointStats()
		if ok && s.LatestRestored != nil {
			restored = s.LatestRestored.ID
			return true
		}
		return false
	})
	if err := job2.Wait(); err != nil {
		t.Fatal(err)
	}
	if restored != previous.Metadata.CheckpointID {
		t.Fatalf("restored checkpoint %d, want the previous one %d (the newest, %d, is torn)",
			restored, previous.Metadata.CheckpointID, newest.Metadata.CheckpointID)
	}
	// The output the newest checkpoint committed is produced again: a lost
	// completed checkpoint costs exactly-once, as in Flink. Nothing is lost.
	highest := map[int64]int64{}
	for _, kc := range readCounts(t, out) {
		highest[kc.Key] = max(highest[kc.Key], kc.Count)
	}
	for k, n := range expectedCounts(records, keys) {
		if highest[k] != n {
			t.Errorf("key %d reached count %d, want %d", k, highest[k], n)
		}
	}
}

// Checkpoints that fail to write are counted; the job fails once more fail
// in a row than tolerated, with an error that says so and names the cause.
func TestCheckpointStorageFailuresCounted(t *testing.T) {
	fsys := faultfs.New(storage.OSFS{})
	env := newEnv(sluice.WithParallelism(1),
		sluice.WithCheckpointing(10*time.Millisecond, t.TempDir()),
		sluice.WithRestartStrategy(sluice.NoRestart()),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.TolerableFailed = 2 }),
		sluice.WithCheckpointStorageFS(fsys))
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenRate(1000))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen")
	sluice.SinkTo(sluice.Reduce(sluice.KeyBy(s, func(v int64) int64 { return v % 3 }),
		func(a, b int64) (int64, error) { return a + b, nil }), sink.NewDiscard[int64]())
	fsys.Inject(faultfs.Rule{Op: faultfs.OpCreate, PathContains: "_metadata", Err: faultfs.ErrDiskFull})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = job.Wait()
	if !errors.Is(err, checkpoint.ErrTolerableFailuresExceeded) {
		t.Fatalf("job ended with %v, want the tolerable failure threshold exceeded", err)
	}
	if !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("error %q does not name the cause", err)
	}
	if len(fsys.Injected()) < 3 {
		t.Fatalf("%d failures injected, want 3 (2 tolerated, then one more)", len(fsys.Injected()))
	}
}

// timerAtEnd registers, per key, an event-time timer far in the future and
// emits -key when it fires.
type timerAtEnd struct{}

func (timerAtEnd) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, out sluice.Collector[int64]) error {
	ctx.Timers().RegisterEventTimeTimer(1 << 50)
	return nil
}

func (timerAtEnd) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, out sluice.Collector[int64]) error {
	out.Collect(-ctx.Key() - 1)
	return nil
}

// Stop-with-savepoint --drain ends event time first, so every event-time
// timer fires before the job stops; without drain none does.
func TestStopWithSavepointDrain(t *testing.T) {
	for _, drain := range []bool{true, false} {
		t.Run(map[bool]string{true: "drain", false: "no-drain"}[drain], func(t *testing.T) {
			env := newEnv(sluice.WithParallelism(2), sluice.WithCheckpointing(time.Hour, t.TempDir()),
				sluice.WithAutoWatermarkInterval(5*time.Millisecond))
			gen := source.NewDatagen(func(i int64) int64 { return i % 7 }, source.DatagenRate(2000),
				source.DatagenTimestamps(func(i int64) int64 { return i }))
			s := sluice.FromSource(env, gen, sluice.ForMonotonousTimestamps[int64](), "gen")
			fired := sluice.Process[int64, int64, int64](sluice.KeyBy(s, func(v int64) int64 { return v }), timerAtEnd{})
			c := sink.NewCollect[int64]()
			sluice.SinkTo(fired, c)
			job, err := env.ExecuteAsync(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			await(t, "the job to run", func() bool {
				for _, m := range job.Metrics() {
					if m.RecordsIn > 50 {
						return true
					}
				}
				return false
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := job.StopWithSavepoint(ctx, t.TempDir(), drain); err != nil {
				t.Fatal(err)
			}
			if err := job.Wait(); err != nil {
				t.Fatal(err)
			}
			got := c.Values()
			if drain && len(got) != 7 {
				t.Fatalf("drained: %d timers fired (%v), want one per key (7)", len(got), got)
			}
			if !drain && len(got) != 0 {
				t.Fatalf("not drained: timers fired %v", got)
			}
		})
	}
}

// Checkpoint counts and history span restarts, as Flink's do.
func TestCheckpointStatsSpanRestarts(t *testing.T) {
	// The crash comes late, so the second attempt takes far fewer
	// checkpoints than the first: its own count alone would be smaller.
	cr := &crashes{thresholds: []int64{2900}}
	env := newEnv(sluice.WithParallelism(1), sluice.WithCheckpointing(10*time.Millisecond, t.TempDir()),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(3, time.Millisecond)))
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(3000), source.DatagenRate(6000))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen")
	s = sluice.Map(s, func(v int64) (int64, error) {
		if cr.hit() {
			return 0, errInjectedCrash
		}
		return v, nil
	})
	sluice.SinkTo(s, sink.NewDiscard[int64]())
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var before int
	await(t, "checkpoints before the crash", func() bool {
		if cr.fired.Load() > 0 {
			return true
		}
		if st, ok := job.CheckpointStats(); ok && job.Restarts() == 0 {
			before = st.Completed
		}
		return false
	})
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	st, ok := job.CheckpointStats()
	if !ok || job.Restarts() != 1 {
		t.Fatalf("stats ok=%v, restarts %d", ok, job.Restarts())
	}
	if before < 5 || st.Completed <= before || st.LatestRestored == nil {
		t.Fatalf("after the restart: %d completed (had %d before), restored %v", st.Completed, before, st.LatestRestored)
	}
}
