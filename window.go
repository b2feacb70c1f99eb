package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// TimeWindow is a window [Start, End) of event or processing time in Unix
// milliseconds; MaxTimestamp (End - 1) is the timestamp of its results.
type TimeWindow = operators.TimeWindow

// WindowAssigner gives each record its windows; the built-in assigners
// are made by TumblingEventTimeWindows and its siblings.
type WindowAssigner = operators.WindowAssigner

// WindowContext is the context of a ProcessWindowFunction: the key, the
// window, the clocks, per-window state (WindowNamespace) and side outputs
// (EmitSide).
type WindowContext[K comparable] = operators.WindowContext[K]

// ProcessWindowFunction sees a fired window and its elements, as Flink's
// ProcessWindowFunction. It may implement Open(*OperatorContext) error,
// Close() error, and Clear(*WindowContext[K]) error for per-window state.
type ProcessWindowFunction[K comparable, IN, OUT any] = operators.ProcessWindowFunction[K, IN, OUT]

// WindowStateClearer is implemented by a ProcessWindowFunction that keeps
// per-window state: Clear runs when a window is purged (its end - 1 plus
// the allowed lateness).
type WindowStateClearer[K comparable] = operators.WindowStateClearer[K]

// ProcessWindowFunc adapts a function to a ProcessWindowFunction.
type ProcessWindowFunc[K comparable, IN, OUT any] = operators.ProcessWindowFunc[K, IN, OUT]

// AggregateFunction aggregates the records of a window incrementally, as
// Flink's AggregateFunction. If it has a method AccumulatorCodec()
// Codec[ACC], that codec stores the accumulator; otherwise
// codec.Default[ACC]() does (codec.DefaultFor with WithDefaultCodec's
// format).
type AggregateFunction[IN, ACC, OUT any] = state.AggregateFunction[IN, ACC, OUT]

// TumblingAssigner is the assigner of TumblingEventTimeWindows and
// TumblingProcessingTimeWindows.
type TumblingAssigner struct{ operators.TumblingWindows }

// WithOffset shifts the windows by offset (|offset| < size): with one-day
// windows, an offset of -8h makes them days of UTC+8.
func (a TumblingAssigner) WithOffset(offset time.Duration) TumblingAssigner {
	a.Offset = millis(offset)
	return a
}

// SlidingAssigner is the assigner of SlidingEventTimeWindows and
// SlidingProcessingTimeWindows.
type SlidingAssigner struct{ operators.SlidingWindows }

// WithOffset shifts the windows by offset (|offset| < slide).
func (a SlidingAssigner) WithOffset(offset time.Duration) SlidingAssigner {
	a.Offset = millis(offset)
	return a
}

// TumblingEventTimeWindows assigns each record to one window of the given
// size by its event timestamp, windows aligned to the epoch (Flink's
// TumblingEventTimeWindows.of).
func TumblingEventTimeWindows(size time.Duration) TumblingAssigner {
	return TumblingAssigner{operators.TumblingWindows{Size: millis(size)}}
}

// TumblingProcessingTimeWindows is TumblingEventTimeWindows by the wall
// clock at the window operator.
func TumblingProcessingTimeWindows(size time.Duration) TumblingAssigner {
	return TumblingAssigner{operators.TumblingWindows{Size: millis(size), ProcessingTime: true}}
}

// SlidingEventTimeWindows assigns each record to the size/slide windows of
// the given size that hold its event timestamp, one starting every slide
// (Flink's SlidingEventTimeWindows.of).
func SlidingEventTimeWindows(size, slide time.Duration) SlidingAssigner {
	return SlidingAssigner{operators.SlidingWindows{Size: millis(size), Slide: millis(slide)}}
}

// SlidingProcessingTimeWindows is SlidingEventTimeWindows by the wall
// clock at the window operator.
func SlidingProcessingTimeWindows(size, slide time.Duration) SlidingAssigner {
	return SlidingAssigner{operators.SlidingWindows{Size: millis(size), Slide: millis(slide), ProcessingTime: true}}
}

// EventTimeSessionWindows groups a key's records into sessions that end
// after a gap without records, by event time (Flink's
// EventTimeSessionWindows.withGap).
func EventTimeSessionWindows(gap time.Duration) WindowAssigner {
	return operators.SessionWindows{Gap: millis(gap)}
}

// ProcessingTimeSessionWindows is EventTimeSessionWindows by the wall
// clock at the window operator.
func ProcessingTimeSessionWindows(gap time.Duration) WindowAssigner {
	return operators.SessionWindows{Gap: millis(gap), ProcessingTime: true}
}

// millis converts a duration to whole milliseconds; a positive duration
// under 1 ms becomes -1 so that validation refuses it.
func millis(d time.Duration) int64 {
	if d > 0 && d < time.Millisecond {
		return -1
	}
	return d.Milliseconds()
}

