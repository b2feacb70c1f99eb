package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// wjSpec is one window assigner of the window join / coGroup tests, with
// its plain evaluation: the windows [start, end) a timestamp falls in.
type wjSpec struct {
	name      string
	assigner  sluice.WindowAssigner
	windowsOf func(ts int64) [][2]int64
}

func wjSpecs() []wjSpec {
	return []wjSpec{
		{name: "tumbling", assigner: sluice.TumblingEventTimeWindows(50 * time.Millisecond),
			windowsOf: func(ts int64) [][2]int64 { s := ts - ts%50; return [][2]int64{{s, s + 50}} }},
		{name: "sliding", assigner: sluice.SlidingEventTimeWindows(60*time.Millisecond, 20*time.Millisecond),
			windowsOf: func(ts int64) [][2]int64 {
				var out [][2]int64
				for s := ts - ts%20; s > ts-60; s -= 20 {
					out = append(out, [2]int64{s, s + 60})
				}
				return out
			}},
	}
}

// wjInputs returns two inputs of n records each over keys, timestamps
// rising but out of order by up to 40 ms (inside the 100 ms bound, so
// nothing is late); some keys get no right records at times, so coGroup
// sees one-sided groups.
func wjInputs(rng *rand.Rand, n int) (left, right []twoEv) {
	for i := range n {
		left = append(left, twoEv{Key: rng.Int64N(5), I: int64(i), Ts: int64(i)*3 + rng.Int64N(40)})
		right = append(right, twoEv{Key: rng.Int64N(7), I: int64(i), Ts: int64(i)*3 + rng.Int64N(40)})
	}
	return left, right
}

// wjGroup is the plain evaluation's grouping: key and window to the
// records of each input.
type wjGroup struct {
	key         int64
	maxTs       int64
	left, right []int64
}

func wjPlainGroups(left, right []twoEv, windowsOf func(int64) [][2]int64) map[[3]int64]*wjGroup {
	g := map[[3]int64]*wjGroup{}
	add := func(e twoEv, isLeft bool) {
		for _, w := range windowsOf(e.Ts) {
			k := [3]int64{e.Key, w[0], w[1]}
			if g[k] == nil {
				g[k] = &wjGroup{key: e.Key, maxTs: w[1] - 1}
			}
			if isLeft {
				g[k].left = append(g[k].left, e.I)
			} else {
				g[k].right = append(g[k].right, e.I)
			}
		}
	}
	for _, e := range left {
		add(e, true)
	}
	for _, e := range right {
		add(e, false)
	}
	return g
}

// wjSessionGroups is the plain evaluation of session windows: per key,
// both inputs' records by time, a new session when a record comes more
// than gap after the last (windows [ts, ts+gap) that touch merge).
func wjSessionGroups(left, right []twoEv, gap int64) map[[3]int64]*wjGroup {
	type tagged struct {
		e      twoEv
		isLeft bool
	}
	byKey := map[int64][]tagged{}
	for _, e := range left {
		byKey[e.Key] = append(byKey[e.Key], tagged{e, true})
	}
	for _, e := range right {
		byKey[e.Key] = append(byKey[e.Key], tagged{e, false})
	}
	g := map[[3]int64]*wjGroup{}
	for key, es := range byKey {
		sort.SliceStable(es, func(i, j int) bool { return es[i].e.Ts < es[j].e.Ts })
		var cur *wjGroup
		var start, end int64
		flush := func() {
			if cur != nil {
				cur.maxTs = end - 1
				g[[3]int64{key, start, end}] = cur
			}
		}
		for _, t := range es {
			if cur == nil || t.e.Ts > end {
				flush()
				cur, start = &wjGroup{key: key}, t.e.Ts
			}
			end = max(end, t.e.Ts+gap)
			if t.isLeft {
				cur.left = append(cur.left, t.e.I)
			} else {
				cur.right = append(cur.right, t.e.I)
			}
		}
		flush()
	}
	return g
}

func wjJoinWant(groups map[[3]int64]*wjGroup) []string {
	var out []string
	for _, g := range groups {
		for _, l := range g.left {
			for _, r := range g.right {
				out = append(out, fmt.Sprintf("%d:%d+%d@%d", g.key, l, r, g.maxTs))
			}
		}
	}
	return out
}

