package sluice_test

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
	"github.com/sluicehq/sluice/state"
)

// The two-input tests run a stateful two-input operator (keyed co-process,
// interval join, window join, broadcast) over two rate-limited datagens
// with out-of-order event timestamps into the exactly-once file sink, with
// crashes injected (before the operator, in it, in the commits) or a
// rescale 2 -> 3 from a savepoint: the committed results must be the plain
// evaluation's, each exactly once.

// twoEv is a record of either input.
type twoEv struct {
	Key int64 `json:"k"`
	I   int64 `json:"i"`
	Ts  int64 `json:"t"`
}

const twoKeys = 7

// leftEv and rightEv are record i of the left and right input: the right
// timestamps are odd, the left even, both out of order by up to 30 ms.
func leftEv(i int64) twoEv  { return twoEv{Key: i % twoKeys, I: i, Ts: restoreTs(i)} }
func rightEv(i int64) twoEv { return twoEv{Key: (i * 3) % twoKeys, I: i, Ts: restoreTs(i) + 1} }

func twoKey(e twoEv) int64 { return e.Key }

// twoRun is one run of a two-input job.
type twoRun struct {
	records, rate         int64
	opPar                 int
	mapCrash, opCrash     *crashes
	commitCrash           *crashes
	outDir, checkpointDir string
	seen                  *atomic.Int64
	// brakeAfter > 0 slows every record past it by a few milliseconds, so
	// that a test's stop lands midway however loaded the machine is.
	brakeAfter int64
	opts       []sluice.Option
	// build adds the operator under test (with uid and parallelism
	// r.opPar); it crashes when r.opCrash says so.
	build func(r *twoRun, left, right *sluice.Stream[twoEv]) *sluice.Stream[string]
}

func (r *twoRun) env() *sluice.Environment {
	opts := append([]sluice.Option{
		sluice.WithParallelism(2),
		sluice.WithBufferTimeout(2 * time.Millisecond),
		sluice.WithAutoWatermarkInterval(5 * time.Millisecond),
		sluice.WithCheckpointing(15*time.Millisecond, r.checkpointDir),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(100, 5*time.Millisecond)),
		quietLogger(),
	}, r.opts...)
	env := sluice.NewEnvironment(opts...)
	side := func(name string, gen func(int64) twoEv) *sluice.Stream[twoEv] {
		g := source.NewDatagen(gen, source.DatagenCount(r.records), source.DatagenRate(float64(r.rate)),
			source.DatagenTimestamps(func(i int64) int64 { return gen(i).Ts }))
		s := sluice.FromSource(env, g, sluice.ForBoundedOutOfOrderness[twoEv](restoreBound*time.Millisecond), name, sluice.UID(name))
		mc, seen, brake := r.mapCrash, r.seen, r.brakeAfter
		return sluice.Map(s, func(v twoEv) (twoEv, error) {
			if mc.hit() {
				return v, fmt.Errorf("map of %s record %d: %w", name, v.I, errInjectedCrash)
			}
			if seen != nil && seen.Add(1) > brake && brake > 0 {
				time.Sleep(3 * time.Millisecond)
			}
			return v, nil
		}, sluice.UID(name+"-maybe-crash"))
	}
	res := r.build(r, side("left", leftEv), side("right", rightEv))
	cc := r.commitCrash
	fs := filesink.New[string](r.outDir, codec.JSON[string]{}, filesink.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		filesink.WithCommitHook(func(id int64) error {
			if cc.hit() {
				return fmt.Errorf("commit of checkpoint %d: %w", id, errInjectedCrash)
			}
			return nil
		}))
	sluice.SinkTo(res, fs, sluice.UID("files"), sluice.Parallelism(2))
	return env
}