// WindowedStream is a keyed stream cut into windows, waiting for its
// window function (ReduceWindow, AggregateWindow, ProcessWindow and their
// combinations), as Flink's WindowedStream. The trigger is the default of
// the assigner's time domain: an event-time window fires when the
// watermark passes its end - 1, a processing-time window when the wall
// clock does.
//
//	late := sluice.NewOutputTag[Click]("late-clicks")
//	byUser := sluice.KeyBy(clicks, func(c Click) string { return c.User })
//	ws := sluice.Window(byUser, sluice.TumblingEventTimeWindows(time.Minute)).
//		AllowedLateness(10 * time.Second).
//		SideOutputLateData(late)
//	counts := sluice.AggregateWindow(ws, countClicks{}, sluice.UID("clicks-per-minute"))
//	lateClicks := sluice.SideOutput(counts, late)
type WindowedStream[K comparable, T any] struct {
	keyed    *KeyedStream[K, T]
	assigner WindowAssigner
	lateness time.Duration
	lateTag  string
	trigger  Trigger[T]
	evictor  Evictor[T]
	// all: a non-keyed window (WindowAll), run with parallelism 1.
	all bool
}

// Window cuts a keyed stream into the windows the assigner gives.
func Window[K comparable, T any](ks *KeyedStream[K, T], assigner WindowAssigner) *WindowedStream[K, T] {
	env := ks.stream.env
	if assigner == nil {
		env.addErr(fmt.Errorf("%w: Window needs an assigner", ErrInvalidOption))
	} else if err := assigner.Validate(); err != nil {
		env.addErr(fmt.Errorf("%w: window assigner: %w", ErrInvalidOption, err))
	}
	return &WindowedStream[K, T]{keyed: ks, assigner: assigner}
}

// AllowedLateness keeps each event-time window's state for d after the
// watermark passed its end (default 0). A record that arrives in that
// time is added to its window, which fires again at once with the updated
// result; the state is purged at end - 1 + d. Processing-time windows
// ignore it.
func (w *WindowedStream[K, T]) AllowedLateness(d time.Duration) *WindowedStream[K, T] {
	if d < 0 {
		w.keyed.stream.env.addErr(fmt.Errorf("%w: allowed lateness must not be negative, got %v", ErrInvalidOption, d))
	}
	c := *w
	c.lateness = d
	return &c
}

// SideOutputLateData sends the records that arrive after every window they
// belong to was purged (later than the allowed lateness) to the side
// output tag, instead of dropping them; take them with SideOutput on the
// window function's stream.
func (w *WindowedStream[K, T]) SideOutputLateData(tag OutputTag[T]) *WindowedStream[K, T] {
	if tag.name == "" {
		w.keyed.stream.env.addErr(fmt.Errorf("%w: late data output tag needs a name", ErrInvalidOption))
	}
	c := *w
	c.lateTag = tag.name
	return &c
}

func (w *WindowedStream[K, T]) config() operators.WindowConfig[K, T] {
	return operators.WindowConfig[K, T]{
		Assigner: w.assigner, KeyOf: w.keyed.keyOf, KeyCodec: w.keyed.keyCodec,
		AllowedLateness: w.lateness.Milliseconds(), LateDataTag: w.lateTag,
		Trigger: w.trigger, Evictor: w.evictor,
	}
}

// elementCodec is the codec of the windowed stream's records: that of
// the operator producing them.
func (w *WindowedStream[K, T]) elementCodec() Codec[T] {
	for _, n := range w.keyed.stream.from {
		if n.Out != nil {
			if c, ok := n.Out.Codec().(codec.Codec[T]); ok {
				return c
			}
		}
	}
	return defaultCodec[T](w.keyed.stream.env)
}

// windowNode adds the window operator node; build makes the operator.
func windowNode[K comparable, T, OUT any](w *WindowedStream[K, T], defName string, opts []OpOption,
	build func(cfg operators.WindowConfig[K, T], out operators.Output[OUT]) operators.Operator) *Stream[OUT] {
	s := w.keyed.stream
	if w.all {
		defName = "All" + defName
	}
	n, set := newNode[OUT](s.env, defName, opts, true)
	n.Keyed, n.KeyCodec = true, w.keyed.keyCodec
	if w.all {
		// Flink's windowAll: one subtask sees every record.
		if set.parallelism > 1 {
			s.env.addErr(fmt.Errorf("%w: operator %q: a non-keyed window (WindowAll) runs with parallelism 1, got %d", ErrInvalidOption, n.Name, set.parallelism))
		}
		n.Parallelism = 1
	}
	cfg := w.config()
	n.Build = func(out any) (operators.Operator, []any, error) {
		c := cfg
		c.BufferLimit = s.env.windowBuffer
		if c.Trigger != nil {
			c.Trigger = cloneFunction(c.Trigger)
		}
		if c.Evictor != nil {
			c.Evictor = cloneFunction(c.Evictor)
		}
		op := build(c, out.(operators.Output[OUT]))
		return op, []any{op}, nil
	}
	connect(s, n, 0)
	return newStream[OUT](s.env, n)
}

