package operators

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// recOut records what an operator emits.
type recOut[T any] struct {
	vals []T
	ts   []int64
	wms  []int64
}

func (o *recOut[T]) Collect(v T, ts int64) error {
	o.vals = append(o.vals, v)
	o.ts = append(o.ts, ts)
	return nil
}

func (o *recOut[T]) EmitWatermark(wm int64) error { o.wms = append(o.wms, wm); return nil }

const testMaxPar = 128

// testBackend makes the keyed state backends of these tests.
var testBackend = func(t *testing.T, kgr *state.KeyGroupRange) (state.KeyedBackend, error) {
	return state.NewHeapKeyedBackend(state.HeapOptions{MaxParallelism: testMaxPar, KeyGroups: kgr})
}

// newBackend returns a heap backend owning kgr (nil: every key group),
// restored from snapshots if any.
func newBackend(t *testing.T, kgr *state.KeyGroupRange, snapshots ...[]byte) state.KeyedBackend {
	t.Helper()
	kb, err := testBackend(t, kgr)
	if err != nil {
		t.Fatal(err)
	}
	if len(snapshots) > 0 {
		var rs []io.Reader
		for _, s := range snapshots {
			rs = append(rs, bytes.NewReader(s))
		}
		if err := kb.Restore(rs...); err != nil {
			t.Fatal(err)
		}
	}
	return kb
}

