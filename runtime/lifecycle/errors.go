package lifecycle

import "errors"

// The refusals of a job's life; the runtime and the root package export
// them under the same names.
var (
	// ErrJobTerminated is returned (wrapped) by Start when the job's
	// directory records that an earlier run was cancelled or failed, no
	// checkpoint of it is left, and nothing says where to start from:
	// starting from no state would write its committed output again. Say
	// so with FreshStart, or restore a snapshot.
	ErrJobTerminated = errors.New("job already reached a terminal state")
	// ErrFreshStartRefused is returned (wrapped) by Start when the job's
	// directory (or the HA store) holds completed checkpoints of the job
	// that cannot be restored and the run would start from no state: its
	// committed output would be written again. The error names the
	// checkpoint; FreshStart says to start from no state all the same.
	ErrFreshStartRefused = errors.New("starting from no state refused: the job has completed checkpoints")
	// ErrFallbackPastCommitted is returned (wrapped) when the latest
	// completed checkpoint is corrupt and the one before it would be
	// restored although the latest one's transactions may have been
	// committed: their output would be written again.
	ErrFallbackPastCommitted = errors.New("restoring an older checkpoint would repeat committed output")
	// ErrRestore is returned (wrapped) when a job cannot restore its state
	// (a snapshot that cannot be read, a checkpoint listing that failed).
	ErrRestore = errors.New("cannot restore")
)

// FatalError marks an error that fails the job without a restart (Flink's
// SuppressRestartsException): retrying cannot help.
type FatalError struct{ Err error }

func (e *FatalError) Error() string { return e.Err.Error() }
func (e *FatalError) Unwrap() error { return e.Err }

// SuppressRestarts says the job must not restart.
func (e *FatalError) SuppressRestarts() bool { return true }
