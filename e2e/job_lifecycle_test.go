package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/checkpoint/storage/faultfs"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/runtime/lifecycle"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// startUntil starts env's job under ctx and waits (the safety net aside,
// for ever) until it completed at least checkpoints checkpoints and seen
// passed records: a run with something to restore and more to read.
func startUntil(t *testing.T, ctx context.Context, env *sluice.Environment, what string, seen *atomic.Int64, checkpoints int, records int64) *sluice.Job {
	t.Helper()
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	await(t, what, func() bool {
		st, ok := job.CheckpointStats()
		if ok && st.Completed >= checkpoints && seen.Load() > records {
			return true
		}
		select {
		case <-job.Done():
			t.Fatalf("the job ended (%v) before %s (%d checkpoints, %d records seen): its input must outlast them", job.Wait(), what, st.Completed, seen.Load())
		default:
		}
		return false
	})
	return job
}

// jobDir is the job's directory under the checkpoint directory.
func jobDir(t *testing.T, cpDir string, job *sluice.Job) *storage.Storage {
	t.Helper()
	st, err := storage.New(storage.OSFS{}, cpDir, job.ID(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func completedOnDisk(t *testing.T, st *storage.Storage) []int64 {
	t.Helper()
	rec, _ := st.Recover()
	var ids []int64
	for _, s := range rec.Retained {
		ids = append(ids, s.Metadata.CheckpointID)
	}
	slices.Sort(ids)
	return ids
}

// A bounded job that finished, started again, does nothing: its result
// says FINISHED, so it reads nothing and commits nothing more (before, it
// found no checkpoint, the default retention having deleted them, and
// committed the whole output a second time). The deprecated
// WithResumeFromLatestCheckpoint changes nothing; WithFreshStart runs it
// anew.
func TestFinishedJobIsNotRunAgain(t *testing.T) {
	const records, keys = 2000, 10
	out, cpDir := t.TempDir(), t.TempDir()
	opts := []sluice.Option{sluice.WithCheckpointing(20*time.Millisecond, cpDir)}
	env, _ := countJob(out, records, keys, 20000, opts...)
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	st := jobDir(t, cpDir, job)
	res, err := st.ReadJobResult()
	if err != nil || res == nil || res.Status != storage.ResultFinished || !res.Clean || res.RunID != job.RunID() {
		t.Fatalf("result of the finished job: %+v, %v; want FINISHED, clean, run %s", res, err, job.RunID())
	}
	if ids := completedOnDisk(t, st); len(ids) != 0 {
		t.Fatalf("checkpoints %v kept after the job finished (every retention deletes them)", ids)
	}
	first := len(readCounts(t, out))
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))

	for run := 2; run <= 3; run++ {
		runOpts := opts
		if run == 3 {
			//lint:ignore SA1019 the deprecated option is what the test gives
			runOpts = append(slices.Clone(opts), sluice.WithResumeFromLatestCheckpoint())
		}
		env2, seen := countJob(out, records, keys, 20000, runOpts...)
		job2, err := env2.ExecuteAsync(context.Background())
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if err := job2.Wait(); err != nil {
			t.Fatalf("run %d of a finished job: %v, want nil", run, err)
		}
		if prev, ok := job2.PreviousResult(); !ok || prev.Status != storage.ResultFinished {
			t.Fatalf("run %d: previous result %+v, %v", run, prev, ok)
		}
		if n := seen.Load(); n != 0 || job2.Status() != runtime.JobFinished {
			t.Fatalf("run %d read %d records (status %v), want none", run, n, job2.Status())
		}
		if n := len(readCounts(t, out)); n != first {
			t.Fatalf("run %d: %d records committed in all, want %d: the finished job ran again", run, n, first)
		}
	}

	out2 := t.TempDir()
	envAgain, _ := countJob(out2, records, keys, 20000, sluice.WithCheckpointing(20*time.Millisecond, cpDir), sluice.WithFreshStart())
	mustExecute(t, envAgain)
	checkExactCounts(t, readCounts(t, out2), expectedCounts(records, keys))
}

// Cancelling the context suspends the job: its latest checkpoint stays (the
// default retention would delete it on a cancel), no result is recorded,
// and the next run resumes from it with exact output. Cancel, in contrast,
// records CANCELED and deletes the checkpoints; a resume then has nothing
// to resume and is refused without an explicit fresh start.
func TestSuspendKeepsCheckpointsCancelDeletesThem(t *testing.T) {
	const records, keys = 6000, 10
	out, cpDir := t.TempDir(), t.TempDir()
	opts := []sluice.Option{sluice.WithCheckpointing(20*time.Millisecond, cpDir)}
	env, seen := countJob(out, records, keys, 4000, opts...)
	ctx, suspend := context.WithCancel(context.Background())
	defer suspend()
	job := startUntil(t, ctx, env, "checkpoints and records", seen, 2, 500)
	suspend()
	if err := job.Wait(); !errors.Is(err, sluice.ErrJobSuspended) || job.Status() != runtime.JobSuspended {
		t.Fatalf("suspended job: %v, %v", err, job.Status())
	}
	st := jobDir(t, cpDir, job)
	if ids := completedOnDisk(t, st); len(ids) == 0 {
		t.Fatal("the suspended job's checkpoints were deleted")
	}
	if res, err := st.ReadJobResult(); res != nil || err != nil {
		t.Fatalf("a suspended job recorded a result: %+v, %v", res, err)
	}
	if seen.Load() >= records {
		t.Fatal("the first run read everything; the test needs a resume midway")
	}

	// Resume, then cancel: CANCELED, checkpoints gone.
	restored := atomic.Int64{}
	env2, seen2 := countJob(out, records, keys, 4000, append(opts, sluice.WithRestoreListener(func(ri sluice.RestoreInfo) { restored.Store(ri.CheckpointID) }))...)
	job2 := startUntil(t, context.Background(), env2, "the resumed run's checkpoints", seen2, 1, 100)
	if restored.Load() == 0 {
		t.Fatal("the resumed run restored nothing")
	}
	job2.Cancel()
	if err := job2.Wait(); !errors.Is(err, sluice.ErrJobCanceled) {
		t.Fatalf("cancel: %v", err)
	}
	if ids := completedOnDisk(t, st); len(ids) != 0 {
		t.Fatalf("checkpoints %v kept after Cancel with the default retention DELETE_ON_CANCELLATION", ids)
	}
	res, err := st.ReadJobResult()
	if err != nil || res == nil || res.Status != storage.ResultCanceled || !res.Clean {
		t.Fatalf("result after cancel: %+v, %v", res, err)
	}
	env3, _ := countJob(out, records, keys, 4000, opts...)
	if _, err := env3.ExecuteAsync(context.Background()); !errors.Is(err, sluice.ErrJobTerminated) || !strings.Contains(err.Error(), "CANCELED") {
		t.Fatalf("resume of a cancelled job without checkpoints: %v; want ErrJobTerminated naming CANCELED", err)
	}
}

// A suspended run, then the same job restarted until it finishes: the
// output equals one run's, whatever the number of suspensions.
func TestRepeatedSuspensionsExact(t *testing.T) {
	const records, keys = 6000, 7
	out, cpDir := t.TempDir(), t.TempDir()
	opts := []sluice.Option{sluice.WithCheckpointing(15*time.Millisecond, cpDir)}
	var total int64
	for i := 0; ; i++ {
		env, seen := countJob(out, records, keys, 8000, opts...)
		ctx, suspend := context.WithCancel(context.Background())
		job, err := env.ExecuteAsync(ctx)
		if err != nil {
			suspend()
			t.Fatal(err)
		}
		if i < 4 {
			target := int64(300 + 200*i)
			await(t, "records", func() bool { return seen.Load() > target || job.Status() != runtime.JobRunning })
			suspend()
		}
		err = job.Wait()
		suspend()
		total += seen.Load()
		if err == nil {
			break
		}
		if !errors.Is(err, sluice.ErrJobSuspended) {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
	t.Logf("%d records read across the runs for %d in the input", total, records)
}

// A second job on the same job directory is refused while the first runs,
// with an error naming the holder.
func TestSecondRunOfAJobIsRefused(t *testing.T) {
	cpDir := t.TempDir()
	env, _ := countJob(t.TempDir(), 1<<40, 5, 1000, sluice.WithCheckpointing(50*time.Millisecond, cpDir), sluice.WithJobName("locked-job"))
	job := mustStart(t, env)
	env2, _ := countJob(t.TempDir(), 1<<40, 5, 1000, sluice.WithCheckpointing(50*time.Millisecond, cpDir), sluice.WithJobName("locked-job"))
	_, err := env2.ExecuteAsync(context.Background())
	if !errors.Is(err, sluice.ErrJobLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), job.RunID()) {
		t.Fatalf("second run: %v; want ErrJobLocked naming pid %d and run %s", err, os.Getpid(), job.RunID())
	}
	job.Cancel()
	_ = job.Wait()
	// Released: the job starts again (a cancelled job needs the explicit
	// choice).
	env3, _ := countJob(t.TempDir(), 100, 5, 0, sluice.WithCheckpointing(50*time.Millisecond, cpDir), sluice.WithJobName("locked-job"), sluice.WithFreshStart())
	mustExecute(t, env3)
}

// Unnamed jobs of different operators do not share a directory; a named
// job's id is its name.
func TestJobIDs(t *testing.T) {
	mk := func(uid string, opts ...sluice.Option) string {
		env := newEnv(opts...)
		s := sluice.FromSource(env, source.FromSlice([]int64{1}), sluice.NoWatermarks[int64](), "src", sluice.UID(uid))
		sluice.SinkTo(s, sink.NewDiscard[int64]())
		j, err := env.ExecuteAsync(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Wait(); err != nil {
			t.Fatal(err)
		}
		return j.ID()
	}
	a, b := mk("a"), mk("b")
	if a == b || !strings.HasPrefix(a, "sluice-job-") {
		t.Fatalf("unnamed jobs of different operators: ids %q and %q", a, b)
	}
	if again := mk("a"); again != a {
		t.Fatalf("the same unnamed job got ids %q and %q", a, again)
	}
	if id := mk("a", sluice.WithJobName("orders / enrich")); id != "orders-enrich" {
		t.Fatalf("named job id %q", id)
	}
	if id := mk("a", sluice.WithJobName("x"), sluice.WithJobID("deploy-7")); id != "deploy-7" {
		t.Fatalf("job id %q, want the one set", id)
	}
	env := newEnv(sluice.WithJobID("a/b"))
	sluice.SinkTo(sluice.FromSource(env, source.FromSlice([]int64{1}), sluice.NoWatermarks[int64](), "src"), sink.NewDiscard[int64]())
	if _, err := env.ExecuteAsync(context.Background()); !errors.Is(err, sluice.ErrInvalidOption) || !strings.Contains(err.Error(), "a/b") {
		t.Fatalf("job id with a slash: %v", err)
	}
}

// failOnce fails the job once, when the shared counter reaches at.
type failOnce struct {
	at   atomic.Int64
	n    atomic.Int64
	done atomic.Bool
}

func newFailOnce(at int64) *failOnce {
	f := &failOnce{}
	f.at.Store(at)
	return f
}

func (f *failOnce) hit() bool {
	return f.n.Add(1) == f.at.Load() && f.done.CompareAndSwap(false, true)
}

// suspendedCountRun runs countJob into cpDir until it completed two
// checkpoints and read 300 records, then suspends it, and returns the job,
// its directory and the completed checkpoints it left (at least one).
func suspendedCountRun(t *testing.T, cpDir string, records, keys int64) (*sluice.Job, *storage.Storage, []int64) {
	t.Helper()
	env, seen := countJob(t.TempDir(), records, keys, 3000, sluice.WithCheckpointing(20*time.Millisecond, cpDir))
	ctx, suspend := context.WithCancel(context.Background())
	defer suspend()
	job := startUntil(t, ctx, env, "checkpoints", seen, 2, 300)
	suspend()
	_ = job.Wait()
	st := jobDir(t, cpDir, job)
	ids := completedOnDisk(t, st)
	if len(ids) == 0 {
		t.Fatal("the first run left no checkpoint")
	}
	return job, st, ids
}

// A fresh run (WithFreshStart) in a directory holding an earlier run's
// checkpoints never restores them, even when it fails before its own
// first checkpoint; and it leaves them on disk.
func TestFreshRunNeverRestoresAnotherRunsCheckpoint(t *testing.T) {
	const records, keys = 3000, 10
	cpDir := t.TempDir()
	job, st, old := suspendedCountRun(t, cpDir, records, keys)

	// The second run fails at its 50th record, long before its first
	// checkpoint (1 min interval), then restarts.
	out := t.TempDir()
	f := newFailOnce(50)
	var restores []int64
	var mu sync.Mutex
	r2 := countRun(out, records, keys, 0, sluice.WithCheckpointing(time.Minute, cpDir), sluice.WithFreshStart(),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(3, time.Millisecond)),
		sluice.WithRestoreListener(func(ri sluice.RestoreInfo) { mu.Lock(); restores = append(restores, ri.CheckpointID); mu.Unlock() }))
	r2.fail = func() error {
		if f.hit() {
			return errors.New("injected failure")
		}
		return nil
	}
	col := sink.NewCollect[KeyCount]()
	r2.sink = col
	env2 := r2.env()
	job2 := mustStart(t, env2)
	if err := job2.Wait(); err != nil {
		t.Fatal(err)
	}
	if job2.ID() != job.ID() {
		t.Fatalf("the two runs have ids %q and %q: the test needs one directory", job.ID(), job2.ID())
	}
	if job2.Restarts() != 1 {
		t.Fatalf("%d restarts, want 1", job2.Restarts())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(restores) != 0 {
		t.Fatalf("the fresh run restored checkpoints %v of the earlier run", restores)
	}
	// Every key counted from zero: the last count per key is its total.
	last := map[int64]int64{}
	for _, kc := range col.Values() {
		last[kc.Key] = max(last[kc.Key], kc.Count)
	}
	for k, n := range expectedCounts(records, keys) {
		if last[k] < n {
			t.Errorf("key %d counted to %d, want at least %d", k, last[k], n)
		}
	}
	for _, id := range old {
		if _, err := os.Stat(filepath.Join(st.CheckpointDir(id), "_metadata")); err != nil {
			t.Errorf("the earlier run's checkpoint %d was deleted by the fresh run: %v", id, err)
		}
	}
}

// RocksDB incremental: a run restored (NO_CLAIM) from an older retained
// checkpoint of the same job deletes nothing that checkpoint references,
// and its own checkpoints reference none of its files; killed (here:
// suspended) after several checkpoints, its latest one restores with every
// count exact. Before, the new run's checkpoints referenced the restored
// checkpoint's shared files and the retention then deleted them.
func TestRocksDBNoClaimRestoreFromOlderCheckpoint(t *testing.T) {
	const records, keys = 9000, 20
	out, cpDir, local := t.TempDir(), t.TempDir(), t.TempDir()
	backend := sluice.WithStateBackend(rocksdb.Factory(local, rocksdb.Options{}))
	retain := sluice.WithCheckpointConfig(func(c *checkpoint.Config) {
		c.Retention, c.RetainedCheckpoints = checkpoint.RetainOnCancellation, 3
	})
	env, seen := countJob(out, records, keys, 4000, backend, retain, sluice.WithCheckpointing(20*time.Millisecond, cpDir))
	job := startUntil(t, context.Background(), env, "three retained checkpoints", seen, 4, 1500)
	job.Cancel()
	_ = job.Wait()
	st := jobDir(t, cpDir, job)
	rec, err := st.Recover()
	if err != nil || len(rec.Retained) < 3 {
		t.Fatalf("recover: %v, %d retained", err, len(rec.Retained))
	}
	oldest := rec.Retained[len(rec.Retained)-1]
	oldFiles := oldest.Metadata.SharedFiles()
	if len(oldFiles) == 0 {
		t.Fatal("the retained checkpoint is not incremental")
	}

	// Restore the oldest retained one: a rollback, so the output committed
	// after it is written again (the counts themselves stay exact).
	env2, seen2 := countJob(out, records, keys, 4000, backend, sluice.WithCheckpointing(20*time.Millisecond, cpDir),
		sluice.WithRestoreFrom(oldest.Dir), sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.RetainedCheckpoints = 1 }))
	ctx, suspend := context.WithCancel(context.Background())
	defer suspend()
	job2, err := env2.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var firstOwn int64
	await(t, "several checkpoints of the restored run", func() bool {
		s, ok := job2.CheckpointStats()
		if ok && s.LatestCompleted != nil && firstOwn == 0 {
			firstOwn = s.LatestCompleted.ID
		}
		return ok && s.Completed >= 4 && seen2.Load() > 500
	})
	suspend()
	if err := job2.Wait(); !errors.Is(err, sluice.ErrJobSuspended) {
		t.Fatal(err)
	}
	if err := oldest.Verify(); err != nil {
		t.Fatalf("the NO_CLAIM restore source lost files: %v", err)
	}
	rec2, err := st.Recover()
	if err != nil || len(rec2.Unusable) != 0 {
		t.Fatalf("after the restored run: %v, unusable %+v", err, rec2.Unusable)
	}
	for _, s := range rec2.Retained {
		if s.Metadata.RunID != job2.RunID() {
			continue
		}
		for _, f := range s.Metadata.SharedFiles() {
			if slices.Contains(oldFiles, f) {
				t.Fatalf("checkpoint %d of the NO_CLAIM run references %s of the restore source", s.Metadata.CheckpointID, f)
			}
		}
	}
	if latest := rec2.Latest(); latest.Metadata.RunID != job2.RunID() {
		t.Fatalf("the latest checkpoint %d is of run %s, want the restored run %s", latest.Metadata.CheckpointID, latest.Metadata.RunID, job2.RunID())
	}
	env3, _ := countJob(out, records, keys, 40000, backend, sluice.WithCheckpointing(20*time.Millisecond, cpDir))
	mustExecute(t, env3)
	// Every key ends at its exact total, and every count from 1 to it was
	// committed (those after the restored checkpoint twice: the rollback).
	got := readCounts(t, out)
	last := map[int64]int64{}
	have := map[KeyCount]bool{}
	for _, kc := range got {
		have[kc] = true
		last[kc.Key] = max(last[kc.Key], kc.Count)
	}
	for k, n := range expectedCounts(records, keys) {
		if last[k] != n {
			t.Errorf("key %d ends at %d, want %d", k, last[k], n)
		}
		for c := int64(1); c <= n; c++ {
			if !have[KeyCount{Key: k, Count: c}] {
				t.Fatalf("count %d of key %d never committed", c, k)
			}
		}
	}
}

// panicFS panics when a state file (not _metadata) is created or linked
// while armed: RocksDB's new SST files are hard links into the storage
// when it is on the same file system, the others copies.
type panicFS struct {
	storage.OSFS
	armed atomic.Bool
	hits  atomic.Int64
}

func (p *panicFS) check(name string) {
	if p.armed.Load() && !strings.Contains(filepath.Base(name), "_metadata") && !strings.HasPrefix(filepath.Base(name), "job-result") {
		p.hits.Add(1)
		panic("injected panic writing " + name)
	}
}

func (p *panicFS) Create(name string) (storage.File, error) {
	p.check(name)
	return p.OSFS.Create(name)
}

func (p *panicFS) Link(oldname, newname string) error {
	p.check(newname)
	return p.OSFS.Link(oldname, newname)
}

// A panic in a checkpoint's asynchronous part declines that checkpoint
// (counted as failed) instead of killing the process; once the cause is
// gone checkpoints complete again and the output is exact.
func TestAsyncPanicDeclinesCheckpoint(t *testing.T) {
	const records, keys = 4000, 10
	out, cpDir := t.TempDir(), t.TempDir()
	pfs := &panicFS{}
	// RocksDB's incremental checkpoints write files (the heap's small state
	// would be inline in _metadata).
	env, seen := countJob(out, records, keys, 4000, sluice.WithCheckpointing(20*time.Millisecond, cpDir),
		sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{})),
		sluice.WithCheckpointStorageFS(pfs),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.TolerableFailed = 1000 }))
	job := startUntil(t, context.Background(), env, "a checkpoint", seen, 1, 100)
	pfs.armed.Store(true)
	await(t, "failed checkpoints", func() bool {
		s, ok := job.CheckpointStats()
		return ok && s.Failed >= 2 && pfs.hits.Load() >= 2
	})
	pfs.armed.Store(false)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if job.Restarts() != 0 {
		t.Fatalf("%d restarts: a panicking checkpoint failed the job", job.Restarts())
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

// Shared files no _metadata references (a crashed upload) are deleted
// when the job starts.
func TestStartupDeletesUnreferencedSharedFiles(t *testing.T) {
	cpDir := t.TempDir()
	env, _ := countJob(t.TempDir(), 100, 5, 0, sluice.WithCheckpointing(time.Second, cpDir), sluice.WithJobName("gc-job"))
	shared := filepath.Join(cpDir, "gc-job", "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(shared, "count-0-0123456789abcdef")
	if err := os.WriteFile(junk, []byte("half an upload"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustExecute(t, env)
	if _, err := os.Stat(junk); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unreferenced shared file kept: %v", err)
	}
}

// stuckError fails a job and says no restart may mend it.
type stuckError struct{}

func (stuckError) Error() string          { return "lost for good" }
func (stuckError) SuppressRestarts() bool { return true }

// An error that suppresses restarts fails the job once, whatever the
// restart strategy allows.
func TestErrorThatSuppressesRestarts(t *testing.T) {
	env := newEnv(sluice.WithRestartStrategy(sluice.FixedDelayRestart(10, time.Millisecond)),
		sluice.WithCheckpointing(20*time.Millisecond, t.TempDir()))
	s := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(1000)), sluice.NoWatermarks[int64](), "gen")
	s = sluice.Map(s, func(v int64) (int64, error) {
		if v == 10 {
			return 0, fmt.Errorf("record %d: %w", v, stuckError{})
		}
		return v, nil
	})
	sluice.SinkTo(s, sink.NewDiscard[int64]())
	job := mustStart(t, env)
	err := job.Wait()
	var se stuckError
	if !errors.As(err, &se) || job.Restarts() != 0 || job.Status() != runtime.JobFailed {
		t.Fatalf("job: %v, %d restarts, %v; want one failure with the error and no restart", err, job.Restarts(), job.Status())
	}
}

// A task that ignores cancellation does not hold Cancel up beyond the
// cancellation timeout.
func TestCancellationTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := newOnce()
	env := newEnv(sluice.WithTaskCancellationTimeout(100 * time.Millisecond))
	s := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }), sluice.NoWatermarks[int64](), "gen")
	s = sluice.Map(s, func(v int64) (int64, error) {
		if v == 5 {
			entered.close()
			<-release // blocks, deaf to cancellation
		}
		return v, nil
	})
	sluice.SinkTo(s, sink.NewDiscard[int64]())
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	awaitClosed(t, "the stuck record", entered.C())
	job.Cancel()
	awaitClosed(t, "Wait after the cancellation timeout", job.Done())
	if err := job.Wait(); !errors.Is(err, sluice.ErrJobCanceled) {
		t.Fatalf("Wait: %v", err)
	}
}

