// Package sink owns the sink interfaces that the runtime drives (a Sink
// makes one Writer per subtask) and the sinks for tests and demos: collect,
// print and discard.
package sink

import (
	"context"
	"log/slog"
)

// WriterContext tells a Writer which subtask it runs in and, on restore,
// what the writers had stored.
type WriterContext struct {
	// Context is the task's context: it is cancelled when the task is
	// cancelled or its attempt fails over. A writer or committer gives up
	// every blocking call (flushes, waits for acknowledgements, requests
	// to a broker that is down) when it is done. Never nil when the
	// runtime makes the context; a sink used by hand treats nil as
	// context.Background().
	Context context.Context
	// Subtask is the index of this writer's subtask, in [0, Parallelism).
	Subtask int
	// Parallelism is the number of parallel writers of the sink.
	Parallelism int
	// Restored is true when the job restores from a checkpoint or
	// savepoint.
	Restored bool
	// RestoredCheckpointID is the id of the checkpoint restored from.
	RestoredCheckpointID int64
	// RestoredParallelisms lists every parallelism the sink has run with
	// in the restored checkpoint's history as far as it is known (at least
	// the one of the restored checkpoint), so that a sink can clean up
	// after subtask indexes that no longer exist.
	RestoredParallelisms []int
	// RestoredState is, on restore, the union of what every writer
	// returned from SnapshotState (StatefulWriter) for that checkpoint.
	RestoredState [][]byte
	// Logger is the job's logger with the operator's attributes: where a
	// writer or committer (and the clients it makes) logs unless it was
	// given a logger of its own. Nil outside a job: slog.Default().
	Logger *slog.Logger
}

// Sink is a parallel sink of records of type T.
type Sink[T any] interface {
	// NewWriter makes the writer of one subtask.
	NewWriter(ctx WriterContext) (Writer[T], error)
}

// Writer writes the records of one subtask. All its methods run on the task
// goroutine.
type Writer[T any] interface {
	// Write writes one record with its event timestamp (NoTimestamp if none).
	Write(v T, ts int64) error
	// Flush makes what was written so far durable or visible; endOfInput is
	// true for the last call before Close on a finished job.
	Flush(endOfInput bool) error
	// Close releases the writer's resources.
	Close() error
}

// Ctx returns the writer context's Context, or context.Background() when
// it is nil.
func (c WriterContext) Ctx() context.Context {
	if c.Context == nil {
		return context.Background()
	}
	return c.Context
}