func wjIDs(ids []int64) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	s := make([]string, len(ids))
	for i, v := range ids {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

func wjCoGroupWant(groups map[[3]int64]*wjGroup) []string {
	var out []string
	for _, g := range groups {
		out = append(out, fmt.Sprintf("%d:[%s]|[%s]@%d", g.key, wjIDs(g.left), wjIDs(g.right), g.maxTs))
	}
	return out
}

// wjRun runs build over the two inputs as bounded, out-of-order sources
// and returns the results with their timestamps as "result@ts".
func wjRun(t *testing.T, left, right []twoEv, build func(l, r *sluice.KeyedStream[int64, twoEv]) *sluice.Stream[string]) []string {
	t.Helper()
	env := newEnv(sluice.WithParallelism(2))
	wm := sluice.ForBoundedOutOfOrderness[twoEv](100 * time.Millisecond).
		WithTimestampAssigner(func(e twoEv, _ int64) int64 { return e.Ts })
	ls := sluice.FromSource(env, source.FromSlice(left), wm, "left", sluice.Parallelism(1))
	rs := sluice.FromSource(env, source.FromSlice(right), wm, "right", sluice.Parallelism(1))
	out := sink.NewCollect[string]()
	sluice.SinkTo(build(sluice.KeyBy(ls, twoKey), sluice.KeyBy(rs, twoKey)), out)
	mustExecute(t, env)
	var got []string
	for _, r := range out.Records() {
		got = append(got, fmt.Sprintf("%s@%d", r.Value, r.Timestamp))
	}
	return got
}

// wjJoinFn tags join results with the key: the join function sees only
// the records, both of the key.
func wjJoinFn() sluice.JoinFunc[twoEv, twoEv, string] {
	return func(l, r twoEv) (string, error) {
		if l.Key != r.Key {
			return "", fmt.Errorf("joined records of keys %d and %d", l.Key, r.Key)
		}
		return fmt.Sprintf("%d:%d+%d", l.Key, l.I, r.I), nil
	}
}

func wjCoGroupFn() sluice.CoGroupFunc[twoEv, twoEv, string] {
	return func(ls, rs []twoEv, out sluice.Collector[string]) error {
		var li, ri []int64
		key := int64(-1)
		for _, l := range ls {
			li, key = append(li, l.I), l.Key
		}
		for _, r := range rs {
			ri, key = append(ri, r.I), r.Key
		}
		out.Collect(fmt.Sprintf("%d:[%s]|[%s]", key, wjIDs(li), wjIDs(ri)))
		return nil
	}
}

func TestWindowJoinMatchesPlainEvaluation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for i, spec := range wjSpecs() {
		t.Run(spec.name, func(t *testing.T) {
			left, right := wjInputs(rand.New(rand.NewPCG(seed, uint64(i))), 300)
			want := wjJoinWant(wjPlainGroups(left, right, spec.windowsOf))
			got := wjRun(t, left, right, func(l, r *sluice.KeyedStream[int64, twoEv]) *sluice.Stream[string] {
				return sluice.ApplyWindowJoin(sluice.WindowJoin(l, r).Window(spec.assigner), wjJoinFn(), sluice.UID("join"))
			})
			if len(want) == 0 {
				t.Fatal("the plain evaluation joins nothing; the test needs pairs")
			}
			if d := sameMultiset(got, want); d != "" {
				t.Fatalf("window join differs from the plain evaluation: %s", d)
			}
		})
	}
}

func TestCoGroupMatchesPlainEvaluation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	type cgSpec struct {
		name     string
		assigner sluice.WindowAssigner
		groups   func(left, right []twoEv) map[[3]int64]*wjGroup
	}
	var specs []cgSpec
	for _, s := range wjSpecs() {
		specs = append(specs, cgSpec{s.name, s.assigner, func(l, r []twoEv) map[[3]int64]*wjGroup { return wjPlainGroups(l, r, s.windowsOf) }})
	}
	const gap = 12
	specs = append(specs, cgSpec{"session", sluice.EventTimeSessionWindows(gap * time.Millisecond),
		func(l, r []twoEv) map[[3]int64]*wjGroup { return wjSessionGroups(l, r, gap) }})
	for i, spec := range specs {
		t.Run(spec.name, func(t *testing.T) {
			left, right := wjInputs(rand.New(rand.NewPCG(seed, uint64(i))), 300)
			groups := spec.groups(left, right)
			oneSided := 0
			for _, g := range groups {
				if len(g.left) == 0 || len(g.right) == 0 {
					oneSided++
				}
			}
			if oneSided == 0 || oneSided == len(groups) {
				t.Fatalf("%d of %d groups are one-sided; the test needs both kinds", oneSided, len(groups))
			}
			want := wjCoGroupWant(groups)
			got := wjRun(t, left, right, func(l, r *sluice.KeyedStream[int64, twoEv]) *sluice.Stream[string] {
				return sluice.ApplyCoGroup(sluice.CoGroup(l, r).Window(spec.assigner), wjCoGroupFn(), sluice.UID("cogroup"))
			})
			if d := sameMultiset(got, want); d != "" {
				t.Fatalf("coGroup differs from the plain evaluation: %s", d)
			}
		})
	}
}