// A task deaf to cancellation while the job fails over: past the
// cancellation timeout the job fails for good with
// ErrTaskCancellationTimeout naming the task, instead of hanging or
// restarting next to the stuck task.
func TestCancellationTimeoutDuringFailover(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := newOnce()
	env := newEnv(sluice.WithParallelism(2), sluice.WithTaskCancellationTimeout(100*time.Millisecond),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(5, time.Millisecond)))
	s := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }), sluice.NoWatermarks[int64](), "gen")
	s = sluice.Map(s.Rebalance(), func(v int64) (int64, error) {
		switch v {
		case 3:
			entered.close()
			<-release
		case 100:
			<-entered.C()
			return 0, errors.New("injected failure")
		}
		return v, nil
	}, sluice.Name("stuck-or-failing"))
	sluice.SinkTo(s, sink.NewDiscard[int64]())
	job := mustStart(t, env)
	awaitClosed(t, "the job's end", job.Done())
	err := job.Wait()
	if !errors.Is(err, sluice.ErrTaskCancellationTimeout) || !strings.Contains(err.Error(), "stuck-or-failing") ||
		!strings.Contains(err.Error(), "injected failure") || job.Restarts() != 0 {
		t.Fatalf("job: %v (%d restarts); want ErrTaskCancellationTimeout naming the stuck task and the failure, no restart", err, job.Restarts())
	}
}

