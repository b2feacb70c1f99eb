package operators

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/codec"
)

// The trigger tests drive window operators with custom triggers and
// evictors step by step and compare every firing with a plain evaluation
// of the trigger's rules written here without timers or state.

// trigStep is a record, or a watermark / clock advance when adv is set.
type trigStep struct {
	e   ev
	adv bool
	t   int64
}

// continuousPlain evaluates tumbling windows of size with a continuous
// trigger of interval: a window's first record (not late) sets its next
// firing time to the multiple of interval at or before the record's time
// (capped at the window's max timestamp); when time reaches it, the window
// fires and the next is interval later (capped); the window also fires
// at its max timestamp, then it is purged. Event time: a record is late
// (dropped) when its window's max timestamp is at or before the
// watermark.
func continuousPlain(steps []trigStep, size, interval int64, event bool) []string {
	type kw struct {
		k string
		w TimeWindow
	}
	type win struct {
		els      []ev
		next     int64
		hasNext  bool
		maxFired bool
	}
	wins := map[kw]*win{}
	var out []string
	emit := func(k kw, w *win) {
		r := winResult{Key: k.k, Window: k.w, N: len(w.els)}
		for _, e := range w.els {
			r.Sum += e.V
		}
		out = append(out, r.String())
	}
	now := MinWatermark
	for _, s := range steps {
		if !s.adv {
			t := s.e.T
			if !event {
				t = now
			}
			start := floorDiv(t, size) * size
			k := kw{s.e.Key, TimeWindow{start, start + size}}
			if event && k.w.MaxTimestamp() <= now {
				continue // late
			}
			w := wins[k]
			if w == nil {
				w = &win{}
				wins[k] = w
			}
			w.els = append(w.els, s.e)
			if !w.hasNext {
				w.next, w.hasNext = min(floorDiv(t, interval)*interval, k.w.MaxTimestamp()), true
			}
			continue
		}
		now = s.t
		for k, w := range wins {
			// The distinct due timer timestamps, in order.
			for {
				due := int64(MaxWatermark)
				if w.hasNext && w.next <= now {
					due = w.next
				}
				if !w.maxFired && k.w.MaxTimestamp() <= now {
					due = min(due, k.w.MaxTimestamp())
				}
				if due == MaxWatermark {
					break
				}
				emit(k, w)
				if due == k.w.MaxTimestamp() {
					w.maxFired = true
					if w.next == due {
						w.hasNext = false
					}
					continue
				}
				w.next = min(due+interval, k.w.MaxTimestamp())
			}
			if w.maxFired {
				delete(wins, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

func continuousScript(rng *rand.Rand, n int, bound int64) []trigStep {
	var steps []trigStep
	maxTs := int64(0)
	for i := range n {
		ts := int64(i)*3 + rng.Int63n(bound)
		if rng.Intn(25) == 0 {
			ts -= 3 * bound // late
		}
		maxTs = max(maxTs, ts)
		steps = append(steps, trigStep{e: ev{Key: fmt.Sprint("k", rng.Intn(4)), V: rng.Int63n(100), T: ts}})
		if rng.Intn(6) == 0 {
			steps = append(steps, trigStep{adv: true, t: maxTs - bound})
		}
	}
	return append(steps, trigStep{adv: true, t: MaxWatermark})
}

func newTriggerWindow(a WindowAssigner, tr Trigger[ev], out *recOut[winResult]) *WindowOperator[string, ev, []ev, winResult] {
	return NewProcessWindow(WindowConfig[string, ev]{Assigner: a, KeyOf: func(e ev) string { return e.Key }, KeyCodec: codec.String{},
		Trigger: tr}, ProcessWindowFunction[string, ev, winResult](sumWindow), codec.JSON[ev]{}, out)
}

// TestContinuousEventTimeTriggerAcrossRescale runs tumbling event-time
// windows with a ContinuousEventTimeTrigger over disordered records with
// late ones, snapshots midway, restores into two operators owning half the
// key groups each, and checks every firing: the next firing times (keyed
// state) and their timers move with their key groups.
func TestContinuousEventTimeTriggerAcrossRescale(t *testing.T) {
	const size, interval, bound = 100, 30, 20
	rng := rand.New(rand.NewSource(3))
	steps := continuousScript(rng, 600, bound)
	tr := ContinuousEventTimeTrigger[ev]{Interval: interval}
	a := TumblingWindows{Size: size}
	clock := &fakeClock{}
	run := func(op *WindowOperator[string, ev, []ev, winResult], s trigStep) {
		t.Helper()
		var err error
		if s.adv {
			err = op.ProcessWatermark(s.t)
		} else {
			err = op.ProcessElement(s.e, s.e.T)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	out0 := &recOut[winResult]{}
	op := newTriggerWindow(a, tr, out0)
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
		p := newTriggerWindow(a, tr, o)
		if err := p.Open(testContext(newBackend(t, &ranges[i], snap), clock, true)); err != nil {
			t.Fatal(err)
		}
		ops, outs = append(ops, p), append(outs, o)
	}
	for _, s := range steps[half:] {
		if s.adv {
			for _, p := range ops {
				run(p, s)
			}
			continue
		}
		run(ops[ownerOf(s.e.Key, ranges)], s)
	}
	got, want := resultStrings(outs...), continuousPlain(steps, size, interval, true)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d firings, want %d\ngot  %v\nwant %v", len(got), len(want), got, want)
	}
	for _, p := range ops {
		if n := p.timers.NumEventTimeTimers(); n != 0 {
			t.Fatalf("%d timers left", n)
		}
		n := 0
		_ = p.ctx.KeyedState.Keys(fireTimeStateName, nil, func([]byte, int) error { n++; return nil })
		if n != 0 {
			t.Fatalf("fire-time state left for %d keys", n)
		}
	}
}

// TestContinuousProcessingTimeTrigger runs tumbling processing-time
// windows with a ContinuousProcessingTimeTrigger on a test clock.
func TestContinuousProcessingTimeTrigger(t *testing.T) {
	const size, interval = 100, 30
	rng := rand.New(rand.NewSource(5))
	var steps []trigStep
	now := int64(1000)
	for range 400 {
		now += rng.Int63n(4)
		steps = append(steps, trigStep{adv: true, t: now})
		steps = append(steps, trigStep{e: ev{Key: fmt.Sprint("k", rng.Intn(4)), V: rng.Int63n(100)}})
	}
	now += 2 * size
	steps = append(steps, trigStep{adv: true, t: now})
	out := &recOut[winResult]{}
	clock := &fakeClock{}
	op := newTriggerWindow(TumblingWindows{Size: size, ProcessingTime: true}, ContinuousProcessingTimeTrigger[ev]{Interval: interval}, out)
	if err := op.Open(testContext(newBackend(t, nil), clock, false)); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.adv {
			clock.advance(t, s.t)
		} else if err := op.ProcessElement(s.e, NoTimestamp); err != nil {
			t.Fatal(err)
		}
	}
	got, want := resultStrings(out), continuousPlain(steps, size, interval, false)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d firings, want %d\ngot  %v\nwant %v", len(got), len(want), got, want)
	}
	if n := op.timers.NumProcessingTimeTimers(); n != 0 {
		t.Fatalf("%d timers left", n)
	}
}

// TestEvictorsOnGlobalWindows runs GlobalWindows with a CountTrigger and
// each evictor, before and after the window function, and checks every
// firing against the evictor's rule applied to the key's records.
func TestEvictorsOnGlobalWindows(t *testing.T) {
	const every = 4
	delta := func(a, b ev) float64 { return float64(b.V - a.V) }
	type evictCase struct {
		name string
		ev   Evictor[ev]
		// keep applies the evictor's rule to the window's elements.
		keep  func(els []ev) []ev
		after bool
	}
	timeKeep := func(els []ev) []ev {
		newest := int64(MinWatermark)
		for _, e := range els {
			newest = max(newest, e.T)
		}
		var out []ev
		for _, e := range els {
			if e.T > newest-25 {
				out = append(out, e)
			}
		}
		return out
	}
	deltaKeep := func(els []ev) []ev {
		var out []ev
		for _, e := range els {
			if float64(els[len(els)-1].V-e.V) < 40 {
				out = append(out, e)
			}
		}
		return out
	}
	countKeep := func(els []ev) []ev { return els[max(0, len(els)-3):] }
	cases := []evictCase{
		{"count", CountEvictor[ev]{MaxCount: 3}, countKeep, false},
		{"count-after", CountEvictor[ev]{MaxCount: 3, After: true}, countKeep, true},
		{"time", TimeEvictor[ev]{WindowSize: 25}, timeKeep, false},
		{"time-after", TimeEvictor[ev]{WindowSize: 25, After: true}, timeKeep, true},
		{"delta", DeltaEvictor[ev]{Threshold: 40, Delta: delta}, deltaKeep, false},
		{"delta-after", DeltaEvictor[ev]{Threshold: 40, Delta: delta, After: true}, deltaKeep, true},
	}
	rng := rand.New(rand.NewSource(9))
	var evs []ev
	for i := range 300 {
		evs = append(evs, ev{Key: fmt.Sprint("k", rng.Intn(3)), V: rng.Int63n(100), T: int64(i)*2 + rng.Int63n(20)})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := &recOut[winResult]{}
			op := NewEvictingWindow(WindowConfig[string, ev]{Assigner: GlobalWindows{}, KeyOf: func(e ev) string { return e.Key },
				KeyCodec: codec.String{}, Trigger: CountTrigger[ev]{MaxCount: every}, Evictor: c.ev},
				nil, codec.JSON[ev]{}, sumWindow.Process, out)
			if err := op.Open(testContext(newBackend(t, nil), &fakeClock{}, false)); err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if err := op.ProcessElement(e, e.T); err != nil {
					t.Fatal(err)
				}
			}
			if err := op.ProcessWatermark(MaxWatermark); err != nil {
				t.Fatal(err)
			}
			var want []string
			held := map[string][]ev{}
			count := map[string]int{}
			for _, e := range evs {
				held[e.Key] = append(held[e.Key], e)
				if count[e.Key]++; count[e.Key]%every != 0 {
					continue
				}
				els := held[e.Key]
				seen := els
				if !c.after {
					seen = c.keep(els)
				}
				r := winResult{Key: e.Key, Window: GlobalWindow, N: len(seen)}
				for _, s := range seen {
					r.Sum += s.V
				}
				want = append(want, r.String())
				held[e.Key] = slices.Clone(c.keep(seen))
			}
			slices.Sort(want)
			if got := resultStrings(out); !slices.Equal(got, want) {
				t.Fatalf("got %d firings, want %d\ngot  %v\nwant %v", len(got), len(want), got, want)
			}
		})
	}
}
