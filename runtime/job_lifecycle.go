package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
)

// Errors of a job's life, beside ErrJobCanceled.
var (
	// ErrJobSuspended is returned by Wait when the job was suspended: the
	// context given to Execute was cancelled (a process shutting down,
	// SIGTERM). The latest completed checkpoint is kept, so the next run
	// resumes from it. It also matches context.Canceled.
	ErrJobSuspended = errors.New("job suspended")
	// ErrJobTerminated is returned (wrapped) by Execute when the job's
	// directory records that an earlier run ended (finished, cancelled,
	// failed) and this run would start from scratch: say so with
	// FreshStart, or restore a snapshot explicitly.
	ErrJobTerminated = errors.New("job already reached a terminal state")
	// ErrFallbackPastCommitted is returned (wrapped) when the latest
	// completed checkpoint is corrupt and the one before it would be
	// restored although the latest one's transactions may have been
	// committed: their output would be written again.
	ErrFallbackPastCommitted = errors.New("restoring an older checkpoint would repeat committed output")
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
type fatalError struct{ err error }

func (e *fatalError) Error() string          { return e.err.Error() }
func (e *fatalError) Unwrap() error          { return e.err }
func (e *fatalError) SuppressRestarts() bool { return true }

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
}

// lockHolder says who holds the job directory's lock.
func (j *Job) lockHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d on %s (job %q, run %s, since %s)", os.Getpid(), host, j.cfg.JobName, j.run, time.Now().UTC().Format(time.RFC3339))
}

// planStart reads the job's result and checkpoints and decides what the
// run starts from.
func (j *Job) planStart() (*startPlan, error) {
	cfg := j.cfg
	var res *storage.JobResult
	if j.store != nil {
		r, err := j.store.ReadJobResult()
		if err != nil {
			return nil, fmt.Errorf("job %s: read its result: %w", j.id, err)
		}
		res = r
		if res != nil && !res.Clean {
			j.finishCleanup(res)
		}
	}
	if res != nil && res.Status == storage.ResultFinished && cfg.ResumeLatest && !cfg.FreshStart && cfg.RestoreFrom == "" {
		j.logger.Info("job already finished; nothing to do", "job_id", j.id, "result", res.String(), "file", j.store.JobResultPath())
		return &startPlan{finished: res}, nil
	}
	if p := cfg.RestoreFrom; p != "" {
		sp, err := j.planRestoreFrom(p)
		if err != nil {
			return nil, err
		}
		if res != nil {
			j.logger.Info("job had ended; starting from the snapshot given", "job_id", j.id, "result", res.String(), "from", p)
		}
		return sp, j.clearResult(res)
	}
	if cfg.ResumeLatest && j.store != nil {
		rec, rerr := j.store.Recover()
		if len(rec.Retained) > 0 {
			snap, err := j.pickLatest(rec, nil)
			if err != nil {
				return nil, err
			}
			if res != nil {
				j.logger.Info("job had ended; resuming from its retained checkpoint", "job_id", j.id, "result", res.String(),
					"checkpoint", snap.Metadata.CheckpointID)
			}
			j.logger.Info("restoring from checkpoint", "checkpoint", snap.Metadata.CheckpointID, "dir", snap.Dir)
			sp := &startPlan{restore: newRestoreSnapshot(snap, true)}
			for _, s := range rec.Retained {
				sp.owned = append(sp.owned, s.Metadata.CheckpointID)
			}
			return sp, j.clearResult(res)
		}
		if rerr != nil && !errors.Is(rerr, storage.ErrNoCheckpoint) {
			return nil, fmt.Errorf("%w: %w", ErrRestore, rerr)
		}
	}
	if res != nil && !cfg.FreshStart {
		hint := "start it anew from no state with FreshStart (sluice.WithFreshStart), or restore a checkpoint or savepoint (WithRestoreFrom)"
		if res.LastCheckpoint > 0 && res.Retained {
			hint += fmt.Sprintf("; its last checkpoint %d was retained: %s", res.LastCheckpoint, j.store.CheckpointDir(res.LastCheckpoint))
		}
		return nil, fmt.Errorf("%w: job %s ended %s (recorded in %s): %s",
			ErrJobTerminated, j.id, res.String(), j.store.JobResultPath(), hint)
	}
	if res != nil {
		j.logger.Info("job had ended; starting it anew from no state as asked", "job_id", j.id, "result", res.String())
	}
	return &startPlan{}, j.clearResult(res)
}

