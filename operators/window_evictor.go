package operators

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// GlobalWindow is the one window of GlobalWindows: all of time. Its max
// timestamp is MaxWatermark, so it is never purged.
var GlobalWindow = TimeWindow{Start: math.MinInt64, End: math.MaxInt64}

// GlobalWindows assigns every record of a key to the one GlobalWindow
// (Flink's GlobalWindows.create). Its default trigger never fires: give it
// a trigger (CountTrigger: count windows).
type GlobalWindows struct{}

func (GlobalWindows) AssignWindows(_, _ int64, dst []TimeWindow) ([]TimeWindow, error) {
	return append(dst, GlobalWindow), nil
}

// IsEventTime is false, as Flink's: allowed lateness does not apply.
func (GlobalWindows) IsEventTime() bool { return false }
func (GlobalWindows) Validate() error   { return nil }
func (GlobalWindows) String() string    { return "GlobalWindows()" }

func isGlobal(a WindowAssigner) bool {
	_, ok := a.(GlobalWindows)
	return ok
}

// TimestampedValue is a window element with its event timestamp
// (NoTimestamp if it has none), as evictors see them.
type TimestampedValue[T any] struct {
	Value     T
	Timestamp int64
}

// EvictorContext is what an evictor sees of the operator: its clocks.
type EvictorContext interface {
	CurrentWatermark() int64
	CurrentProcessingTime() int64
}

// Evictor removes elements from a window before and after the window
// function runs on a firing, as Flink's Evictor: each method returns the
// elements to keep, in their order (it may filter elements in place). A
// window with an evictor keeps all its elements (with timestamps) in
// keyed state and applies reduce or aggregate functions at firing time.
type Evictor[T any] interface {
	EvictBefore(elements []TimestampedValue[T], w TimeWindow, ctx EvictorContext) []TimestampedValue[T]
	EvictAfter(elements []TimestampedValue[T], w TimeWindow, ctx EvictorContext) []TimestampedValue[T]
}

// CountEvictor keeps the last MaxCount elements of a window (Flink's
// CountEvictor.of), before the window function or, with After, after it.
type CountEvictor[T any] struct {
	MaxCount int64
	After    bool
}

func (e CountEvictor[T]) evict(els []TimestampedValue[T]) []TimestampedValue[T] {
	if int64(len(els)) <= e.MaxCount {
		return els
	}
	return els[int64(len(els))-e.MaxCount:]
}

func (e CountEvictor[T]) EvictBefore(els []TimestampedValue[T], _ TimeWindow, _ EvictorContext) []TimestampedValue[T] {
	if e.After {
		return els
	}
	return e.evict(els)
}

func (e CountEvictor[T]) EvictAfter(els []TimestampedValue[T], _ TimeWindow, _ EvictorContext) []TimestampedValue[T] {
	if !e.After {
		return els
	}
	return e.evict(els)
}

// TimeEvictor keeps the elements whose timestamp is within WindowSize ms
// of the newest element's, dropping those at or before newest - WindowSize
// (Flink's TimeEvictor.of); elements without timestamps are kept.
type TimeEvictor[T any] struct {
	WindowSize int64
	After      bool
}

func (e TimeEvictor[T]) evict(els []TimestampedValue[T]) []TimestampedValue[T] {
	newest := int64(math.MinInt64)
	for _, v := range els {
		if v.Timestamp == NoTimestamp {
			return els // Flink's: no timestamps, nothing to evict by
		}
		newest = max(newest, v.Timestamp)
	}
	cutoff := newest - e.WindowSize
	kept := els[:0]
	for _, v := range els {
		if v.Timestamp > cutoff {
			kept = append(kept, v)
		}
	}
	return kept
}

func (e TimeEvictor[T]) EvictBefore(els []TimestampedValue[T], _ TimeWindow, _ EvictorContext) []TimestampedValue[T] {
	if e.After {
		return els
	}
	return e.evict(els)
}

func (e TimeEvictor[T]) EvictAfter(els []TimestampedValue[T], _ TimeWindow, _ EvictorContext) []TimestampedValue[T] {
	if !e.After {
		return els
	}
	return e.evict(els)
}

