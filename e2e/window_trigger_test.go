package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
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

type trigRun struct {
	records, rate         int64
	windowPar             int
	mapCrash, winCrash    *crashes
	commitCrash           *crashes
	outDir, checkpointDir string
	seen                  *atomic.Int64
	// brakeAfter > 0 slows every record past it by a few milliseconds, so
	// that a test's stop lands midway however loaded the machine is.
	brakeAfter int64
	opts       []sluice.Option
}

func (r *trigRun) env() *sluice.Environment {
	opts := append([]sluice.Option{
		sluice.WithParallelism(2),
		sluice.WithBufferTimeout(2 * time.Millisecond),
		sluice.WithAutoWatermarkInterval(5 * time.Millisecond),
		sluice.WithCheckpointing(15*time.Millisecond, r.checkpointDir),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(100, 5*time.Millisecond)),
		quietLogger(),
	}, r.opts...)
	env := sluice.NewEnvironment(opts...)
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(r.records),
		source.DatagenRate(float64(r.rate)), source.DatagenTimestamps(restoreTs))
	s := sluice.FromSource(env, gen, sluice.ForBoundedOutOfOrderness[int64](restoreBound*time.Millisecond), "gen",
		sluice.UID("gen"), sluice.Parallelism(1))
	mc, seen, brake := r.mapCrash, r.seen, r.brakeAfter
	s = sluice.Map(s, func(v int64) (int64, error) {
		if mc.hit() {
			return 0, fmt.Errorf("map of record %d: %w", v, errInjectedCrash)
		}
		if seen != nil && seen.Add(1) > brake && brake > 0 {
			time.Sleep(3 * time.Millisecond)
		}
		return v, nil
	}, sluice.UID("maybe-crash"), sluice.Parallelism(1))
	ks := sluice.KeyBy(s, winKey)
	fn := func(kind string) sluice.ProcessWindowFunction[int64, int64, trigOut] {
		return &trigWindowFn[int64]{kind: kind, key: func(k int64) int64 { return k }, crash: r.winCrash}
	}
	par := sluice.Parallelism(r.windowPar)
	tumbling := sluice.TumblingEventTimeWindows(trigWindow * time.Millisecond)
	results := []*sluice.Stream[trigOut]{
		sluice.ProcessWindow(sluice.CountWindow(ks, trigTumbleCount), fn("count"), sluice.UID("count"), par),
		sluice.ProcessWindow(sluice.CountWindowSliding(ks, trigSlideSize, trigSlideEvery), fn("sliding-count"), sluice.UID("sliding-count"), par),
		sluice.ProcessWindow(sluice.Window(ks, tumbling).Evictor(sluice.CountEvictor[int64](trigEvictKeep)), fn("evict"), sluice.UID("evict"), par),
		sluice.ProcessWindow(sluice.Window(ks, tumbling).Trigger(sluice.PurgingTrigger(sluice.CountTrigger[int64](trigPurgeCount))),
			fn("purge-count"), sluice.UID("purge-count"), par),
		sluice.ProcessWindow(sluice.CountWindowAll(s, trigAllCount),
			sluice.ProcessWindowFunction[sluice.AllKey, int64, trigOut](&trigWindowFn[sluice.AllKey]{kind: "count-all", key: func(sluice.AllKey) int64 { return -1 }, crash: r.winCrash}),
			sluice.UID("count-all")),
	}
	cc := r.commitCrash
	fs := filesink.New[trigOut](r.outDir, codec.JSON[trigOut]{}, filesink.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		filesink.WithCommitHook(func(id int64) error {
			if cc.hit() {
				return fmt.Errorf("commit of checkpoint %d: %w", id, errInjectedCrash)
			}
			return nil
		}))
	sluice.SinkTo(sluice.Union(results[0], results[1:]...), fs, sluice.UID("files"), sluice.Parallelism(2))
	return env
}

func (r *trigRun) committed(t *testing.T) []string {
	t.Helper()
	got, err := filesink.ReadCommitted(r.outDir, codec.JSON[trigOut]{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(got))
	for i, o := range got {
		out[i] = o.String()
	}
	return out
}

func TestTriggersAndEvictorsMatchPlainEvaluation(t *testing.T) {
	const records = 1000
	r := &trigRun{records: records, rate: 1e6, windowPar: 2, outDir: t.TempDir(), checkpointDir: t.TempDir()}
	mustExecute(t, r.env())
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
	r := &trigRun{
		records: records, rate: 5000, windowPar: 2,
		mapCrash:      newCrashes(rng, 2, records),
		winCrash:      newCrashes(rng, 2, int64(len(want))),
		commitCrash:   newCrashes(rng, 1, 15),
		outDir:        t.TempDir(),
		checkpointDir: t.TempDir(),
	}
	job, err := r.env().ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job failed: %v", err)
	}
	crashes := r.mapCrash.fired.Load() + r.winCrash.fired.Load() + r.commitCrash.fired.Load()
	if r.winCrash.fired.Load() == 0 || crashes < 3 {
		t.Fatalf("%d crashes injected (%d in window functions); the test needs several", crashes, r.winCrash.fired.Load())
	}
	got := r.committed(t)
	if d := sameMultiset(got, want); d != "" {
		t.Fatalf("committed firings differ from the plain evaluation: %s", d)
	}
	t.Logf("%d crashes, %d restarts, %d firings committed", crashes, job.Restarts(), len(got))
}

// TestTriggersAndEvictorsRescale stops the job with a savepoint midway
// and finishes the input from it with the keyed windows at parallelism 3:
// count-trigger state, evictor lists and timers move with their key
// groups.
func TestTriggersAndEvictorsRescale(t *testing.T) {
	const records = 2000
	seen := &atomic.Int64{}
	r := &trigRun{records: records, rate: 2500, windowPar: 2, seen: seen, brakeAfter: records / 2, outDir: t.TempDir(), checkpointDir: t.TempDir()}
	job, err := r.env().ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	await(t, "a third of the input, with firings committed", func() bool {
		return seen.Load() > records/3 && len(r.committed(t)) > 0
	})
	sp := stopWithSavepoint(t, job)
	if n := seen.Load(); n >= records {
		t.Fatalf("the first run read all %d records; the test needs a stop midway", n)
	}
	partial := len(r.committed(t))
	r2 := *r
	r2.windowPar, r2.rate, r2.seen, r2.brakeAfter = 3, 1e6, nil, 0
	r2.opts = []sluice.Option{sluice.WithRestoreFrom(sp)}
	mustExecute(t, r2.env())
	got := r2.committed(t)
	if partial == 0 || partial >= len(got) {
		t.Fatalf("%d firings committed before the rescale, %d in all: the test needs both runs to commit", partial, len(got))
	}
	if d := sameMultiset(got, trigWant(records)); d != "" {
		t.Fatalf("committed firings differ from the plain evaluation: %s", d)
	}
}
