package sink

import (
	"fmt"
	"sync/atomic"
)

// Discard is a sink that counts the records written to it and drops them,
// for benchmarks. The zero value is ready to use.
type Discard[T any] struct {
	n atomic.Int64
}

var _ Sink[int] = (*Discard[int])(nil)

// NewDiscard returns a Discard sink with a count of zero.
func NewDiscard[T any]() *Discard[T] { return &Discard[T]{} }

// NewWriter makes the writer of subtask ctx.Subtask.
func (d *Discard[T]) NewWriter(ctx WriterContext) (Writer[T], error) {
	if err := checkWriterContext(ctx); err != nil {
		return nil, fmt.Errorf("discard sink: %w", err)
	}
	return &discardWriter[T]{sink: d}, nil
}

// Count returns the number of records written so far over all subtasks.
// While writers run it may lag by up to discardBatch records per writer;
// it is exact once they flushed or closed.
func (d *Discard[T]) Count() int64 { return d.n.Load() }

// discardBatch is how many records a writer counts locally before it adds
// them to the shared count: an atomic add per record would cost more than
// the rest of a chain of cheap operators.
const discardBatch = 1024

type discardWriter[T any] struct {
	sink  *Discard[T]
	local int64
}

func (w *discardWriter[T]) Write(T, int64) error {
	if w.local++; w.local == discardBatch {
		w.publish()
	}
	return nil
}

func (w *discardWriter[T]) publish() {
	w.sink.n.Add(w.local)
	w.local = 0
}

func (w *discardWriter[T]) Flush(bool) error { w.publish(); return nil }
func (w *discardWriter[T]) Close() error     { w.publish(); return nil }