// snapshot writes the full snapshot of the operator's keyed backend, as
// the runtime takes it: the timers held in memory flushed first.
func snapshot(t *testing.T, ctx *Context) []byte {
	t.Helper()
	if err := ctx.FlushKeyedState(); err != nil {
		t.Fatal(err)
	}
	s, err := ctx.KeyedState.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testContext(kb state.KeyedBackend, clock ProcessingTimeService, restored bool) *Context {
	return &Context{OperatorName: "win", UID: "win", Parallelism: 1, MaxParallelism: testMaxPar,
		ProcessingTime: clock, Logger: slog.Default(), KeyedState: kb, Restored: restored}
}

// halves are the key-group ranges of two subtasks: a rescale from 1 to 2.
func halves() []state.KeyGroupRange {
	return []state.KeyGroupRange{state.RangeFor(testMaxPar, 2, 0), state.RangeFor(testMaxPar, 2, 1)}
}

func ownerOf(key string, ranges []state.KeyGroupRange) int {
	kg := state.KeyGroupFor([]byte(key), testMaxPar)
	for i, r := range ranges {
		if r.Contains(kg) {
			return i
		}
	}
	panic("no owner")
}

// ev is a test record: a key, a value and a time (event timestamp, or
// arrival time for processing-time windows).
type ev struct {
	Key string
	V   int64
	T   int64
}

// winResult is one window firing.
type winResult struct {
	Key    string
	Window TimeWindow
	Sum    int64
	N      int
}

func (r winResult) String() string { return fmt.Sprintf("%s%v=%d/%d", r.Key, r.Window, r.Sum, r.N) }

var sumWindow = ProcessWindowFunc[string, ev, winResult](func(ctx *WindowContext[string], els []ev, out Collector[winResult]) error {
	r := winResult{Key: ctx.Key(), Window: ctx.Window(), N: len(els)}
	for _, e := range els {
		r.Sum += e.V
	}
	out.Collect(r)
	return nil
})

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// plainWindows evaluates windows of the given kind over events that are
// all on time: the windows of each key and the sum and count of each.
// Sessions that touch merge (as in Flink) unless closedTouch: with
// processing time a session has fired by the time a record arrives at its
// end.
func plainWindows(kind string, size, slide, gap int64, evs []ev, closedTouch bool) []string {
	type kw struct {
		k string
		w TimeWindow
	}
	acc := map[kw]*winResult{}
	add := func(e ev, w TimeWindow) {
		r := acc[kw{e.Key, w}]
		if r == nil {
			r = &winResult{Key: e.Key, Window: w}
			acc[kw{e.Key, w}] = r
		}
		r.Sum += e.V
		r.N++
	}
	switch kind {
	case "tumbling":
		for _, e := range evs {
			s := floorDiv(e.T, size) * size
			add(e, TimeWindow{s, s + size})
		}
	case "sliding":
		for _, e := range evs {
			for s := floorDiv(e.T, slide) * slide; s > e.T-size; s -= slide {
				add(e, TimeWindow{s, s + size})
			}
		}
	case "session":
		byKey := map[string][]ev{}
		for _, e := range evs {
			byKey[e.Key] = append(byKey[e.Key], e)
		}
		for _, es := range byKey {
			slices.SortFunc(es, func(a, b ev) int { return cmpInt64(a.T, b.T) })
			var group []ev
			flush := func() {
				if len(group) == 0 {
					return
				}
				w := TimeWindow{group[0].T, group[len(group)-1].T + gap}
				for _, g := range group {
					add(g, w)
				}
				group = nil
			}
			for _, e := range es {
				if len(group) > 0 && (e.T > group[len(group)-1].T+gap || closedTouch && e.T == group[len(group)-1].T+gap) {
					flush()
				}
				group = append(group, e)
			}
			flush()
		}
	}
	var out []string
	for _, r := range acc {
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out
}

func resultStrings(outs ...*recOut[winResult]) []string {
	var s []string
	for _, o := range outs {
		for _, r := range o.vals {
			s = append(s, r.String())
		}
	}
	slices.Sort(s)
	return s
}

func assigner(kind string, size, slide, gap int64, proc bool) WindowAssigner {
	switch kind {
	case "tumbling":
		return TumblingWindows{Size: size, ProcessingTime: proc}
	case "sliding":
		return SlidingWindows{Size: size, Slide: slide, ProcessingTime: proc}
	}
	return SessionWindows{Gap: gap, ProcessingTime: proc}
}

func newSumWindow(a WindowAssigner, lateness int64, out *recOut[winResult]) *WindowOperator[string, ev, []ev, winResult] {
	return NewProcessWindow(WindowConfig[string, ev]{Assigner: a, KeyOf: func(e ev) string { return e.Key }, KeyCodec: codec.String{},
		AllowedLateness: lateness}, ProcessWindowFunction[string, ev, winResult](sumWindow), codec.JSON[ev]{}, out)
}

// TestProcessingTimeWindowsAcrossRescale runs processing-time windows of
// each kind on a test clock, takes a snapshot midway, restores it into two
// operators owning half the key groups each, and checks every window
// against a plain evaluation by arrival time: contents and processing-time
// timers move with their key groups.
func TestProcessingTimeWindowsAcrossRescale(t *testing.T) {
	// Arrival times are even and every window's max timestamp odd: a
	// record never arrives at the very millisecond its window fires, where
	// processing-time results depend on which comes first.
	const size, slide, gap = 100, 40, 36
	for _, kind := range []string{"tumbling", "sliding", "session"} {
		t.Run(kind, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(len(kind))))
			var evs []ev
			now := int64(1000)
			for range 400 {
				now += 2 * rng.Int63n(8)
				evs = append(evs, ev{Key: fmt.Sprint("k", rng.Intn(6)), V: rng.Int63n(100), T: now})
			}
			a := assigner(kind, size, slide, gap, true)
			clock := &fakeClock{now: 1000}
			out0 := &recOut[winResult]{}
			op := newSumWindow(a, 0, out0)
			if err := op.Open(testContext(newBackend(t, nil), clock, false)); err != nil {
				t.Fatal(err)
			}
			half := len(evs) / 2
			for _, e := range evs[:half] {
				clock.advance(t, e.T)
				if err := op.ProcessElement(e, NoTimestamp); err != nil {
					t.Fatal(err)
				}
			}
			snap := snapshot(t, op.ctx)
			if err := op.Close(); err != nil {
				t.Fatal(err)
			}
			ranges := halves()
			outs := []*recOut[winResult]{out0}
			var ops []*WindowOperator[string, ev, []ev, winResult]
			for i := range ranges {
				o := &recOut[winResult]{}
				p := newSumWindow(a, 0, o)
				if err := p.Open(testContext(newBackend(t, &ranges[i], snap), clock, true)); err != nil {
					t.Fatal(err)
				}
				ops, outs = append(ops, p), append(outs, o)
			}
			for _, e := range evs[half:] {
				clock.advance(t, e.T)
				if err := ops[ownerOf(e.Key, ranges)].ProcessElement(e, NoTimestamp); err != nil {
					t.Fatal(err)
				}
			}
			clock.advance(t, now+10*size)
			got, want := resultStrings(outs...), plainWindows(kind, size, slide, gap, evs, true)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d windows, want %d\ngot  %v\nwant %v", len(got), len(want), got, want)
			}
			for _, p := range ops {
				if n := p.timers.NumProcessingTimeTimers(); n != 0 {
					t.Fatalf("%d timers left after every window fired", n)
				}
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if len(clock.scheduled()) != 0 {
				t.Fatalf("callbacks left at %v", clock.scheduled())
			}
		})
	}
}

