package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/runtime/lifecycle"
)

// Errors of a job's life, beside ErrJobCanceled. The refusals of a start
// and of a failover are the lifecycle machine's (package lifecycle).
var (
	// ErrJobSuspended is returned by Wait when the job was suspended: the
	// context given to Execute was cancelled (a process shutting down,
	// SIGTERM). The latest completed checkpoint is kept, so the next run
	// resumes from it. It also matches context.Canceled.
	ErrJobSuspended = errors.New("job suspended")
	// ErrJobTerminated is returned (wrapped) by Execute when the job's
	// directory records that an earlier run was cancelled or failed and
	// none of its checkpoints is left: starting from no state would write
	// its committed output again. Say so with FreshStart, or restore a
	// snapshot explicitly.
	ErrJobTerminated = lifecycle.ErrJobTerminated
	// ErrFreshStartRefused is returned (wrapped) by Execute when the job's
	// completed checkpoints (in its directory, or the HA store's pointer)
	// cannot be restored and the run would start from no state; the error
	// names the checkpoint. FreshStart starts from no state all the same.
	ErrFreshStartRefused = lifecycle.ErrFreshStartRefused
	// ErrFallbackPastCommitted is returned (wrapped) when the latest
	// completed checkpoint is corrupt and the one before it would be
	// restored although the latest one's transactions may have been
	// committed: their output would be written again.
	ErrFallbackPastCommitted = lifecycle.ErrFallbackPastCommitted
	// ErrTaskCancellationTimeout: tasks did not exit within the
	// cancellation timeout (task.cancellation.timeout). The job fails
	// without a restart.
	ErrTaskCancellationTimeout = errors.New("task cancellation timed out")
	// ErrJobLocked: another process runs the job (its checkpoint directory
	// is locked); the error names the holder.
	ErrJobLocked = storage.ErrJobLocked
)

// ClaimMode says who owns the snapshot a job is restored from with
// RestoreFrom (Flink's execution.state-recovery.claim-mode).
type ClaimMode uint8

const (
	// NoClaim (the default): the snapshot stays the user's. The new run
	// never deletes anything it references, and its own checkpoints never
	// reference the snapshot's files (the first one is written in full).
	NoClaim ClaimMode = iota
	// Claim: the new run owns the snapshot and deletes it once a newer
	// checkpoint subsumes it. A checkpoint of the job's own directory is
	// then retained and subsumed like the run's own, its shared files
	// referenced by the run's incremental checkpoints.
	Claim
)

func (m ClaimMode) String() string {
	if m == Claim {
		return "CLAIM"
	}
	return "NO_CLAIM"
}

// ParseClaimMode parses Flink's spelling (NO_CLAIM, CLAIM; any case).
func ParseClaimMode(s string) (ClaimMode, error) {
	switch strings.ReplaceAll(strings.ToUpper(s), "-", "_") {
	case "NO_CLAIM":
		return NoClaim, nil
	case "CLAIM":
		return Claim, nil
	}
	return 0, fmt.Errorf("%w: execution.state-recovery.claim-mode %q: want NO_CLAIM or CLAIM", checkpoint.ErrInvalidConfig, s)
}

// restartSuppressor is an error that must not be retried by a restart
// (Flink's SuppressRestartsException): a lost Kafka transaction, a task
// that cannot be cancelled.
type restartSuppressor interface{ SuppressRestarts() bool }

// suppressesRestarts reports whether err, or an error it wraps, says the
// job must not restart.
func suppressesRestarts(err error) bool {
	var s restartSuppressor
	return errors.As(err, &s) && s.SuppressRestarts()
}

// expectedFailure is an error of a failure that is part of the
// deployment's life, logged in words where it happened (a worker lost,
// which its coordinator reports): the attempt's stop and the job's
// restart it causes are logged at INFO, not as errors.
type expectedFailure interface{ ExpectedFailure() bool }

// failureLevel is the level of the log lines of a failure: INFO for an
// expected one, else high.
func failureLevel(err error, high slog.Level) slog.Level {
	var e expectedFailure
	if errors.As(err, &e) && e.ExpectedFailure() {
		return slog.LevelInfo
	}
	return high
}

// fatalError marks an error of the runtime's own that fails the job
// without a restart.
type fatalError = lifecycle.FatalError

// defaultJobName is DefaultConfig's JobName.
const defaultJobName = "sluice job"

