package lifecycle

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
)

// How a refusal's advice names the options, for a user of the Go API and
// of a configuration file alike.
const (
	adviceFresh       = "start from no state with sluice.WithFreshStart()"
	adviceRestoreFrom = "restore a savepoint or checkpoint with sluice.WithRestoreFrom (execution.state-recovery.path)"
	adviceFallback    = "sluice.WithAllowFallbackPastCommitted()"
)

// Config is what the job's options say about its life.
type Config struct {
	// JobID names the job in errors and logs.
	JobID string
	// RestoreFrom is the snapshot the run is told to start from
	// (execution.state-recovery.path), Claim its claim mode (CLAIM).
	RestoreFrom string
	Claim       bool
	// FreshStart: start from no state whatever the job's directory holds.
	FreshStart bool
	// AllowFallbackPastCommitted lets a restore skip a corrupt checkpoint
	// whose transactions may have been committed.
	AllowFallbackPastCommitted bool
	// Retention is what the job's end does to the checkpoints it owns.
	Retention checkpoint.Retention
	// RunID is this execution's id, recorded in its result.
	RunID string
	// Layout names the job's files; nil without checkpoint storage.
	Layout Layout
}

// Layout is where the job's storage keeps its files: names only
// (*storage.Storage is one).
type Layout interface {
	JobDir() string
	JobResultPath() string
	CheckpointDir(id int64) string
}

// Pointer is the job's latest completed checkpoint as the HA store has it
// (the etcd pointer a leader moved before any sink committed).
type Pointer struct {
	ID   int64
	Path string
}

// Facts are what the job's storage and HA store hold when a run starts.
type Facts struct {
	// Result is the recorded end of an earlier run; nil when none.
	Result *storage.JobResult
	// Checkpoints are the job directory's checkpoints (storage.Recover);
	// nil without checkpoint storage. ListErr is why they could not be
	// listed (not storage.ErrNoCheckpoint nor unusable checkpoints).
	Checkpoints *storage.Recovery
	ListErr     error
	// Pointer is the HA store's pointer; nil without HA or when no
	// checkpoint was published.
	Pointer *Pointer
	// Snapshot is Config.RestoreFrom loaded, SnapshotErr why it could not
	// be.
	Snapshot    *storage.Snapshot
	SnapshotErr error
}

// End is how the job's last attempt ended.
type End struct {
	// Status is storage.ResultFinished, ResultCanceled or ResultFailed.
	Status string
	// Err is the failure of a failed job.
	Err error
	// Savepoint is the savepoint a stop-with-savepoint ended with.
	Savepoint string
	// Owned are the completed checkpoints the run owns, oldest first (its
	// coordinator's retained ones).
	Owned []int64
	// Publish: the result goes to the HA store first (PublishResult).
	Publish bool
}

type phase uint8

const (
	phaseNew phase = iota
	phaseRunning
	phaseNothing // the job had finished: nothing runs
	phasePublishing
	phaseWriting
	phaseCleaning
	phaseEnded
)

var phaseNames = [...]string{"new", "running", "nothing-to-run", "publishing-result", "writing-result", "marking-result-clean", "ended"}

func (p phase) String() string { return phaseNames[p] }

// Machine is the life of one run of a job. Its methods are called from
// one goroutine at a time, in the order of the job's life: Start, then
// any number of Failover, then End and the answers to its actions.
type Machine struct {
	cfg   Config
	phase phase
	// initial is what the run started from (nil: no state), origin its
	// lineage (Run.Origin).
	initial *storage.Snapshot
	origin  string
	// result is the result being recorded, term its termination.
	result  storage.JobResult
	term    checkpoint.Termination
	discard bool
}

// New returns the machine of a run with cfg.
func New(cfg Config) *Machine { return &Machine{cfg: cfg} }

// String says where the run is, for scenario tests.
func (m *Machine) String() string {
	s := "phase=" + m.phase.String()
	if m.initial != nil {
		s += " initial=" + describeSnapshot(m.initial)
	}
	return s
}

