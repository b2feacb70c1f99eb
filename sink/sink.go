// Package sink owns the sink interfaces that the runtime drives (a Sink
// makes one Writer per subtask) and the sinks for tests and demos: collect,
// print and discard.
package sink

// WriterContext tells a Writer which subtask it runs in.
type WriterContext struct {
	// Subtask is the index of this writer's subtask, in [0, Parallelism).
	Subtask int
	// Parallelism is the number of parallel writers of the sink.
	Parallelism int
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