func (j *Job) clearResult(res *storage.JobResult) error {
	if res == nil {
		return nil
	}
	if err := j.store.ClearJobResult(); err != nil {
		return fmt.Errorf("job %s: %w", j.id, err)
	}
	return nil
}

// planRestoreFrom loads the snapshot at path and decides, by the claim
// mode, whether the run owns it.
func (j *Job) planRestoreFrom(path string) (*startPlan, error) {
	fsys := j.cfg.CheckpointFS
	if fsys == nil {
		fsys = storage.OSFS{}
	}
	snap, err := storage.LoadSnapshotWith(fsys, path, j.cfg.CheckpointSchemes)
	if err != nil {
		return nil, fmt.Errorf("%w from %s: %w", ErrRestore, path, err)
	}
	md := snap.Metadata
	j.logger.Info("restoring from snapshot", "checkpoint", md.CheckpointID, "kind", md.Kind, "dir", snap.Dir, "claim_mode", j.cfg.ClaimMode.String())
	if j.cfg.ClaimMode != Claim {
		return &startPlan{restore: newRestoreSnapshot(snap, false)}, nil
	}
	own := j.store != nil && md.Kind != storage.KindSavepoint &&
		filepath.Clean(snap.Dir) == filepath.Clean(j.store.CheckpointDir(md.CheckpointID))
	if own {
		return &startPlan{restore: newRestoreSnapshot(snap, true), owned: []int64{md.CheckpointID}}, nil
	}
	// A snapshot elsewhere: its files are not the run's to reference (they
	// live beside another job's shared directory); the run deletes it once
	// its own first checkpoint completes.
	return &startPlan{restore: newRestoreSnapshot(snap, false), adopt: snap.Dir}, nil
}

// pickLatest returns the newest usable completed checkpoint of rec among
// those allowed (nil allows all). Skipping a newer unusable one whose
// transactions may have been committed is refused unless
// AllowFallbackPastCommitted; allowed, it is logged and counted.
func (j *Job) pickLatest(rec *storage.Recovery, allowed func(int64) bool) (*storage.Snapshot, error) {
	ok := func(id int64) bool { return allowed == nil || allowed(id) }
	var latest *storage.Snapshot
	for _, s := range rec.Retained {
		if ok(s.Metadata.CheckpointID) {
			latest = s
			break
		}
	}
	if latest == nil {
		return nil, nil
	}
	for _, u := range rec.Unusable {
		if u.ID < latest.Metadata.CheckpointID || !ok(u.ID) {
			continue
		}
		committed := len(latest.Metadata.Committables()) > 0
		if u.Metadata != nil {
			committed = len(u.Metadata.Committables()) > 0
		}
		if !committed {
			continue
		}
		file := ""
		var fe *storage.FileError
		if errors.As(u.Err, &fe) {
			file = fe.Path
		}
		if !j.cfg.AllowFallbackPastCommitted {
			return nil, &fatalError{fmt.Errorf("%w: checkpoint %d is corrupt (%s: %v) and its transactions may have been committed; restoring checkpoint %d would write their output again. Repair or remove %s, or allow the fallback (sluice.WithAllowFallbackPastCommitted)",
				ErrFallbackPastCommitted, u.ID, file, u.Err, latest.Metadata.CheckpointID, j.store.CheckpointDir(u.ID))}
		}
		j.fallbacks.Add(1)
		j.logger.Error("restoring an older checkpoint past a corrupt one whose transactions may have been committed: their output is written again",
			"corrupt", u.ID, "file", file, "restoring", latest.Metadata.CheckpointID, "err", u.Err)
	}
	return latest, nil
}

