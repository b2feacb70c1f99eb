package sink

import (
	"fmt"
	"sync"
)

// Collected is one record gathered by a Collect sink.
type Collected[T any] struct {
	Value T
	// Timestamp is the record's event timestamp (source.NoTimestamp if none).
	Timestamp int64
	// Subtask is the index of the writer that received the record.
	Subtask int
}

// Collect is a sink that gathers every written record into memory, for
// tests. Writers of all subtasks may write concurrently; the records are
// kept in arrival order, so the records of one subtask are in the order it
// wrote them. The zero value is ready to use; a Collect must not be copied
// after first use.
type Collect[T any] struct {
	mu      sync.Mutex
	records []Collected[T]
}

var _ Sink[int] = (*Collect[int])(nil)

// NewCollect returns an empty Collect sink.
func NewCollect[T any]() *Collect[T] { return &Collect[T]{} }

// NewWriter makes the writer of subtask ctx.Subtask.
func (c *Collect[T]) NewWriter(ctx WriterContext) (Writer[T], error) {
	if err := checkWriterContext(ctx); err != nil {
		return nil, fmt.Errorf("collect sink: %w", err)
	}
	return &collectWriter[T]{sink: c, subtask: ctx.Subtask}, nil
}

// Values returns a copy of the values gathered so far, in arrival order.
func (c *Collect[T]) Values() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]T, len(c.records))
	for i, r := range c.records {
		out[i] = r.Value
	}
	return out
}

// Records returns a copy of the records gathered so far, in arrival order.
func (c *Collect[T]) Records() []Collected[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Collected[T], len(c.records))
	copy(out, c.records)
	return out
}

// Len returns the number of records gathered so far.
func (c *Collect[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.records)
}

type collectWriter[T any] struct {
	sink    *Collect[T]
	subtask int
	closed  bool
}

func (w *collectWriter[T]) Write(v T, ts int64) error {
	if w.closed {
		return fmt.Errorf("collect sink subtask %d: write: %w", w.subtask, ErrClosed)
	}
	c := w.sink
	c.mu.Lock()
	c.records = append(c.records, Collected[T]{Value: v, Timestamp: ts, Subtask: w.subtask})
	c.mu.Unlock()
	return nil
}

// Flush does nothing: records are visible as soon as they are written.
func (w *collectWriter[T]) Flush(endOfInput bool) error {
	if w.closed {
		return fmt.Errorf("collect sink subtask %d: flush: %w", w.subtask, ErrClosed)
	}
	return nil
}

func (w *collectWriter[T]) Close() error {
	w.closed = true
	return nil
}