// CLAIM: the run owns the checkpoint it was restored from and deletes it
// once its own checkpoints subsume it; NO_CLAIM (the default, above) keeps
// it.
func TestClaimModeDeletesTheRestoredCheckpointOnceSubsumed(t *testing.T) {
	const records, keys = 4000, 10
	out, cpDir := t.TempDir(), t.TempDir()
	keep := sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Retention = checkpoint.RetainOnCancellation })
	env, seen := countJob(out, records, keys, 4000, keep, sluice.WithCheckpointing(20*time.Millisecond, cpDir))
	job := startUntil(t, context.Background(), env, "a checkpoint", seen, 1, 300)
	job.Cancel()
	_ = job.Wait()
	st := jobDir(t, cpDir, job)
	ids := completedOnDisk(t, st)
	if len(ids) != 1 {
		t.Fatalf("retained %v, want one checkpoint", ids)
	}
	restored := st.CheckpointDir(ids[0])
	env2, _ := countJob(out, records, keys, 40000, sluice.WithCheckpointing(20*time.Millisecond, cpDir),
		sluice.WithRestoreFrom(restored), sluice.WithClaimMode(sluice.Claim))
	mustExecute(t, env2)
	if _, err := os.Stat(restored); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the claimed checkpoint %s is still there: %v", restored, err)
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