// DeltaEvictor drops the elements whose Delta to the window's last
// element is Threshold or more (Flink's DeltaEvictor.of).
type DeltaEvictor[T any] struct {
	Threshold float64
	Delta     func(a, b T) float64
	After     bool
}

func (e DeltaEvictor[T]) evict(els []TimestampedValue[T]) []TimestampedValue[T] {
	if len(els) == 0 {
		return els
	}
	last := els[len(els)-1].Value
	kept := els[:0]
	for _, v := range els {
		if e.Delta(v.Value, last) < e.Threshold {
			kept = append(kept, v)
		}
	}
	return kept
}

func (e DeltaEvictor[T]) EvictBefore(els []TimestampedValue[T], _ TimeWindow, _ EvictorContext) []TimestampedValue[T] {
	if e.After {
		return els
	}
	return e.evict(els)
}

func (e DeltaEvictor[T]) EvictAfter(els []TimestampedValue[T], _ TimeWindow, _ EvictorContext) []TimestampedValue[T] {
	if !e.After {
		return els
	}
	return e.evict(els)
}

// ValidateEvictor reports an evictor that cannot work.
func ValidateEvictor[T any](e Evictor[T]) error {
	switch ee := e.(type) {
	case CountEvictor[T]:
		if ee.MaxCount <= 0 {
			return fmt.Errorf("CountEvictor(%d): the count must be positive: %w", ee.MaxCount, ErrInvalidWindow)
		}
	case TimeEvictor[T]:
		if ee.WindowSize < 0 {
			return fmt.Errorf("TimeEvictor(%v): the size must not be negative: %w", ms(ee.WindowSize), ErrInvalidWindow)
		}
	case DeltaEvictor[T]:
		if ee.Delta == nil {
			return fmt.Errorf("DeltaEvictor without a delta function: %w", ErrInvalidWindow)
		}
	}
	return nil
}

// timestampedCodec encodes a TimestampedValue as its timestamp (8 bytes,
// big endian) and the value.
type timestampedCodec[T any] struct{ c codec.Codec[T] }

func (c timestampedCodec[T]) Append(dst []byte, v TimestampedValue[T]) ([]byte, error) {
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.Timestamp))
	return c.c.Append(dst, v.Value)
}

func (c timestampedCodec[T]) Decode(src []byte) (TimestampedValue[T], error) {
	if len(src) < 8 {
		return TimestampedValue[T]{}, fmt.Errorf("window element of %d bytes: %w", len(src), state.ErrCorruptSnapshot)
	}
	v, err := c.c.Decode(src[8:])
	return TimestampedValue[T]{Value: v, Timestamp: int64(binary.BigEndian.Uint64(src))}, err
}

// evictingContents is the contents of an evicting window: every element
// with its timestamp (the operator's elemTS when it is added).
type evictingContents[T any] struct {
	list state.ListState[TimestampedValue[T]]
	ts   *int64
}

func (e *evictingContents[T]) SetNamespace(ns []byte) { e.list.SetNamespace(ns) }
func (e *evictingContents[T]) Add(v T) error {
	return e.list.Add(TimestampedValue[T]{Value: v, Timestamp: *e.ts})
}
func (e *evictingContents[T]) Get() ([]TimestampedValue[T], bool, error) {
	v, err := e.list.Get()
	return v, len(v) > 0, err
}
func (e *evictingContents[T]) Clear() error { return e.list.Clear() }
func (e *evictingContents[T]) MergeNamespaces(target []byte, sources [][]byte) error {
	return e.list.MergeNamespaces(target, sources)
}

