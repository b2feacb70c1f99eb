package operators

// StateSnapshotter is implemented by operators that keep something outside
// their state backends which a checkpoint must hold: a source reader's
// position, a sink writer's state, a two-phase-commit sink's pre-committed
// transactions. The runtime calls it in the synchronous part of a
// checkpoint, on the task goroutine, before it snapshots the operator's
// backends; the operator writes what it keeps into Context.OperatorState
// and returns its committables, which the checkpoint stores.
type StateSnapshotter interface {
	SnapshotState(checkpointID int64) (committables [][]byte, err error)
}

// CheckpointListener is implemented by operators (and user functions)
// that act when a checkpoint completes or is aborted: a two-phase-commit
// sink commits on completion.
type CheckpointListener interface {
	NotifyCheckpointComplete(checkpointID int64) error
	NotifyCheckpointAborted(checkpointID int64) error
}