// JobIDOf returns the job id of cfg for the compiled graph: cfg.JobID when
// set; else the job name made a file name, when a name was given; else
// "sluice-job-" and a hash of the uids and names of the graph's operators,
// so that two unnamed jobs of different operators never share a checkpoint
// directory, while a change of parallelism keeps the id. Name a job (or
// set its id) to keep its id across changes of its operators.
func JobIDOf(cfg Config, g *JobGraph) string {
	if cfg.JobID != "" {
		return cfg.JobID
	}
	if cfg.JobName != "" && cfg.JobName != defaultJobName {
		return storageName(cfg.JobName)
	}
	var ops []string
	for _, v := range g.Vertices {
		for _, n := range v.Nodes {
			ops = append(ops, n.UID+"\x00"+n.Name)
		}
	}
	slices.Sort(ops)
	h := fnv.New64a()
	for _, op := range ops {
		h.Write([]byte(op + "\n"))
	}
	return fmt.Sprintf("sluice-job-%08x", uint32(h.Sum64()))
}

func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startPlan is what the first attempt of a run starts from.
type startPlan struct {
	restore *restoreSnapshot
	// owned are the completed checkpoints of the job's directory this run
	// owns: retained, and subsumed and discarded like its own.
	owned []int64
	// adopt is a snapshot outside the job's directory claimed by the run
	// (CLAIM), deleted once the run completes a checkpoint.
	adopt string
	// finished: the job's result says it finished; nothing runs.
	finished *storage.JobResult
	// resumed: restore is the job's own checkpoint (the latest, the HA
	// pointer's), not the snapshot RestoreFrom names.
	resumed bool
}

// lockHolder says who holds the job directory's lock.
func (j *Job) lockHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d on %s (job %q, run %s, since %s)", os.Getpid(), host, j.cfg.JobName, j.run, time.Now().UTC().Format(time.RFC3339))
}

// newMachine makes the lifecycle machine of the run.
func (j *Job) newMachine() *lifecycle.Machine {
	cfg := lifecycle.Config{
		JobID: j.id, RunID: j.run, RestoreFrom: j.cfg.RestoreFrom, Claim: j.cfg.ClaimMode == Claim,
		FreshStart: j.cfg.FreshStart, AllowFallbackPastCommitted: j.cfg.AllowFallbackPastCommitted,
		Retention: j.cfg.Checkpoint.Retention,
	}
	if j.store != nil {
		cfg.Layout = j.store
	}
	return lifecycle.New(cfg)
}

// listCheckpoints lists the job's checkpoints; the error is a failure to
// list them, not their absence nor their being unusable.
func (j *Job) listCheckpoints() (*storage.Recovery, error) {
	rec, err := j.store.Recover()
	if err != nil && (errors.Is(err, storage.ErrNoCheckpoint) || len(rec.Unusable) > 0) {
		err = nil
	}
	return rec, err
}

// planStart gathers what the job's storage (and the HA store) hold, lets
// the lifecycle machine decide what the run starts from, and carries out
// its actions.
func (j *Job) planStart() (*startPlan, error) {
	cfg := j.cfg
	var f lifecycle.Facts
	if j.store != nil {
		r, err := j.store.ReadJobResult()
		if err != nil {
			return nil, fmt.Errorf("job %s: read its result: %w", j.id, err)
		}
		f.Result = r
		f.Checkpoints, f.ListErr = j.listCheckpoints()
	}
	if read := cfg.PublishedCheckpoint; read != nil {
		id, path, ok, err := read()
		if err != nil {
			return nil, fmt.Errorf("job %s: read the latest checkpoint in the HA store: %w", j.id, err)
		}
		if ok {
			f.Pointer = &lifecycle.Pointer{ID: id, Path: path}
		}
	}
	if p := cfg.RestoreFrom; p != "" {
		fsys := cfg.CheckpointFS
		if fsys == nil {
			fsys = storage.OSFS{}
		}
		f.Snapshot, f.SnapshotErr = storage.LoadSnapshotWith(fsys, p, cfg.CheckpointSchemes)
	}
	acts, err := j.life.Start(time.Now(), f)
	var plan *startPlan
	for _, a := range acts {
		switch a := a.(type) {
		case lifecycle.Run:
			plan = &startPlan{owned: a.Owned, adopt: a.Adopt}
			j.origin = a.Origin
			if a.Restore != nil {
				plan.restore = newRestoreSnapshot(a.Restore, a.RestoreOwned)
				plan.resumed = a.Restore != f.Snapshot
			}
		case lifecycle.NothingToRun:
			plan = &startPlan{finished: &a.Result}
		case lifecycle.ClearResult:
			if cerr := j.store.ClearJobResult(); cerr != nil {
				return nil, fmt.Errorf("job %s: %w", j.id, cerr)
			}
		default:
			j.carryOut(a)
		}
	}
	if err != nil {
		return nil, err
	}
	if plan == nil {
		return nil, fmt.Errorf("job %s: the lifecycle machine decided no start (actions %v)", j.id, acts)
	}
	return plan, nil
}

