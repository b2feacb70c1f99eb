package operators

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// WatermarkStrategy says how a source operator assigns event timestamps
// and generates watermarks (the settings behind the API's
// WatermarkStrategy, Flink's WatermarkStrategy). It applies per split
// of a reader that emits to split outputs (source.ReaderOutput), else to
// the reader's records as a whole.
type WatermarkStrategy[T any] struct {
	// Periodic emits, every Interval, the watermark max timestamp seen -
	// OutOfOrderness - 1 ms.
	Periodic       bool
	OutOfOrderness time.Duration
	// Timestamps gives a record its event timestamp from the record and
	// the timestamp the source attached; nil keeps the source's.
	Timestamps func(v T, sourceTs int64) int64
	// Idleness marks a split idle after it emitted nothing for that long
	// (0: never); the subtask is idle when all its splits are.
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
	// ShouldYield reports whether the task wants its goroutine back
	// between two records of one poll (source.Yielder); nil: never.
	ShouldYield func() bool
}

// ReaderStateName is the union list state that holds the source readers'
// positions: on restore every reader sees all of them and takes its own.
const ReaderStateName = "source-reader-state"

// Source is the operator at the head of a source task: it drives one
// source.Reader, applies the watermark strategy, and keeps the reader's
// position in operator state. The task polls it (PollNext) like an input.
//
// The reader emits to a source.ReaderOutput: records of no particular
// split to the output itself, the records of each split to the split's
// output (CreateOutputForSplit). Every output carries its own timestamps,
// watermark and idleness, as Flink's per-split watermarks; the subtask's
// watermark is the smallest over the outputs that are not idle, and the
// subtask is idle when all of them are. The reader's own output takes
// part while the reader has no split outputs, or once it used it.
type Source[T any] struct {
	reader source.Reader[T]
	out    Output[T]
	ws     WatermarkStrategy[T]
	sc     *SourceContext

	main   *splitOutput[T]
	splits []*splitOutput[T] // the split outputs not released, in creation order
	byID   map[string]*splitOutput[T]
	// recombine: a split output was made or released during PollNext;
	// the combined watermark and idleness are due after it.
	recombine bool

	lastWm int64 // the latest watermark sent down the chain
	idle   bool  // the subtask is marked idle downstream
	cancel func()
	ended  bool
	state  state.OperatorListState[[]byte]
}

// splitOutput is the output of one split, or the reader's own (main):
// the strategy's state for it. Task goroutine only.
type splitOutput[T any] struct {
	src   *Source[T]
	id    string
	maxTs int64 // the largest timestamp of its records
	wm    int64 // its watermark: generated from maxTs, or emitted by the reader
	idle  bool
	// joined: the output takes part in the combined watermark (a split
	// output from its creation until released; main once used).
	joined   bool
	released bool
	// live: joined, not idle, and the subtask active since: a record on
	// it changes nothing but maxTs.
	live      bool
	emitted   bool  // a record since the last periodic check
	quietFrom int64 // when it was last seen emitting, at a periodic check
}

var (
	_ source.ReaderOutput[int] = (*splitOutput[int])(nil)
	_ source.Yielder           = (*splitOutput[int])(nil)
)

// ShouldYield is the task's: source.Yielder.
func (o *splitOutput[T]) ShouldYield() bool {
	y := o.src.sc.ShouldYield
	return y != nil && y()
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
	if rep, ok := r.(report.Reporter); ok {
		sc.Op.Metrics.AddReporter(rep)
	}
	s := &Source[T]{reader: r, out: out, ws: ws, sc: sc, state: st, lastWm: MinWatermark, byID: map[string]*splitOutput[T]{}}
	s.main = s.newOutput("")
	if ws.Periodic || ws.Idleness > 0 {
		s.schedule()
	}
	return s, nil
}

