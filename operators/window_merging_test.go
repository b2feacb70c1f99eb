package operators

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// mergeCall is one call of the merging set's merge function.
type mergeCall struct {
	result, stateResult TimeWindow
	merged, mergedState []TimeWindow
}

func tw(start, end int64) TimeWindow { return TimeWindow{Start: start, End: end} }

func addTo(t *testing.T, s *mergingWindowSet, w TimeWindow) (TimeWindow, []mergeCall) {
	t.Helper()
	var calls []mergeCall
	got, err := s.addWindow(w, SessionWindows{Gap: 10}, func(r TimeWindow, m []TimeWindow, sr TimeWindow, ms []TimeWindow) error {
		calls = append(calls, mergeCall{r, sr, slices.Clone(m), slices.Clone(ms)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, calls
}

func TestMergingWindowSetBookkeeping(t *testing.T) {
	s := newMergingWindowSet(nil)
	// A window of its own is its own state window, no merge.
	got, calls := addTo(t, s, tw(0, 10))
	if got != tw(0, 10) || len(calls) != 0 {
		t.Fatalf("first window: %v, calls %v", got, calls)
	}
	if sw, ok := s.stateWindow(tw(0, 10)); !ok || sw != tw(0, 10) {
		t.Fatalf("state window of [0,10): %v %v", sw, ok)
	}
	// Inside a window in flight: swallowed, nothing moves.
	got, calls = addTo(t, s, tw(3, 8))
	if got != tw(0, 10) || len(calls) != 0 || len(s.mapping) != 1 {
		t.Fatalf("contained window: %v, calls %v, mapping %v", got, calls, s.mapping)
	}
	// Extending it: the result keeps the old state window; the old window's
	// timers go (merged), no state merges.
	got, calls = addTo(t, s, tw(5, 15))
	want := []mergeCall{{result: tw(0, 15), stateResult: tw(0, 10), merged: []TimeWindow{tw(0, 10)}}}
	if got != tw(0, 15) || !equalCalls(calls, want) {
		t.Fatalf("extension: %v, calls %+v", got, calls)
	}
	if sw, _ := s.stateWindow(tw(0, 15)); sw != tw(0, 15-5) || len(s.mapping) != 1 {
		t.Fatalf("after extension: mapping %v", s.mapping)
	}
	// A separate session.
	if got, calls = addTo(t, s, tw(30, 40)); got != tw(30, 40) || len(calls) != 0 || len(s.mapping) != 2 {
		t.Fatalf("separate: %v %v %v", got, calls, s.mapping)
	}
	// Touching windows merge, as in Flink ([0,15) and [15,25)).
	got, calls = addTo(t, s, tw(15, 25))
	want = []mergeCall{{result: tw(0, 25), stateResult: tw(0, 10), merged: []TimeWindow{tw(0, 15)}}}
	if got != tw(0, 25) || !equalCalls(calls, want) {
		t.Fatalf("touching: %v, calls %+v", got, calls)
	}
	// A bridge between two sessions: one state window stays, the other's
	// contents merge into it.
	got, calls = addTo(t, s, tw(24, 34))
	if got != tw(0, 40) || len(calls) != 1 {
		t.Fatalf("bridge: %v, calls %+v", got, calls)
	}
	c := calls[0]
	if c.result != tw(0, 40) || len(c.merged) != 2 || !slices.Contains(c.merged, tw(0, 25)) || !slices.Contains(c.merged, tw(30, 40)) {
		t.Fatalf("bridge call %+v", c)
	}
	if c.stateResult != tw(0, 10) || !slices.Equal(c.mergedState, []TimeWindow{tw(30, 40)}) {
		t.Fatalf("bridge state windows: keep %v merge %v, want keep [0,10) merge [30,40)", c.stateResult, c.mergedState)
	}
	if sw, ok := s.stateWindow(tw(0, 40)); !ok || sw != tw(0, 10) || len(s.mapping) != 1 {
		t.Fatalf("after bridge: mapping %v", s.mapping)
	}
	// Persisted and read back (through the state codec) it is the same set.
	var buf []byte
	var pairs []windowPair
	for _, p := range s.pairs() {
		b, err := windowPairCodec{}.Append(buf[:0], p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := windowPairCodec{}.Decode(b)
		if err != nil || q != p {
			t.Fatalf("codec round trip %v -> %v, %v", p, q, err)
		}
		pairs = append(pairs, q)
	}
	r := newMergingWindowSet(pairs)
	if !slices.Equal(r.pairs(), s.pairs()) || r.dirty {
		t.Fatalf("restored set %v, want %v", r.pairs(), s.pairs())
	}
	// Retiring.
	if err := r.retireWindow(tw(0, 40)); err != nil || len(r.mapping) != 0 || !r.dirty {
		t.Fatalf("retire: %v, mapping %v", err, r.mapping)
	}
	if err := r.retireWindow(tw(0, 40)); err == nil {
		t.Fatal("retiring a window not in flight succeeded")
	}
	if _, err := (windowPairCodec{}).Decode(make([]byte, 31)); err == nil {
		t.Fatal("a short merging-window entry decoded")
	}
}

func equalCalls(a, b []mergeCall) bool {
	return slices.EqualFunc(a, b, func(x, y mergeCall) bool {
		return x.result == y.result && x.stateResult == y.stateResult && slices.Equal(x.merged, y.merged) && slices.Equal(x.mergedState, y.mergedState)
	})
}

// TestMergingWindowSetModel adds random session windows (and retires
// random sessions) and checks the set against a plain model: the windows
// in flight are exactly the covers of the added windows, each with a
// distinct state window, and contents moved as the merge calls say end up
// with the right session.
func TestMergingWindowSetModel(t *testing.T) {
	for seed := int64(0); seed < 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			const gap = 10
			s := newMergingWindowSet(nil)
			contents := map[TimeWindow][]int{} // state window -> element ids
			var sessions [][2]int64            // model: disjoint covers, with their elements
			members := map[[2]int64][]int{}
			for id := range 200 {
				ts := rng.Int63n(500)
				w := tw(ts, ts+gap)
				got, err := s.addWindow(w, SessionWindows{Gap: gap}, func(r TimeWindow, m []TimeWindow, sr TimeWindow, ms []TimeWindow) error {
					for _, src := range ms {
						contents[sr] = append(contents[sr], contents[src]...)
						delete(contents, src)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				sw, ok := s.stateWindow(got)
				if !ok {
					t.Fatalf("no state window for %v", got)
				}
				contents[sw] = append(contents[sw], id)
				// Model: merge w with every intersecting session.
				cover := [2]int64{w.Start, w.End}
				ids := []int{id}
				kept := sessions[:0]
				for _, ss := range sessions {
					if ss[0] <= cover[1] && ss[1] >= cover[0] {
						cover = [2]int64{min(cover[0], ss[0]), max(cover[1], ss[1])}
						ids = append(ids, members[ss]...)
						delete(members, ss)
						continue
					}
					kept = append(kept, ss)
				}
				sessions = append(kept, cover)
				members[cover] = ids
				if got != tw(cover[0], cover[1]) {
					t.Fatalf("element %d at %d: in window %v, model says %v", id, ts, got, cover)
				}
				if rng.Intn(20) == 0 { // retire a random session, as firing does
					i := rng.Intn(len(sessions))
					ss := sessions[i]
					sw, _ := s.stateWindow(tw(ss[0], ss[1]))
					if err := s.retireWindow(tw(ss[0], ss[1])); err != nil {
						t.Fatal(err)
					}
					delete(contents, sw)
					delete(members, ss)
					sessions = slices.Delete(sessions, i, i+1)
				}
			}
			if len(s.mapping) != len(sessions) {
				t.Fatalf("%d windows in flight, model has %d sessions", len(s.mapping), len(sessions))
			}
			seenState := map[TimeWindow]bool{}
			for _, ss := range sessions {
				sw, ok := s.stateWindow(tw(ss[0], ss[1]))
				if !ok {
					t.Fatalf("session %v not in flight", ss)
				}
				if seenState[sw] {
					t.Fatalf("state window %v shared", sw)
				}
				seenState[sw] = true
				if g, w := sortedInts(contents[sw]), sortedInts(members[ss]); !slices.Equal(g, w) {
					t.Fatalf("session %v holds %v, want %v", ss, g, w)
				}
			}
		})
	}
}

func sortedInts(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestMergeTimeWindows(t *testing.T) {
	var got []mergeCall
	MergeTimeWindows([]TimeWindow{tw(20, 30), tw(0, 10), tw(5, 12), tw(40, 50), tw(12, 14), tw(40, 50), tw(60, 70)},
		func(r TimeWindow, m []TimeWindow) { got = append(got, mergeCall{result: r, merged: slices.Clone(m)}) })
	want := []mergeCall{
		{result: tw(0, 14), merged: []TimeWindow{tw(0, 10), tw(5, 12), tw(12, 14)}},
	}
	if !equalCalls(got, want) {
		t.Fatalf("merges %+v, want %+v (duplicates are one window; lone windows do not merge)", got, want)
	}
}

func TestAssigners(t *testing.T) {
	cases := []struct {
		a    WindowAssigner
		ts   int64
		want []TimeWindow
	}{
		{TumblingWindows{Size: 10}, 25, []TimeWindow{tw(20, 30)}},
		{TumblingWindows{Size: 10}, -1, []TimeWindow{tw(-10, 0)}},
		{TumblingWindows{Size: 10, Offset: 3}, 25, []TimeWindow{tw(23, 33)}},
		{TumblingWindows{Size: 10, Offset: -3}, 25, []TimeWindow{tw(17, 27)}},
		{SlidingWindows{Size: 10, Slide: 5}, 12, []TimeWindow{tw(10, 20), tw(5, 15)}},
		{SlidingWindows{Size: 10, Slide: 3}, 0, []TimeWindow{tw(0, 10), tw(-3, 7), tw(-6, 4), tw(-9, 1)}},
		{SlidingWindows{Size: 10, Slide: 5, Offset: 2}, 12, []TimeWindow{tw(12, 22), tw(7, 17)}},
		{SessionWindows{Gap: 7}, 12, []TimeWindow{tw(12, 19)}},
	}
	for _, c := range cases {
		if err := c.a.Validate(); err != nil {
			t.Fatalf("%s: %v", c.a, err)
		}
		got, err := c.a.AssignWindows(c.ts, 0, nil)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s at %d: %v %v, want %v", c.a, c.ts, got, err, c.want)
		}
		if _, err := c.a.AssignWindows(NoTimestamp, 0, nil); err == nil {
			t.Errorf("%s assigned a record without timestamp", c.a)
		}
	}
	got, err := TumblingWindows{Size: 10, ProcessingTime: true}.AssignWindows(NoTimestamp, 1234, nil)
	if err != nil || !slices.Equal(got, []TimeWindow{tw(1230, 1240)}) {
		t.Errorf("processing-time tumbling: %v %v", got, err)
	}
	for _, bad := range []WindowAssigner{TumblingWindows{}, TumblingWindows{Size: 10, Offset: 10}, SlidingWindows{Size: 10},
		SlidingWindows{Size: 10, Slide: 5, Offset: -5}, SessionWindows{}} {
		if bad.Validate() == nil {
			t.Errorf("%s validated", bad)
		}
	}
	if w, err := DecodeWindowNamespace(AppendWindowNamespace(nil, tw(-5, 7))); err != nil || w != tw(-5, 7) {
		t.Errorf("namespace round trip: %v %v", w, err)
	}
}

// countingBackend counts the reads of the merging-window sets.
type countingBackend struct {
	state.KeyedBackend
	setReads int
}

type countedSet struct {
	state.ValueState[[]windowPair]
	reads *int
}

func (c countedSet) Value() ([]windowPair, bool, error) {
	*c.reads++
	return c.ValueState.Value()
}

func (b *countingBackend) CreateState(d state.Descriptor) (any, error) {
	h, err := b.KeyedBackend.CreateState(d)
	if vs, ok := h.(state.ValueState[[]windowPair]); ok && err == nil {
		return countedSet{vs, &b.setReads}, nil
	}
	return h, err
}

// TestSessionSetReadOncePerRun: records of one key in a row read the
// key's merging-window set from state once; another key's record or
// timer in between makes the next read it again, and the windows are
// those of the plain evaluation.
func TestSessionSetReadOncePerRun(t *testing.T) {
	out := &recOut[winResult]{}
	op := newSumWindow(SessionWindows{Gap: 10}, 0, out)
	kb := &countingBackend{KeyedBackend: newBackend(t, nil)}
	if err := op.Open(testContext(kb, &fakeClock{}, false)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		e     *ev
		wm    int64
		reads int // the reads of merging sets after the step
	}{
		{e: &ev{"a", 1, 0}, reads: 1},
		{e: &ev{"a", 2, 5}, reads: 1},  // [0,15)
		{e: &ev{"a", 4, 30}, reads: 1}, // [30,40)
		{e: &ev{"b", 8, 31}, reads: 2},
		{e: &ev{"a", 16, 32}, reads: 3}, // [30,42)
		{e: &ev{"a", 32, 36}, reads: 3}, // [30,46)
		{wm: 20, reads: 3},              // fires a's [0,15): a's set is held
		{e: &ev{"a", 64, 40}, reads: 3}, // [30,50): the timer left it held
		{e: &ev{"b", 128, 33}, reads: 4},
		{wm: 100, reads: 5}, // fires b's [31,43) (held), then a's [30,50)
	}
	for i, s := range steps {
		var err error
		if s.e != nil {
			err = op.ProcessElement(*s.e, s.e.T)
		} else {
			err = op.ProcessWatermark(s.wm)
		}
		if err != nil {
			t.Fatal(err)
		}
		if kb.setReads != s.reads {
			t.Fatalf("step %d: %d reads of merging sets, want %d", i, kb.setReads, s.reads)
		}
	}
	want := []string{"a[0, 15)=3/2", "a[30, 50)=116/4", "b[31, 43)=136/2"}
	if got := resultStrings(out); !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
}