func (m *Machine) expect(p phase, event string) {
	if m.phase != p {
		panic(fmt.Sprintf("lifecycle: %s in phase %s, want %s", event, m.phase, p))
	}
}

// Start decides what the run starts from (see the package comment). Its
// actions end with Run or NothingToRun. An error refuses the start, after
// the actions returned with it (the cleanup of an earlier run's result)
// are carried out.
func (m *Machine) Start(now time.Time, f Facts) ([]Action, error) {
	m.expect(phaseNew, "start")
	var cleanup []Action
	rec, res := f.Checkpoints, f.Result
	if res != nil && !res.Clean {
		var r storage.JobResult
		r, rec, cleanup = m.finishCleanup(*res, rec, nil)
		res = &r
	}
	acts, err := m.decide(f, rec, res, cleanup)
	if err != nil {
		return cleanup, err
	}
	return acts, nil
}

// decide is Start once an unclean result is cleaned up: rec and res are
// what is left.
func (m *Machine) decide(f Facts, rec *storage.Recovery, res *storage.JobResult, acts []Action) ([]Action, error) {
	switch {
	case res == nil && f.Pointer != nil && rec != nil && !m.cfg.FreshStart:
		return m.fromPointer(f, rec, acts)
	case res != nil && res.Status == storage.ResultFinished && !m.cfg.FreshStart &&
		(m.cfg.RestoreFrom == "" || res.Origin == Origin(m.cfg.RestoreFrom)):
		attrs := []any{"job_id", m.cfg.JobID, "result", res.String(), "file", m.cfg.Layout.JobResultPath()}
		if m.cfg.RestoreFrom != "" {
			attrs = append(attrs, "restore_path", m.cfg.RestoreFrom, "hint", "the finished run descended from this snapshot; to run from it again, add sluice.WithFreshStart()")
		}
		acts = append(acts, Log{slog.LevelInfo, "job already finished; nothing to do", attrs})
		m.phase = phaseNothing
		return append(acts, NothingToRun{*res}), nil
	case m.cfg.RestoreFrom != "" && !m.cfg.FreshStart && (res == nil || res.Status == storage.ResultFailed):
		if f.ListErr != nil {
			return nil, fmt.Errorf("%w: job %s: list its checkpoints in %s (to tell whether they descend from %s): %w",
				ErrRestore, m.cfg.JobID, m.cfg.Layout.JobDir(), m.cfg.RestoreFrom, f.ListErr)
		}
		if acts, ok, err := m.resumeLineage(rec, res, acts); ok || err != nil {
			return acts, err
		}
		return m.fromSnapshot(f, res, acts)
	case m.cfg.RestoreFrom != "":
		return m.fromSnapshot(f, res, acts)
	case m.cfg.FreshStart:
		return m.fresh(f, res, acts), nil
	}
	if rec == nil {
		return m.run(acts, Run{}), nil
	}
	if f.ListErr != nil {
		return nil, fmt.Errorf("%w: job %s: list its checkpoints in %s: %w", ErrRestore, m.cfg.JobID, m.cfg.Layout.JobDir(), f.ListErr)
	}
	// After a recorded end only what that run retained counts: older
	// checkpoints left by an earlier run (pinned by a fresh start) are
	// not the ended run's state.
	var allowed func(int64) bool
	if res != nil {
		allowed = func(id int64) bool { return res.Retained && id <= res.LastCheckpoint }
	}
	if snap, acts, err := m.pickLatest(rec, allowed, acts); err != nil {
		return nil, err
	} else if snap != nil {
		if res != nil {
			acts = append(acts, Log{slog.LevelInfo, "job had ended; resuming from its retained checkpoint",
				[]any{"job_id", m.cfg.JobID, "result", res.String(), "checkpoint", snap.Metadata.CheckpointID}})
			acts = append(acts, ClearResult{})
		}
		acts = append(acts, Log{slog.LevelInfo, "resuming from the job's latest checkpoint",
			[]any{"checkpoint", snap.Metadata.CheckpointID, "dir", snap.Dir}})
		return m.run(acts, Run{Restore: snap, RestoreOwned: true, Owned: ids(rec.Retained, nil)}), nil
	}
	if unusable := ids(nil, rec.Unusable, allowedOrAll(allowed)); len(unusable) > 0 {
		u := slices.Max(unusable)
		var cause error
		for _, x := range rec.Unusable {
			if x.ID == u {
				cause = x.Err
			}
		}
		err := fmt.Errorf("%w: job %s: its completed checkpoint %d (%s) cannot be restored: %v; no completed checkpoint of it is usable (%v). Starting from no state would write the output they committed again: repair the checkpoint, %s, or %s",
			ErrFreshStartRefused, m.cfg.JobID, u, m.cfg.Layout.CheckpointDir(u), cause, unusable, adviceFresh, adviceRestoreFrom)
		if res != nil {
			err = fmt.Errorf("%w (it ended %s, recorded in %s): %w", ErrJobTerminated, res.String(), m.cfg.Layout.JobResultPath(), err)
		}
		return nil, err
	}
	if res != nil {
		return nil, fmt.Errorf("%w: job %s ended %s (recorded in %s) and none of its checkpoints is left: starting it again from no state would write its committed output again. To run it anyway, %s, or %s",
			ErrJobTerminated, m.cfg.JobID, res.String(), m.cfg.Layout.JobResultPath(), adviceFresh, adviceRestoreFrom)
	}
	return m.run(acts, Run{}), nil
}

