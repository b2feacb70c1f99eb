package source

import (
	"fmt"
	"slices"
)

// SliceOption configures a SliceSource.
type SliceOption[T any] func(*SliceSource[T])

// SliceTimestamps gives every element v the event timestamp fn(v), in
// milliseconds. Without it elements carry NoTimestamp. fn is called from
// every subtask's goroutine, so it must be safe for concurrent use.
func SliceTimestamps[T any](fn func(v T) int64) SliceOption[T] {
	return func(s *SliceSource[T]) { s.timestamps = fn }
}

// SliceSource is a bounded source of the elements of a slice, like Flink's
// fromCollection. Subtask i of p emits the elements i, i+p, i+2p, ... in
// that order, then MaxWatermark once, then reports EndOfInput.
type SliceSource[T any] struct {
	values     []T
	timestamps func(v T) int64
}

var _ Source[int] = (*SliceSource[int])(nil)

// FromSlice returns a bounded source of a copy of values.
func FromSlice[T any](values []T, opts ...SliceOption[T]) *SliceSource[T] {
	s := &SliceSource[T]{values: slices.Clone(values)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Bounded reports true: a SliceSource always ends.
func (s *SliceSource[T]) Bounded() bool { return true }

// NewReader makes the reader of subtask ctx.Subtask.
func (s *SliceSource[T]) NewReader(ctx ReaderContext) (Reader[T], error) {
	if err := checkReaderContext(ctx); err != nil {
		return nil, fmt.Errorf("slice source: %w", err)
	}
	return &sliceReader[T]{src: s, next: ctx.Subtask, step: ctx.Parallelism}, nil
}

type sliceReader[T any] struct {
	src  *SliceSource[T]
	next int // next element to emit
	step int // parallelism
	done bool
}

func (r *sliceReader[T]) PollNext(out Output[T]) (Status, error) {
	vals := r.src.values
	if r.next >= len(vals) {
		if !r.done {
			if err := out.EmitWatermark(MaxWatermark); err != nil {
				return EndOfInput, fmt.Errorf("slice source: emit final watermark: %w", err)
			}
			r.done = true
		}
		return EndOfInput, nil
	}
	v := vals[r.next]
	ts := NoTimestamp
	if r.src.timestamps != nil {
		ts = r.src.timestamps(v)
	}
	if err := out.Collect(v, ts); err != nil {
		return MoreAvailable, fmt.Errorf("slice source: emit element %d: %w", r.next, err)
	}
	r.next += r.step
	return MoreAvailable, nil
}

// Available returns a closed channel: a slice reader never waits.
func (r *sliceReader[T]) Available() <-chan struct{} { return closedChan }

func (r *sliceReader[T]) Close() error { return nil }
