package lifecycle

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
)

// Action is what the Machine asks the runtime to do. The runtime carries
// out a batch in order.
type Action interface {
	fmt.Stringer
	action()
}

// Log is a line for the job's logger.
type Log struct {
	Level slog.Level
	Msg   string
	// Attrs are key-value pairs, as slog.Logger.Log takes them.
	Attrs []any
}

// DiscardCheckpoints deletes the completed checkpoints IDs (their
// _metadata first), never a shared file another checkpoint references. A
// failure is logged: the next start finds what is left.
type DiscardCheckpoints struct{ IDs []int64 }

// CollectGarbage deletes the shared files no _metadata references and
// aborts incomplete uploads. A failure is logged.
type CollectGarbage struct{}

// WriteResult writes the job's result durably, replacing an earlier one.
// At the start (marking an earlier run's result clean) a failure is
// logged; at the end the runtime answers with ResultWritten.
type WriteResult struct{ Result storage.JobResult }

// PublishResult hands the job's result to the HA store (a write fenced by
// the leader's epoch) before anything is recorded; the runtime answers
// with ResultPublished.
type PublishResult struct{ Result storage.JobResult }

// ClearResult deletes the recorded result of an earlier run: this run
// goes on with the job. A failure fails the start: the next start would
// otherwise take the job for ended.
type ClearResult struct{}

// CountFallback counts a restore that skipped a corrupt checkpoint whose
// transactions may have been committed (AllowFallbackPastCommitted).
type CountFallback struct{}

// NothingToRun ends the start: the job finished in an earlier run.
type NothingToRun struct{ Result storage.JobResult }

// Run starts the run's first attempt.
type Run struct {
	// Restore is the snapshot to restore (nil: from no state).
	Restore *storage.Snapshot
	// RestoreOwned: the restored snapshot is the run's (a checkpoint of the
	// job's directory it resumes or claims): its incremental checkpoints
	// may reference its shared files.
	RestoreOwned bool
	// Owned are the completed checkpoints of the job's directory the run
	// owns: retained, subsumed and discarded like its own. Every other
	// completed checkpoint there is pinned.
	Owned []int64
	// Adopt is a claimed snapshot outside the job's directory, deleted
	// once the run completes a checkpoint.
	Adopt string
	// Origin is the run's lineage, recorded in each of its checkpoints
	// (snapshot.Metadata.Origin): the restore path it started from, or the
	// lineage of the checkpoint it resumes.
	Origin string
}

// Attempt is what a restarted attempt restores.
type Attempt struct {
	// Initial: what the run started from (Run.Restore, maybe nothing).
	Initial bool
	// Restore is a checkpoint the run owns, when not Initial.
	Restore *storage.Snapshot
}

// ApplyRetention applies the retention policy to the checkpoints the run
// owns for a job that ended with Term: the checkpoint coordinator's
// Shutdown discards them.
type ApplyRetention struct{ Term checkpoint.Termination }

// Ended says the job's end is recorded as Result (also when the write
// failed: the result is then the run's own view).
type Ended struct{ Result storage.JobResult }

func (Log) action()                {}
func (DiscardCheckpoints) action() {}
func (CollectGarbage) action()     {}
func (WriteResult) action()        {}
func (PublishResult) action()      {}
func (ClearResult) action()        {}
func (CountFallback) action()      {}
func (NothingToRun) action()       {}
func (Run) action()                {}
func (Attempt) action()            {}
func (ApplyRetention) action()     {}
func (Ended) action()              {}

func (a Log) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log %s %q", strings.ToLower(a.Level.String()), a.Msg)
	for i := 0; i+1 < len(a.Attrs); i += 2 {
		fmt.Fprintf(&b, " %v=%v", a.Attrs[i], a.Attrs[i+1])
	}
	return b.String()
}

func (a DiscardCheckpoints) String() string { return fmt.Sprintf("discard %v", a.IDs) }
func (CollectGarbage) String() string       { return "collect-garbage" }
func (a WriteResult) String() string        { return "write-result " + describeResult(a.Result) }
func (a PublishResult) String() string      { return "publish-result " + describeResult(a.Result) }
func (ClearResult) String() string          { return "clear-result" }
func (CountFallback) String() string        { return "count-fallback" }
func (a NothingToRun) String() string       { return "nothing-to-run " + describeResult(a.Result) }
func (a ApplyRetention) String() string     { return "apply-retention " + a.Term.String() }
func (a Ended) String() string              { return "ended " + describeResult(a.Result) }

func (a Run) String() string {
	s := "run from-no-state"
	if a.Restore != nil {
		s = fmt.Sprintf("run restore=%s owned-restore=%t", describeSnapshot(a.Restore), a.RestoreOwned)
	}
	if len(a.Owned) > 0 {
		s += fmt.Sprintf(" owned=%v", a.Owned)
	}
	if a.Adopt != "" {
		s += " adopt=" + a.Adopt
	}
	if a.Origin != "" {
		s += " origin=" + a.Origin
	}
	return s
}

func (a Attempt) String() string {
	if a.Initial {
		return "attempt initial"
	}
	return "attempt restore=" + describeSnapshot(a.Restore)
}

func describeSnapshot(s *storage.Snapshot) string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("%d@%s", s.Metadata.CheckpointID, s.Dir)
}

func describeResult(r storage.JobResult) string {
	s := fmt.Sprintf("%s run=%s", r.Status, r.RunID)
	if r.LastCheckpoint > 0 {
		s += fmt.Sprintf(" last=%d retained=%t", r.LastCheckpoint, r.Retained)
	}
	if r.Savepoint != "" {
		s += " savepoint=" + r.Savepoint
	}
	if r.Origin != "" {
		s += " origin=" + r.Origin
	}
	if r.Error != "" {
		s += fmt.Sprintf(" error=%q", r.Error)
	}
	return s + fmt.Sprintf(" clean=%t", r.Clean)
}