// failoverRestore picks what a restarted attempt restores: the newest
// usable checkpoint the run owns (its own, or those it claimed), else
// what the run started from.
func (j *Job) failoverRestore(owned []int64, initial *restoreSnapshot) (*restoreSnapshot, error) {
	if j.store == nil || len(owned) == 0 {
		return initial, nil
	}
	rec, _ := j.store.Recover()
	snap, err := j.pickLatest(rec, func(id int64) bool { return slices.Contains(owned, id) })
	if err != nil {
		return nil, err
	}
	if snap == nil {
		// Every checkpoint the run owns is unusable: going back to what the
		// run started from repeats whatever they committed.
		for _, u := range rec.Unusable {
			if !slices.Contains(owned, u.ID) || (u.Metadata != nil && len(u.Metadata.Committables()) == 0) {
				continue
			}
			if !j.cfg.AllowFallbackPastCommitted {
				return nil, &fatalError{fmt.Errorf("%w: checkpoint %d is corrupt (%v) and its transactions may have been committed, and the run has no older usable checkpoint; restoring what it started from would write their output again. Repair or remove %s, or allow the fallback (sluice.WithAllowFallbackPastCommitted)",
					ErrFallbackPastCommitted, u.ID, u.Err, j.store.CheckpointDir(u.ID))}
			}
			j.fallbacks.Add(1)
			j.logger.Error("restoring what the run started from, past a corrupt checkpoint whose transactions may have been committed: their output is written again",
				"corrupt", u.ID, "err", u.Err)
			break
		}
		return initial, nil
	}
	if initial != nil && snap.Metadata.CheckpointID == initial.id() && filepath.Clean(snap.Dir) == filepath.Clean(initial.snap.Dir) {
		return initial, nil
	}
	j.logger.Info("restoring from checkpoint", "checkpoint", snap.Metadata.CheckpointID, "dir", snap.Dir)
	return newRestoreSnapshot(snap, true), nil
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

// recordResult writes the job's result before the retention policy
// deletes anything, applies the policy, and marks the result clean.
func (j *Job) recordResult(status JobStatus, runErr error, savepoint string) {
	if j.store == nil {
		return
	}
	res := &storage.JobResult{JobID: j.id, RunID: j.run, EndTimestamp: time.Now().UnixMilli(), Savepoint: savepoint}
	term := checkpoint.JobFinished
	switch status {
	case JobFinished:
		res.Status = storage.ResultFinished
	case JobCanceled:
		res.Status, term = storage.ResultCanceled, checkpoint.JobCanceled
	default:
		res.Status, term = storage.ResultFailed, checkpoint.JobFailed
		if runErr != nil {
			res.Error = runErr.Error()
		}
	}
	var d *checkpointDriver
	if a := j.att.Load(); a != nil {
		d = a.driver
	}
	discard := j.cfg.Checkpoint.Retention.Discards(term)
	if d != nil {
		if r := d.coord.Retained(); len(r) > 0 {
			res.LastCheckpoint, res.Retained = r[len(r)-1], !discard
		}
	}
	if guard := j.cfg.PublishResult; guard != nil {
		if err := guard(res); err != nil {
			// HA: another coordinator leads the job now; this one records
			// nothing and deletes nothing.
			j.logger.Error("the job's result is not recorded here: this coordinator may not (it lost the leadership); its checkpoints are kept", "status", res.Status, "err", err)
			return
		}
	}
	if err := j.store.WriteJobResult(res); err != nil {
		// Without a durable result nothing may be deleted: the next start
		// must still find the checkpoints.
		j.logger.Error("write the job result; its checkpoints are kept", "status", res.Status, "err", err)
		j.ended.Store(res)
		return
	}
	if d != nil && discard {
		d.exec(d.coord.Shutdown(time.Now(), term))
	}
	res.Clean = true
	if err := j.store.WriteJobResult(res); err != nil {
		j.logger.Warn("mark the job result clean", "err", err)
	}
	j.ended.Store(res)
}

// finishCleanup completes the retention cleanup of a result written by a
// run that stopped before it was done: the checkpoints of that run are
// deleted unless the result says they were retained, then the shared
// files no checkpoint references.
func (j *Job) finishCleanup(res *storage.JobResult) {
	if !res.Retained {
		rec, _ := j.store.Recover()
		for _, s := range rec.Retained {
			if s.Metadata.RunID == res.RunID {
				if err := j.store.DiscardCheckpoint(s.Metadata.CheckpointID, nil); err != nil {
					j.logger.Warn("finish the cleanup of an ended run", "checkpoint", s.Metadata.CheckpointID, "err", err)
				}
			}
		}
		j.collectGarbage()
	}
	res.Clean = true
	if err := j.store.WriteJobResult(res); err != nil {
		j.logger.Warn("mark the job result clean", "err", err)
	}
}
