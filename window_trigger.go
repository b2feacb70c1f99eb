package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// Trigger decides when a window fires and purges, as Flink's Trigger: it
// is called for every record added to a window, for the window's timers
// (registered through the TriggerContext), when windows merge and when a
// window is cleared. Keep what a trigger needs in keyed state of the
// window (GetTriggerState): it is checkpointed, restored and rescaled
// with the window. The built-in triggers are made by CountTrigger and its
// siblings; set one with WindowedStream.Trigger.
type Trigger[T any] = operators.Trigger[T]

// TriggerResult is a trigger's decision (Continue, Fire, Purge,
// FireAndPurge).
type TriggerResult = operators.TriggerResult

// The trigger results, as Flink's TriggerResult.
const (
	Continue     = operators.Continue
	Fire         = operators.Fire
	Purge        = operators.Purge
	FireAndPurge = operators.FireAndPurge
)

// TriggerContext is what a Trigger sees: clocks, timers and the keyed
// state of the current key and window.
type TriggerContext = operators.TriggerContext

// GetTriggerState returns a keyed state handle of type H (a
// state.ReducingState[int64] for a ReducingStateDescriptor[int64]) scoped
// to the trigger's current key and window, as Flink's
// getPartitionedState.
func GetTriggerState[H state.KeyedState](ctx *TriggerContext, d state.Descriptor) (H, error) {
	return operators.GetTriggerState[H](ctx, d)
}

// MergeTriggerState merges a trigger's merging state of the windows
// merged into the current one, in Trigger.OnMerge.
func MergeTriggerState(ctx *TriggerContext, d state.Descriptor) error {
	return operators.MergeTriggerState(ctx, d)
}

// EventTimeTrigger fires a window when the watermark passes its end: the
// default of event-time assigners.
func EventTimeTrigger[T any]() Trigger[T] { return operators.EventTimeTrigger[T]{} }

// ProcessingTimeTrigger fires a window when the wall clock passes its
// end: the default of processing-time assigners.
func ProcessingTimeTrigger[T any]() Trigger[T] { return operators.ProcessingTimeTrigger[T]{} }

// CountTrigger fires a window each time n more records arrived in it
// (Flink's CountTrigger.of); it does not purge.
func CountTrigger[T any](n int64) Trigger[T] { return operators.CountTrigger[T]{MaxCount: n} }

// ContinuousEventTimeTrigger fires a window every interval of event time
// and when the watermark passes its end (Flink's
// ContinuousEventTimeTrigger.of).
func ContinuousEventTimeTrigger[T any](interval time.Duration) Trigger[T] {
	return operators.ContinuousEventTimeTrigger[T]{Interval: millis(interval)}
}

// ContinuousProcessingTimeTrigger fires a window every interval of
// processing time (Flink's ContinuousProcessingTimeTrigger.of).
func ContinuousProcessingTimeTrigger[T any](interval time.Duration) Trigger[T] {
	return operators.ContinuousProcessingTimeTrigger[T]{Interval: millis(interval)}
}

// PurgingTrigger makes every firing of nested also purge the window's
// contents (Flink's PurgingTrigger.of).
func PurgingTrigger[T any](nested Trigger[T]) Trigger[T] {
	return operators.PurgingTrigger[T]{Nested: nested}
}

// Evictor removes elements of a window before and after the window
// function runs, as Flink's Evictor. A window with an evictor keeps every
// element (with its timestamp) in state and applies a reduce or aggregate
// function when it fires.
type Evictor[T any] = operators.Evictor[T]

// TimestampedValue is a window element and its timestamp, as evictors
// see them.
type TimestampedValue[T any] = operators.TimestampedValue[T]

// EvictorContext gives an evictor the operator's clocks.
type EvictorContext = operators.EvictorContext

// CountEvictor keeps the last maxCount elements of a window when it fires
// (Flink's CountEvictor.of), before the window function; wrap it in
// EvictAfter to evict after it.
func CountEvictor[T any](maxCount int64) Evictor[T] {
	return operators.CountEvictor[T]{MaxCount: maxCount}
}

// TimeEvictor keeps the elements within size of the newest element's
// timestamp (Flink's TimeEvictor.of).
func TimeEvictor[T any](size time.Duration) Evictor[T] {
	return operators.TimeEvictor[T]{WindowSize: millis(size)}
}

// DeltaEvictor drops the elements whose delta to the window's last
// element is threshold or more (Flink's DeltaEvictor.of).
func DeltaEvictor[T any](threshold float64, delta func(a, b T) float64) Evictor[T] {
	return operators.DeltaEvictor[T]{Threshold: threshold, Delta: delta}
}

