package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The trigger and evictor tests of window join and coGroup (Flink's
// JoinedStreams.WithWindow.trigger and .evictor) run the inputs of the
// plain-evaluation tests (wjInputs) with a trigger or evictor over the
// TaggedUnion of both inputs.

// wjTs returns the timestamp of each input record by its index.
func wjTs(in []twoEv) map[int64]int64 {
	m := map[int64]int64{}
	for _, e := range in {
		m[e.I] = e.Ts
	}
	return m
}

// A time evictor keeps, when a window fires, the records of both inputs
// within its size of the window's newest record.
func TestCoGroupTimeEvictorMatchesPlainEvaluation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const keep = 15
	spec := wjSpecs()[0]
	left, right := wjInputs(rand.New(rand.NewPCG(seed, 1)), 300)
	lts, rts := wjTs(left), wjTs(right)
	groups := wjPlainGroups(left, right, spec.windowsOf)
	evicted := 0
	for _, g := range groups {
		newest := int64(-1 << 62)
		for _, i := range g.left {
			newest = max(newest, lts[i])
		}
		for _, i := range g.right {
			newest = max(newest, rts[i])
		}
		n := len(g.left) + len(g.right)
		g.left = slices.DeleteFunc(g.left, func(i int64) bool { return lts[i] <= newest-keep })
		g.right = slices.DeleteFunc(g.right, func(i int64) bool { return rts[i] <= newest-keep })
		evicted += n - len(g.left) - len(g.right)
	}
	if evicted == 0 {
		t.Fatal("the plain evaluation evicts nothing; the test needs evictions")
	}
	want := wjCoGroupWant(groups)
	got := wjRun(t, left, right, func(l, r *sluice.KeyedStream[int64, twoEv]) *sluice.Stream[string] {
		return sluice.ApplyCoGroup(sluice.CoGroup(l, r).Window(spec.assigner).
			Evictor(sluice.TimeEvictor[sluice.TaggedUnion[twoEv, twoEv]](keep*time.Millisecond)),
			wjCoGroupFn(), sluice.UID("cogroup"))
	})
	if d := sameMultiset(got, want); d != "" {
		t.Fatalf("coGroup with a time evictor differs from the plain evaluation: %s", d)
	}
	// The window join sees the same records: the pairs of what is kept.
	gotJoin := wjRun(t, left, right, func(l, r *sluice.KeyedStream[int64, twoEv]) *sluice.Stream[string] {
		return sluice.ApplyWindowJoin(sluice.WindowJoin(l, r).Window(spec.assigner).
			Evictor(sluice.TimeEvictor[sluice.TaggedUnion[twoEv, twoEv]](keep*time.Millisecond)),
			wjJoinFn(), sluice.UID("join"))
	})
	if d := sameMultiset(gotJoin, wjJoinWant(groups)); d != "" {
		t.Fatalf("window join with a time evictor differs from the plain evaluation: %s", d)
	}
}

// A count trigger fires a window each time 3 more records of either input
// arrived, with everything it holds (it does not purge), and not at the
// window's end: which records a firing holds depends on how the inputs
// interleave, so the test compares the firings' sizes and that each holds
// records of its window only.
func TestCoGroupCountTriggerMatchesPlainEvaluation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const every = 3
	spec := wjSpecs()[0]
	left, right := wjInputs(rand.New(rand.NewPCG(seed, 2)), 300)
	groups := wjPlainGroups(left, right, spec.windowsOf)
	var want []string
	byWindow := map[string]*wjGroup{}
	for _, g := range groups {
		id := fmt.Sprintf("%d@%d", g.key, g.maxTs)
		byWindow[id] = g
		for n := every; n <= len(g.left)+len(g.right); n += every {
			want = append(want, fmt.Sprintf("%s#%d", id, n))
		}
	}
	got := wjRun(t, left, right, func(l, r *sluice.KeyedStream[int64, twoEv]) *sluice.Stream[string] {
		return sluice.ApplyCoGroup(sluice.CoGroup(l, r).Window(spec.assigner).
			Trigger(sluice.CountTrigger[sluice.TaggedUnion[twoEv, twoEv]](every)),
			wjCoGroupFn(), sluice.UID("cogroup"))
	})
	var sizes []string
	for _, g := range got {
		// key:[l,...]|[r,...]@ts
		key, rest, _ := strings.Cut(g, ":")
		ids, ts, _ := strings.Cut(rest, "@")
		ls, rs, _ := strings.Cut(ids, "|")
		id := key + "@" + ts
		w := byWindow[id]
		if w == nil {
			t.Fatalf("firing %s of no window of the plain evaluation", g)
		}
		n := 0
		for side, list := range []string{ls, rs} {
			for s := range strings.SplitSeq(strings.Trim(list, "[]"), ",") {
				if s == "" {
					continue
				}
				i, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					t.Fatalf("firing %s: %v", g, err)
				}
				if of := [][]int64{w.left, w.right}[side]; !slices.Contains(of, i) {
					t.Fatalf("firing %s holds record %d of input %d, not in its window", g, i, side)
				}
				n++
			}
		}
		sizes = append(sizes, fmt.Sprintf("%s#%d", id, n))
	}
	if d := sameMultiset(sizes, want); d != "" {
		t.Fatalf("count-triggered coGroup firings differ from the plain evaluation: %s", d)
	}
}
