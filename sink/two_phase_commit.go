package sink

import "context"

// StatefulWriter is a Writer with state of its own in every checkpoint,
// restored through WriterContext.RestoredState.
type StatefulWriter[T any] interface {
	Writer[T]
	// SnapshotState runs in the synchronous part of checkpoint id.
	SnapshotState(checkpointID int64) ([][]byte, error)
}

// PrecommittingWriter is the writer half of a two-phase-commit sink: at
// the barrier of checkpoint n it makes everything written since the
// previous barrier durable but invisible (a Kafka transaction: flushed,
// every record acknowledged, not committed) and hands over committables
// that describe it; it then writes the next interval into a new
// transaction.
type PrecommittingWriter[T any] interface {
	Writer[T]
	// PrepareCommit runs in the synchronous part of checkpoint n and
	// returns the committables of the interval that n closes. They are
	// stored in checkpoint n.
	PrepareCommit(checkpointID int64) ([][]byte, error)
}

// Committer is the committer half of a two-phase-commit sink. Commit runs
// on notify-complete of a checkpoint, and on restore for the committables
// the restored checkpoint holds, before any writer starts.
type Committer interface {
	// Commit makes the committables of checkpoint id (and any earlier ones
	// handed in with them) visible. It must be idempotent: committing one
	// that is already committed succeeds. An error that retrying cannot
	// mend fails the job and must name the committable and the checkpoint.
	Commit(ctx context.Context, checkpointID int64, committables [][]byte) error
	// Close releases the committer.
	Close() error
}

// TwoPhaseCommitSink is a sink whose output becomes visible only when the
// checkpoint that covers it completes: exactly-once end to end.
type TwoPhaseCommitSink[T any] interface {
	Sink[T]
	// NewCommitter makes the committer of one subtask.
	NewCommitter(ctx WriterContext) (Committer, error)
}
