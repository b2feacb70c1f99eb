package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/state"
)

// The window tests feed scripted records (value v, key v % winKeys) with
// explicit watermarks through windows and compare every firing with a
// plain evaluation of the same script, written here without windows,
// timers or state.

const winKeys = 5

func winKey(v int64) int64 { return v % winKeys }

// winFiring is one window firing: what a process window function sees.
type winFiring struct {
	Key   int64 `json:"k"`
	Start int64 `json:"s"`
	End   int64 `json:"e"`
	Sum   int64 `json:"sum"`
	N     int64 `json:"n"`
	// Fire counts the firings of the window: 1, then 2... for re-firings
	// caused by late records within the allowed lateness.
	Fire int64 `json:"f"`
	// vals are the window's records at the firing, in arrival order (the
	// plain evaluation's, for tests that need the contents).
	vals []int64
}

func (f winFiring) String() string {
	return fmt.Sprintf("k%d[%d,%d)=%d/%d#%d", f.Key, f.Start, f.End, f.Sum, f.N, f.Fire)
}

// winSpec describes a window kind for the plain evaluation.
type winSpec struct {
	kind             string // tumbling, sliding, session
	size, slide, gap int64
	lateness         int64
}

func (s winSpec) assigner() sluice.WindowAssigner {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	switch s.kind {
	case "tumbling":
		return sluice.TumblingEventTimeWindows(ms(s.size))
	case "sliding":
		return sluice.SlidingEventTimeWindows(ms(s.size), ms(s.slide))
	}
	return sluice.EventTimeSessionWindows(ms(s.gap))
}

// windowsOf lists the tumbling or sliding windows holding ts.
func (s winSpec) windowsOf(ts int64) [][2]int64 {
	floor := func(a, b int64) int64 {
		q := a / b
		if a%b != 0 && a < 0 {
			q--
		}
		return q * b
	}
	if s.kind == "tumbling" {
		st := floor(ts, s.size)
		return [][2]int64{{st, st + s.size}}
	}
	var out [][2]int64
	for st := floor(ts, s.slide); st > ts-s.size; st -= s.slide {
		out = append(out, [2]int64{st, st + s.size})
	}
	return out
}

// plainEval runs a script through Flink's window semantics for tumbling
// and sliding windows, by hand: a window fires when the watermark passes
// its end - 1, fires again for each record that arrives later but within
// the allowed lateness, and is gone after end - 1 + lateness; a record
// for which every window is gone is late data. Sessions (no record
// within the lateness of a fired session, see sessionScript) are split
// where a key's records are more than a gap apart.
func plainEval(spec winSpec, script []step) (firings []winFiring, late []int64) {
	if spec.kind == "session" {
		return plainSessions(spec, script)
	}
	type kw struct {
		key int64
		w   [2]int64
	}
	type win struct {
		sum, n, fires int64
		vals          []int64
	}
	open := map[kw]*win{}
	wm := int64(-1 << 62)
	fire := func(k kw, w *win) {
		w.fires++
		firings = append(firings, winFiring{Key: k.key, Start: k.w[0], End: k.w[1], Sum: w.sum, N: w.n, Fire: w.fires, vals: slices.Clone(w.vals)})
	}
	for _, st := range script {
		if st.wm {
			if st.wmTs <= wm {
				continue
			}
			for k, w := range open {
				if maxTs := k.w[1] - 1; maxTs > wm && maxTs <= st.wmTs {
					fire(k, w)
				}
			}
			wm = st.wmTs
			for k := range open {
				if k.w[1]-1+spec.lateness <= wm {
					delete(open, k)
				}
			}
			continue
		}
		skipped := true
		for _, w := range spec.windowsOf(st.ts) {
			if w[1]-1+spec.lateness <= wm {
				continue // the window is gone
			}
			skipped = false
			k := kw{winKey(st.v), w}
			if open[k] == nil {
				open[k] = &win{}
			}
			open[k].sum += st.v
			open[k].n++
			open[k].vals = append(open[k].vals, st.v)
			if w[1]-1 <= wm {
				fire(k, open[k]) // late but within the allowed lateness
			}
		}
		if skipped && st.ts+spec.lateness <= wm {
			late = append(late, st.v)
		}
	}
	for k, w := range open { // the final watermark
		if k.w[1]-1 > wm {
			fire(k, w)
		}
	}
	return firings, late
}