// The run's only checkpoint is corrupt when a task fails: restarting from
// what the run started from (here: nothing) would write that checkpoint's
// committed output again, so the job fails for good with
// ErrFallbackPastCommitted naming it, instead of silently starting over.
func TestFailoverRefusesToFallBackPastCommittedOutput(t *testing.T) {
	const records, keys = 1 << 40, 10
	out, cpDir := t.TempDir(), t.TempDir()
	ffs := faultfs.New(storage.OSFS{})
	f := newFailOnce(1 << 62)
	env := newEnv(sluice.WithParallelism(2), sluice.WithCheckpointing(20*time.Millisecond, cpDir), sluice.WithCheckpointStorageFS(ffs),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(5, time.Millisecond)),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.TolerableFailed = 1 << 20 }))
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenRate(5000))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen", sluice.UID("gen"))
	s = sluice.Map(s, func(v int64) (int64, error) {
		if f.hit() {
			return 0, errors.New("injected failure")
		}
		return v, nil
	}, sluice.UID("maybe-fail"))
	counts := sluice.Process[int64, int64, KeyCount](sluice.KeyBy(s, func(v int64) int64 { return v % keys }),
		&runningCount{}, sluice.Name("count"), sluice.UID("count"))
	sluice.SinkTo(counts, filesink.New[KeyCount](out, codec.JSON[KeyCount]{}), sluice.Name("files"), sluice.UID("files"))
	job := mustStart(t, env)
	var done int64
	await(t, "a completed checkpoint", func() bool {
		st, ok := job.CheckpointStats()
		if ok && st.LatestCompleted != nil {
			done = st.LatestCompleted.ID
		}
		return done > 0
	})
	// No later checkpoint completes; then the completed one rots.
	ffs.Inject(faultfs.Rule{Op: faultfs.OpRename, PathContains: "_metadata"})
	await(t, "a checkpoint failing after the fault", func() bool {
		st, ok := job.CheckpointStats()
		return ok && st.Failed > 0 && st.LatestCompleted != nil
	})
	st, _ := job.CheckpointStats()
	latest := st.LatestCompleted.ID
	md := filepath.Join(cpDir, job.ID(), fmt.Sprintf("chk-%d", latest), "_metadata")
	data, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(md, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	f.at.Store(f.n.Load() + 10) // fail soon
	err = job.Wait()
	if !errors.Is(err, sluice.ErrFallbackPastCommitted) || !strings.Contains(err.Error(), fmt.Sprintf("checkpoint %d", latest)) {
		t.Fatalf("job: %v; want ErrFallbackPastCommitted naming checkpoint %d", err, latest)
	}
	if job.Restarts() != 1 {
		t.Fatalf("%d restarts, want the one that found the corrupt checkpoint", job.Restarts())
	}
}