// TestEventTimeWindowsAcrossRescale is the event-time counterpart, with
// out-of-order records and watermarks, some windows firing before the
// snapshot and some after the restore (with allowed lateness, so their
// cleanup timers come later than their firing timers).
func TestEventTimeWindowsAcrossRescale(t *testing.T) {
	const size, slide, gap, bound = 100, 40, 35, 30
	for _, kind := range []string{"tumbling", "sliding", "session"} {
		t.Run(kind, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(len(kind))))
			type step struct {
				e  ev
				wm int64
			}
			var steps []step
			maxTs := int64(0)
			for i := range 500 {
				// Even timestamps and an odd gap: no two records of a key are
				// exactly a gap apart, where merging would depend on timing.
				ts := 2 * (int64(i)*3 + rng.Int63n(bound/2))
				maxTs = max(maxTs, ts)
				steps = append(steps, step{e: ev{Key: fmt.Sprint("k", rng.Intn(5)), V: rng.Int63n(100), T: ts}})
				if i%7 == 0 {
					steps = append(steps, step{wm: maxTs - bound - 1})
				}
			}
			var evs []ev
			for _, s := range steps {
				if s.wm == 0 {
					evs = append(evs, s.e)
				}
			}
			a := assigner(kind, size, slide, gap, false)
			clock := &fakeClock{}
			run := func(op *WindowOperator[string, ev, []ev, winResult], s step) {
				t.Helper()
				var err error
				if s.wm != 0 {
					err = op.ProcessWatermark(s.wm)
				} else {
					err = op.ProcessElement(s.e, s.e.T)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			out0 := &recOut[winResult]{}
			op := newSumWindow(a, 50, out0)
			if err := op.Open(testContext(newBackend(t, nil), clock, false)); err != nil {
				t.Fatal(err)
			}
			half := len(steps) / 2
			for _, s := range steps[:half] {
				run(op, s)
			}
			if len(out0.vals) == 0 {
				t.Fatal("no window fired before the snapshot")
			}
			snap := snapshot(t, op.ctx)
			ranges := halves()
			outs := []*recOut[winResult]{out0}
			var ops []*WindowOperator[string, ev, []ev, winResult]
			for i := range ranges {
				o := &recOut[winResult]{}
				p := newSumWindow(a, 50, o)
				if err := p.Open(testContext(newBackend(t, &ranges[i], snap), clock, true)); err != nil {
					t.Fatal(err)
				}
				ops, outs = append(ops, p), append(outs, o)
			}
			for _, s := range steps[half:] {
				if s.wm != 0 {
					for _, p := range ops {
						run(p, s)
					}
					continue
				}
				run(ops[ownerOf(s.e.Key, ranges)], s)
			}
			for _, p := range ops {
				run(p, step{wm: MaxWatermark})
			}
			got, want := resultStrings(outs...), plainWindows(kind, size, slide, gap, evs, false)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d windows, want %d\ngot  %v\nwant %v", len(got), len(want), got, want)
			}
			for i, p := range ops {
				if n := p.timers.NumEventTimeTimers(); n != 0 {
					t.Fatalf("%d timers left", n)
				}
				if o := outs[i+1]; len(o.wms) == 0 || o.wms[len(o.wms)-1] != MaxWatermark {
					t.Fatalf("watermarks not forwarded: %v", o.wms)
				}
				// Every window was purged: no contents, no merging sets, no
				// timers are left in state (once the staged removals of the
				// fired timers are flushed, as a checkpoint would).
				if err := p.ctx.FlushKeyedState(); err != nil {
					t.Fatal(err)
				}
				for _, name := range []string{windowContentsName, timerStateName} {
					n := 0
					kb := p.ctx.KeyedState
					for _, ns := range [][]byte{nil, eventTimersNS} {
						_ = kb.Keys(name, ns, func([]byte, int) error { n++; return nil })
					}
					if n != 0 {
						t.Fatalf("state %q still has %d keys", name, n)
					}
				}
				if kind == "session" {
					n := 0
					if err := p.ctx.KeyedState.Keys(mergingSetName, nil, func([]byte, int) error { n++; return nil }); err != nil || n != 0 {
						t.Fatalf("merging window sets left for %d keys (%v)", n, err)
					}
				}
			}
		})
	}
}