// plainSessions evaluates session windows over a script whose on-time
// records never reach a fired session and whose late records are far
// older than any session (see sessionScript).
func plainSessions(spec winSpec, script []step) (firings []winFiring, late []int64) {
	byKey := map[int64][]step{}
	wm := int64(-1 << 62)
	for _, st := range script {
		switch {
		case st.wm:
			wm = max(wm, st.wmTs)
		case st.ts+spec.gap-1+spec.lateness <= wm:
			late = append(late, st.v)
		default:
			byKey[winKey(st.v)] = append(byKey[winKey(st.v)], st)
		}
	}
	for k, recs := range byKey {
		slices.SortStableFunc(recs, func(a, b step) int { return int(a.ts - b.ts) })
		var cur *winFiring
		lastTs := int64(0)
		for _, r := range recs {
			if cur != nil && r.ts > lastTs+spec.gap {
				firings = append(firings, *cur)
				cur = nil
			}
			if cur == nil {
				cur = &winFiring{Key: k, Start: r.ts, Fire: 1}
			}
			lastTs = r.ts
			cur.End = r.ts + spec.gap
			cur.Sum += r.v
			cur.N++
		}
		if cur != nil {
			firings = append(firings, *cur)
		}
	}
	return firings, late
}

// windowScript makes records with even, out-of-order timestamps (at most
// bound apart from the largest seen), a watermark every few records at
// max - bound - 1, and some late records: within the allowed lateness
// and beyond it.
func windowScript(rng *rand.Rand, n int, bound, lateness, maxWindow int64) []step {
	var s []step
	maxTs, wm := int64(1000), int64(-1<<62)
	for i := range int64(n) {
		ts := 1000 + 2*(i*3+rng.Int64N(bound/2))
		if i%23 == 22 && wm > 1000 {
			// A late record: within the allowed lateness, or beyond it for
			// all its windows.
			if rng.IntN(2) == 0 {
				ts = wm - rng.Int64N(lateness)
			} else {
				ts = wm - maxWindow - lateness - rng.Int64N(50)
			}
		}
		maxTs = max(maxTs, ts)
		s = append(s, rec(i, ts))
		if i%5 == 4 {
			wm = maxTs - bound - 1
			s = append(s, wmark(wm))
		}
	}
	return s
}

// sessionScript is windowScript for sessions: on-time records have even
// timestamps and the gap is odd, so no record lands exactly at the end of
// a session (where merging would depend on whether the session fired
// already); late records are far older than every session.
func sessionScript(rng *rand.Rand, n int, bound int64) []step {
	var s []step
	maxTs := int64(1000)
	for i := range int64(n) {
		ts := 1000 + 2*(i*4+rng.Int64N(bound/2))
		if i%31 == 30 {
			ts = 1 + rng.Int64N(100)
		}
		maxTs = max(maxTs, ts)
		s = append(s, rec(i, ts))
		if i%5 == 4 {
			s = append(s, wmark(maxTs-bound-1))
		}
	}
	return s
}

// firingCounter is a ProcessWindowFunction with per-window state: it
// counts the firings of each window in a ValueState under the window's
// namespace and clears it when the window is purged.
type firingCounter struct {
	fires  state.ValueState[int64]
	clears *atomic.Int64
}

func (f *firingCounter) Open(ctx *sluice.OperatorContext) error {
	var err error
	f.fires, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "fires"})
	return err
}

func (f *firingCounter) Process(ctx *sluice.WindowContext[int64], els []int64, out sluice.Collector[winFiring]) error {
	f.fires.SetNamespace(ctx.WindowNamespace())
	n, _, err := f.fires.Value()
	if err != nil {
		return err
	}
	n++
	if err := f.fires.Update(n); err != nil {
		return err
	}
	w := ctx.Window()
	r := winFiring{Key: ctx.Key(), Start: w.Start, End: w.End, N: int64(len(els)), Fire: n}
	for _, v := range els {
		if winKey(v) != ctx.Key() {
			return fmt.Errorf("record %d in the window of key %d", v, ctx.Key())
		}
		r.Sum += v
	}
	out.Collect(r)
	return nil
}

func (f *firingCounter) Clear(ctx *sluice.WindowContext[int64]) error {
	f.clears.Add(1)
	f.fires.SetNamespace(ctx.WindowNamespace())
	return f.fires.Clear()
}

// sumCount is an AggregateFunction: the sum and count of a window.
type sumCount struct{}