func allowedOrAll(f func(int64) bool) func(int64) bool {
	if f == nil {
		return func(int64) bool { return true }
	}
	return f
}

// run records what the run starts from and ends the start's actions.
func (m *Machine) run(acts []Action, r Run) []Action {
	if r.Restore != nil && r.Origin == "" && r.RestoreOwned {
		r.Origin = r.Restore.Metadata.Origin // the lineage goes on
	}
	m.phase, m.initial, m.origin = phaseRunning, r.Restore, r.Origin
	return append(acts, r)
}

// finishCleanup completes the retention cleanup of a result written by a
// run that stopped before it was done: that run's checkpoints are
// discarded unless the result says they were retained, then the shared
// files no checkpoint references. It returns the result marked clean and
// the checkpoints that are left.
func (m *Machine) finishCleanup(res storage.JobResult, rec *storage.Recovery, acts []Action) (storage.JobResult, *storage.Recovery, []Action) {
	if !res.Retained && rec != nil {
		var gone []int64
		left := *rec
		left.Retained = nil
		for _, s := range rec.Retained {
			if s.Metadata.RunID == res.RunID {
				gone = append(gone, s.Metadata.CheckpointID)
			} else {
				left.Retained = append(left.Retained, s)
			}
		}
		if len(gone) > 0 {
			acts = append(acts, DiscardCheckpoints{gone})
		}
		acts = append(acts, CollectGarbage{})
		rec = &left
	}
	res.Clean = true
	return res, rec, append(acts, WriteResult{res})
}

// Origin is the lineage a restore path starts (Metadata.Origin): the
// snapshot's directory (a path to its _metadata names the same snapshot),
// cleaned, a URL's trailing slashes dropped.
func Origin(path string) string {
	if strings.Contains(path, "://") {
		return strings.TrimSuffix(strings.TrimRight(path, "/"), "/_metadata")
	}
	path = filepath.Clean(path)
	if filepath.Base(path) == "_metadata" {
		path = filepath.Dir(path)
	}
	return path
}