// The exactly-once test of the two-input harness: a tumbling window join
// under crashes before, in and after it.
const wjSize = 100 // ms

func buildWindowJoin(r *job[string], left, right *sluice.Stream[twoEv]) *sluice.Stream[string] {
	crash := r.opCrash
	fn := sluice.JoinFunc[twoEv, twoEv, string](func(l, rr twoEv) (string, error) {
		if crash.hit() {
			return "", fmt.Errorf("join of %d and %d: %w", l.I, rr.I, errInjectedCrash)
		}
		return fmt.Sprintf("%d+%d", l.I, rr.I), nil
	})
	return sluice.ApplyWindowJoin(
		sluice.WindowJoin(sluice.KeyBy(left, twoKey), sluice.KeyBy(right, twoKey)).
			Window(sluice.TumblingEventTimeWindows(wjSize*time.Millisecond)),
		fn, sluice.UID("window-join"), sluice.Parallelism(r.opPar))
}

func wantWindowJoin(n int64) []string {
	left, right := twoInputs(n)
	var out []string
	for _, l := range left {
		for _, r := range right {
			if l.Key == r.Key && l.Ts/wjSize == r.Ts/wjSize {
				out = append(out, fmt.Sprintf("%d+%d", l.I, r.I))
			}
		}
	}
	return out
}

func TestWindowJoinExactlyOnceUnderFailures(t *testing.T) {
	runTwoUnderFailures(t, buildWindowJoin, wantWindowJoin(2000))
}

func TestWindowJoinRescale(t *testing.T) {
	runTwoRescale(t, buildWindowJoin, wantWindowJoin(2000))
}

// buildCoGroup sums each key's records of both inputs per tumbling
// window: one-sided windows (a key with records of one input only) are
// results too.
func buildCoGroup(r *job[string], left, right *sluice.Stream[twoEv]) *sluice.Stream[string] {
	crash := r.opCrash
	fn := sluice.CoGroupFunc[twoEv, twoEv, string](func(ls, rs []twoEv, out sluice.Collector[string]) error {
		if crash.hit() {
			return fmt.Errorf("coGroup of %d and %d records: %w", len(ls), len(rs), errInjectedCrash)
		}
		var s [4]int64
		key := int64(-1)
		for side, in := range [][]twoEv{ls, rs} {
			for _, e := range in {
				s[2*side]++
				s[2*side+1] += e.I
				key = e.Key
			}
		}
		out.Collect(fmt.Sprintf("%d/%v", key, s))
		return nil
	})
	return sluice.ApplyCoGroup(
		sluice.CoGroup(sluice.KeyBy(left, twoKey), sluice.KeyBy(right, twoKey)).
			Window(sluice.TumblingEventTimeWindows(wjSize*time.Millisecond)),
		fn, sluice.UID("cogroup"), sluice.Parallelism(r.opPar))
}

// wantCoGroup is the plain evaluation of buildCoGroup.
func wantCoGroup(n int64) []string {
	left, right := twoInputs(n)
	type kw struct{ key, w int64 }
	sums := map[kw][4]int64{}
	for side, in := range [][]twoEv{left, right} {
		for _, e := range in {
			b := kw{e.Key, e.Ts / wjSize}
			s := sums[b]
			s[2*side]++
			s[2*side+1] += e.I
			sums[b] = s
		}
	}
	var out []string
	oneSided := 0
	for b, s := range sums {
		if s[0] == 0 || s[2] == 0 {
			oneSided++
		}
		out = append(out, fmt.Sprintf("%d/%v", b.key, s))
	}
	if oneSided == 0 {
		panic("wantCoGroup: no one-sided window; the test needs some")
	}
	return out
}

func TestCoGroupRescale(t *testing.T) {
	runTwoRescale(t, buildCoGroup, wantCoGroup(2000))
}
