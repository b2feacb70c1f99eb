package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
)

// The crash-and-restore harness: every test of the package that crashes a
// job, stops it midway or restores it at another parallelism describes
// the job as a job value and runs it through the methods below. A job is
// datagen sources (datagen), each followed by a "maybe-crash" map
// (maybeCrash), the operators under test (the test's build) and the
// exactly-once file sink, with crashes injected where the test says: in
// the maps, in the operators under test (build hands them opCrash), in
// the sink's commits. A crash fails a task; the restart strategy
// (crashOptions) restores the job from its latest checkpoint in the same
// run. For a restore at another parallelism the test stops the job midway
// with a savepoint (stopMidway) and runs the next one from it (rescaled).

// errInjectedCrash is the error of every injected crash.
var errInjectedCrash = errors.New("injected crash")

// crashes fails at a few chosen points of a run: when its counter reaches
// each threshold, once. A nil *crashes never fails.
type crashes struct {
	mu         sync.Mutex
	n          int64
	thresholds []int64
	fired      atomic.Int64
}

// newCrashes chooses count thresholds in 1..span.
func newCrashes(rng *rand.Rand, count int, span int64) *crashes {
	c := &crashes{}
	for range count {
		c.thresholds = append(c.thresholds, 1+rng.Int64N(span))
	}
	slices.Sort(c.thresholds)
	return c
}

// hit counts one event and reports whether it crashes now.
func (c *crashes) hit() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if len(c.thresholds) > 0 && c.n >= c.thresholds[0] {
		c.thresholds = c.thresholds[1:]
		c.fired.Add(1)
		return true
	}
	return false
}

// count is how many crashes fired.
func (c *crashes) count() int64 {
	if c == nil {
		return 0
	}
	return c.fired.Load()
}

// crashOptions are the options of a job under crashes: parallelism 2, a
// short buffer timeout (records in flight at every checkpoint),
// checkpoints every interval into dir, and restarts enough for every
// crash, 5 ms apart.
func crashOptions(dir string, interval time.Duration, more ...sluice.Option) []sluice.Option {
	return append([]sluice.Option{
		sluice.WithParallelism(2),
		sluice.WithBufferTimeout(2 * time.Millisecond),
		sluice.WithCheckpointing(interval, dir),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(100, 5*time.Millisecond)),
	}, more...)
}

// job is a job under test, built afresh for every run (env).
type job[Out any] struct {
	// opts are the environment's options (after quiet logs), extra this
	// run's (rescaled replaces them).
	opts, extra []sluice.Option
	// records and rate are every source's records and records/s (0: as
	// fast as it can).
	records int64
	rate    float64
	// opPar is the parallelism of the operators under test (build sets
	// it; 0 leaves the job's).
	opPar int
	// mapCrash crashes the maybe-crash maps, opCrash the operators under
	// test (build hands it to them), commitCrash the file sink's commits.
	mapCrash, opCrash, commitCrash *crashes
	// fail, when set, is called for every record in the maybe-crash maps:
	// its error fails the task.
	fail func() error
	// seen, when set, counts the records past the maybe-crash maps; past
	// brakeAfter (when > 0) each is slowed by 3 ms, so that a test's stop
	// lands midway however loaded the machine is.
	seen       *atomic.Int64
	brakeAfter int64
	// build adds the sources and the operators under test; the harness
	// sinks what it returns.
	build func(j *job[Out], env *sluice.Environment) *sluice.Stream[Out]
	// outDir is the file sink's directory, sinkOpts its operator options.
	outDir   string
	sinkOpts []sluice.OpOption
	// sink, when set, takes the output instead of the file sink.
	sink sink.Sink[Out]
	// timeout bounds run (0: the safety net).
	timeout time.Duration
}

// env builds the job: a new environment, the test's sources and
// operators, and the sink.
func (j *job[Out]) env() *sluice.Environment {
	env := newEnv(append(slices.Clip(j.opts), j.extra...)...)
	out := j.build(j, env)
	snk := j.sink
	if snk == nil {
		fopts := []filesink.Option{filesink.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
		if cc := j.commitCrash; cc != nil {
			fopts = append(fopts, filesink.WithCommitHook(func(id int64) error {
				if cc.hit() {
					return fmt.Errorf("commit of checkpoint %d: %w", id, errInjectedCrash)
				}
				return nil
			}))
		}
		snk = filesink.New[Out](j.outDir, codec.JSON[Out]{}, fopts...)
	}
	sluice.SinkTo(out, snk, append([]sluice.OpOption{sluice.Name("files"), sluice.UID("files")}, j.sinkOpts...)...)
	return env
}

// start starts a run; when the test ends it is cancelled if still
// running.
func (j *job[Out]) start(t *testing.T) *sluice.Job {
	t.Helper()
	return mustStart(t, j.env())
}

// run runs the job to its end and fails t if it fails or outlasts its
// timeout.
func (j *job[Out]) run(t *testing.T) *sluice.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(j.timeout, safetyNet))
	defer cancel()
	job, err := j.env().ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job failed: %v", err)
	}
	return job
}

// crashed is the number of crashes injected.
func (j *job[Out]) crashed() int64 {
	return j.mapCrash.count() + j.opCrash.count() + j.commitCrash.count()
}