// resumeLineage resumes, when the snapshot given (RestoreFrom) is where
// the job's own checkpoints descend from, the newest usable of them: the
// process was restarted with the arguments it first ran with (after a
// crash, a suspension, a failure), and restoring the snapshot again
// would write the output committed since a second time. ok is false when
// no checkpoint of that lineage is there.
func (m *Machine) resumeLineage(rec *storage.Recovery, res *storage.JobResult, acts []Action) ([]Action, bool, error) {
	if rec == nil {
		return acts, false, nil
	}
	origin := Origin(m.cfg.RestoreFrom)
	lineage := map[int64]bool{}
	for _, s := range rec.Retained {
		lineage[s.Metadata.CheckpointID] = s.Metadata.Origin == origin
	}
	for _, u := range rec.Unusable {
		lineage[u.ID] = u.Metadata != nil && u.Metadata.Origin == origin
	}
	allowed := func(id int64) bool {
		return lineage[id] && (res == nil || (res.Retained && id <= res.LastCheckpoint))
	}
	snap, acts, err := m.pickLatest(rec, allowed, acts)
	if err != nil || snap == nil {
		return acts, false, err
	}
	if res != nil {
		acts = append(acts, Log{slog.LevelInfo, "job had ended; resuming from its retained checkpoint",
			[]any{"job_id", m.cfg.JobID, "result", res.String(), "checkpoint", snap.Metadata.CheckpointID}}, ClearResult{})
	}
	acts = append(acts, Log{slog.LevelInfo, "the job's checkpoints descend from the snapshot given: resuming from their latest rather than restoring the snapshot again, which would write the output committed since a second time (to restore it anyway, add sluice.WithFreshStart())",
		[]any{"restore_path", m.cfg.RestoreFrom, "checkpoint", snap.Metadata.CheckpointID, "dir", snap.Dir}})
	return m.run(acts, Run{Restore: snap, RestoreOwned: true, Owned: ids(rec.Retained, nil), Origin: origin}), true, nil
}

// fromSnapshot starts from the snapshot given, by the claim mode.
func (m *Machine) fromSnapshot(f Facts, res *storage.JobResult, acts []Action) ([]Action, error) {
	path := m.cfg.RestoreFrom
	if f.SnapshotErr != nil || f.Snapshot == nil {
		return nil, fmt.Errorf("%w from %s: %w", ErrRestore, path, cmpErr(f.SnapshotErr, errors.New("not loaded")))
	}
	snap := f.Snapshot
	md := snap.Metadata
	mode := "NO_CLAIM"
	if m.cfg.Claim {
		mode = "CLAIM"
	}
	acts = append(acts, Log{slog.LevelInfo, "restoring from snapshot",
		[]any{"checkpoint", md.CheckpointID, "kind", md.Kind, "dir", snap.Dir, "claim_mode", mode}})
	if res != nil {
		acts = append(acts, Log{slog.LevelInfo, "job had ended; starting from the snapshot given",
			[]any{"job_id", m.cfg.JobID, "result", res.String(), "from", path}}, ClearResult{})
	}
	r := Run{Restore: snap, Origin: Origin(m.cfg.RestoreFrom)}
	switch {
	case !m.cfg.Claim:
	case m.cfg.Layout != nil && md.Kind != storage.KindSavepoint &&
		filepath.Clean(snap.Dir) == filepath.Clean(m.cfg.Layout.CheckpointDir(md.CheckpointID)):
		r.RestoreOwned, r.Owned = true, []int64{md.CheckpointID}
	default:
		// A snapshot elsewhere: its files are not the run's to reference
		// (they live beside another job's shared directory); the run
		// deletes it once its own first checkpoint completes.
		r.Adopt = snap.Dir
	}
	return m.run(acts, r), nil
}

// fresh starts from no state as asked, saying what it leaves alone.
func (m *Machine) fresh(f Facts, res *storage.JobResult, acts []Action) []Action {
	attrs := []any{"job_id", m.cfg.JobID, "option", "WithFreshStart"}
	level := slog.LevelInfo
	if res != nil {
		attrs = append(attrs, "earlier_result", res.String())
		acts = append(acts, ClearResult{})
	}
	if rec := f.Checkpoints; rec != nil && len(rec.Retained)+len(rec.Unusable) > 0 {
		attrs = append(attrs, "checkpoints_not_restored", ids(rec.Retained, rec.Unusable), "dir", m.cfg.Layout.JobDir())
		level = slog.LevelWarn // state is left behind
	}
	if f.Pointer != nil {
		attrs = append(attrs, "ha_pointer_not_restored", f.Pointer.ID)
		level = slog.LevelWarn
	}
	acts = append(acts, Log{level, "starting the job from no state as asked (fresh start): no checkpoint is restored", attrs})
	return m.run(acts, Run{})
}