type sumCountAcc struct{ Sum, N int64 }

func (sumCount) CreateAccumulator() sumCountAcc { return sumCountAcc{} }
func (sumCount) Add(v int64, a sumCountAcc) sumCountAcc {
	return sumCountAcc{a.Sum + v, a.N + 1}
}
func (sumCount) GetResult(a sumCountAcc) string     { return fmt.Sprintf("%d/%d", a.Sum, a.N) }
func (sumCount) Merge(a, b sumCountAcc) sumCountAcc { return sumCountAcc{a.Sum + b.Sum, a.N + b.N} }

func TestEventTimeWindowsMatchPlainEvaluation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	specs := []winSpec{
		{kind: "tumbling", size: 100, lateness: 40},
		{kind: "sliding", size: 100, slide: 30, lateness: 40},
		{kind: "session", gap: 25, lateness: 20},
	}
	for si, spec := range specs {
		rng := rand.New(rand.NewPCG(seed, uint64(si)))
		// A script with late records and (but for sessions) re-firings:
		// random ones have them nearly always; draw again if not.
		var script []step
		var want []winFiring
		var wantLate []int64
		for try := 0; ; try++ {
			if spec.kind == "session" {
				script = sessionScript(rng, 400, 40)
			} else {
				script = windowScript(rng, 400, 40, spec.lateness, spec.size)
			}
			want, wantLate = plainEval(spec, script)
			refires := 0
			for _, f := range want {
				if f.Fire > 1 {
					refires++
				}
			}
			if len(wantLate) > 0 && (spec.kind == "session" || refires > 0) {
				break
			}
			if try == 20 {
				t.Fatalf("%s: the script has %d late records and %d re-firings; the test needs both", spec.kind, len(wantLate), refires)
			}
		}
		for _, fn := range []string{"reduce", "aggregate", "process"} {
			t.Run(spec.kind+"/"+fn, func(t *testing.T) {
				env := newEnv(sluice.WithParallelism(2))
				src := sluice.FromSource(env, newScriptSource(script), sluice.NoWatermarks[int64](), "script", sluice.Parallelism(1))
				lateTag := sluice.NewOutputTag[int64]("late")
				ws := sluice.Window(sluice.KeyBy(src, winKey), spec.assigner()).
					AllowedLateness(time.Duration(spec.lateness) * time.Millisecond).
					SideOutputLateData(lateTag)
				var got, wantS []string
				lateOut := sink.NewCollect[int64]()
				var collect func()
				clears := &atomic.Int64{}
				switch fn {
				case "reduce":
					out := sink.NewCollect[int64]()
					res := sluice.ReduceWindow(ws, func(a, b int64) (int64, error) { return a + b, nil }, sluice.UID("sum"))
					sluice.SinkTo(res, out)
					sluice.SinkTo(sluice.SideOutput(res, lateTag), lateOut)
					collect = func() {
						for _, r := range out.Records() {
							got = append(got, fmt.Sprintf("%d@%d", r.Value, r.Timestamp))
						}
						for _, f := range want {
							wantS = append(wantS, fmt.Sprintf("%d@%d", f.Sum, f.End-1))
						}
					}
				case "aggregate":
					out := sink.NewCollect[string]()
					res := sluice.AggregateWindow(ws, sluice.AggregateFunction[int64, sumCountAcc, string](sumCount{}))
					sluice.SinkTo(res, out)
					sluice.SinkTo(sluice.SideOutput(res, lateTag), lateOut)
					collect = func() {
						for _, r := range out.Records() {
							got = append(got, fmt.Sprintf("%s@%d", r.Value, r.Timestamp))
						}
						for _, f := range want {
							wantS = append(wantS, fmt.Sprintf("%d/%d@%d", f.Sum, f.N, f.End-1))
						}
					}
				case "process":
					out := sink.NewCollect[winFiring]()
					res := sluice.ProcessWindow(ws, sluice.ProcessWindowFunction[int64, int64, winFiring](&firingCounter{clears: clears}))
					sluice.SinkTo(res, out)
					sluice.SinkTo(sluice.SideOutput(res, lateTag), lateOut)
					collect = func() {
						for _, r := range out.Records() {
							got = append(got, r.Value.String())
							if r.Timestamp != r.Value.End-1 {
								t.Errorf("firing %v has timestamp %d, want the window's end - 1", r.Value, r.Timestamp)
							}
						}
						windows := map[[3]int64]bool{}
						for _, f := range want {
							wantS = append(wantS, f.String())
							windows[[3]int64{f.Key, f.Start, f.End}] = true
						}
						if n := clears.Load(); n != int64(len(windows)) {
							t.Errorf("Clear called %d times for %d windows", n, len(windows))
						}
					}
				}
				mustExecute(t, env)
				collect()
				if d := sameMultiset(got, wantS); d != "" {
					t.Errorf("window results: %s", d)
				}
				var gotLate []int64
				for _, r := range lateOut.Records() {
					gotLate = append(gotLate, r.Value)
					if ts := scriptTs(script, r.Value); r.Timestamp != ts {
						t.Errorf("late record %d has timestamp %d, want its own %d", r.Value, r.Timestamp, ts)
					}
				}
				if d := sameMultiset(gotLate, wantLate); d != "" {
					t.Errorf("late data: %s", d)
				}
			})
		}
	}
}

