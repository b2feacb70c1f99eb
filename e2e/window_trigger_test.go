package e2e

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The trigger tests run count windows (tumbling and sliding, keyed and
// WindowAll), an event-time window with a CountEvictor and one with a
// PurgingTrigger(CountTrigger) over a rate-limited datagen with disordered
// event timestamps into the exactly-once file sink, with crashes or a
// rescale 2 -> 3 from a savepoint. The source has parallelism 1, so each
// key's records reach its window in the source's order, which count
// windows and count evictors depend on. Count-trigger state, evictor
// lists and timers come back from the checkpoints, or the committed
// results would differ from the plain evaluation.

// trigOut is one committed firing: the first and last element it saw,
// their sum and count, in window Win (its start; 0 for global windows).
type trigOut struct {
	Kind  string `json:"kind"`
	Key   int64  `json:"k"`
	Win   int64  `json:"w"`
	First int64  `json:"a"`
	Last  int64  `json:"b"`
	Sum   int64  `json:"s"`
	N     int64  `json:"n"`
}

func (o trigOut) String() string {
	return fmt.Sprintf("%s:k%d@%d[%d..%d]=%d/%d", o.Kind, o.Key, o.Win, o.First, o.Last, o.Sum, o.N)
}

const (
	trigTumbleCount = 7
	trigSlideSize   = 5
	trigSlideEvery  = 2
	trigAllCount    = 50
	trigEvictKeep   = 3
	trigPurgeCount  = 4
	trigWindow      = 100 // ms
)

func trigFiring(kind string, key, win int64, els []int64) trigOut {
	o := trigOut{Kind: kind, Key: key, Win: win, First: els[0], Last: els[len(els)-1], N: int64(len(els))}
	for _, v := range els {
		o.Sum += v
	}
	return o
}

// trigWant is the plain evaluation of the job over n records.
func trigWant(n int64) []string {
	var want []trigOut
	byKey := map[int64][]int64{}
	type kw struct{ k, w int64 }
	byWin := map[kw][]int64{}
	var all []int64
	for i := range n {
		k := winKey(i)
		byKey[k] = append(byKey[k], i)
		w := restoreTs(i) - restoreTs(i)%trigWindow
		byWin[kw{k, w}] = append(byWin[kw{k, w}], i)
		all = append(all, i)
	}
	for k, els := range byKey {
		for j := trigTumbleCount; j <= len(els); j += trigTumbleCount {
			want = append(want, trigFiring("count", k, 0, els[j-trigTumbleCount:j]))
		}
		for j := trigSlideEvery; j <= len(els); j += trigSlideEvery {
			want = append(want, trigFiring("sliding-count", k, 0, els[max(0, j-trigSlideSize):j]))
		}
	}
	for j := trigAllCount; j <= len(all); j += trigAllCount {
		want = append(want, trigFiring("count-all", -1, 0, all[j-trigAllCount:j]))
	}
	for w, els := range byWin {
		want = append(want, trigFiring("evict", w.k, w.w, els[max(0, len(els)-trigEvictKeep):]))
		for j := trigPurgeCount; j <= len(els); j += trigPurgeCount {
			want = append(want, trigFiring("purge-count", w.k, w.w, els[j-trigPurgeCount:j]))
		}
	}
	out := make([]string, len(want))
	for i, o := range want {
		out[i] = o.String()
	}
	return out
}

// trigWindowFn reports each firing, crashing when its crashes say so.
type trigWindowFn[K comparable] struct {
	kind  string
	key   func(K) int64
	crash *crashes
}

func (f *trigWindowFn[K]) Process(ctx *sluice.WindowContext[K], els []int64, out sluice.Collector[trigOut]) error {
	if f.crash.hit() {
		return fmt.Errorf("%s window of key %v: %w", f.kind, ctx.Key(), errInjectedCrash)
	}
	var win int64
	if w := ctx.Window(); w != sluice.GlobalWindow {
		win = w.Start
	}
	out.Collect(trigFiring(f.kind, f.key(ctx.Key()), win, els))
	return nil
}

// triggersJob is the trigger tests' job: records records at rate from
// one source subtask, keyed by winKey into every window kind above at the
// parallelism opPar (the WindowAll at the job's), their firings unioned.
func triggersJob(t *testing.T, records int64, rate float64) *job[trigOut] {
	return &job[trigOut]{opts: eventTimeOptions(t.TempDir()), records: records, rate: rate, opPar: 2, outDir: t.TempDir(),
		build: func(j *job[trigOut], env *sluice.Environment) *sluice.Stream[trigOut] {
			s := datagen(j, env, "gen", index, restoreTs, sluice.ForBoundedOutOfOrderness[int64](restoreBound*time.Millisecond),
				sluice.Parallelism(1))
			s = maybeCrash(j, s, "maybe-crash", sluice.Parallelism(1))
			ks := sluice.KeyBy(s, winKey)
			fn := func(kind string) sluice.ProcessWindowFunction[int64, int64, trigOut] {
				return &trigWindowFn[int64]{kind: kind, key: func(k int64) int64 { return k }, crash: j.opCrash}
			}
			par := sluice.Parallelism(j.opPar)
			tumbling := sluice.TumblingEventTimeWindows(trigWindow * time.Millisecond)
			results := []*sluice.Stream[trigOut]{
				sluice.ProcessWindow(sluice.CountWindow(ks, trigTumbleCount), fn("count"), sluice.UID("count"), par),
				sluice.ProcessWindow(sluice.CountWindowSliding(ks, trigSlideSize, trigSlideEvery), fn("sliding-count"), sluice.UID("sliding-count"), par),
				sluice.ProcessWindow(sluice.Window(ks, tumbling).Evictor(sluice.CountEvictor[int64](trigEvictKeep)), fn("evict"), sluice.UID("evict"), par),
				sluice.ProcessWindow(sluice.Window(ks, tumbling).Trigger(sluice.PurgingTrigger(sluice.CountTrigger[int64](trigPurgeCount))),
					fn("purge-count"), sluice.UID("purge-count"), par),
				sluice.ProcessWindow(sluice.CountWindowAll(s, trigAllCount),
					sluice.ProcessWindowFunction[sluice.AllKey, int64, trigOut](&trigWindowFn[sluice.AllKey]{kind: "count-all", key: func(sluice.AllKey) int64 { return -1 }, crash: j.opCrash}),
					sluice.UID("count-all")),
			}
			return sluice.Union(results[0], results[1:]...)
		}}
}

func TestTriggersAndEvictorsMatchPlainEvaluation(t *testing.T) {
	const records = 1000
	r := triggersJob(t, records, 1e6)
	r.run(t)
	if d := sameMultiset(r.committed(t), trigWant(records)); d != "" {
		t.Fatalf("committed firings differ from the plain evaluation: %s", d)
	}
}

func TestTriggersAndEvictorsExactlyOnceUnderFailures(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	const records = 2000
	want := trigWant(records)
	triggersJob(t, records, 5000).runUnderCrashes(t, rng, records, 15, int64(len(want)), sameAs(want), "firings")
}

// TestTriggersAndEvictorsRescale stops the job with a savepoint midway
// and finishes the input from it with the keyed windows at parallelism 3:
// count-trigger state, evictor lists and timers move with their key
// groups.
func TestTriggersAndEvictorsRescale(t *testing.T) {
	const records = 2000
	seen := &atomic.Int64{}
	r := triggersJob(t, records, 2500)
	r.seen, r.brakeAfter = seen, records/2
	sp := r.stopMidway(t, "a third of the input, with firings committed", func() bool {
		return seen.Load() > records/3 && len(r.committed(t)) > 0
	}, records)
	partial := len(r.committed(t))
	r2 := r.rescaled(3, 1e6, sluice.WithRestoreFrom(sp))
	mustExecute(t, r2.env())
	got := r2.committed(t)
	checkBothRunsCommitted(t, "firings", partial, len(got))
	if d := sameMultiset(got, trigWant(records)); d != "" {
		t.Fatalf("committed firings differ from the plain evaluation: %s", d)
	}
}