// fromPointer is the start of a coordinator taking over a job under HA:
// the checkpoint the HA store points to, checked against storage.
func (m *Machine) fromPointer(f Facts, rec *storage.Recovery, acts []Action) ([]Action, error) {
	p := *f.Pointer
	if m.cfg.RestoreFrom != "" {
		acts = append(acts, Log{slog.LevelInfo, "the job ran past the snapshot given: resuming from the HA store's checkpoint instead",
			[]any{"restore_path", m.cfg.RestoreFrom, "checkpoint", p.ID}})
	}
	if f.ListErr != nil {
		return nil, fmt.Errorf("%w: job %s: the HA store points to checkpoint %d (%s) but the job's checkpoints in %s cannot be listed: %w",
			ErrRestore, m.cfg.JobID, p.ID, p.Path, m.cfg.Layout.JobDir(), f.ListErr)
	}
	atMost := func(id int64) bool { return id <= p.ID }
	var above []int64
	for _, s := range rec.Retained {
		if s.Metadata.CheckpointID > p.ID {
			above = append(above, s.Metadata.CheckpointID)
		}
	}
	if len(above) > 0 {
		acts = append(acts, Log{slog.LevelInfo, "checkpoints completed after the HA store's pointer were never published (no sink committed them): not restored, left in place",
			[]any{"checkpoints", above, "pointer", p.ID}})
	}
	var snap *storage.Snapshot
	for _, s := range rec.Retained {
		if s.Metadata.CheckpointID == p.ID {
			snap = s
		}
	}
	if snap != nil {
		if filepath.Clean(snap.Dir) != filepath.Clean(p.Path) {
			acts = append(acts, Log{slog.LevelWarn, "the HA store's pointer names another path than the job's storage: restoring the job's checkpoint of that id",
				[]any{"checkpoint", p.ID, "pointer_path", p.Path, "dir", snap.Dir}})
		}
		acts = append(acts, Log{slog.LevelInfo, "resuming from the checkpoint the HA store points to",
			[]any{"checkpoint", p.ID, "dir", snap.Dir}})
		return m.run(acts, Run{Restore: snap, RestoreOwned: true, Owned: ids(rec.Retained, nil, atMost)}), nil
	}
	// The pointer's checkpoint is missing or corrupt. It was published, so
	// sinks may have committed its transactions: an older checkpoint
	// would write their output again.
	why := "its _metadata is missing"
	for _, u := range rec.Unusable {
		if u.ID == p.ID {
			why = u.Err.Error()
		}
	}
	var older *storage.Snapshot
	for _, s := range rec.Retained {
		if s.Metadata.CheckpointID < p.ID {
			older = s
			break
		}
	}
	if older == nil {
		return nil, &FatalError{fmt.Errorf("%w: job %s: the HA store points to checkpoint %d (%s), which cannot be restored (%s), and no older checkpoint is usable; starting from no state would write the output its transactions committed again. Repair the checkpoint, %s, or %s",
			ErrFreshStartRefused, m.cfg.JobID, p.ID, p.Path, why, adviceFresh, adviceRestoreFrom)}
	}
	if !m.cfg.AllowFallbackPastCommitted {
		return nil, &FatalError{fmt.Errorf("%w: job %s: the HA store points to checkpoint %d (%s), which cannot be restored (%s); it was published, so its transactions may have been committed, and restoring checkpoint %d (%s) would write their output again. Repair checkpoint %d, allow the fallback to checkpoint %d with %s, or %s",
			ErrFallbackPastCommitted, m.cfg.JobID, p.ID, p.Path, why, older.Metadata.CheckpointID, older.Dir, p.ID, older.Metadata.CheckpointID, adviceFallback, adviceFresh)}
	}
	acts = append(acts, CountFallback{}, Log{slog.LevelError, "restoring an older checkpoint than the HA store's pointer, which cannot be restored: the output its transactions committed is written again",
		[]any{"pointer", p.ID, "why", why, "restoring", older.Metadata.CheckpointID}})
	return m.run(acts, Run{Restore: older, RestoreOwned: true, Owned: ids(rec.Retained, nil, atMost)}), nil
}