// carryOut does what the lifecycle machine asks that needs no answer.
func (j *Job) carryOut(a lifecycle.Action) {
	switch a := a.(type) {
	case lifecycle.Log:
		j.logger.Log(context.Background(), a.Level, a.Msg, a.Attrs...)
	case lifecycle.CountFallback:
		j.fallbacks.Add(1)
	case lifecycle.DiscardCheckpoints:
		for _, id := range a.IDs {
			if err := j.store.DiscardCheckpoint(id, nil); err != nil {
				j.logger.Warn("finish the cleanup of an ended run", "checkpoint", id, "err", err)
			}
		}
	case lifecycle.CollectGarbage:
		j.collectGarbage()
	case lifecycle.WriteResult:
		if err := j.store.WriteJobResult(&a.Result); err != nil {
			j.logger.Warn("mark the job result clean", "err", err)
		}
	default:
		panic(fmt.Sprintf("runtime: lifecycle action %s out of place", a))
	}
}

// failoverRestore picks what a restarted attempt restores (the lifecycle
// machine's Failover): the newest usable checkpoint the run owns, else
// what the run started from.
func (j *Job) failoverRestore(owned []int64, initial *restoreSnapshot) (*restoreSnapshot, error) {
	if j.store == nil || len(owned) == 0 {
		return initial, nil
	}
	rec, lerr := j.listCheckpoints()
	acts, err := j.life.Failover(time.Now(), owned, rec, lerr)
	if err != nil {
		return nil, err
	}
	restore := initial
	for _, a := range acts {
		if at, ok := a.(lifecycle.Attempt); ok {
			if !at.Initial {
				restore = newRestoreSnapshot(at.Restore, true)
			}
			continue
		}
		j.carryOut(a)
	}
	return restore, nil
}

// collectGarbage deletes, at start-up, the shared files no _metadata on
// disk references (uploads of checkpoints that never completed).
func (j *Job) collectGarbage() {
	removed, err := j.store.CollectSharedGarbage()
	if len(removed) > 0 {
		j.logger.Info("deleted shared checkpoint files no checkpoint references", "files", len(removed), "dir", j.store.JobDir())
	}
	if err != nil {
		j.logger.Warn("collect unreferenced shared checkpoint files", "err", err)
	}
	aborted, err := j.store.AbortIncompleteUploads()
	if aborted > 0 {
		j.logger.Info("aborted incomplete uploads of an earlier run", "uploads", aborted, "dir", j.store.JobDir())
	}
	if err != nil {
		j.logger.Warn("abort incomplete checkpoint uploads", "err", err)
	}
}

// recordResult records the job's end through the lifecycle machine: the
// result published (HA) and written before the retention policy deletes
// anything, then marked clean.
func (j *Job) recordResult(status JobStatus, runErr error, savepoint string) {
	if j.store == nil {
		return
	}
	e := lifecycle.End{Err: runErr, Savepoint: savepoint, Publish: j.cfg.PublishResult != nil}
	switch status {
	case JobFinished:
		e.Status = storage.ResultFinished
	case JobCanceled:
		e.Status = storage.ResultCanceled
	default:
		e.Status = storage.ResultFailed
	}
	var d *checkpointDriver
	if a := j.att.Load(); a != nil {
		d = a.driver
	}
	if d != nil {
		e.Owned = d.coord.Retained()
	}
	acts := j.life.End(time.Now(), e)
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a := a.(type) {
		case lifecycle.PublishResult:
			res := a.Result
			acts = append(j.life.ResultPublished(time.Now(), j.cfg.PublishResult(&res)), acts...)
		case lifecycle.WriteResult:
			res := a.Result
			acts = append(j.life.ResultWritten(time.Now(), j.store.WriteJobResult(&res)), acts...)
		case lifecycle.ApplyRetention:
			if d != nil {
				d.exec(d.coord.Shutdown(time.Now(), a.Term))
			}
		case lifecycle.Ended:
			res := a.Result
			j.ended.Store(&res)
		default:
			j.carryOut(a)
		}
	}
}