// output is what the file sink committed.
func (j *job[Out]) output(t *testing.T) []Out {
	t.Helper()
	got, err := filesink.ReadCommitted(j.outDir, codec.JSON[Out]{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// runUnderCrashes runs the job with two crashes in the maybe-crash maps
// (within their first mapSpan records), two in the operators under test
// (within their first opSpan outputs) and one in the sink's commits
// (within the first commitSpan), and fails t unless several struck, one
// at least in the operators, and check finds nothing wrong with the
// committed output, each record as fmt.Sprint prints it (sameAs(want):
// want as a multiset); what names the records.
func (j *job[Out]) runUnderCrashes(t *testing.T, rng *rand.Rand, mapSpan, commitSpan, opSpan int64, check func(got []string) string, what string) *sluice.Job {
	t.Helper()
	j.mapCrash, j.opCrash, j.commitCrash = newCrashes(rng, 2, mapSpan), newCrashes(rng, 2, opSpan), newCrashes(rng, 1, commitSpan)
	job := j.run(t)
	crashes := j.crashed()
	if j.opCrash.count() == 0 || crashes < 3 {
		t.Fatalf("%d crashes injected (%d in the operators under test); the test needs several", crashes, j.opCrash.count())
	}
	got := j.committed(t)
	if d := check(got); d != "" {
		t.Fatalf("committed %s differ from the plain evaluation: %s", what, d)
	}
	t.Logf("%d crashes, %d restarts, %d %s committed", crashes, job.Restarts(), len(got), what)
	return job
}

// sameAs is the check that the output is want as a multiset.
func sameAs(want []string) func(got []string) string {
	return func(got []string) string { return sameMultiset(got, want) }
}

// committed is what the file sink committed, each record as fmt.Sprint
// prints it.
func (j *job[Out]) committed(t *testing.T) []string {
	t.Helper()
	got := j.output(t)
	out := make([]string, len(got))
	for i, o := range got {
		out[i] = fmt.Sprint(o)
	}
	return out
}

// stopMidway starts the job, waits until cond holds, stops the job with a
// savepoint and returns the savepoint; it fails t when the sources had
// read all their total records (j.seen) by then.
func (j *job[Out]) stopMidway(t *testing.T, what string, cond func() bool, total int64) string {
	t.Helper()
	job := j.start(t)
	await(t, what, cond)
	sp := stopWithSavepoint(t, job)
	if n := j.seen.Load(); n >= total {
		t.Fatalf("the first run read all %d records; the test needs a stop midway", n)
	}
	return sp
}

// rescaled is the job's next run: its operators under test at
// parallelism par, its sources at rate, nothing counted or slowed, with
// the run options extra (the savepoint to restore, a listener).
func (j *job[Out]) rescaled(par int, rate float64, extra ...sluice.Option) *job[Out] {
	next := *j
	next.opPar, next.rate, next.seen, next.brakeAfter, next.extra = par, rate, nil, 0, extra
	return &next
}

// checkBothRunsCommitted fails t unless the run before a rescale
// committed some of the output (partial) and the run after it the rest
// (all in all).
func checkBothRunsCommitted(t *testing.T, what string, partial, all int) {
	t.Helper()
	if partial == 0 || partial >= all {
		t.Fatalf("%d %s committed before the rescale, %d in all: the test needs both runs to commit", partial, what, all)
	}
}

// datagen adds the source name (its uid too): j.records records gen(0),
// gen(1), ... at j.rate, with the event timestamps ts (nil: none) and
// the watermarks of wm.
func datagen[In, Out any](j *job[Out], env *sluice.Environment, name string, gen func(int64) In, ts func(int64) int64,
	wm sluice.WatermarkStrategy[In], opts ...sluice.OpOption) *sluice.Stream[In] {
	gopts := []source.DatagenOption{source.DatagenCount(j.records), source.DatagenRate(j.rate)}
	if ts != nil {
		gopts = append(gopts, source.DatagenTimestamps(ts))
	}
	return sluice.FromSource(env, source.NewDatagen(gen, gopts...), wm, name, append([]sluice.OpOption{sluice.UID(name)}, opts...)...)
}

// maybeCrash is the map named uid after a source: it crashes when
// j.mapCrash says so, fails when j.fail does, counts j.seen and, past
// j.brakeAfter, slows every record.
func maybeCrash[T, Out any](j *job[Out], s *sluice.Stream[T], uid string, opts ...sluice.OpOption) *sluice.Stream[T] {
	mc, fail, seen, brake := j.mapCrash, j.fail, j.seen, j.brakeAfter
	return sluice.Map(s, func(v T) (T, error) {
		if mc.hit() {
			return v, fmt.Errorf("%s of %v: %w", uid, v, errInjectedCrash)
		}
		if fail != nil {
			if err := fail(); err != nil {
				return v, err
			}
		}
		if seen != nil && seen.Add(1) > brake && brake > 0 {
			time.Sleep(3 * time.Millisecond)
		}
		return v, nil
	}, append([]sluice.OpOption{sluice.Name(uid), sluice.UID(uid)}, opts...)...)
}

// index is the datagen of the record numbers.
func index(i int64) int64 { return i }
