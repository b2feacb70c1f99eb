package operators_test

import (
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
	"log/slog"
	"maps"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/sink"
)

// out records what an operator emits.
type out[T any] struct {
	vals []T
	ts   []int64
	wms  []int64
	fail error // returned by Collect when set
}

func (o *out[T]) Collect(v T, ts int64) error {
	if o.fail != nil {
		return o.fail
	}
	o.vals = append(o.vals, v)
	o.ts = append(o.ts, ts)
	return nil
}

func (o *out[T]) EmitWatermark(wm int64) error { o.wms = append(o.wms, wm); return nil }

type noClock struct{}

func (noClock) Now() int64                    { return 0 }
func (noClock) At(int64, func() error) func() { return func() {} }

func opContext(name string, subtask int) *operators.Context {
	return &operators.Context{OperatorName: name, UID: name, Subtask: subtask, Parallelism: 4, MaxParallelism: 128,
		ProcessingTime: noClock{}, Logger: slog.Default()}
}

// keyedContext is opContext with a heap keyed state backend owning every
// key group.
func keyedContext(t *testing.T, name string, subtask int) *operators.Context {
	t.Helper()
	c := opContext(name, subtask)
	kb, err := state.NewHeapKeyedBackend(state.HeapOptions{MaxParallelism: c.MaxParallelism})
	if err != nil {
		t.Fatal(err)
	}
	c.KeyedState = kb
	return c
}

var errBoom = errors.New("boom")