// TestAllowedLatenessAndLateData follows Flink's semantics step by step:
// a window fires when the watermark passes its end, fires again for each
// late record within the allowed lateness, is purged at end - 1 +
// lateness, and a record later than that goes to the late-data side
// output with its own timestamp.
func TestAllowedLatenessAndLateData(t *testing.T) {
	out := &recOut[int64]{}
	late := &recOut[ev]{}
	op := NewReduceWindow(WindowConfig[string, ev]{Assigner: TumblingWindows{Size: 10}, KeyOf: func(e ev) string { return e.Key },
		KeyCodec: codec.String{}, AllowedLateness: 5, LateDataTag: "late"},
		func(a, b ev) (ev, error) { return ev{Key: a.Key, V: a.V + b.V}, nil }, codec.JSON[ev]{}, &evSums{out})
	sides, err := NewSideOutputs([]string{"late"}, []any{Output[ev](late)})
	if err != nil {
		t.Fatal(err)
	}
	op.SetSideOutputs(sides)
	if err := op.Open(testContext(newBackend(t, nil), &fakeClock{}, false)); err != nil {
		t.Fatal(err)
	}
	el := func(v, ts int64) {
		t.Helper()
		if err := op.ProcessElement(ev{Key: "a", V: v, T: ts}, ts); err != nil {
			t.Fatal(err)
		}
	}
	wm := func(w int64) {
		t.Helper()
		if err := op.ProcessWatermark(w); err != nil {
			t.Fatal(err)
		}
	}
	el(1, 3)
	el(2, 7)
	wm(8)
	if len(out.vals) != 0 {
		t.Fatalf("fired before the watermark reached the window's end: %v", out.vals)
	}
	wm(9)    // end - 1
	el(4, 5) // late, allowed: fires again at once
	el(100, 12)
	wm(13)
	el(8, 1)   // still allowed (cleanup at 9+5 = 14)
	wm(14)     // [0,10) purged
	el(16, 2)  // too late: side output
	el(32, 15) // [10,20) is on time
	wm(19)
	if want := []int64{3, 7, 15, 132}; !slices.Equal(out.vals, want) {
		t.Fatalf("fired %v, want %v", out.vals, want)
	}
	if want := []int64{9, 9, 9, 19}; !slices.Equal(out.ts, want) {
		t.Fatalf("result timestamps %v, want each window's end - 1: %v", out.ts, want)
	}
	if len(late.vals) != 1 || late.vals[0].V != 16 || late.ts[0] != 2 {
		t.Fatalf("late data %v at %v, want the record 16 at its timestamp 2", late.vals, late.ts)
	}
	if !slices.Equal(late.wms, out.wms) || len(late.wms) != 5 {
		t.Fatalf("side output watermarks %v, main %v", late.wms, out.wms)
	}
	// Without a late-data output, the late record is counted as dropped.
	op.cfg.LateDataTag = ""
	el(1, 0)
	if op.NumLateRecordsDropped() != 1 || len(late.vals) != 1 {
		t.Fatalf("dropped %d, side %v", op.NumLateRecordsDropped(), late.vals)
	}
}

// evSums emits the values of reduced records.
type evSums struct{ out *recOut[int64] }

func (s *evSums) Collect(e ev, ts int64) error { return s.out.Collect(e.V, ts) }
func (s *evSums) EmitWatermark(wm int64) error { return s.out.EmitWatermark(wm) }