// EvictAfter makes an evictor evict after the window function instead of
// before it (Flink's doEvictAfter).
func EvictAfter[T any](e Evictor[T]) Evictor[T] {
	switch ee := e.(type) {
	case operators.CountEvictor[T]:
		ee.After = true
		return ee
	case operators.TimeEvictor[T]:
		ee.After = true
		return ee
	case operators.DeltaEvictor[T]:
		ee.After = true
		return ee
	}
	return evictAfter[T]{e}
}

// evictAfter runs a user evictor's EvictBefore after the window function.
type evictAfter[T any] struct{ e Evictor[T] }

func (a evictAfter[T]) EvictBefore(els []TimestampedValue[T], _ TimeWindow, _ EvictorContext) []TimestampedValue[T] {
	return els
}

func (a evictAfter[T]) EvictAfter(els []TimestampedValue[T], w TimeWindow, ctx EvictorContext) []TimestampedValue[T] {
	return a.e.EvictBefore(els, w, ctx)
}

// GlobalWindows assigns every record of a key to one window that never
// ends (Flink's GlobalWindows.create); its default trigger never fires, so
// give it one (Trigger).
func GlobalWindows() WindowAssigner { return operators.GlobalWindows{} }

// GlobalWindow is the window of GlobalWindows.
var GlobalWindow = operators.GlobalWindow

// Trigger replaces the assigner's default trigger, as Flink's
// WindowedStream.trigger.
func (w *WindowedStream[K, T]) Trigger(t Trigger[T]) *WindowedStream[K, T] {
	if err := operators.ValidateTrigger(t, w.assigner); err != nil && w.assigner != nil {
		w.keyed.stream.env.addErr(fmt.Errorf("%w: window trigger: %w", ErrInvalidOption, err))
	}
	c := *w
	c.trigger = t
	return &c
}

// Evictor sets the window's evictor, as Flink's WindowedStream.evictor.
func (w *WindowedStream[K, T]) Evictor(e Evictor[T]) *WindowedStream[K, T] {
	if e == nil {
		w.keyed.stream.env.addErr(fmt.Errorf("%w: window evictor is nil", ErrInvalidOption))
	} else if err := operators.ValidateEvictor(e); err != nil {
		w.keyed.stream.env.addErr(fmt.Errorf("%w: window evictor: %w", ErrInvalidOption, err))
	}
	c := *w
	c.evictor = e
	return &c
}

// CountWindow cuts a keyed stream into tumbling windows of size records
// per key, as Flink's KeyedStream.countWindow(size): GlobalWindows with
// PurgingTrigger(CountTrigger(size)). A key's last partial window does
// not fire.
func CountWindow[K comparable, T any](ks *KeyedStream[K, T], size int64) *WindowedStream[K, T] {
	return Window(ks, GlobalWindows()).Trigger(PurgingTrigger(CountTrigger[T](size)))
}

// CountWindowSliding cuts a keyed stream into windows of the last size
// records per key, one firing every slide records, as Flink's
// countWindow(size, slide): GlobalWindows with CountEvictor(size) and
// CountTrigger(slide).
func CountWindowSliding[K comparable, T any](ks *KeyedStream[K, T], size, slide int64) *WindowedStream[K, T] {
	return Window(ks, GlobalWindows()).Evictor(CountEvictor[T](size)).Trigger(CountTrigger[T](slide))
}

// AllKey is the key of a non-keyed window (WindowAll): there is one.
type AllKey = struct{}

// allKeyCodec encodes the one AllKey in no bytes.
type allKeyCodec struct{}

func (allKeyCodec) Append(dst []byte, _ AllKey) ([]byte, error) { return dst, nil }
func (allKeyCodec) Decode([]byte) (AllKey, error)               { return AllKey{}, nil }

// WindowAll cuts a non-keyed stream into windows, as Flink's
// DataStream.windowAll: every record goes to one subtask (the window
// operator runs with parallelism 1), and the window functions see the key
// AllKey{}.
func WindowAll[T any](s *Stream[T], assigner WindowAssigner) *WindowedStream[AllKey, T] {
	ks := KeyByCodec(s, func(T) AllKey { return AllKey{} }, Codec[AllKey](allKeyCodec{}))
	w := Window(ks, assigner)
	w.all = true
	return w
}

// CountWindowAll is CountWindow on a non-keyed stream (Flink's
// countWindowAll(size)).
func CountWindowAll[T any](s *Stream[T], size int64) *WindowedStream[AllKey, T] {
	return WindowAll(s, GlobalWindows()).Trigger(PurgingTrigger(CountTrigger[T](size)))
}

// CountWindowAllSliding is CountWindowSliding on a non-keyed stream
// (Flink's countWindowAll(size, slide)).
func CountWindowAllSliding[T any](s *Stream[T], size, slide int64) *WindowedStream[AllKey, T] {
	return WindowAll(s, GlobalWindows()).Evictor(CountEvictor[T](size)).Trigger(CountTrigger[T](slide))
}
