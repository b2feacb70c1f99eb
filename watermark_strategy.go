package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// WatermarkStrategy says how a source assigns event timestamps and
// generates watermarks, as Flink's WatermarkStrategy.
type WatermarkStrategy[T any] struct {
	periodic       bool
	outOfOrderness time.Duration
	timestamps     func(v T, sourceTs int64) int64
	idleness       time.Duration
}

// NoWatermarks keeps the source's timestamps and emits no periodic
// watermarks (a bounded source still ends with the maximum watermark).
func NoWatermarks[T any]() WatermarkStrategy[T] { return WatermarkStrategy[T]{} }

// ForBoundedOutOfOrderness emits, every auto-watermark interval, the
// watermark max timestamp seen - d - 1 ms: records may be up to d late.
func ForBoundedOutOfOrderness[T any](d time.Duration) WatermarkStrategy[T] {
	return WatermarkStrategy[T]{periodic: true, outOfOrderness: d}
}

// ForMonotonousTimestamps is ForBoundedOutOfOrderness(0).
func ForMonotonousTimestamps[T any]() WatermarkStrategy[T] { return ForBoundedOutOfOrderness[T](0) }

// WithTimestampAssigner sets the function that gives a record its event
// timestamp (Unix ms); sourceTs is the timestamp the source attached.
func (w WatermarkStrategy[T]) WithTimestampAssigner(fn func(v T, sourceTs int64) int64) WatermarkStrategy[T] {
	w.timestamps = fn
	return w
}

// WithIdleness marks the source subtask idle when it has emitted nothing
// for d, so downstream watermarks do not wait for it.
func (w WatermarkStrategy[T]) WithIdleness(d time.Duration) WatermarkStrategy[T] {
	w.idleness = d
	return w
}

// FromSource adds a parallel source to the job.
func FromSource[T any](env *Environment, src source.Source[T], ws WatermarkStrategy[T], name string, opts ...OpOption) *Stream[T] {
	opts = append([]OpOption{Name(name)}, opts...)
	n, _ := newNode[T](env, "Source", opts, true)
	interval := env.cfg.AutoWatermarkInterval
	n.BuildSource = func(sc *runtime.SourceContext, out any) (runtime.SourceDriver, error) {
		rctx := source.ReaderContext{Subtask: sc.Op.Subtask, Parallelism: sc.Op.Parallelism,
			Restored: sc.Op.Restored, RestoredCheckpointID: sc.Op.RestoredCheckpointID}
		st, err := state.GetUnionListState(sc.Op.OperatorState, state.ListStateDescriptor[[]byte]{Name: readerStateName, Codec: codec.Bytes{}})
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
		d := &sourceDriver[T]{reader: r, out: out.(operators.Output[T]), ws: ws, sc: sc, state: st,
			maxTs: operators.MinWatermark, lastWm: operators.MinWatermark, interval: interval}
		if ws.periodic || ws.idleness > 0 {
			d.schedule()
		}
		return d, nil
	}
	return newStream[T](env, n)
}

// sourceDriver runs a source.Reader for the task loop and applies the
// watermark strategy. It is its own source.Output.
type sourceDriver[T any] struct {
	reader   source.Reader[T]
	out      operators.Output[T]
	ws       WatermarkStrategy[T]
	sc       *runtime.SourceContext
	interval time.Duration

	maxTs     int64
	lastWm    int64
	idle      bool
	emitted   bool // a record since the last periodic check
	quietFrom int64
	cancel    func()
	ended     bool
	state     state.OperatorListState[[]byte]
}

// readerStateName is the union list state that holds the source readers'
// positions: on restore every reader sees all of them and takes its own.
const readerStateName = "source-reader-state"

// SnapshotState stores the reader's position for checkpoint id.
func (d *sourceDriver[T]) SnapshotState(id int64) error {
	cr, ok := d.reader.(source.CheckpointedReader[T])
	if !ok {
		return nil
	}
	entries, err := cr.SnapshotState(id)
	if err != nil {
		return err
	}
	return d.state.Update(entries)
}

// NotifyCheckpointComplete and NotifyCheckpointAborted pass the
// notifications to a reader that listens for them.
func (d *sourceDriver[T]) NotifyCheckpointComplete(id int64) error {
	if l, ok := d.reader.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

func (d *sourceDriver[T]) NotifyCheckpointAborted(id int64) error {
	if l, ok := d.reader.(source.CheckpointListener); ok {
		return l.NotifyCheckpointAborted(id)
	}
	return nil
}

func (d *sourceDriver[T]) PollNext() (source.Status, error) {
	st, err := d.reader.PollNext(d)
	if err == nil && st == source.EndOfInput && !d.ended {
		d.ended = true
		if d.cancel != nil {
			d.cancel()
			d.cancel = nil
		}
		if d.lastWm != source.MaxWatermark {
			err = d.EmitWatermark(source.MaxWatermark)
		}
	}
	return st, err
}

func (d *sourceDriver[T]) Available() <-chan struct{} { return d.reader.Available() }

func (d *sourceDriver[T]) Close() error {
	if d.cancel != nil {
		d.cancel()
		d.cancel = nil
	}
	return d.reader.Close()
}

func (d *sourceDriver[T]) Collect(v T, ts int64) error {
	if d.ws.timestamps != nil {
		ts = d.ws.timestamps(v, ts)
	}
	if ts != source.NoTimestamp && ts > d.maxTs {
		d.maxTs = ts
	}
	d.emitted = true
	if d.idle {
		d.idle = false
		if err := d.sc.SetIdle(false); err != nil {
			return err
		}
	}
	return d.out.Collect(v, ts)
}

func (d *sourceDriver[T]) EmitWatermark(wm int64) error {
	if wm <= d.lastWm {
		return nil
	}
	d.lastWm = wm
	if d.idle {
		d.idle = false
		if err := d.sc.SetIdle(false); err != nil {
			return err
		}
	}
	return d.out.EmitWatermark(wm)
}

func (d *sourceDriver[T]) MarkIdle() error {
	if d.idle {
		return nil
	}
	d.idle = true
	return d.sc.SetIdle(true)
}

// schedule arms the next periodic watermark / idleness check.
func (d *sourceDriver[T]) schedule() {
	pts := d.sc.Op.ProcessingTime
	d.cancel = pts.At(pts.Now()+d.interval.Milliseconds(), d.onPeriodic)
}

func (d *sourceDriver[T]) onPeriodic() error {
	d.cancel = nil
	if d.ended {
		return nil
	}
	now := d.sc.Op.ProcessingTime.Now()
	if d.emitted {
		d.emitted = false
		d.quietFrom = now
	} else if d.quietFrom == 0 {
		d.quietFrom = now
	}
	if d.ws.periodic && d.maxTs != operators.MinWatermark {
		if err := d.EmitWatermark(d.maxTs - d.ws.outOfOrderness.Milliseconds() - 1); err != nil {
			return err
		}
	}
	if d.ws.idleness > 0 && !d.idle && now-d.quietFrom >= d.ws.idleness.Milliseconds() {
		if err := d.MarkIdle(); err != nil {
			return err
		}
	}
	d.schedule()
	return nil
}
