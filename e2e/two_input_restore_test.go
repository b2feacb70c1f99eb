package e2e

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
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

// twoOp adds the two-input operator under test (with a uid, at the
// parallelism j.opPar); it crashes when j.opCrash says so.
type twoOp = func(j *job[string], left, right *sluice.Stream[twoEv]) *sluice.Stream[string]

// twoOptions are the two-input jobs' options, checkpoints into dir.
func twoOptions(dir string) []sluice.Option {
	return crashOptions(dir, 15*time.Millisecond, sluice.WithAutoWatermarkInterval(5*time.Millisecond))
}

// twoInputJob is the two-input tests' job: records records of each input
// at rate, from the sources left and right, each through its maybe-crash
// map, into op at parallelism 2.
func twoInputJob(t *testing.T, records int64, rate float64, op twoOp) *job[string] {
	return &job[string]{opts: twoOptions(t.TempDir()), records: records, rate: rate, opPar: 2, outDir: t.TempDir(),
		build: func(j *job[string], env *sluice.Environment) *sluice.Stream[string] {
			side := func(name string, gen func(int64) twoEv) *sluice.Stream[twoEv] {
				s := datagen(j, env, name, gen, func(i int64) int64 { return gen(i).Ts },
					sluice.ForBoundedOutOfOrderness[twoEv](restoreBound*time.Millisecond))
				return maybeCrash(j, s, name+"-maybe-crash")
			}
			return op(j, side("left", leftEv), side("right", rightEv))
		}}
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
func runTwoUnderFailures(t *testing.T, op twoOp, want []string) {
	t.Helper()
	runTwoUnderFailuresCheck(t, op, len(want), sameAs(want))
}

// runTwoUnderFailuresCheck is runTwoUnderFailures for an output that is
// not one fixed multiset (a changelog whose interleaving varies): check
// says what is wrong with the committed output; results is about how
// many records it has, where the operator's crashes are placed.
func runTwoUnderFailuresCheck(t *testing.T, op twoOp, results int, check func(got []string) string) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 16))
	const records = 2000
	twoInputJob(t, records, 5000, op).runUnderCrashes(t, rng, 2*records, 15, int64(results), check, "results")
}

// runTwoRescale runs the job with the operator at parallelism 2, stops it
// with a savepoint a third into the input, and finishes from the savepoint
// with the operator at parallelism 3.
func runTwoRescale(t *testing.T, op twoOp, want []string) {
	t.Helper()
	runTwoRescaleCheck(t, op, sameAs(want))
}

// runTwoRescaleCheck is runTwoRescale with the check of
// runTwoUnderFailuresCheck.
func runTwoRescaleCheck(t *testing.T, op twoOp, check func(got []string) string) {
	t.Helper()
	const records = 2000
	seen := &atomic.Int64{}
	r := twoInputJob(t, records, 1200, op)
	r.seen, r.brakeAfter = seen, records
	sp := r.stopMidway(t, "a third of the input, with results committed", func() bool {
		return seen.Load() > 2*records/3 && len(r.committed(t)) > 0
	}, 2*records)
	partial := len(r.committed(t))
	restored := &atomic.Int64{}
	r2 := r.rescaled(3, 20000, sluice.WithRestoreFrom(sp), sluice.WithRestoreListener(func(ri sluice.RestoreInfo) { restored.Add(1) }))
	r2.opts = twoOptions(t.TempDir())
	mustExecute(t, r2.env())
	if restored.Load() == 0 {
		t.Fatal("the second run restored nothing")
	}
	got := r2.committed(t)
	checkBothRunsCommitted(t, "results", partial, len(got))
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

func buildCoBuckets(r *job[string], left, right *sluice.Stream[twoEv]) *sluice.Stream[string] {
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
