package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

// versionsDesc is the broadcast state of the keyed broadcast tests: every
// right record, by its key.
var versionsDesc = state.MapStateDescriptor[int64, []twoEv]{Name: "versions"}

// asOfJoin joins each left record with the latest right record of its key
// at or before the left record's timestamp: the right input is broadcast
// into broadcast state, the left records wait in keyed state for the
// watermark to pass them, so the result does not depend on how the inputs
// interleave. It crashes in OnTimer when its run says so.
type asOfJoin struct {
	crash   *crashes
	waiting state.MapState[int64, []twoEv]
}

func (a *asOfJoin) Open(ctx *sluice.OperatorContext) error {
	var err error
	a.waiting, err = state.GetMapState(ctx.KeyedState, state.MapStateDescriptor[int64, []twoEv]{
		Name: "waiting", ValueCodec: operators.ListCodec[twoEv]{Elem: codec.JSON[twoEv]{}}})
	return err
}

func (a *asOfJoin) ProcessElement(ctx *sluice.KeyedReadOnlyBroadcastContext[int64], v twoEv, _ sluice.Collector[string]) error {
	if _, err := sluice.GetReadOnlyBroadcastState(ctx, versionsDesc); err != nil {
		return err
	}
	ws, _, err := a.waiting.Get(v.Ts)
	if err != nil {
		return err
	}
	ctx.Timers().RegisterEventTimeTimer(v.Ts)
	return a.waiting.Put(v.Ts, append(slices.Clip(ws), v))
}

func (a *asOfJoin) ProcessBroadcastElement(ctx *sluice.KeyedBroadcastContext[int64], v twoEv, _ sluice.Collector[string]) error {
	st, err := sluice.GetBroadcastState(ctx, versionsDesc)
	if err != nil {
		return err
	}
	vs, _, err := st.Get(v.Key)
	if err != nil {
		return err
	}
	return st.Put(v.Key, append(slices.Clip(vs), v))
}

func (a *asOfJoin) OnTimer(ctx *sluice.KeyedReadOnlyBroadcastContext[int64], ts int64, out sluice.Collector[string]) error {
	if a.crash.hit() {
		return fmt.Errorf("timer %d of key %d: %w", ts, ctx.Key(), errInjectedCrash)
	}
	st, err := sluice.GetReadOnlyBroadcastState(ctx, versionsDesc)
	if err != nil {
		return err
	}
	ws, _, err := a.waiting.Get(ts)
	if err != nil {
		return err
	}
	vs, _, err := st.Get(ctx.Key())
	if err != nil {
		return err
	}
	for _, l := range ws {
		out.Collect(asOf(l, vs))
	}
	return a.waiting.Remove(ts)
}

// asOf is the result for left record l given the right records rs of its
// key.
func asOf(l twoEv, rs []twoEv) string {
	best := "none"
	bestTs := int64(-1)
	for _, r := range rs {
		if r.Ts <= l.Ts && r.Ts > bestTs {
			best, bestTs = fmt.Sprint(r.I), r.Ts
		}
	}
	return fmt.Sprintf("%d<-%s", l.I, best)
}

func buildAsOfJoin(r *job[string], left, right *sluice.Stream[twoEv]) *sluice.Stream[string] {
	return sluice.ProcessKeyedBroadcast(sluice.KeyBy(left, twoKey),
		sluice.NewBroadcastStream(right, sluice.DeclareBroadcastState(versionsDesc)),
		sluice.KeyedBroadcastProcessFunction[int64, twoEv, twoEv, string](&asOfJoin{crash: r.opCrash}),
		sluice.UID("as-of"), sluice.Parallelism(r.opPar))
}

func wantAsOfJoin(n int64) []string {
	left, right := twoInputs(n)
	byKey := map[int64][]twoEv{}
	for _, r := range right {
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	var out []string
	for _, l := range left {
		out = append(out, asOf(l, byKey[l.Key]))
	}
	return out
}

func TestKeyedBroadcastExactlyOnceUnderFailures(t *testing.T) {
	runTwoUnderFailures(t, buildAsOfJoin, wantAsOfJoin(2000))
}

func TestKeyedBroadcastRescale(t *testing.T) {
	runTwoRescale(t, buildAsOfJoin, wantAsOfJoin(2000))
}