// TestSessionMergeLatenessAndRestore: a late-but-allowed record that
// bridges two fired sessions merges them (their contents and timers) and
// fires the merged session; the merging-window set is in keyed state, so
// the same happens after a restore.
func TestSessionMergeLatenessAndRestore(t *testing.T) {
	for _, restore := range []bool{false, true} {
		t.Run(fmt.Sprint("restore=", restore), func(t *testing.T) {
			out := &recOut[winResult]{}
			op := newSumWindow(SessionWindows{Gap: 10}, 100, out)
			if err := op.Open(testContext(newBackend(t, nil), &fakeClock{}, false)); err != nil {
				t.Fatal(err)
			}
			step := func(e *ev, wm int64) {
				t.Helper()
				var err error
				if e != nil {
					err = op.ProcessElement(*e, e.T)
				} else {
					err = op.ProcessWatermark(wm)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			step(&ev{"a", 1, 0}, 0)
			step(&ev{"a", 2, 5}, 0)   // [0,15)
			step(&ev{"a", 4, 22}, 0)  // [22,32)
			step(&ev{"b", 64, 31}, 0) // another key
			step(nil, 50)             // fires [0,15), [22,32) of a and [31,41) of b
			if restore {
				snap := snapshot(t, op.ctx)
				op = newSumWindow(SessionWindows{Gap: 10}, 100, out)
				if err := op.Open(testContext(newBackend(t, nil, snap), &fakeClock{}, true)); err != nil {
					t.Fatal(err)
				}
			}
			step(&ev{"a", 8, 14}, 0) // [14,24) bridges [0,15) and [22,32): fires [0,32)
			step(nil, 200)           // nothing more fires; all purged by 140
			want := []string{"a[0, 15)=3/2", "a[22, 32)=4/1", "b[31, 41)=64/1", "a[0, 32)=15/4"}
			got := resultStrings(out)
			if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
				t.Fatalf("fired %v, want %v", got, w)
			}
			if n := op.timers.NumEventTimeTimers(); n != 0 {
				t.Fatalf("%d timers left", n)
			}
		})
	}
}

// timerLog is a keyed process function that registers the timers its
// records ask for and logs the firings.
type timerLog struct {
	fired *[]string
}

func (f timerLog) ProcessElement(ctx *KeyedContext[string], v ev, _ Collector[string]) error {
	switch {
	case v.V > 0:
		ctx.Timers().RegisterEventTimeTimer(v.T)
		ctx.Timers().RegisterProcessingTimeTimer(10_000 + v.T)
	case v.V < 0:
		ctx.Timers().DeleteEventTimeTimer(v.T)
		ctx.Timers().DeleteProcessingTimeTimer(10_000 + v.T)
	}
	return nil
}

func (f timerLog) OnTimer(ctx *KeyedContext[string], ts int64, _ Collector[string]) error {
	*f.fired = append(*f.fired, fmt.Sprintf("%s@%d/%s", ctx.Key(), ts, ctx.TimeDomain()))
	return nil
}

// TestKeyedProcessTimersSurviveRescale registers event- and
// processing-time timers for many keys, fires some, deletes some, takes a
// snapshot and restores it into three subtasks: every timer live at the
// snapshot fires exactly once, on the subtask that owns its key.
func TestKeyedProcessTimersSurviveRescale(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var fired []string
	clock := &fakeClock{now: 0}
	kp := NewKeyedProcess[string, ev, string](timerLog{&fired}, func(e ev) string { return e.Key }, codec.String{}, &recOut[string]{})
	if err := kp.Open(testContext(newBackend(t, nil), clock, false)); err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for range 3000 {
		e := ev{Key: fmt.Sprint("k", rng.Intn(300)), T: rng.Int63n(1000)}
		e.V = 1
		if rng.Intn(4) == 0 {
			e.V = -1
		}
		if err := kp.ProcessElement(e, NoTimestamp); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"event-time", "processing-time"} {
			ts := e.T
			if d == "processing-time" {
				ts += 10_000
			}
			live[fmt.Sprintf("%s@%d/%s", e.Key, ts, d)] = e.V > 0
		}
	}
	// Fire the timers up to 300 (event time) and 10300 (processing time).
	if err := kp.ProcessWatermark(300); err != nil {
		t.Fatal(err)
	}
	clock.advance(t, 10_300)
	for _, f := range fired {
		if !live[f] {
			t.Fatalf("fired %s, which is not live", f)
		}
		delete(live, f)
	}
	snap := snapshot(t, kp.ctx)
	if err := kp.Close(); err != nil {
		t.Fatal(err)
	}
	firedBefore := len(fired)
	fired = fired[:0]
	clock2 := &fakeClock{now: 10_300}
	for i := range 3 {
		r := state.RangeFor(testMaxPar, 3, i)
		var mine []string
		p := NewKeyedProcess[string, ev, string](timerLog{&mine}, func(e ev) string { return e.Key }, codec.String{}, &recOut[string]{})
		if err := p.Open(testContext(newBackend(t, &r, snap), clock2, true)); err != nil {
			t.Fatal(err)
		}
		if err := p.ProcessWatermark(MaxWatermark); err != nil {
			t.Fatal(err)
		}
		clock2.advance(t, 1<<40)
		for _, f := range mine {
			key, _, _ := strings.Cut(f, "@")
			if ownerOf(key, []state.KeyGroupRange{r}) != 0 {
				t.Fatalf("subtask %d fired %s of a key it does not own", i, f)
			}
		}
		fired = append(fired, mine...)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{}
	for f, ok := range live {
		if ok {
			want = append(want, f)
		}
	}
	slices.Sort(want)
	slices.Sort(fired)
	if firedBefore == 0 || len(want) == 0 {
		t.Fatalf("test needs timers fired before (%d) and after (%d) the snapshot", firedBefore, len(want))
	}
	if !slices.Equal(fired, want) {
		t.Fatalf("after the restore %d timers fired, want %d", len(fired), len(want))
	}
}
