package operators

import (
	"fmt"

	"github.com/sluicehq/sluice/sink"
)

// Sink writes every record to a sink.Writer it makes at Open.
type Sink[T any] struct {
	base
	sink   sink.Sink[T]
	writer sink.Writer[T]
}

// NewSink returns the operator that drives s.
func NewSink[T any](s sink.Sink[T]) *Sink[T] { return &Sink[T]{sink: s} }

func (s *Sink[T]) Open(ctx *Context) error {
	s.ctx = ctx
	w, err := s.sink.NewWriter(sink.WriterContext{Subtask: ctx.Subtask, Parallelism: ctx.Parallelism})
	if err != nil {
		return Wrap(ctx, fmt.Errorf("open sink writer: %w", err))
	}
	s.writer = w
	return nil
}

func (s *Sink[T]) ProcessElement(v T, ts int64) error {
	if err := s.writer.Write(v, ts); err != nil {
		return Wrap(s.ctx, err)
	}
	return nil
}

func (s *Sink[T]) ProcessWatermark(int64) error { return nil }

// Finish flushes the writer with endOfInput set.
func (s *Sink[T]) Finish() error {
	if err := s.writer.Flush(true); err != nil {
		return Wrap(s.ctx, fmt.Errorf("flush sink at end of input: %w", err))
	}
	return nil
}

func (s *Sink[T]) Close() error {
	if s.writer == nil {
		return nil
	}
	w := s.writer
	s.writer = nil
	if err := w.Close(); err != nil {
		return Wrap(s.ctx, fmt.Errorf("close sink writer: %w", err))
	}
	return nil
}

// Collect and EmitWatermark let the previous operator of a chain call the
// sink directly as its Output.
func (s *Sink[T]) Collect(v T, ts int64) error  { return s.ProcessElement(v, ts) }
func (s *Sink[T]) EmitWatermark(wm int64) error { return s.ProcessWatermark(wm) }