func TestWrapNamesOperatorOnce(t *testing.T) {
	if operators.Wrap(opContext("x", 0), nil) != nil {
		t.Fatal("Wrap(nil) is not nil")
	}
	inner := operators.Wrap(opContext("inner", 2), errBoom)
	outer := operators.Wrap(opContext("outer", 1), fmt.Errorf("context: %w", inner))
	var oe *operators.Error
	if !errors.As(outer, &oe) || oe.Operator != "inner" || oe.Subtask != 2 || oe.Parallelism != 4 {
		t.Fatalf("error %v claimed by %+v, want the inner operator", outer, oe)
	}
	if !errors.Is(outer, errBoom) {
		t.Fatal("cause lost")
	}
	if got, want := inner.Error(), `operator "inner" (subtask 2/4): boom`; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

func TestMapFilterFlatMap(t *testing.T) {
	o := &out[string]{}
	// A chain: map -> flatmap -> out, built tail first as the runtime does.
	fm := operators.NewFlatMap(func(v string, c operators.Collector[string]) error {
		c.Collect(v)
		c.Collect(v + "!")
		return nil
	}, o)
	m := operators.NewMap(func(v int) (string, error) {
		if v < 0 {
			return "", errBoom
		}
		return fmt.Sprint(v), nil
	}, operators.Output[string](fm))
	for _, op := range []operators.Operator{fm, m} {
		if err := op.Open(opContext("op", 0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.ProcessElement(7, 70); err != nil {
		t.Fatal(err)
	}
	if err := m.ProcessWatermark(80); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.vals, []string{"7", "7!"}) || !slices.Equal(o.ts, []int64{70, 70}) || !slices.Equal(o.wms, []int64{80}) {
		t.Fatalf("emitted %v %v %v", o.vals, o.ts, o.wms)
	}
	err := m.ProcessElement(-1, 0)
	var oe *operators.Error
	if !errors.Is(err, errBoom) || !errors.As(err, &oe) || oe.Operator != "op" {
		t.Fatalf("map error %v", err)
	}

	fo := &out[int]{}
	filter := operators.NewFilter(func(v int) (bool, error) { return v%2 == 0, nil }, fo)
	_ = filter.Open(opContext("filter", 0))
	for v := range 6 {
		if err := filter.ProcessElement(v, int64(v)); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(fo.vals, []int{0, 2, 4}) {
		t.Fatalf("filter kept %v", fo.vals)
	}
}

// TestCollectorKeepsFirstError: an output error inside a FlatMap is
// returned after the user function, and later Collects are dropped.
func TestCollectorKeepsFirstError(t *testing.T) {
	o := &out[int]{fail: errBoom}
	calls := 0
	fm := operators.NewFlatMap(func(v int, c operators.Collector[int]) error {
		calls++
		c.Collect(v)
		c.Collect(v)
		return nil
	}, o)
	_ = fm.Open(opContext("fm", 0))
	if err := fm.ProcessElement(1, 0); !errors.Is(err, errBoom) {
		t.Fatalf("ProcessElement: %v, want the output's error", err)
	}
	o.fail = nil
	if err := fm.ProcessElement(2, 0); err != nil {
		t.Fatalf("the error leaked into the next record: %v", err)
	}
	if !slices.Equal(o.vals, []int{2, 2}) {
		t.Fatalf("emitted %v", o.vals)
	}
}

func TestReducePerKey(t *testing.T) {
	o := &out[int]{}
	r := operators.NewReduce(func(acc, v int) (int, error) { return acc + v, nil }, func(v int) int { return v % 3 },
		codec.Int[int]{}, codec.Int[int]{}, o)
	if err := r.Open(keyedContext(t, "reduce", 0)); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{1, 2, 4, 5, 7, 3} {
		if err := r.ProcessElement(v, 0); err != nil {
			t.Fatal(err)
		}
	}
	// keys: 1->1, 2->2, 1->5, 2->7, 1->12, 0->3
	if want := []int{1, 2, 5, 7, 12, 3}; !slices.Equal(o.vals, want) {
		t.Fatalf("reduce emitted %v, want %v", o.vals, want)
	}
}

type keyEcho struct{ opened bool }

func (k *keyEcho) Open(*operators.Context) error { k.opened = true; return nil }

func (k *keyEcho) ProcessElement(ctx *operators.KeyedContext[string], v string, c operators.Collector[string]) error {
	if !k.opened {
		return errors.New("not opened")
	}
	c.Collect(fmt.Sprintf("%s/%s@%d", ctx.Key(), v, ctx.Timestamp()))
	ctx.Timers().RegisterEventTimeTimer(ctx.Timestamp() + 10)
	return nil
}

func (k *keyEcho) OnTimer(ctx *operators.KeyedContext[string], ts int64, c operators.Collector[string]) error {
	c.Collect(fmt.Sprintf("timer %s@%d %v", ctx.Key(), ts, ctx.TimeDomain()))
	return nil
}

func TestKeyedProcessContextAndTimers(t *testing.T) {
	o := &out[string]{}
	p := operators.NewKeyedProcess[string, string, string](&keyEcho{}, func(v string) string { return v[:1] }, codec.String{}, o)
	if err := p.Open(opContext("kp", 0)); err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"a1", "b1", "a2"} {
		if err := p.ProcessElement(v, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.ProcessWatermark(11); err != nil {
		t.Fatal(err)
	}
	want := []string{"a/a1@0", "b/b1@1", "a/a2@2", "timer a@10 event-time", "timer b@11 event-time"}
	if !slices.Equal(o.vals, want) {
		t.Fatalf("emitted %v, want %v", o.vals, want)
	}
	if !slices.Equal(o.ts[3:], []int64{10, 11}) || !slices.Equal(o.wms, []int64{11}) {
		t.Fatalf("timestamps %v, watermarks %v", o.ts, o.wms)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

type recordingWriter struct {
	vals    []int
	flushed []bool
	closed  int
}

func (w *recordingWriter) Write(v int, _ int64) error { w.vals = append(w.vals, v); return nil }
func (w *recordingWriter) Flush(end bool) error       { w.flushed = append(w.flushed, end); return nil }
func (w *recordingWriter) Close() error               { w.closed++; return nil }

type oneWriter struct{ w *recordingWriter }

func (s oneWriter) NewWriter(sink.WriterContext) (sink.Writer[int], error) { return s.w, nil }

func TestSinkLifecycle(t *testing.T) {
	w := &recordingWriter{}
	s := operators.NewSink[int](oneWriter{w})
	if err := s.Close(); err != nil { // before Open: nothing to close
		t.Fatal(err)
	}
	_ = s.Open(opContext("sink", 0))
	_ = s.ProcessElement(1, 0)
	_ = s.ProcessElement(2, 0)
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_ = s.Close()
	if !slices.Equal(w.vals, []int{1, 2}) || !slices.Equal(w.flushed, []bool{true}) || w.closed != 1 {
		t.Fatalf("writer saw %+v", w)
	}
}

// bufferedCount counts records per key in memory (buf) and merges the
// counts into a value state only when the operator has it flush (a
// KeyedFlusher); a timer at 100 emits a key's count from the state.
type bufferedCount struct {
	count   state.ValueState[int64]
	buf     map[string]int64
	flushes []int64
}

var bufferedCountDesc = state.ValueStateDescriptor[int64]{Name: "count", Codec: codec.Int[int64]{}}

func (b *bufferedCount) Open(ctx *operators.Context) (err error) {
	b.buf = map[string]int64{}
	b.count, err = state.GetValueState(ctx.KeyedState, bufferedCountDesc)
	return err
}

func (b *bufferedCount) ProcessElement(ctx *operators.KeyedContext[string], _ string, _ operators.Collector[string]) error {
	b.buf[ctx.Key()]++
	return nil
}

func (b *bufferedCount) Flush(ctx *operators.KeyedContext[string], upTo int64) error {
	b.flushes = append(b.flushes, upTo)
	for _, k := range slices.Sorted(maps.Keys(b.buf)) {
		if err := ctx.SetCurrentKey(k); err != nil {
			return err
		}
		if ctx.Key() != k {
			return fmt.Errorf("key %q after SetCurrentKey(%q)", ctx.Key(), k)
		}
		n, _, err := b.count.Value()
		if err != nil {
			return err
		}
		if err := b.count.Update(n + b.buf[k]); err != nil {
			return err
		}
		ctx.Timers().RegisterEventTimeTimer(100)
	}
	clear(b.buf)
	return nil
}

func (b *bufferedCount) OnTimer(ctx *operators.KeyedContext[string], _ int64, c operators.Collector[string]) error {
	n, _, err := b.count.Value()
	c.Collect(fmt.Sprintf("%s=%d", ctx.Key(), n))
	return err
}

// TestKeyedFlusher: a KeyedFlusher's buffer reaches the keyed state (with
// its timers) in the snapshot, before the backend's snapshot would copy
// it, and at every watermark before the timers it fires, so they see it.
func TestKeyedFlusher(t *testing.T) {
	o := &out[string]{}
	fn := &bufferedCount{}
	p := operators.NewKeyedProcess[string, string, string](fn, func(v string) string { return v[:1] }, codec.String{}, o)
	ctx := keyedContext(t, "flusher", 0)
	if err := p.Open(ctx); err != nil {
		t.Fatal(err)
	}
	stored := func(key string) int64 {
		t.Helper()
		kb := []byte(key)
		ctx.KeyedState.SetCurrentKey(kb, state.KeyGroupFor(kb, ctx.MaxParallelism))
		st, err := state.GetValueState(ctx.KeyedState, bufferedCountDesc)
		if err != nil {
			t.Fatal(err)
		}
		n, _, err := st.Value()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, v := range []string{"a1", "b1", "a2"} {
		if err := p.ProcessElement(v, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	if a, b := stored("a"), stored("b"); a != 2 || b != 1 {
		t.Fatalf("after the snapshot the state holds a=%d b=%d, want 2 and 1", a, b)
	}
	if err := p.ProcessElement("a3", 2); err != nil {
		t.Fatal(err)
	}
	if err := p.ProcessWatermark(100); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a=3", "b=1"}; !slices.Equal(o.vals, want) {
		t.Fatalf("the timers emitted %v, want %v", o.vals, want)
	}
	if want := []int64{operators.MaxWatermark, 100}; !slices.Equal(fn.flushes, want) {
		t.Fatalf("flushed up to %v, want %v", fn.flushes, want)
	}
}