func scriptTs(script []step, v int64) int64 {
	for _, s := range script {
		if s.emit && s.v == v {
			return s.ts
		}
	}
	return -1
}

// TestReduceProcessAndAggregateProcessWindows: the incremental functions
// combined with a process window function see the single reduced value
// with the window.
func TestReduceProcessAndAggregateProcessWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	spec := winSpec{kind: "tumbling", size: 50}
	var script []step
	for i := range int64(200) {
		script = append(script, rec(i, 1000+i*3+rng.Int64N(5)))
		if i%10 == 9 {
			script = append(script, wmark(1000+i*3-10))
		}
	}
	want, _ := plainEval(spec, script)
	env := newEnv(sluice.WithParallelism(2))
	src := sluice.FromSource(env, newScriptSource(script), sluice.NoWatermarks[int64](), "script", sluice.Parallelism(1))
	ws := sluice.Window(sluice.KeyBy(src, winKey), spec.assigner())
	reduced := sluice.ReduceProcessWindow(ws, func(a, b int64) (int64, error) { return a + b, nil },
		sluice.ProcessWindowFunc[int64, int64, winFiring](func(ctx *sluice.WindowContext[int64], sums []int64, out sluice.Collector[winFiring]) error {
			if len(sums) != 1 {
				return fmt.Errorf("%d reduced values", len(sums))
			}
			w := ctx.Window()
			out.Collect(winFiring{Key: ctx.Key(), Start: w.Start, End: w.End, Sum: sums[0], Fire: 1})
			return nil
		}))
	counted := sluice.AggregateProcessWindow(ws, sluice.AggregateFunction[int64, sumCountAcc, string](sumCount{}),
		sluice.ProcessWindowFunc[int64, string, string](func(ctx *sluice.WindowContext[int64], rs []string, out sluice.Collector[string]) error {
			out.Collect(fmt.Sprintf("k%d[%d,%d)=%s", ctx.Key(), ctx.Window().Start, ctx.Window().End, rs[0]))
			return nil
		}))
	a, b := sink.NewCollect[winFiring](), sink.NewCollect[string]()
	sluice.SinkTo(reduced, a)
	sluice.SinkTo(counted, b)
	mustExecute(t, env)
	var gotA, gotB []string
	for _, f := range a.Values() {
		gotA = append(gotA, winFiring{Key: f.Key, Start: f.Start, End: f.End, Sum: f.Sum, Fire: 1}.String())
	}
	var wantA, wantB []string
	for _, f := range want {
		wantA = append(wantA, winFiring{Key: f.Key, Start: f.Start, End: f.End, Sum: f.Sum, Fire: 1}.String())
		wantB = append(wantB, fmt.Sprintf("k%d[%d,%d)=%d/%d", f.Key, f.Start, f.End, f.Sum, f.N))
	}
	gotB = b.Values()
	if d := sameMultiset(gotA, wantA); d != "" {
		t.Errorf("reduce+process: %s", d)
	}
	if d := sameMultiset(gotB, wantB); d != "" {
		t.Errorf("aggregate+process: %s", d)
	}
}