func (r *twoRun) committed(t *testing.T) []string {
	t.Helper()
	got, err := filesink.ReadCommitted(r.outDir, codec.JSON[string]{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// twoInputs returns both inputs of n records each.
func twoInputs(n int64) (left, right []twoEv) {
	for i := range n {
		left, right = append(left, leftEv(i)), append(right, rightEv(i))
	}
	return left, right
}

// runTwoUnderFailures runs the job with crashes before, in and after the
// operator and compares the committed output with want.
func runTwoUnderFailures(t *testing.T, build func(*twoRun, *sluice.Stream[twoEv], *sluice.Stream[twoEv]) *sluice.Stream[string], want []string) {
	t.Helper()
	runTwoUnderFailuresCheck(t, build, len(want), func(got []string) string { return sameMultiset(got, want) })
}

// runTwoUnderFailuresCheck is runTwoUnderFailures for an output that is
// not one fixed multiset (a changelog whose interleaving varies): check
// says what is wrong with the committed output; results is about how
// many records it has, where the operator's crashes are placed.
func runTwoUnderFailuresCheck(t *testing.T, build func(*twoRun, *sluice.Stream[twoEv], *sluice.Stream[twoEv]) *sluice.Stream[string], results int, check func(got []string) string) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 16))
	const records = 2000
	r := &twoRun{
		records: records, rate: 5000, opPar: 2, build: build,
		mapCrash:      newCrashes(rng, 2, 2*records),
		opCrash:       newCrashes(rng, 2, int64(results)),
		commitCrash:   newCrashes(rng, 1, 15),
		outDir:        t.TempDir(),
		checkpointDir: t.TempDir(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	job, err := r.env().ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job failed: %v", err)
	}
	crashes := r.mapCrash.fired.Load() + r.opCrash.fired.Load() + r.commitCrash.fired.Load()
	if r.opCrash.fired.Load() == 0 || crashes < 3 {
		t.Fatalf("%d crashes injected (%d in the operator); the test needs several", crashes, r.opCrash.fired.Load())
	}
	got := r.committed(t)
	if d := check(got); d != "" {
		t.Fatalf("committed results differ from the plain evaluation: %s", d)
	}
	t.Logf("%d crashes, %d restarts, %d results committed", crashes, job.Restarts(), len(got))
}

// runTwoRescale runs the job with the operator at parallelism 2, stops it
// with a savepoint a third into the input, and finishes from the savepoint
// with the operator at parallelism 3.
func runTwoRescale(t *testing.T, build func(*twoRun, *sluice.Stream[twoEv], *sluice.Stream[twoEv]) *sluice.Stream[string], want []string) {
	t.Helper()
	runTwoRescaleCheck(t, build, func(got []string) string { return sameMultiset(got, want) })
}

// runTwoRescaleCheck is runTwoRescale with the check of
// runTwoUnderFailuresCheck.
func runTwoRescaleCheck(t *testing.T, build func(*twoRun, *sluice.Stream[twoEv], *sluice.Stream[twoEv]) *sluice.Stream[string], check func(got []string) string) {
	t.Helper()
	const records = 2000
	seen := &atomic.Int64{}
	r := &twoRun{records: records, rate: 1200, opPar: 2, seen: seen, brakeAfter: records, build: build,
		outDir: t.TempDir(), checkpointDir: t.TempDir()}
	job, err := r.env().ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	await(t, "a third of the input, with results committed", func() bool {
		return seen.Load() > 2*records/3 && len(r.committed(t)) > 0
	})
	sp := stopWithSavepoint(t, job)
	if n := seen.Load(); n >= 2*records {
		t.Fatalf("the first run read all %d records; the test needs a stop midway", n)
	}
	partial := len(r.committed(t))
	r2 := *r
	r2.opPar, r2.rate, r2.seen, r2.brakeAfter, r2.checkpointDir = 3, 20000, nil, 0, t.TempDir()
	restored := &atomic.Int64{}
	r2.opts = []sluice.Option{sluice.WithRestoreFrom(sp),
		sluice.WithRestoreListener(func(ri sluice.RestoreInfo) { restored.Add(1) })}
	mustExecute(t, r2.env())
	if restored.Load() == 0 {
		t.Fatal("the second run restored nothing")
	}
	got := r2.committed(t)
	if partial == 0 || partial >= len(got) {
		t.Fatalf("%d results committed before the rescale, %d in all: the test needs both runs to commit", partial, len(got))
	}
	if d := check(got); d != "" {
		t.Fatalf("committed results differ from the plain evaluation: %s", d)
	}
}

// coBuckets sums each key's records of both inputs per 100 ms bucket in
// keyed map state and emits a bucket from its event-time timer; it
// crashes in OnTimer when its run says so.
type coBuckets struct {
	crash *crashes
	sums  state.MapState[int64, [4]int64]
}

func (b *coBuckets) Open(ctx *sluice.OperatorContext) error {
	var err error
	b.sums, err = state.GetMapState(ctx.KeyedState, state.MapStateDescriptor[int64, [4]int64]{Name: "sums"})
	return err
}

func (b *coBuckets) add(ctx *sluice.KeyedContext[int64], side int, v twoEv, out sluice.Collector[string]) error {
	if ctx.Key() != v.Key || ctx.Timestamp() != v.Ts {
		return fmt.Errorf("record %+v under key %d at %d", v, ctx.Key(), ctx.Timestamp())
	}
	end := v.Ts/100*100 + 100
	if end-1 <= ctx.Timers().CurrentWatermark() {
		out.Collect(fmt.Sprintf("late %d/%d", side, v.I))
		return nil
	}
	s, _, err := b.sums.Get(end)
	if err != nil {
		return err
	}
	s[2*side]++
	s[2*side+1] += v.I
	ctx.Timers().RegisterEventTimeTimer(end - 1)
	return b.sums.Put(end, s)
}

func (b *coBuckets) ProcessElement1(ctx *sluice.KeyedContext[int64], v twoEv, out sluice.Collector[string]) error {
	return b.add(ctx, 0, v, out)
}

func (b *coBuckets) ProcessElement2(ctx *sluice.KeyedContext[int64], v twoEv, out sluice.Collector[string]) error {
	return b.add(ctx, 1, v, out)
}

func (b *coBuckets) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, out sluice.Collector[string]) error {
	if b.crash.hit() {
		return fmt.Errorf("timer %d of key %d: %w", ts, ctx.Key(), errInjectedCrash)
	}
	s, ok, err := b.sums.Get(ts + 1)
	if err != nil || !ok {
		return fmt.Errorf("timer %d of key %d without its bucket: %v", ts, ctx.Key(), err)
	}
	out.Collect(fmt.Sprintf("%d/%d/%v", ctx.Key(), ts+1, s))
	return b.sums.Remove(ts + 1)
}

