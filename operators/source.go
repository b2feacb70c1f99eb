package operators

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// WatermarkStrategy says how a source operator assigns event timestamps
// and generates watermarks (the settings behind the API's
// WatermarkStrategy, Flink's WatermarkStrategy).
type WatermarkStrategy[T any] struct {
	// Periodic emits, every Interval, the watermark max timestamp seen -
	// OutOfOrderness - 1 ms.
	Periodic       bool
	OutOfOrderness time.Duration
	// Timestamps gives a record its event timestamp from the record and
	// the timestamp the source attached; nil keeps the source's.
	Timestamps func(v T, sourceTs int64) int64
	// Idleness marks the subtask idle after it emitted nothing for that
	// long (0: never).
	Idleness time.Duration
	// Interval is how often periodic watermarks and idleness are checked
	// (pipeline.auto-watermark-interval).
	Interval time.Duration
}

// SourceContext is what a source operator gets from its task: the
// operator context (subtask, operator state, processing time) and the way
// to mark the subtask idle downstream.
type SourceContext struct {
	Op *Context
	// SetIdle marks the source subtask idle (true) or active again (false)
	// downstream, so that watermarks do not wait for an idle source.
	SetIdle func(idle bool) error
}

// ReaderStateName is the union list state that holds the source readers'
// positions: on restore every reader sees all of them and takes its own.
const ReaderStateName = "source-reader-state"

// Source is the operator at the head of a source task: it drives one
// source.Reader, applies the watermark strategy, and keeps the reader's
// position in operator state. The task polls it (PollNext) like an input;
// it is the reader's source.Output.
type Source[T any] struct {
	reader source.Reader[T]
	out    Output[T]
	ws     WatermarkStrategy[T]
	sc     *SourceContext

	maxTs     int64
	lastWm    int64
	idle      bool
	emitted   bool // a record since the last periodic check
	quietFrom int64
	cancel    func()
	ended     bool
	state     state.OperatorListState[[]byte]
}

// NewSource makes the reader of src for the subtask of sc, restoring its
// position from the operator state, and returns the operator that drives
// it, writing to out.
func NewSource[T any](src source.Source[T], ws WatermarkStrategy[T], sc *SourceContext, out Output[T]) (*Source[T], error) {
	rctx := source.ReaderContext{Subtask: sc.Op.Subtask, Parallelism: sc.Op.Parallelism,
		Restored: sc.Op.Restored, RestoredCheckpointID: sc.Op.RestoredCheckpointID, Logger: sc.Op.Logger}
	st, err := state.GetUnionListState(sc.Op.OperatorState, state.ListStateDescriptor[[]byte]{Name: ReaderStateName, Codec: codec.Bytes{}})
	if err != nil {
		return nil, fmt.Errorf("source reader state: %w", err)
	}
	if rctx.Restored {
		if rctx.RestoredState, err = st.Get(); err != nil {
			return nil, fmt.Errorf("read restored source reader state: %w", err)
		}
	}
	r, err := src.NewReader(rctx)
	if err != nil {
		return nil, err
	}
	s := &Source[T]{reader: r, out: out, ws: ws, sc: sc, state: st, maxTs: MinWatermark, lastWm: MinWatermark}
	if ws.Periodic || ws.Idleness > 0 {
		s.schedule()
	}
	return s, nil
}

// SnapshotState stores the reader's position for checkpoint id.
func (s *Source[T]) SnapshotState(id int64) error {
	cr, ok := s.reader.(source.CheckpointedReader[T])
	if !ok {
		return nil
	}
	entries, err := cr.SnapshotState(id)
	if err != nil {
		return err
	}
	return s.state.Update(entries)
}

// NotifyCheckpointComplete and NotifyCheckpointAborted pass the
// notifications to a reader that listens for them.
func (s *Source[T]) NotifyCheckpointComplete(id int64) error {
	if l, ok := s.reader.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

func (s *Source[T]) NotifyCheckpointAborted(id int64) error {
	if l, ok := s.reader.(source.CheckpointListener); ok {
		return l.NotifyCheckpointAborted(id)
	}
	return nil
}

// PollNext polls the reader once; at the end of its input it emits the
// maximum watermark.
func (s *Source[T]) PollNext() (source.Status, error) {
	st, err := s.reader.PollNext(s)
	if err == nil && st == source.EndOfInput && !s.ended {
		s.ended = true
		if s.cancel != nil {
			s.cancel()
			s.cancel = nil
		}
		if s.lastWm != source.MaxWatermark {
			err = s.EmitWatermark(source.MaxWatermark)
		}
	}
	return st, err
}

// Available is the reader's: closed when PollNext may have something.
func (s *Source[T]) Available() <-chan struct{} { return s.reader.Available() }

// Close stops the periodic check and closes the reader.
func (s *Source[T]) Close() error {
	if s.cancel != nil {
		s.cancel()
		s.cancel = nil
	}
	return s.reader.Close()
}

// Collect is the reader's output: the record gets its timestamp by the
// strategy and goes down the chain.
func (s *Source[T]) Collect(v T, ts int64) error {
	if s.ws.Timestamps != nil {
		ts = s.ws.Timestamps(v, ts)
	}
	if ts != source.NoTimestamp && ts > s.maxTs {
		s.maxTs = ts
	}
	s.emitted = true
	if s.idle {
		s.idle = false
		if err := s.sc.SetIdle(false); err != nil {
			return err
		}
	}
	return s.out.Collect(v, ts)
}

// EmitWatermark forwards a watermark that advances time.
func (s *Source[T]) EmitWatermark(wm int64) error {
	if wm <= s.lastWm {
		return nil
	}
	s.lastWm = wm
	if s.idle {
		s.idle = false
		if err := s.sc.SetIdle(false); err != nil {
			return err
		}
	}
	return s.out.EmitWatermark(wm)
}

// MarkIdle marks the subtask idle downstream until it emits again.
func (s *Source[T]) MarkIdle() error {
	if s.idle {
		return nil
	}
	s.idle = true
	return s.sc.SetIdle(true)
}

// schedule arms the next periodic watermark / idleness check.
func (s *Source[T]) schedule() {
	pts := s.sc.Op.ProcessingTime
	s.cancel = pts.At(pts.Now()+s.ws.Interval.Milliseconds(), s.onPeriodic)
}

func (s *Source[T]) onPeriodic() error {
	s.cancel = nil
	if s.ended {
		return nil
	}
	now := s.sc.Op.ProcessingTime.Now()
	if s.emitted {
		s.emitted = false
		s.quietFrom = now
	} else if s.quietFrom == 0 {
		s.quietFrom = now
	}
	if s.ws.Periodic && s.maxTs != MinWatermark {
		if err := s.EmitWatermark(s.maxTs - s.ws.OutOfOrderness.Milliseconds() - 1); err != nil {
			return err
		}
	}
	if s.ws.Idleness > 0 && !s.idle && now-s.quietFrom >= s.ws.Idleness.Milliseconds() {
		if err := s.MarkIdle(); err != nil {
			return err
		}
	}
	s.schedule()
	return nil
}