// A disk full when the job's result is written: nothing is deleted (the
// retention waits for a durable result), so a resumed run finds the final
// checkpoint, finishes at once and commits nothing twice.
func TestResultWriteFailureDeletesNothing(t *testing.T) {
	const records, keys = 2000, 10
	out, cpDir := t.TempDir(), t.TempDir()
	ffs := faultfs.New(storage.OSFS{})
	ffs.Inject(faultfs.Rule{Op: faultfs.OpCreate, PathContains: "job-result", Err: faultfs.ErrDiskFull})
	env, _ := countJob(out, records, keys, 20000, sluice.WithCheckpointing(20*time.Millisecond, cpDir), sluice.WithCheckpointStorageFS(ffs))
	job := mustStart(t, env)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(ffs.Injected()) == 0 {
		t.Fatal("the fault never fired: the test did not test a failed result write")
	}
	st := jobDir(t, cpDir, job)
	if ids := completedOnDisk(t, st); len(ids) == 0 {
		t.Fatal("checkpoints deleted although the job's result could not be written")
	}
	if res, err := st.ReadJobResult(); res != nil || err != nil {
		t.Fatalf("result %+v, %v; want none", res, err)
	}
	committed := len(readCounts(t, out))
	env2, seen := countJob(out, records, keys, 20000, sluice.WithCheckpointing(20*time.Millisecond, cpDir))
	mustExecute(t, env2)
	if n := len(readCounts(t, out)); n != committed || seen.Load() != 0 {
		t.Fatalf("the resumed run read %d records and committed %d in all, want 0 and %d", seen.Load(), n, committed)
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

// Resuming is the default, so starting from no state needs saying: a job
// whose completed checkpoints all turn out unusable (here every _metadata
// torn) is refused with ErrFreshStartRefused naming the newest
// checkpoint's directory and the option, rather than started from no
// state (before, a start without options began from nothing whatever the
// directory held). WithFreshStart then runs it from no state, with a log
// line saying what it leaves alone, and its output is one whole run's.
func TestFreshStartRefusedWhileCheckpointsExist(t *testing.T) {
	const records, keys = 3000, 10
	cpDir := t.TempDir()
	_, st, ids := suspendedCountRun(t, cpDir, records, keys)
	for _, id := range ids {
		md := filepath.Join(st.CheckpointDir(id), "_metadata")
		data, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(md, data[:len(data)/2], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	newest := st.CheckpointDir(slices.Max(ids))

	env2, seen2 := countJob(t.TempDir(), records, keys, 0, sluice.WithCheckpointing(20*time.Millisecond, cpDir))
	_, err := env2.ExecuteAsync(context.Background())
	if !errors.Is(err, sluice.ErrFreshStartRefused) || !strings.Contains(err.Error(), newest) || !strings.Contains(err.Error(), "WithFreshStart") {
		t.Fatalf("start over unusable checkpoints: %v; want ErrFreshStartRefused naming %s and WithFreshStart", err, newest)
	}
	if seen2.Load() != 0 {
		t.Fatalf("the refused run read %d records", seen2.Load())
	}

	var logs testutil.LogRecorder
	out := t.TempDir()
	env3, _ := countJob(out, records, keys, 0, sluice.WithCheckpointing(20*time.Millisecond, cpDir), sluice.WithFreshStart(),
		sluice.WithLogger(logs.Logger()))
	mustExecute(t, env3)
	said := logs.Find("starting the job from no state as asked")
	if len(said) != 1 || !strings.Contains(said[0], "checkpoints_not_restored") {
		t.Fatalf("the fresh start logged %q; want one line naming the checkpoints it did not restore", said)
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

// A job that fails for good (no restart strategy) keeps its latest
// checkpoint by default (DELETE_ON_CANCELLATION): its result says FAILED
// with that checkpoint retained, and the next start, with no option,
// resumes from it and commits the rest: the output of the two runs is one
// whole run's. Before, the default retention deleted the checkpoints of
// a failed job, and every later start was refused or began from nothing.
func TestFailedJobKeepsItsLatestCheckpoint(t *testing.T) {
	const records, keys = 4000, 10
	out, cpDir := t.TempDir(), t.TempDir()
	var failNow atomic.Bool
	r := countRun(out, records, keys, 4000, sluice.WithCheckpointing(20*time.Millisecond, cpDir), sluice.WithRestartStrategy(sluice.NoRestart()))
	r.fail = func() error {
		if failNow.Load() {
			return errors.New("injected failure")
		}
		return nil
	}
	job := startUntil(t, context.Background(), r.env(), "checkpoints", r.seen, 2, 300)
	failNow.Store(true)
	if err := job.Wait(); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("the failing run ended with %v, want the injected failure", err)
	}
	st := jobDir(t, cpDir, job)
	res, err := st.ReadJobResult()
	if err != nil || res == nil || res.Status != storage.ResultFailed || !res.Retained || !res.Clean || res.LastCheckpoint == 0 {
		t.Fatalf("result of the failed job: %+v, %v; want FAILED, its last checkpoint retained, clean", res, err)
	}
	if ids := completedOnDisk(t, st); !slices.Contains(ids, res.LastCheckpoint) {
		t.Fatalf("the failed job's last checkpoint %d is not on disk (%v): the default retention deleted it", res.LastCheckpoint, ids)
	}

	var restored atomic.Int64
	env2, _ := countJob(out, records, keys, 0, sluice.WithCheckpointing(20*time.Millisecond, cpDir),
		sluice.WithRestoreListener(func(ri sluice.RestoreInfo) { restored.Store(ri.CheckpointID) }))
	mustExecute(t, env2)
	if got := restored.Load(); got != res.LastCheckpoint {
		t.Fatalf("the next start restored checkpoint %d, want the failed run's last, %d", got, res.LastCheckpoint)
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

// A process restarted with the restore path it was first started with (a
// Kubernetes pod after a savepoint upgrade, a service unit's arguments)
// resumes the job's own checkpoints that descend from that snapshot, not
// the snapshot again: the output committed since is not written twice.
// Started from a savepoint, suspended twice midway and started again each
// time with the same WithRestoreFrom, the job's committed counts are
// exact.
func TestRestorePathGivenAgainResumesTheLineage(t *testing.T) {
	const records, keys = 6000, 7
	out := t.TempDir()
	first, seen := countJob(out, records, keys, 8000, sluice.WithCheckpointing(15*time.Millisecond, t.TempDir()), sluice.WithJobName("lineage"))
	job := mustStart(t, first)
	await(t, "records before the savepoint", func() bool { return seen.Load() > 500 })
	sp := stopWithSavepoint(t, job)

	cpDir := t.TempDir()
	opts := []sluice.Option{sluice.WithCheckpointing(15*time.Millisecond, cpDir), sluice.WithJobName("lineage"), sluice.WithRestoreFrom(sp)}
	var restored []string // what each run restored
	for i := 0; ; i++ {
		env, seen := countJob(out, records, keys, 8000, opts...)
		ctx, suspend := context.WithCancel(context.Background())
		job, err := env.ExecuteAsync(ctx)
		if err != nil {
			suspend()
			t.Fatal(err)
		}
		if i < 2 {
			await(t, "records", func() bool { return seen.Load() > int64(800+400*i) || job.Status() != runtime.JobRunning })
			suspend()
		}
		err = job.Wait()
		suspend()
		if info, ok := job.LastRestore(); ok {
			restored = append(restored, info.Path)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, sluice.ErrJobSuspended) {
			t.Fatalf("run %d: %v", i+2, err)
		}
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
	// The first run from the savepoint restored it; every later one a
	// checkpoint of its own directory (of the savepoint's lineage: the
	// runtime/lifecycle scenarios pin that rule).
	if len(restored) != 3 || filepath.Clean(restored[0]) != lifecycle.Origin(sp) {
		t.Fatalf("the runs restored %q: want the savepoint %s, then two of the job's own checkpoints", restored, sp)
	}
	for _, dir := range restored[1:] {
		if !strings.HasPrefix(dir, filepath.Join(cpDir, "lineage")+string(filepath.Separator)) {
			t.Fatalf("a later run restored %s: want a checkpoint of the job's directory in %s", dir, cpDir)
		}
	}
}
