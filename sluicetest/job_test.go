package sluicetest_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// keyCount is the output of the counting job: a key and how many of its
// records the job has seen.
type keyCount struct {
	Key   int64
	Count int64
}

const keys = 7

// countPerKey keeps a running count per key.
type countPerKey struct{ n state.ValueState[int64] }

func (c *countPerKey) Open(ctx *sluice.OperatorContext) (err error) {
	c.n, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "n"})
	return err
}

func (c *countPerKey) ProcessElement(ctx *sluice.KeyedContext[int64], _ int64, out sluice.Collector[keyCount]) error {
	n, _, err := c.n.Value()
	if err != nil {
		return err
	}
	if err := c.n.Update(n + 1); err != nil {
		return err
	}
	out.Collect(keyCount{ctx.Key(), n + 1})
	return nil
}

// countingJob counts records 0..records-1 by key (i mod 7), at rate
// records per second, into snk.
func countingJob(records int64, rate float64, snk sink.Sink[keyCount]) sluicetest.Pipeline {
	return func(env *sluice.Environment) error {
		opts := []source.DatagenOption{source.DatagenRate(rate)}
		if records > 0 {
			opts = append(opts, source.DatagenCount(records))
		}
		gen := source.NewDatagen(func(i int64) int64 { return i }, opts...)
		in := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "numbers", sluice.UID("numbers"))
		counts := sluice.Process(sluice.KeyBy(in, func(i int64) int64 { return i % keys }), &countPerKey{},
			sluice.Name("count"), sluice.UID("count"))
		sluice.SinkTo(counts, snk, sluice.Name("output"), sluice.UID("output"))
		return nil
	}
}

// expectedCounts is the exactly-once output of countingJob: every key's
// counts 1..n, once each.
func expectedCounts(records int64) []keyCount {
	var want []keyCount
	n := map[int64]int64{}
	for i := range records {
		n[i%keys]++
		want = append(want, keyCount{i % keys, n[i%keys]})
	}
	return want
}

// The runner crashes the job at a checkpoint before its commit and at a
// record, fails a task in between, restarts it each time, and the
// exactly-once file sink's committed output is every count once, in
// order per key.
func TestRunJobCrashesAndRestarts(t *testing.T) {
	const records = 900
	dir := t.TempDir()
	run := sluicetest.RunJob(t, countingJob(records, 3000, filesink.New[keyCount](dir, codec.JSON[keyCount]{})),
		sluicetest.Checkpointing(20*time.Millisecond),
		sluicetest.JobOptions(sluice.WithParallelism(2)),
		sluicetest.CrashAt(sluicetest.AtCheckpoint(2), sluicetest.AfterRecords("count", 150)),
		sluicetest.FailAt(sluicetest.AfterRecords("count", 100)))
	t.Logf("%d runs, crashes %v, failures %v, %d restarts, %d checkpoints", run.Runs, run.Crashes, run.Failures, run.Restarts, run.Checkpoints)
	if run.Runs != 3 || len(run.Crashes) != 2 || len(run.Failures) != 1 || run.Restarts != 1 || run.Err != nil {
		t.Fatalf("runs %d, crashes %v, failures %v, restarts %d, end %v", run.Runs, run.Crashes, run.Failures, run.Restarts, run.Err)
	}
	got, err := filesink.ReadCommitted(dir, codec.JSON[keyCount]{})
	if err != nil {
		t.Fatal(err)
	}
	want := expectedCounts(records)
	sluicetest.AssertExactlyOnce(t, got, want)
	if err := sluicetest.CheckOrderPerKey(got, want, func(c keyCount) int64 { return c.Key }); err != nil {
		t.Fatal(err)
	}
}

// appendSink is a user's sink that is not exactly once: it appends every
// record to its list as it is written, so a replay after a crash writes
// the replayed records again.
type appendSink struct {
	mu   sync.Mutex
	recs []keyCount
}

func (s *appendSink) NewWriter(sink.WriterContext) (sink.Writer[keyCount], error) { return s, nil }
func (s *appendSink) Write(v keyCount, _ int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, v)
	return nil
}
func (s *appendSink) Flush(bool) error { return nil }
func (s *appendSink) Close() error     { return nil }