func (s *Source[T]) newOutput(id string) *splitOutput[T] {
	return &splitOutput[T]{src: s, id: id, maxTs: MinWatermark, wm: MinWatermark}
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
	st, err := s.reader.PollNext(s.main)
	if err == nil && s.recombine {
		s.recombine = false
		err = s.combine()
	}
	if err == nil && st == source.EndOfInput && !s.ended {
		s.ended = true
		if s.cancel != nil {
			s.cancel()
			s.cancel = nil
		}
		err = s.EmitWatermark(source.MaxWatermark)
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

// EmitWatermark sends wm down the chain when it advances event time,
// marking the subtask active: the combined watermark, the end of input,
// and the end of event time of a drain (stop-with-savepoint --drain).
func (s *Source[T]) EmitWatermark(wm int64) error {
	if wm <= s.lastWm {
		return nil
	}
	s.lastWm = wm
	if err := s.setIdle(false); err != nil {
		return err
	}
	return s.out.EmitWatermark(wm)
}

func (s *Source[T]) setIdle(idle bool) error {
	if s.idle == idle {
		return nil
	}
	s.idle = idle
	return s.sc.SetIdle(idle)
}

// combine sends the smallest watermark of the outputs that take part and
// are not idle, or marks the subtask idle when all of them are.
func (s *Source[T]) combine() error {
	wm, active, some := MaxWatermark, false, false
	take := func(o *splitOutput[T]) {
		some = true
		if !o.idle {
			active, wm = true, min(wm, o.wm)
		}
	}
	for _, o := range s.splits {
		take(o)
	}
	if s.main.joined || len(s.splits) == 0 {
		take(s.main)
	}
	if !some {
		return nil
	}
	if !active {
		return s.setIdle(true)
	}
	if err := s.setIdle(false); err != nil {
		return err
	}
	return s.EmitWatermark(wm)
}

// CreateOutputForSplit returns the output of split id, made active at
// the minimum watermark on the first call.
func (o *splitOutput[T]) CreateOutputForSplit(id string) source.Output[T] {
	s := o.src
	if so := s.byID[id]; so != nil {
		return so
	}
	so := s.newOutput(id)
	// Not live: its first record marks the subtask active before it goes
	// out, should the subtask be idle.
	so.joined = true
	s.byID[id] = so
	s.splits = append(s.splits, so)
	s.recombine = true
	return so
}

// ReleaseOutputForSplit drops the output of split id from the combined
// watermark.
func (o *splitOutput[T]) ReleaseOutputForSplit(id string) {
	s := o.src
	so := s.byID[id]
	if so == nil {
		return
	}
	delete(s.byID, id)
	so.released, so.joined, so.live = true, false, false
	s.splits = slices.DeleteFunc(s.splits, func(x *splitOutput[T]) bool { return x == so })
	s.recombine = true
}

// Collect gives the record its timestamp by the strategy, notes it for
// the output's watermark and idleness, and sends it down the chain.
func (o *splitOutput[T]) Collect(v T, ts int64) error {
	s := o.src
	if s.ws.Timestamps != nil {
		ts = s.ws.Timestamps(v, ts)
	}
	if ts > o.maxTs {
		o.maxTs = ts
	}
	o.emitted = true
	if !o.live {
		if err := o.activate(); err != nil {
			return err
		}
	}
	return s.out.Collect(v, ts)
}

// activate makes the output take part, not idle, and the subtask active
// (a record is on its way).
func (o *splitOutput[T]) activate() error {
	o.idle = false
	if !o.released {
		o.joined, o.live = true, true
	}
	return o.src.setIdle(false)
}

// EmitWatermark raises the output's watermark to wm (the reader's own
// watermarks, beside the strategy's).
func (o *splitOutput[T]) EmitWatermark(wm int64) error {
	o.wm = max(o.wm, wm)
	o.idle = false
	if !o.released {
		o.joined, o.live = true, true
	}
	return o.src.combine()
}

// MarkIdle marks the output idle until it emits again.
func (o *splitOutput[T]) MarkIdle() error {
	o.idle, o.live = true, false
	if !o.released {
		o.joined = true
	}
	return o.src.combine()
}

// schedule arms the next periodic watermark / idleness check.
func (s *Source[T]) schedule() {
	pts := s.sc.Op.ProcessingTime
	s.cancel = pts.At(pts.Now()+s.ws.Interval.Milliseconds(), s.onPeriodic)
}

// onPeriodic advances every output's watermark by the strategy, marks
// the outputs idle that emitted nothing for the idleness timeout, and
// combines.
func (s *Source[T]) onPeriodic() error {
	s.cancel = nil
	if s.ended {
		return nil
	}
	now := s.sc.Op.ProcessingTime.Now()
	s.tick(s.main, now)
	for _, o := range s.splits {
		s.tick(o, now)
	}
	if err := s.combine(); err != nil {
		return err
	}
	s.schedule()
	return nil
}

func (s *Source[T]) tick(o *splitOutput[T], now int64) {
	if o.emitted {
		o.emitted = false
		o.quietFrom = now
	} else if o.quietFrom == 0 {
		o.quietFrom = now
	}
	if s.ws.Periodic && o.maxTs != MinWatermark {
		o.wm = max(o.wm, o.maxTs-s.ws.OutOfOrderness.Milliseconds()-1)
	}
	if s.ws.Idleness > 0 && !o.idle && now-o.quietFrom >= s.ws.Idleness.Milliseconds() {
		o.idle, o.live = true, false
	}
}
