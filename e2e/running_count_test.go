package e2e

import (
	"cmp"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/state"
)

// The running count is the job the exactly-once and the job-life tests
// run through the harness: a datagen of the record numbers, the
// maybe-crash map, a count per key (the number modulo the keys) in keyed
// state, into the file sink. Its output committed exactly once is, for
// every key, the counts 1..n once each (checkExactCounts).

// KeyCount is one output record: the running count of a key.
type KeyCount struct {
	Key   int64 `json:"k"`
	Count int64 `json:"c"`
}

// runningCount keeps a count per key in checkpointed keyed state.
type runningCount struct {
	count state.ValueState[int64]
	crash *crashes
	slow  bool
	every int // with slow: sleep 1 ms every this many records (0: 200)
	seen  int
	// heavy, when set, makes every record cost 1 ms while it holds.
	heavy *atomic.Bool
}

func (r *runningCount) Open(ctx *sluice.OperatorContext) error {
	var err error
	r.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (r *runningCount) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, out sluice.Collector[KeyCount]) error {
	n, _, err := r.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := r.count.Update(n); err != nil {
		return err
	}
	if r.crash.hit() {
		return fmt.Errorf("count of key %d: %w", ctx.Key(), errInjectedCrash)
	}
	if r.seen++; r.slow && r.seen%cmp.Or(r.every, 200) == 0 {
		time.Sleep(time.Millisecond) // some backpressure, so there is in-flight data
	}
	if r.heavy != nil && r.heavy.Load() {
		time.Sleep(time.Millisecond)
	}
	out.Collect(KeyCount{Key: ctx.Key(), Count: n})
	return nil
}

// counting builds the running count over keys keys with the counter
// newCounter makes for each run (nil: a plain runningCount), at the
// parallelism j.opPar when set.
func counting(keys int64, newCounter func(j *job[KeyCount]) sluice.KeyedProcessFunction[int64, int64, KeyCount]) func(*job[KeyCount], *sluice.Environment) *sluice.Stream[KeyCount] {
	return func(j *job[KeyCount], env *sluice.Environment) *sluice.Stream[KeyCount] {
		s := maybeCrash(j, datagen(j, env, "gen", index, nil, sluice.NoWatermarks[int64]()), "maybe-crash")
		var counter sluice.KeyedProcessFunction[int64, int64, KeyCount] = &runningCount{}
		if newCounter != nil {
			counter = newCounter(j)
		}
		opts := []sluice.OpOption{sluice.Name("count"), sluice.UID("count")}
		if j.opPar > 0 {
			opts = append(opts, sluice.Parallelism(j.opPar))
		}
		return sluice.Process(sluice.KeyBy(s, func(v int64) int64 { return v % keys }), counter, opts...)
	}
}

// countRun is the running count of records records over keys keys at
// rate (records/s; 0: as fast as it can), at parallelism 2, into outDir,
// with the options, counting the records it reads (seen).
func countRun(outDir string, records, keys int64, rate float64, opts ...sluice.Option) *job[KeyCount] {
	return &job[KeyCount]{opts: append([]sluice.Option{sluice.WithParallelism(2)}, opts...), records: records, rate: rate,
		seen: &atomic.Int64{}, outDir: outDir, build: counting(keys, nil)}
}

// countJob is countRun's environment and its count of records read: what
// the savepoint, restore and job-life tests run.
func countJob(outDir string, records, keys int64, rate float64, opts ...sluice.Option) (*sluice.Environment, *atomic.Int64) {
	j := countRun(outDir, records, keys, rate, opts...)
	return j.env(), j.seen
}

// countJobAt is countJob with the count and the sink at their own
// parallelism (the source keeps 2: datagen does not rescale).
func countJobAt(outDir string, records, keys int64, rate float64, countPar int, opts ...sluice.Option) (*sluice.Environment, *atomic.Int64) {
	j := countRun(outDir, records, keys, rate, opts...)
	j.opPar, j.sinkOpts = countPar, []sluice.OpOption{sluice.Parallelism(countPar)}
	return j.env(), j.seen
}

// crashCount is the running count under crashes, the exactly-once tests'
// job: records records over keys keys, checkpoints every interval,
// aligned, unaligned or mixed (unaligned after 3 ms of alignment) as mode
// says; the counter is slowed (every slowEvery records; 0: 200) but for
// aligned checkpoints, so that there is data in flight. The test sets its
// crashes.
func crashCount(t *testing.T, mode string, records, keys int64, interval time.Duration, slowEvery int) *job[KeyCount] {
	opts := crashOptions(t.TempDir(), interval)
	switch mode {
	case "unaligned":
		opts = append(opts, sluice.WithUnalignedCheckpoints(0))
	case "mixed":
		opts = append(opts, sluice.WithUnalignedCheckpoints(3*time.Millisecond))
	}
	return &job[KeyCount]{opts: opts, records: records, rate: float64(2 * records), outDir: t.TempDir(), timeout: 2 * time.Minute,
		build: counting(keys, func(j *job[KeyCount]) sluice.KeyedProcessFunction[int64, int64, KeyCount] {
			return &runningCount{crash: j.opCrash, slow: mode != "aligned", every: slowEvery}
		})}
}

// expectedCounts is the output of a run without crashes: for every key,
// the counts 1..n once each.
func expectedCounts(records, keys int64) map[int64]int64 {
	want := map[int64]int64{}
	for i := range records {
		want[i%keys]++
	}
	return want
}

// checkExactCounts asserts that the committed output is exactly that of a
// run without crashes: for each key the counts 1..n, once each.
func checkExactCounts(t *testing.T, got []KeyCount, want map[int64]int64) {
	t.Helper()
	seen := map[int64]map[int64]int{}
	for _, kc := range got {
		if seen[kc.Key] == nil {
			seen[kc.Key] = map[int64]int{}
		}
		seen[kc.Key][kc.Count]++
	}
	bad := 0
	for k, n := range want {
		for c := int64(1); c <= n; c++ {
			if times := seen[k][c]; times != 1 && bad < 10 {
				t.Errorf("key %d count %d committed %d times, want once", k, c, times)
				bad++
			}
		}
		if len(seen[k]) != int(n) && bad < 10 {
			t.Errorf("key %d: %d distinct counts committed, want %d", k, len(seen[k]), n)
			bad++
		}
	}
	if len(got) != int(sum(want)) {
		t.Errorf("committed %d records, want %d", len(got), sum(want))
	}
}

// checkOnceEachEndingAt asserts that no count was committed twice and
// that every key's highest committed count is its total in want.
func checkOnceEachEndingAt(t *testing.T, got []KeyCount, want map[int64]int64) {
	t.Helper()
	last := map[int64]int64{}
	times := map[KeyCount]int{}
	for _, kc := range got {
		times[kc]++
		last[kc.Key] = max(last[kc.Key], kc.Count)
	}
	for kc, n := range times {
		if n != 1 {
			t.Fatalf("%+v committed %d times", kc, n)
		}
	}
	for k, n := range want {
		if last[k] != n {
			t.Errorf("key %d ends at %d, want %d", k, last[k], n)
		}
	}
}

func sum(m map[int64]int64) (s int64) {
	for _, v := range m {
		s += v
	}
	return s
}

// readCounts is what the running count committed into dir.
func readCounts(t *testing.T, dir string) []KeyCount {
	t.Helper()
	return (&job[KeyCount]{outDir: dir}).output(t)
}
