// Package source owns the source interfaces that the runtime drives (a
// Source makes one Reader per subtask; the task's mailbox loop polls it) and
// the sources for tests and demos: datagen and a slice source.
package source

import (
	"context"
	"log/slog"
	"math"
)

// NoTimestamp marks a record that carries no event timestamp.
const NoTimestamp int64 = math.MinInt64

// MaxWatermark is the watermark a finished bounded source emits: event time
// has reached its end.
const MaxWatermark int64 = math.MaxInt64

// Status is what a Reader reports after PollNext.
type Status int

const (
	// MoreAvailable: call PollNext again right away.
	MoreAvailable Status = iota
	// NothingAvailable: wait until Available() fires, then poll again.
	NothingAvailable
	// EndOfInput: the reader has emitted everything it ever will.
	EndOfInput
)

func (s Status) String() string {
	switch s {
	case MoreAvailable:
		return "more-available"
	case NothingAvailable:
		return "nothing-available"
	case EndOfInput:
		return "end-of-input"
	}
	return "unknown"
}

// Output is where a Reader emits records and watermarks. It is called only
// from the task goroutine, inside PollNext.
type Output[T any] interface {
	// Collect emits one record with its event timestamp (NoTimestamp if none).
	Collect(v T, ts int64) error
	// EmitWatermark declares that no record with a timestamp <= wm follows.
	EmitWatermark(wm int64) error
	// MarkIdle declares the reader idle: downstream watermarks do not wait
	// for it until it emits again.
	MarkIdle() error
}

// ReaderOutput is the Output the runtime passes to PollNext (Flink's
// ReaderOutput). A reader of several splits (a Kafka reader's partitions)
// emits each split's records to that split's own output, so that the
// job's watermark strategy runs per split, as in Flink: each split gets
// its timestamps from the strategy's assigner, its own watermark and its
// own idleness, and the subtask's watermark is the smallest over the
// splits that are not idle. A split output holds the subtask's watermark
// back from its creation on (a split without records yet is at the
// minimum watermark until the strategy's idleness marks it idle), so a
// reader creates it when the split is assigned. A reader of no splits
// uses the ReaderOutput's own methods, as a plain Output.
//
// The runtime passes the same ReaderOutput to every PollNext of a
// reader; a reader may keep it, and the split outputs it made, between
// calls, and carry a split's output with the split's own state instead
// of looking it up per record.
type ReaderOutput[T any] interface {
	Output[T]
	// CreateOutputForSplit returns the output of the split with id
	// splitID, made on the first call for that id (Flink's
	// createOutputForSplit). Its EmitWatermark and MarkIdle concern the
	// split alone; a record or watermark on it makes the split active
	// again.
	CreateOutputForSplit(splitID string) Output[T]
	// ReleaseOutputForSplit forgets the output of a split that has
	// finished: it no longer holds the subtask's watermark back.
	ReleaseOutputForSplit(splitID string)
}

// ReaderContext tells a Reader which subtask it runs in and, on restore,
// where the readers were.
type ReaderContext struct {
	// Subtask is the index of this reader's subtask, in [0, Parallelism).
	Subtask int
	// Parallelism is the number of parallel readers of the source.
	Parallelism int
	// Restored is true when the job restores from a checkpoint or
	// savepoint.
	Restored bool
	// RestoredState is, on restore, the union of what every reader of the
	// source returned from SnapshotState for that checkpoint, whatever the
	// parallelism was then: each reader takes the entries it owns now (a
	// Kafka reader: the partitions assigned to its subtask), so a restore
	// with another parallelism redistributes them.
	RestoredState [][]byte
	// RestoredCheckpointID is the id of the checkpoint restored from.
	RestoredCheckpointID int64
	// Logger is the job's logger with the operator's attributes: where a
	// reader (and the clients it makes) logs unless it was given a logger
	// of its own. Nil outside a job: slog.Default().
	Logger *slog.Logger
}

// Source is a parallel source of records of type T.
type Source[T any] interface {
	// Bounded reports whether every reader reaches EndOfInput by itself.
	Bounded() bool
	// NewReader makes the reader of one subtask.
	NewReader(ctx ReaderContext) (Reader[T], error)
}

// Yielder is implemented by the ReaderOutput the runtime passes to
// PollNext. A reader that emits more than one record per call asks
// ShouldYield after each record and returns MoreAvailable once it
// reports true: the task has mail (a checkpoint's trigger, a timer, a
// flush) or an output without a free buffer, which would otherwise wait
// for the rest of the batch. Flink's readers emit one record per call,
// so that its mails wait for one record at most; a batch keeps that
// bound and its throughput.
type Yielder interface {
	ShouldYield() bool
}

// Reader reads the records of one subtask. All its methods run on the task
// goroutine, so it needs no locks of its own.
type Reader[T any] interface {
	// PollNext emits a few records (typically one) to out and says whether
	// more are available now. It must not block for long: the task checks
	// its mailbox between calls (a reader of several records per call
	// asks the output when to stop early: Yielder). In a running job out
	// is a ReaderOutput: a reader of several splits emits to their
	// outputs.
	PollNext(out Output[T]) (Status, error)
	// Available returns a channel that receives (or is closed) when the
	// reader may have data again after NothingAvailable.
	Available() <-chan struct{}
	// Close releases the reader's resources.
	Close() error
}

// CheckpointedReader is a Reader whose position is part of every
// checkpoint. The runtime calls its methods on the task goroutine.
type CheckpointedReader[T any] interface {
	Reader[T]
	// SnapshotState returns the reader's position as of the records it has
	// emitted so far (for Kafka: the next offset of every assigned
	// partition), as independent entries so that a restore can
	// redistribute them. It runs in the synchronous part of the checkpoint:
	// it must be quick and must not block.
	SnapshotState(checkpointID int64) ([][]byte, error)
}

// CheckpointListener is implemented by readers, operators, user functions
// and sink writers that act when a checkpoint completes or is aborted,
// such as committing Kafka offsets back to a group for lag monitoring
// (operators.CheckpointListener is this interface).
type CheckpointListener interface {
	NotifyCheckpointComplete(checkpointID int64) error
	NotifyCheckpointAborted(checkpointID int64) error
}

// Partitioned is implemented by a source whose records come in a fixed
// number of splits at a time (a Kafka source: the partitions of its
// topics): more readers than splits would read nothing. The reactive mode
// (scheduler-mode: reactive) runs the source at no more parallelism than
// Partitions says. It may ask the external system and should return
// within ctx.
type Partitioned interface {
	Partitions(ctx context.Context) (int, error)
}