// A crash finds a sink that is not exactly once: the records written
// before the crash are written again by the restarted run, and
// CheckExactlyOnce names them; the same run against the exactly-once
// file sink passes. This is the kit's own test failing when exactly-once
// is broken.
func TestCrashFindsANonIdempotentSink(t *testing.T) {
	const records = 300
	crash := []sluicetest.RunOption{sluicetest.Checkpointing(time.Hour), sluicetest.CrashAt(sluicetest.AfterRecords("count", 50))}
	bad := &appendSink{}
	sluicetest.RunJob(t, countingJob(records, 0, bad), crash...)
	err := sluicetest.CheckExactlyOnce(bad.recs, expectedCounts(records))
	if err == nil || !strings.Contains(err.Error(), "49 written more than once") {
		t.Fatalf("the appending sink's output passed the check: %v", err)
	}
	t.Logf("caught: %v", err)
	msg := failureOf(t, func(tb testing.TB) { sluicetest.AssertExactlyOnce(tb, bad.recs, expectedCounts(records)) })
	if !strings.Contains(msg, "(2 times, want 1)") {
		t.Fatalf("AssertExactlyOnce said %q", msg)
	}

	dir := t.TempDir()
	sluicetest.RunJob(t, countingJob(records, 0, filesink.New[keyCount](dir, codec.JSON[keyCount]{})), crash...)
	got, err := filesink.ReadCommitted(dir, codec.JSON[keyCount]{})
	if err != nil {
		t.Fatal(err)
	}
	sluicetest.AssertExactlyOnce(t, got, expectedCounts(records))
}

// A crash point the job never reaches, and an operator that is not in
// the job, fail the test, naming them: a test that meant to crash the
// job proves nothing if it did not.
func TestRunJobRefusesPointsItCannotReach(t *testing.T) {
	for want, opt := range map[string]sluicetest.RunOption{
		`ended (finished) before CrashAt after 1000 records of operator "count"`:             sluicetest.CrashAt(sluicetest.AfterRecords("count", 1000)),
		`no operator named "cout" in the job (operators with an output: "numbers", "count")`: sluicetest.CrashAt(sluicetest.AfterRecords("cout", 1)),
		`the job ended before FailAt after 500 records of operator "numbers"`:                sluicetest.FailAt(sluicetest.AfterRecords("numbers", 500)),
	} {
		msg := failureOf(t, func(tb testing.TB) {
			sluicetest.RunJob(tb, countingJob(100, 0, sink.NewDiscard[keyCount]()), opt)
		})
		if !strings.Contains(msg, want) {
			t.Errorf("failure %q does not say %q", msg, want)
		}
	}
}

// An unbounded pipeline runs until the condition holds, through a crash.
func TestRunJobUntil(t *testing.T) {
	dir := t.TempDir()
	committed := func() int {
		got, err := filesink.ReadCommitted(dir, codec.JSON[keyCount]{})
		if err != nil {
			t.Error(err)
		}
		return len(got)
	}
	run := sluicetest.RunJob(t, countingJob(0, 2000, filesink.New[keyCount](dir, codec.JSON[keyCount]{})),
		sluicetest.Checkpointing(20*time.Millisecond),
		sluicetest.CrashAt(sluicetest.AfterRecords("numbers", 100)),
		sluicetest.Until(func() bool { return committed() >= 300 }))
	if run.Runs != 2 || run.Err == nil {
		t.Fatalf("runs %d, end %v", run.Runs, run.Err)
	}
	got, err := filesink.ReadCommitted(dir, codec.JSON[keyCount]{})
	if err != nil {
		t.Fatal(err)
	}
	// What was committed is, for every key, its first counts, each once,
	// in order: 1..n.
	next := map[int64]int64{}
	for _, c := range got {
		if c.Count != next[c.Key]+1 {
			t.Fatalf("key %d: count %d after %d", c.Key, c.Count, next[c.Key])
		}
		next[c.Key] = c.Count
	}
}
