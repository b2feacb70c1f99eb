package table

import (
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// The join functions are driven here as the runtime drives them, one
// operator instance each (operators.NewKeyedCoProcess and friends) on a
// heap backend, with records, watermarks and their interleaving chosen
// by the test: every result is compared with a plain evaluation of the
// same script.

// collect records what an operator emits.
type collect[T any] struct {
	vals []T
	ts   []int64
	wms  []int64
	// then, when set, is called with every record (a harness wiring
	// operators together).
	then func(v T, ts int64) error
}

func (c *collect[T]) Collect(v T, ts int64) error {
	c.vals = append(c.vals, v)
	c.ts = append(c.ts, ts)
	if c.then != nil {
		return c.then(v, ts)
	}
	return nil
}

func (c *collect[T]) EmitWatermark(wm int64) error { c.wms = append(c.wms, wm); return nil }

type noClock struct{}

func (noClock) Now() int64                    { return 0 }
func (noClock) At(int64, func() error) func() { return func() {} }

// opContext is an operator's context with a heap keyed backend owning
// every key group and an operator state backend.
func opContext(t *testing.T, name string) *operators.Context {
	t.Helper()
	kb, err := state.NewHeapKeyedBackend(state.HeapOptions{MaxParallelism: 128})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := state.NewOperatorStateBackend(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &operators.Context{OperatorName: name, UID: name, Parallelism: 1, MaxParallelism: 128,
		ProcessingTime: noClock{}, Logger: slog.Default(), KeyedState: kb, OperatorState: ob}
}

// coHarness is one keyed two-input operator with its main output and
// the late side output.
type coHarness[K comparable, A, B, OUT any] struct {
	op          *operators.KeyedCoProcess[K, A, B, OUT]
	out         *collect[OUT]
	late        *collect[A]
	lateChanges *collect[B]
}

func newCoHarness[K comparable, A, B, OUT any](t *testing.T, fn operators.KeyedCoProcessFunction[K, A, B, OUT], keyA func(A) K, keyB func(B) K) *coHarness[K, A, B, OUT] {
	t.Helper()
	h := &coHarness[K, A, B, OUT]{out: &collect[OUT]{}, late: &collect[A]{}, lateChanges: &collect[B]{}}
	h.op = operators.NewKeyedCoProcess(fn, keyA, keyB, codec.DefaultKey[K](), operators.Output[OUT](h.out))
	sides, err := operators.NewSideOutputs([]string{lateTag, lateChangesTag}, []any{operators.Output[A](h.late), operators.Output[B](h.lateChanges)})
	if err != nil {
		t.Fatal(err)
	}
	h.op.SetSideOutputs(sides)
	if err := h.op.Open(opContext(t, "join")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.op.Close() })
	return h
}

func tableDesc() state.ValueStateDescriptor[string] {
	return state.ValueStateDescriptor[string]{Name: "table", Codec: codec.String{}}
}