// ReduceWindow reduces each window's records incrementally with fn and
// emits one result per window firing, as Flink's WindowedStream.reduce;
// the reduced value is stored with the output codec (WithCodec).
func ReduceWindow[K comparable, T any](w *WindowedStream[K, T], fn func(acc, v T) (T, error), opts ...OpOption) *Stream[T] {
	var vc Codec[T]
	ec := w.elementCodec()
	s := windowNode(w, "Window(Reduce)", opts, func(cfg operators.WindowConfig[K, T], out operators.Output[T]) operators.Operator {
		if cfg.Evictor != nil {
			return operators.NewEvictingWindow(cfg, nil, ec, operators.ReduceElements[K](fn), out)
		}
		return operators.NewReduceWindow(cfg, fn, vc, out)
	})
	vc = outputCodec(s)
	return s
}

// AggregateWindow aggregates each window's records incrementally with agg
// and emits its result per window firing, as Flink's
// WindowedStream.aggregate.
func AggregateWindow[K comparable, IN, ACC, OUT any](w *WindowedStream[K, IN], agg AggregateFunction[IN, ACC, OUT], opts ...OpOption) *Stream[OUT] {
	ec := w.elementCodec()
	return windowNode(w, "Window(Aggregate)", opts, func(cfg operators.WindowConfig[K, IN], out operators.Output[OUT]) operators.Operator {
		if cfg.Evictor != nil {
			return operators.NewEvictingWindow(cfg, nil, ec, operators.AggregateElements[K](cloneFunction(agg)), out)
		}
		return operators.NewAggregateWindow(cfg, cloneFunction(agg), accumulatorCodec(w.keyed.stream.env, agg), out)
	})
}

// ProcessWindow buffers each window's records (in keyed state, with the
// input's codec) and hands them to fn with the window when it fires, as
// Flink's WindowedStream.process.
func ProcessWindow[K comparable, IN, OUT any](w *WindowedStream[K, IN], fn ProcessWindowFunction[K, IN, OUT], opts ...OpOption) *Stream[OUT] {
	ec := w.elementCodec()
	return windowNode(w, "Window(Process)", opts, func(cfg operators.WindowConfig[K, IN], out operators.Output[OUT]) operators.Operator {
		f := cloneFunction(fn)
		if cfg.Evictor != nil {
			return operators.NewEvictingWindow(cfg, f, ec, f.Process, out)
		}
		return operators.NewProcessWindow(cfg, f, ec, out)
	})
}

// ReduceProcessWindow reduces each window incrementally with reduce and
// hands the single result to fn with the window, as Flink's
// WindowedStream.reduce(ReduceFunction, ProcessWindowFunction); the
// reduced value is stored with the input's codec.
func ReduceProcessWindow[K comparable, T, OUT any](w *WindowedStream[K, T], reduce func(acc, v T) (T, error), fn ProcessWindowFunction[K, T, OUT], opts ...OpOption) *Stream[OUT] {
	vc := w.elementCodec()
	return windowNode(w, "Window(ReduceProcess)", opts, func(cfg operators.WindowConfig[K, T], out operators.Output[OUT]) operators.Operator {
		f := cloneFunction(fn)
		if cfg.Evictor != nil {
			return operators.NewEvictingWindow(cfg, f, vc, operators.ReduceProcessElements(reduce, f), out)
		}
		return operators.NewReduceProcessWindow(cfg, reduce, vc, f, out)
	})
}

// AggregateProcessWindow aggregates each window incrementally with agg
// and hands its result to fn with the window, as Flink's
// WindowedStream.aggregate(AggregateFunction, ProcessWindowFunction).
func AggregateProcessWindow[K comparable, IN, ACC, V, OUT any](w *WindowedStream[K, IN], agg AggregateFunction[IN, ACC, V], fn ProcessWindowFunction[K, V, OUT], opts ...OpOption) *Stream[OUT] {
	ec := w.elementCodec()
	return windowNode(w, "Window(AggregateProcess)", opts, func(cfg operators.WindowConfig[K, IN], out operators.Output[OUT]) operators.Operator {
		f := cloneFunction(fn)
		if cfg.Evictor != nil {
			return operators.NewEvictingWindow(cfg, f, ec, operators.AggregateProcessElements(cloneFunction(agg), f), out)
		}
		return operators.NewAggregateProcessWindow(cfg, cloneFunction(agg), accumulatorCodec(w.keyed.stream.env, agg), f, out)
	})
}

// outputCodec is the codec of a stream's producing operator.
func outputCodec[T any](s *Stream[T]) Codec[T] {
	if len(s.from) == 1 && s.from[0].Out != nil {
		if c, ok := s.from[0].Out.Codec().(codec.Codec[T]); ok {
			return c
		}
	}
	return defaultCodec[T](s.env)
}

// accumulatorCodec is the codec an AggregateFunction names for its
// accumulator, if it does.
func accumulatorCodec[IN, ACC, OUT any](env *Environment, agg AggregateFunction[IN, ACC, OUT]) Codec[ACC] {
	if c, ok := agg.(interface{ AccumulatorCodec() Codec[ACC] }); ok {
		return c.AccumulatorCodec()
	}
	return defaultCodec[ACC](env)
}
