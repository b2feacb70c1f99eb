package operators_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

var thresholds = state.MapStateDescriptor[string, int64]{Name: "thresholds"}

// filterByThreshold passes the records above their key's threshold; the
// broadcast side sets thresholds ("key=value").
type filterByThreshold struct{}

func (filterByThreshold) ProcessElement(ctx *operators.ReadOnlyBroadcastContext, v coEv, out operators.Collector[string]) error {
	st, err := operators.GetReadOnlyBroadcastState(ctx, thresholds)
	if err != nil {
		return err
	}
	if _, writable := st.(state.BroadcastState[string, int64]); writable {
		return errors.New("the read-only view can be written")
	}
	if _, err := operators.GetReadOnlyBroadcastState(ctx, state.MapStateDescriptor[string, int64]{Name: "other"}); !errors.Is(err, operators.ErrUndeclaredBroadcastState) {
		return fmt.Errorf("an undeclared state: %v", err)
	}
	th, ok, err := st.Get(v.key)
	if err != nil {
		return err
	}
	if ok && v.v > th {
		out.Collect(fmt.Sprintf("%s:%d", v.key, v.v))
	}
	return nil
}

func (filterByThreshold) ProcessBroadcastElement(ctx *operators.BroadcastContext, v coEv, out operators.Collector[string]) error {
	st, err := operators.GetBroadcastState(ctx, thresholds)
	if err != nil {
		return err
	}
	return st.Put(v.key, v.v)
}

// broadcastSubtask opens subtask i of p of the operator, restored from
// snaps.
func broadcastSubtask(t *testing.T, i, p int, snaps [][]byte) (*operators.BroadcastProcess[coEv, coEv, string], *out[string], *operators.Context) {
	t.Helper()
	o := &out[string]{}
	op := operators.NewBroadcastProcess[coEv, coEv, string](filterByThreshold{}, []operators.BroadcastStateDeclaration{operators.DeclareBroadcastState(thresholds)}, o)
	ctx := opContext("bc", i)
	ctx.Parallelism = p
	ob, err := state.NewOperatorStateBackend(i, p)
	if err != nil {
		t.Fatal(err)
	}
	var rs []io.Reader
	for _, s := range snaps {
		rs = append(rs, bytes.NewReader(s))
	}
	if err := ob.Restore(rs...); err != nil {
		t.Fatal(err)
	}
	ctx.OperatorState = ob
	if err := op.Open(ctx); err != nil {
		t.Fatal(err)
	}
	return op, o, ctx
}

func TestBroadcastProcessStateAndRescale(t *testing.T) {
	records := []coEv{{key: "a", v: 5}, {key: "b", v: 1}, {key: "a", v: 12}, {key: "c", v: 100}, {key: "b", v: 9}}
	var snaps [][]byte
	for i := range 2 {
		op, o, ctx := broadcastSubtask(t, i, 2, nil)
		for _, th := range []coEv{{key: "a", v: 10}, {key: "b", v: 0}} {
			if err := op.Input2().ProcessElement(th, 0); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range records {
			if err := op.Input1().ProcessElement(r, 1); err != nil {
				t.Fatal(err)
			}
		}
		if want := []string{"b:1", "a:12", "b:9"}; !slices.Equal(o.vals, want) {
			t.Fatalf("subtask %d emitted %v, want %v", i, o.vals, want)
		}
		s, err := ctx.OperatorState.Snapshot(1)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := s.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, buf.Bytes())
	}
	// Rescaled to 3, every subtask has the thresholds.
	for i := range 3 {
		op, o, _ := broadcastSubtask(t, i, 3, snaps)
		for _, r := range records {
			if err := op.Input1().ProcessElement(r, 1); err != nil {
				t.Fatal(err)
			}
		}
		if want := []string{"b:1", "a:12", "b:9"}; !slices.Equal(o.vals, want) {
			t.Fatalf("restored subtask %d of 3 emitted %v, want %v", i, o.vals, want)
		}
	}
}

// countKeys counts per key in keyed state; a broadcast "reset" record
// clears every key's count with ApplyToKeyedState.
type countKeys struct {
	n state.ValueState[int64]
}

func (c *countKeys) Open(ctx *operators.Context) error {
	var err error
	c.n, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "n"})
	return err
}

func (c *countKeys) ProcessElement(ctx *operators.KeyedReadOnlyBroadcastContext[string], v coEv, out operators.Collector[string]) error {
	n, _, err := c.n.Value()
	if err != nil {
		return err
	}
	out.Collect(fmt.Sprintf("%s=%d", ctx.Key(), n+1))
	return c.n.Update(n + 1)
}

func (c *countKeys) ProcessBroadcastElement(ctx *operators.KeyedBroadcastContext[string], v coEv, out operators.Collector[string]) error {
	return ctx.ApplyToKeyedState("n", func(key string) error {
		n, _, err := c.n.Value()
		if err != nil {
			return err
		}
		out.Collect(fmt.Sprintf("reset %s from %d", key, n))
		return c.n.Clear()
	})
}

func TestKeyedBroadcastApplyToKeyedState(t *testing.T) {
	o := &out[string]{}
	keyOf := func(e coEv) string { return e.key }
	op := operators.NewKeyedBroadcastProcess[string, coEv, coEv, string](&countKeys{}, keyOf, codec.String{},
		[]operators.BroadcastStateDeclaration{operators.DeclareBroadcastState(thresholds)}, o)
	ctx := keyedContext(t, "kbc", 0)
	ob, _ := state.NewOperatorStateBackend(0, 1)
	ctx.OperatorState = ob
	if err := op.Open(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "a"} {
		if err := op.Input1().ProcessElement(coEv{key: k}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := op.Input2().ProcessElement(coEv{}, 0); err != nil {
		t.Fatal(err)
	}
	if err := op.Input1().ProcessElement(coEv{key: "a"}, 0); err != nil {
		t.Fatal(err)
	}
	resets := slices.Sorted(slices.Values(o.vals[3:5]))
	got := append(append(slices.Clone(o.vals[:3]), resets...), o.vals[5:]...)
	want := []string{"a=1", "b=1", "a=2", "reset a from 2", "reset b from 1", "a=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("emitted %v, want %v", o.vals, want)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
}
