package operators

import (
	"fmt"

	"github.com/sluicehq/sluice/source"
)

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
// sink commits on completion. It is source.CheckpointListener: one
// interface for readers, operators, functions and writers.
type CheckpointListener = source.CheckpointListener

// FunctionSnapshotter is implemented by user functions (and the source
// operator, for its reader's position) that keep something outside keyed
// state which a checkpoint must hold: they write it into their operator
// state (Context.OperatorState) in the synchronous part of checkpoint
// checkpointID, on the task goroutine.
type FunctionSnapshotter interface {
	SnapshotState(checkpointID int64) error
}

// snapshotFunction calls a user function's FunctionSnapshotter, if any.
func snapshotFunction(ctx *Context, fn any, id int64) ([][]byte, error) {
	if s, ok := fn.(FunctionSnapshotter); ok {
		if err := s.SnapshotState(id); err != nil {
			return nil, Wrap(ctx, fmt.Errorf("snapshot for checkpoint %d: %w", id, err))
		}
	}
	return nil, nil
}