// NewEvictingWindow returns a window operator with an evictor
// (cfg.Evictor), as Flink's EvictingWindowOperator: it keeps every element
// of a window with its timestamp (elemCodec encodes the elements), and on
// a firing applies EvictBefore, then apply on the remaining elements
// (ReduceElements, AggregateElements or a process window function), then
// EvictAfter, and keeps what is left. fn is the user's function for its
// Opener, Closer, WindowStateClearer and checkpoint hooks (nil if none).
func NewEvictingWindow[K comparable, IN, OUT any](cfg WindowConfig[K, IN], fn any, elemCodec codec.Codec[IN],
	apply func(ctx *WindowContext[K], elements []IN, out Collector[OUT]) error, out Output[OUT]) *WindowOperator[K, IN, []TimestampedValue[IN], OUT] {
	w := newWindowOperator[K, IN, []TimestampedValue[IN], OUT](cfg, out, fn, nil, nil, nil)
	var contents *evictingContents[IN]
	w.newContents = func(b state.KeyedBackend) (windowContents[IN, []TimestampedValue[IN]], error) {
		st, err := state.GetListState(b, state.ListStateDescriptor[TimestampedValue[IN]]{
			Name: windowContentsName, Codec: timestampedCodec[IN]{orDefaultCodec(elemCodec)}})
		if err != nil {
			return nil, err
		}
		contents = &evictingContents[IN]{list: st, ts: &w.elemTS}
		return contents, nil
	}
	ev := cfg.Evictor
	var vals []IN
	w.emit = func(ctx *WindowContext[K], els []TimestampedValue[IN], out Collector[OUT]) error {
		n := len(els)
		els = ev.EvictBefore(els, ctx.window, ctx)
		vals = vals[:0]
		for _, e := range els {
			vals = append(vals, e.Value)
		}
		if err := apply(ctx, vals, out); err != nil {
			return err
		}
		els = ev.EvictAfter(els, ctx.window, ctx)
		if len(els) == n {
			return nil
		}
		return contents.list.Update(els)
	}
	return w
}

func orDefaultCodec[T any](c codec.Codec[T]) codec.Codec[T] {
	if c == nil {
		return codec.Default[T]()
	}
	return c
}

// ReduceElements is the apply function of an evicting reduce window: it
// folds the elements with reduce and emits the result.
func ReduceElements[K comparable, T any](reduce func(acc, v T) (T, error)) func(*WindowContext[K], []T, Collector[T]) error {
	return func(_ *WindowContext[K], els []T, out Collector[T]) error {
		acc, err := foldElements(reduce, els)
		if err != nil || len(els) == 0 {
			return err
		}
		out.Collect(acc)
		return nil
	}
}

// ReduceProcessElements folds the elements with reduce and hands the
// result to fn.
func ReduceProcessElements[K comparable, T, OUT any](reduce func(acc, v T) (T, error), fn ProcessWindowFunction[K, T, OUT]) func(*WindowContext[K], []T, Collector[OUT]) error {
	return func(ctx *WindowContext[K], els []T, out Collector[OUT]) error {
		acc, err := foldElements(reduce, els)
		if err != nil || len(els) == 0 {
			return err
		}
		return fn.Process(ctx, []T{acc}, out)
	}
}

func foldElements[T any](reduce func(acc, v T) (T, error), els []T) (T, error) {
	var acc T
	for i, v := range els {
		if i == 0 {
			acc = v
			continue
		}
		var err error
		if acc, err = reduce(acc, v); err != nil {
			return acc, fmt.Errorf("reduce: %w", err)
		}
	}
	return acc, nil
}

// AggregateElements is the apply function of an evicting aggregate window:
// it aggregates the elements with agg and emits the result.
func AggregateElements[K comparable, IN, ACC, OUT any](agg state.AggregateFunction[IN, ACC, OUT]) func(*WindowContext[K], []IN, Collector[OUT]) error {
	return func(_ *WindowContext[K], els []IN, out Collector[OUT]) error {
		if len(els) == 0 {
			return nil
		}
		out.Collect(aggregateAll(agg, els))
		return nil
	}
}

// AggregateProcessElements aggregates the elements and hands the result
// to fn.
func AggregateProcessElements[K comparable, IN, ACC, V, OUT any](agg state.AggregateFunction[IN, ACC, V], fn ProcessWindowFunction[K, V, OUT]) func(*WindowContext[K], []IN, Collector[OUT]) error {
	return func(ctx *WindowContext[K], els []IN, out Collector[OUT]) error {
		if len(els) == 0 {
			return nil
		}
		return fn.Process(ctx, []V{aggregateAll(agg, els)}, out)
	}
}

func aggregateAll[IN, ACC, OUT any](agg state.AggregateFunction[IN, ACC, OUT], els []IN) OUT {
	acc := agg.CreateAccumulator()
	for _, v := range els {
		acc = agg.Add(v, acc)
	}
	return agg.GetResult(acc)
}
