package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
)

// The allowed-lateness tests of window join and coGroup run a script of
// out-of-order and late records (windowScript) split into two inputs (even
// values left, odd right) and compare with the plain evaluation of one
// window over both (plainEval): a record within the allowed lateness
// fires its window again with all it holds, as Flink's JoinedStreams and
// CoGroupedStreams do; a record beyond it is dropped (Flink's joins have
// no late-data side output).
//
// The two inputs reach the join over two channels, so its watermark (the
// smaller of both) could lag the script's and make a late record on
// time: the script waits after each watermark until the join's input
// watermark reached it, which makes the run follow the script exactly.

const wjLateness = 40 // ms

// wjLateScript draws a script with late records and re-firings (random
// ones have them nearly always; it draws again if not).
func wjLateScript(t *testing.T, rng *rand.Rand, spec winSpec) ([]step, []winFiring) {
	t.Helper()
	for range 20 {
		script := windowScript(rng, 400, 40, spec.lateness, spec.size)
		want, late := plainEval(spec, script)
		refires := 0
		for _, f := range want {
			if f.Fire > 1 {
				refires++
			}
		}
		if len(late) > 0 && refires > 0 {
			return script, want
		}
	}
	t.Fatal("no script with both late records and re-firings; the test needs both")
	return nil, nil
}

// wjRunScript runs build over the script's records split into two
// inputs and returns the results as "result@ts".
func wjRunScript(t *testing.T, script []step, build func(l, r *sluice.KeyedStream[int64, twoEv]) *sluice.Stream[string]) []string {
	t.Helper()
	// After each watermark the script waits for the join to have it.
	var synced []step
	type barrier struct {
		wm int64
		ch *once
	}
	var barriers []barrier
	tsOf := map[int64]int64{}
	for _, st := range script {
		synced = append(synced, st)
		if st.emit {
			tsOf[st.v] = st.ts
		}
		if st.wm {
			b := barrier{st.wmTs, newOnce()}
			barriers = append(barriers, b)
			synced = append(synced, waitFor(b.ch.C()))
		}
	}
	env := newEnv(sluice.WithParallelism(2), sluice.WithBufferTimeout(2*time.Millisecond))
	src := sluice.FromSource(env, newScriptSource(synced), sluice.NoWatermarks[int64](), "script", sluice.Parallelism(1))
	side := func(parity int64) *sluice.KeyedStream[int64, twoEv] {
		s := sluice.Filter(src, func(v int64) (bool, error) { return v%2 == parity, nil }, sluice.Parallelism(1))
		return sluice.KeyBy(sluice.Map(s, func(v int64) (twoEv, error) {
			return twoEv{Key: winKey(v), I: v, Ts: tsOf[v]}, nil
		}, sluice.Parallelism(1)), twoKey)
	}
	out := sink.NewCollect[string]()
	sluice.SinkTo(build(side(0), side(1)), out)
	job := mustStart(t, env)
	for _, b := range barriers {
		await(t, fmt.Sprintf("the join's watermark at %d", b.wm), func() bool {
			n := 0
			for _, tm := range job.Metrics() {
				if tm.Vertex == "late-join" || strings.HasPrefix(tm.Vertex, "late-join -> ") {
					if tm.InputWatermark < b.wm {
						return false
					}
					n++
				}
			}
			return n == 2
		})
		b.ch.close()
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job failed: %v", err)
	}
	var got []string
	for _, r := range out.Records() {
		got = append(got, fmt.Sprintf("%s@%d", r.Value, r.Timestamp))
	}
	return got
}

func TestCoGroupAllowedLatenessMatchesPlainEvaluation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for i, spec := range []winSpec{
		{kind: "tumbling", size: 100, lateness: wjLateness},
		{kind: "sliding", size: 100, slide: 30, lateness: wjLateness},
	} {
		t.Run(spec.kind, func(t *testing.T) {
			script, firings := wjLateScript(t, rand.New(rand.NewPCG(seed, uint64(i))), spec)
			var want []string
			for _, f := range firings {
				want = append(want, fmt.Sprintf("%d:%d/%d@%d", f.Key, f.Sum, f.N, f.End-1))
			}
			got := wjRunScript(t, script, func(l, r *sluice.KeyedStream[int64, twoEv]) *sluice.Stream[string] {
				fn := sluice.CoGroupFunc[twoEv, twoEv, string](func(ls, rs []twoEv, out sluice.Collector[string]) error {
					var key, sum, n int64
					for _, e := range append(ls, rs...) {
						if e.I%2 == 0 != (n < int64(len(ls))) {
							return fmt.Errorf("record %d on the wrong side", e.I)
						}
						key, sum, n = e.Key, sum+e.I, n+1
					}
					out.Collect(fmt.Sprintf("%d:%d/%d", key, sum, n))
					return nil
				})
				return sluice.ApplyCoGroup(sluice.CoGroup(l, r).Window(spec.assigner()).
					AllowedLateness(wjLateness*time.Millisecond), fn, sluice.Name("late-join"))
			})
			if d := sameMultiset(got, want); d != "" {
				t.Fatalf("coGroup with allowed lateness differs from the plain evaluation: %s", d)
			}
		})
	}
}

func TestWindowJoinAllowedLatenessMatchesPlainEvaluation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	spec := winSpec{kind: "tumbling", size: 100, lateness: wjLateness}
	script, firings := wjLateScript(t, rand.New(rand.NewPCG(seed, 0)), spec)
	// Every firing, a re-firing too, joins all the window holds.
	var want []string
	for _, f := range firings {
		for _, l := range f.vals {
			for _, r := range f.vals {
				if l%2 == 0 && r%2 == 1 {
					want = append(want, fmt.Sprintf("%d+%d@%d", l, r, f.End-1))
				}
			}
		}
	}
	got := wjRunScript(t, script, func(l, r *sluice.KeyedStream[int64, twoEv]) *sluice.Stream[string] {
		return sluice.ApplyWindowJoin(sluice.WindowJoin(l, r).Window(spec.assigner()).AllowedLateness(wjLateness*time.Millisecond),
			sluice.JoinFunc[twoEv, twoEv, string](func(l, r twoEv) (string, error) { return fmt.Sprintf("%d+%d", l.I, r.I), nil }),
			sluice.Name("late-join"))
	})
	if len(want) == 0 {
		t.Fatal("the plain evaluation joins nothing; the test needs pairs")
	}
	if d := sameMultiset(got, want); d != "" {
		t.Fatalf("window join with allowed lateness differs from the plain evaluation: %s", d)
	}
}