// pickLatest returns the newest usable completed checkpoint of rec among
// those allowed (nil allows all). Skipping a newer unusable one whose
// transactions may have been committed is refused unless
// AllowFallbackPastCommitted; allowed, it is logged and counted.
func (m *Machine) pickLatest(rec *storage.Recovery, allowed func(int64) bool, acts []Action) (*storage.Snapshot, []Action, error) {
	ok := func(id int64) bool { return allowed == nil || allowed(id) }
	var latest *storage.Snapshot
	for _, s := range rec.Retained {
		if ok(s.Metadata.CheckpointID) {
			latest = s
			break
		}
	}
	if latest == nil {
		return nil, acts, nil
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
		if !m.cfg.AllowFallbackPastCommitted {
			return nil, acts, &FatalError{fmt.Errorf("%w: checkpoint %d is corrupt (%v) and its transactions may have been committed; restoring checkpoint %d would write their output again. Repair or remove %s, or allow the fallback with %s",
				ErrFallbackPastCommitted, u.ID, u.Err, latest.Metadata.CheckpointID, m.cfg.Layout.CheckpointDir(u.ID), adviceFallback)}
		}
		acts = append(acts, CountFallback{}, Log{slog.LevelError, "restoring an older checkpoint past a corrupt one whose transactions may have been committed: their output is written again",
			[]any{"corrupt", u.ID, "file", failedFile(u.Err), "restoring", latest.Metadata.CheckpointID, "err", u.Err}})
	}
	return latest, acts, nil
}

// Failover picks what a restarted attempt restores: the newest usable
// checkpoint the run owns (its own, or those it resumed or claimed), else
// what the run started from. rec lists the job's checkpoints now; a
// listing that failed (listErr) fails the attempt, to be retried: going
// back to what the run started from would repeat what the run committed
// since.
func (m *Machine) Failover(now time.Time, owned []int64, rec *storage.Recovery, listErr error) ([]Action, error) {
	m.expect(phaseRunning, "failover")
	if len(owned) == 0 || rec == nil {
		return []Action{Attempt{Initial: true, Restore: m.initial}}, nil
	}
	if listErr != nil && len(rec.Retained) == 0 && len(rec.Unusable) == 0 {
		return nil, fmt.Errorf("%w: job %s: list its checkpoints in %s: %w", ErrRestore, m.cfg.JobID, m.cfg.Layout.JobDir(), listErr)
	}
	snap, acts, err := m.pickLatest(rec, func(id int64) bool { return slices.Contains(owned, id) }, nil)
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
			if !m.cfg.AllowFallbackPastCommitted {
				return nil, &FatalError{fmt.Errorf("%w: checkpoint %d is corrupt (%v) and its transactions may have been committed, and the run has no older usable checkpoint; restoring what it started from would write their output again. Repair or remove %s, or allow the fallback with %s",
					ErrFallbackPastCommitted, u.ID, u.Err, m.cfg.Layout.CheckpointDir(u.ID), adviceFallback)}
			}
			acts = append(acts, CountFallback{}, Log{slog.LevelError, "restoring what the run started from, past a corrupt checkpoint whose transactions may have been committed: their output is written again",
				[]any{"corrupt", u.ID, "err", u.Err}})
			break
		}
		return append(acts, Attempt{Initial: true, Restore: m.initial}), nil
	}
	if i := m.initial; i != nil && snap.Metadata.CheckpointID == i.Metadata.CheckpointID && filepath.Clean(snap.Dir) == filepath.Clean(i.Dir) {
		return append(acts, Attempt{Initial: true, Restore: i}), nil
	}
	acts = append(acts, Log{slog.LevelInfo, "restoring from checkpoint", []any{"checkpoint", snap.Metadata.CheckpointID, "dir", snap.Dir}})
	return append(acts, Attempt{Restore: snap}), nil
}

