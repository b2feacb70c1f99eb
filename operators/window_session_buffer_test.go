package operators

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// sessAcc is the accumulator of sessAgg: the records' count and sum.
type sessAcc struct{ N, Sum int64 }

// sessAgg counts and sums a window's records.
type sessAgg struct{}

func (sessAgg) CreateAccumulator() sessAcc             { return sessAcc{} }
func (sessAgg) Add(e ev, a sessAcc) sessAcc            { return sessAcc{a.N + 1, a.Sum + e.V} }
func (sessAgg) GetResult(a sessAcc) sessAcc            { return a }
func (sessAgg) Merge(a, b sessAcc) sessAcc             { return sessAcc{a.N + b.N, a.Sum + b.Sum} }
func (sessAgg) AccumulatorCodec() codec.Codec[sessAcc] { return codec.JSON[sessAcc]{} }
func sumEvs(a, b ev) (ev, error)                       { return ev{Key: a.Key, V: a.V + b.V, T: min(a.T, b.T)}, nil }
func sessKey(e ev) string                              { return e.Key }
func (o *recOut[T]) records() []string                 { return recordStrings(o.vals, o.ts) }
func recordStrings[T any](vals []T, ts []int64) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = fmt.Sprintf("%v@%d", v, ts[i])
	}
	return out
}

// sessOp is one subtask of a session window operator under test: its
// outputs (main and late data) and its context.
type sessOp struct {
	op interface {
		Operator
		ProcessElement(v ev, ts int64) error
	}
	ctx        *Context
	out        *recOut[string]
	late       *recOut[ev]
	bufferedOf func() windowBuffer[string, ev]
}

// sessStep is a record or (e nil) a watermark.
type sessStep struct {
	e  *ev
	wm int64
}