// TestProcessingTimeWindows runs processing-time windows of each kind on
// the wall clock, so their boundaries are not known in advance; it checks
// what holds whatever the timing: every record is counted in each of its
// windows exactly once, windows are aligned and of the right size, results
// carry the window's end - 1, and a key's sessions do not overlap.
func TestProcessingTimeWindows(t *testing.T) {
	const n = 300
	cases := []struct {
		name    string
		a       sluice.WindowAssigner
		perRec  int64
		checkFn func(w sluice.TimeWindow) error
	}{
		{"tumbling", sluice.TumblingProcessingTimeWindows(40 * time.Millisecond), 1, func(w sluice.TimeWindow) error {
			if w.Start%40 != 0 || w.End-w.Start != 40 {
				return fmt.Errorf("window %v not aligned to 40 ms", w)
			}
			return nil
		}},
		{"tumbling-offset", sluice.TumblingProcessingTimeWindows(40 * time.Millisecond).WithOffset(7 * time.Millisecond), 1, func(w sluice.TimeWindow) error {
			if (w.Start-7)%40 != 0 || w.End-w.Start != 40 {
				return fmt.Errorf("window %v not aligned to 40 ms + 7", w)
			}
			return nil
		}},
		{"sliding", sluice.SlidingProcessingTimeWindows(60*time.Millisecond, 20*time.Millisecond), 3, func(w sluice.TimeWindow) error {
			if w.Start%20 != 0 || w.End-w.Start != 60 {
				return fmt.Errorf("window %v not a 60 ms window aligned to 20 ms", w)
			}
			return nil
		}},
		{"session", sluice.ProcessingTimeSessionWindows(30 * time.Millisecond), 1, func(w sluice.TimeWindow) error {
			if w.End-w.Start < 30 {
				return fmt.Errorf("session %v shorter than its gap", w)
			}
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			release := newOnce()
			defer release.close()
			var script []step
			for i := range int64(n) {
				script = append(script, rec(i, 0))
				if i%50 == 49 {
					script = append(script, waitFor(closedAfter(15*time.Millisecond)))
				}
			}
			script = append(script, waitFor(release.C()))
			env := newEnv(sluice.WithParallelism(2))
			src := sluice.FromSource(env, newScriptSource(script), sluice.NoWatermarks[int64](), "script", sluice.Parallelism(1))
			res := sluice.ProcessWindow(sluice.Window(sluice.KeyBy(src, winKey), c.a),
				sluice.ProcessWindowFunc[int64, int64, winFiring](func(ctx *sluice.WindowContext[int64], els []int64, out sluice.Collector[winFiring]) error {
					w := ctx.Window()
					f := winFiring{Key: ctx.Key(), Start: w.Start, End: w.End, N: int64(len(els))}
					for _, v := range els {
						f.Sum += v
					}
					out.Collect(f)
					return nil
				}))
			out := sink.NewCollect[winFiring]()
			sluice.SinkTo(res, out)
			job := mustStart(t, env)
			total := func() (s int64) {
				for _, f := range out.Values() {
					s += f.N
				}
				return s
			}
			await(t, "every record counted in all its windows", func() bool { return total() >= n*c.perRec })
			release.close()
			if err := job.Wait(); err != nil {
				t.Fatal(err)
			}
			if got := total(); got != n*c.perRec {
				t.Fatalf("%d records counted, want %d", got, n*c.perRec)
			}
			var sum int64
			seen := map[[3]int64]bool{}
			sessions := map[int64][]sluice.TimeWindow{}
			for _, r := range out.Records() {
				f := r.Value
				w := sluice.TimeWindow{Start: f.Start, End: f.End}
				if err := c.checkFn(w); err != nil {
					t.Fatal(err)
				}
				if r.Timestamp != w.MaxTimestamp() {
					t.Fatalf("result of %v at %d, want %d", w, r.Timestamp, w.MaxTimestamp())
				}
				// A record that arrives in the very millisecond its window
				// fired on the wall clock makes the window fire again with
				// just that record, as in Flink; the totals above still
				// count every record exactly once per window.
				k := [3]int64{f.Key, f.Start, f.End}
				again := seen[k]
				seen[k] = true
				for _, o := range sessions[f.Key] {
					if c.name == "session" && !again && o.Start < w.End && w.Start < o.End {
						t.Fatalf("sessions %v and %v of key %d overlap", o, w, f.Key)
					}
				}
				sessions[f.Key] = append(sessions[f.Key], w)
				sum += f.Sum
			}
			if want := c.perRec * n * (n - 1) / 2; sum != want {
				t.Fatalf("sum over windows %d, want %d", sum, want)
			}
		})
	}
}

// closedAfter returns a channel that is closed after d.
func closedAfter(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(d, func() { close(ch) })
	return ch
}