// End records how the job ended: the result goes to the HA store first
// when e.Publish, then is written, then the retention policy applies. The
// runtime answers PublishResult with ResultPublished and WriteResult with
// ResultWritten.
func (m *Machine) End(now time.Time, e End) []Action {
	m.expect(phaseRunning, "end")
	res := storage.JobResult{JobID: m.cfg.JobID, RunID: m.cfg.RunID, Status: e.Status, EndTimestamp: now.UnixMilli(), Savepoint: e.Savepoint, Origin: m.origin}
	switch e.Status {
	case storage.ResultFinished:
		m.term = checkpoint.JobFinished
	case storage.ResultCanceled:
		m.term = checkpoint.JobCanceled
	default:
		res.Status, m.term = storage.ResultFailed, checkpoint.JobFailed
		if e.Err != nil {
			res.Error = e.Err.Error()
		}
	}
	m.discard = m.cfg.Retention.Discards(m.term)
	if len(e.Owned) > 0 {
		res.LastCheckpoint, res.Retained = e.Owned[len(e.Owned)-1], !m.discard
	}
	m.result = res
	if e.Publish {
		m.phase = phasePublishing
		return []Action{PublishResult{res}}
	}
	m.phase = phaseWriting
	return []Action{WriteResult{res}}
}

// ResultPublished is the HA store's answer to PublishResult. A refusal
// (another coordinator leads the job now) records nothing and deletes
// nothing.
func (m *Machine) ResultPublished(now time.Time, err error) []Action {
	m.expect(phasePublishing, "result published")
	if err != nil {
		m.phase = phaseEnded
		return []Action{Log{slog.LevelError, "the job's result is not recorded here: this coordinator may not (it lost the leadership); its checkpoints are kept",
			[]any{"status", m.result.Status, "err", err}}}
	}
	m.phase = phaseWriting
	return []Action{WriteResult{m.result}}
}

// ResultWritten is the storage's answer to WriteResult. Without a durable
// result nothing may be deleted: the next start must still find the
// checkpoints.
func (m *Machine) ResultWritten(now time.Time, err error) []Action {
	switch m.phase {
	case phaseWriting:
		if err != nil {
			m.phase = phaseEnded
			return []Action{Log{slog.LevelError, "write the job result; its checkpoints are kept", []any{"status", m.result.Status, "err", err}}, Ended{m.result}}
		}
		var acts []Action
		if m.discard {
			acts = append(acts, ApplyRetention{m.term})
		} else if m.result.LastCheckpoint > 0 {
			acts = append(acts, Log{slog.LevelInfo, "the job's checkpoints are kept (execution.checkpointing.externalized-checkpoint-retention " + m.cfg.Retention.String() + ")",
				[]any{"status", m.result.Status, "last_checkpoint", m.result.LastCheckpoint, "dir", m.cfg.Layout.CheckpointDir(m.result.LastCheckpoint)}})
		}
		m.result.Clean = true
		m.phase = phaseCleaning
		return append(acts, WriteResult{m.result})
	case phaseCleaning:
		m.phase = phaseEnded
		if err != nil {
			return []Action{Log{slog.LevelWarn, "mark the job result clean", []any{"err", err}}, Ended{m.result}}
		}
		return []Action{Ended{m.result}}
	}
	panic(fmt.Sprintf("lifecycle: result written in phase %s", m.phase))
}

// ids lists the checkpoint ids of retained and unusable, among those
// every filter allows.
func ids(retained []*storage.Snapshot, unusable []storage.Unusable, filters ...func(int64) bool) []int64 {
	var out []int64
	add := func(id int64) {
		for _, f := range filters {
			if !f(id) {
				return
			}
		}
		out = append(out, id)
	}
	for _, s := range retained {
		add(s.Metadata.CheckpointID)
	}
	for _, u := range unusable {
		add(u.ID)
	}
	slices.Sort(out)
	return out
}

func failedFile(err error) string {
	var fe *storage.FileError
	if errors.As(err, &fe) {
		return fe.Path
	}
	return ""
}

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}