// newSessOp makes a session window operator of the kind (aggregate,
// aggregate-process, reduce) with the given buffer limit (0: none) and
// allowed lateness, opened on a heap backend owning kgr, restored from
// snap if any.
func newSessOp(t *testing.T, kind string, limit int, lateness int64, kgr *state.KeyGroupRange, snap []byte) *sessOp {
	t.Helper()
	s := &sessOp{out: &recOut[string]{}, late: &recOut[ev]{}}
	cfg := WindowConfig[string, ev]{Assigner: SessionWindows{Gap: 10}, KeyOf: sessKey, KeyCodec: codec.String{},
		AllowedLateness: lateness, LateDataTag: "late", BufferLimit: limit}
	var sides *SideOutputs
	var err error
	switch kind {
	case "aggregate":
		op := NewAggregateWindow(cfg, state.AggregateFunction[ev, sessAcc, sessAcc](sessAgg{}), codec.JSON[sessAcc]{}, &mapOut[sessAcc]{s.out})
		sides, err = NewSideOutputs([]string{"late"}, []any{Output[ev](s.late)})
		op.SetSideOutputs(sides)
		s.op, s.bufferedOf = op, func() windowBuffer[string, ev] { return op.buf }
	case "aggregate-process":
		op := NewAggregateProcessWindow(cfg, state.AggregateFunction[ev, sessAcc, sessAcc](sessAgg{}), codec.JSON[sessAcc]{},
			ProcessWindowFunction[string, sessAcc, string](ProcessWindowFunc[string, sessAcc, string](
				func(ctx *WindowContext[string], a []sessAcc, out Collector[string]) error {
					out.Collect(fmt.Sprintf("%s%v=%d/%d", ctx.Key(), ctx.Window(), a[0].N, a[0].Sum))
					return nil
				})), s.out)
		sides, err = NewSideOutputs([]string{"late"}, []any{Output[ev](s.late)})
		op.SetSideOutputs(sides)
		s.op, s.bufferedOf = op, func() windowBuffer[string, ev] { return op.buf }
	case "reduce":
		op := NewReduceWindow(cfg, sumEvs, codec.JSON[ev]{}, &mapOut[ev]{s.out})
		sides, err = NewSideOutputs([]string{"late"}, []any{Output[ev](s.late)})
		op.SetSideOutputs(sides)
		s.op, s.bufferedOf = op, func() windowBuffer[string, ev] { return op.buf }
	default:
		t.Fatalf("kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	var kb state.KeyedBackend
	if snap != nil {
		kb = newBackend(t, kgr, snap)
	} else {
		kb = newBackend(t, kgr)
	}
	s.ctx = testContext(kb, &fakeClock{}, snap != nil)
	if err := s.op.Open(s.ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// mapOut collects values as strings.
type mapOut[T any] struct{ out *recOut[string] }

func (m *mapOut[T]) Collect(v T, ts int64) error  { return m.out.Collect(fmt.Sprint(v), ts) }
func (m *mapOut[T]) EmitWatermark(wm int64) error { return m.out.EmitWatermark(wm) }

func (s *sessOp) step(t *testing.T, st sessStep) {
	t.Helper()
	var err error
	if st.e != nil {
		err = s.op.ProcessElement(*st.e, st.e.T)
	} else {
		err = s.op.ProcessWatermark(st.wm)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// sessRun is what one run emitted, per subtask: the main output and the
// late data, in order, with timestamps; buffered counts the records
// that were held in a buffer at some step.
type sessRun struct {
	outs     [][]string
	buffered bool
}

// runSessions feeds steps to a session window operator; at step snapAt
// (if >= 0) it snapshots it and goes on in a restored one, or in two
// owning half the key groups each (rescale).
func runSessions(t *testing.T, kind string, limit int, lateness int64, steps []sessStep, snapAt int, rescale bool) sessRun {
	t.Helper()
	var run sessRun
	ops := []*sessOp{newSessOp(t, kind, limit, lateness, nil, nil)}
	collect := func() {
		for _, s := range ops {
			run.outs = append(run.outs, s.out.records(), s.late.records())
		}
	}
	for i, st := range steps {
		if i == snapAt {
			snap := snapshot(t, ops[0].ctx)
			collect()
			if err := ops[0].op.Close(); err != nil {
				t.Fatal(err)
			}
			if rescale {
				hs := halves()
				ops = []*sessOp{newSessOp(t, kind, limit, lateness, &hs[0], snap), newSessOp(t, kind, limit, lateness, &hs[1], snap)}
			} else {
				ops = []*sessOp{newSessOp(t, kind, limit, lateness, nil, snap)}
			}
		}
		if st.e != nil {
			o := ops[0]
			if len(ops) > 1 {
				hs := halves()
				o = ops[ownerOf(st.e.Key, hs)]
			}
			o.step(t, st)
		} else {
			for _, o := range ops {
				o.step(t, st)
			}
		}
		for _, o := range ops {
			if b := o.bufferedOf(); b != nil && len(b.keys(nil)) > 0 {
				run.buffered = true
			}
		}
	}
	for _, o := range ops {
		o.step(t, sessStep{wm: MaxWatermark})
	}
	collect()
	for _, o := range ops {
		if err := o.op.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// randomSessionSteps makes records of five keys, out of order (up to 40
// ms behind the latest), with a watermark after some: usually 15 ms
// behind the latest record, so records come late, within allowed
// lateness and beyond it, merging sessions in state and in flight.
func randomSessionSteps(rng *rand.Rand, n int) []sessStep {
	var steps []sessStep
	latest, wm := int64(0), int64(-1000)
	for i := range n {
		ts := max(0, int64(i)*2-rng.Int63n(40))
		latest = max(latest, ts)
		steps = append(steps, sessStep{e: &ev{Key: fmt.Sprint("k", rng.Intn(5)), V: rng.Int63n(100), T: ts}})
		if rng.Intn(6) == 0 {
			wm = max(wm, latest-rng.Int63n(30))
			steps = append(steps, sessStep{wm: wm})
		}
	}
	return steps
}

// TestSessionBufferMatchesPerRecord: event-time session windows that
// combine records in memory (buffer limits 1, 3 and 10 000) emit what the
// per-record operator (no buffer) emits - the same results with the same
// timestamps in the same order, and the same late data - on random
// inputs with out-of-order and late records, with allowed lateness 0 and
// more, without a snapshot, across a snapshot and restore, and across a
// restore at another parallelism (the buffer flushed into the snapshot).
func TestSessionBufferMatchesPerRecord(t *testing.T) {
	for _, kind := range []string{"aggregate", "aggregate-process", "reduce"} {
		for _, lateness := range []int64{0, 7, 25} {
			for seed := range int64(4) {
				rng := rand.New(rand.NewSource(seed*31 + lateness))
				steps := randomSessionSteps(rng, 400)
				for _, snap := range []struct {
					at      int
					rescale bool
				}{{-1, false}, {len(steps) / 2, false}, {len(steps) / 3, true}} {
					name := fmt.Sprintf("%s/lateness %d/seed %d/snapshot at %d rescale %v", kind, lateness, seed, snap.at, snap.rescale)
					t.Run(name, func(t *testing.T) {
						want := runSessions(t, kind, 0, lateness, steps, snap.at, snap.rescale)
						if want.buffered {
							t.Fatal("the operator without a buffer buffered")
						}
						var fired, late int
						for i, o := range want.outs {
							if i%2 == 0 {
								fired += len(o)
							} else {
								late += len(o)
							}
						}
						if fired == 0 || (lateness == 0 && late == 0) {
							t.Fatalf("the input fired %d windows and had %d late records: the test needs both", fired, late)
						}
						for _, limit := range []int{1, 3, 10_000} {
							got := runSessions(t, kind, limit, lateness, steps, snap.at, snap.rescale)
							if !got.buffered {
								t.Fatalf("limit %d: nothing was buffered", limit)
							}
							if !slices.EqualFunc(got.outs, want.outs, slices.Equal) {
								t.Fatalf("limit %d: the buffered operator emitted\n%q\nthe per-record one\n%q", limit, got.outs, want.outs)
							}
						}
					})
				}
			}
		}
	}
}
