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
	return discardWriter[T]{d}, nil
}

// Count returns the number of records written so far over all subtasks.
func (d *Discard[T]) Count() int64 { return d.n.Load() }

type discardWriter[T any] struct{ sink *Discard[T] }

func (w discardWriter[T]) Write(T, int64) error {
	w.sink.n.Add(1)
	return nil
}

func (w discardWriter[T]) Flush(bool) error { return nil }
func (w discardWriter[T]) Close() error     { return nil }