func buildCoBuckets(r *twoRun, left, right *sluice.Stream[twoEv]) *sluice.Stream[string] {
	return sluice.KeyedCoProcess(sluice.ConnectKeyed(sluice.KeyBy(left, twoKey), sluice.KeyBy(right, twoKey)),
		sluice.KeyedCoProcessFunction[int64, twoEv, twoEv, string](&coBuckets{crash: r.opCrash}),
		sluice.UID("co-buckets"), sluice.Parallelism(r.opPar))
}

// wantCoBuckets is the plain evaluation of coBuckets.
func wantCoBuckets(n int64) []string {
	left, right := twoInputs(n)
	type kb struct{ key, end int64 }
	sums := map[kb][4]int64{}
	for side, in := range [][]twoEv{left, right} {
		for _, e := range in {
			b := kb{e.Key, e.Ts/100*100 + 100}
			s := sums[b]
			s[2*side]++
			s[2*side+1] += e.I
			sums[b] = s
		}
	}
	var out []string
	for b, s := range sums {
		out = append(out, fmt.Sprintf("%d/%d/%v", b.key, b.end, s))
	}
	return out
}

func TestKeyedCoProcessExactlyOnceUnderFailures(t *testing.T) {
	runTwoUnderFailures(t, buildCoBuckets, wantCoBuckets(2000))
}

func TestKeyedCoProcessRescale(t *testing.T) {
	runTwoRescale(t, buildCoBuckets, wantCoBuckets(2000))
}
