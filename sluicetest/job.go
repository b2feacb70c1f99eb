package sluicetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
)

// Pipeline adds a job's sources, operators and sinks to env, as the
// program's main does. RunJob calls it once per run, on a new
// environment each time, so it must build the same job every time (the
// state of a run is found by the operators' uids).
type Pipeline func(env *sluice.Environment) error

// ErrInjected is the failure FailAt makes a task fail with, and the error
// of the records a crash stops (CrashAt).
var ErrInjected = errors.New("sluicetest: injected failure")

// RunOption configures RunJob.
type RunOption func(*runSettings)

type runSettings struct {
	interval time.Duration
	options  []sluice.Option
	crashes  []Point
	fails    []Point
	until    func() bool
	timeout  time.Duration
	logLevel slog.Level
}

// Checkpointing sets the checkpoint interval of every run (default
// 50 ms; execution.checkpointing.interval). The checkpoints go into a
// directory of the test.
func Checkpointing(interval time.Duration) RunOption {
	return func(s *runSettings) { s.interval = interval }
}

// JobOptions applies options to every run's environment, after the kit's
// own (a checkpoint directory of the test, the interval, a restart
// strategy that restarts once per FailAt point without delay, a logger to
// the test's log at warning level): sluice.WithParallelism, a state
// backend, another restart strategy.
func JobOptions(opts ...sluice.Option) RunOption {
	return func(s *runSettings) { s.options = append(s.options, opts...) }
}

// CrashAt crashes the job at each point in turn, the way a killed process
// stops: the run ends at once, nothing is recorded, no transaction is
// committed after it, the checkpoints stay. Each crash ends a run; the
// next run starts the pipeline again in the same checkpoint directory, so
// it resumes from the latest checkpoint, as the program restarted by its
// supervisor would. The run after the last crash runs to the end (or
// until Until holds). A point the job never reaches fails the test.
func CrashAt(points ...Point) RunOption {
	return func(s *runSettings) { s.crashes = append(s.crashes, points...) }
}

// FailAt makes a task fail at each point in turn, with ErrInjected, within
// a run: the job's restart strategy restores it from its latest
// checkpoint in the same process (Flink's failover), as a task that
// throws does.
func FailAt(points ...Point) RunOption {
	return func(s *runSettings) { s.fails = append(s.fails, points...) }
}

// Until ends the last run once cond holds (polled every 10 ms), by
// suspending the job: for a pipeline whose sources never end, such as an
// unbounded Kafka source (cond: the output topic has every record). A
// pipeline whose sources end runs until it finishes without it.
func Until(cond func() bool) RunOption { return func(s *runSettings) { s.until = cond } }

// RunTimeout bounds every run (default SafetyNet): a run past it fails
// the test.
func RunTimeout(d time.Duration) RunOption { return func(s *runSettings) { s.timeout = d } }

// JobLogLevel sets the level of the job's logs written to the test's log
// (default slog.LevelWarn).
func JobLogLevel(l slog.Level) RunOption { return func(s *runSettings) { s.logLevel = l } }

// Point is where CrashAt and FailAt strike.
type Point struct {
	operator   string
	records    int64
	checkpoint int
}

// AfterRecords is the point where operator (its name or uid) has emitted
// n records in the run, over all its subtasks: the n-th record does not
// leave it. The operator may be a source. Counting starts anew in each
// run, and after a FailAt failure goes on counting.
func AfterRecords(operator string, n int64) Point { return Point{operator: operator, records: n} }

// AtCheckpoint is the point where the k-th checkpoint completed in the
// run (k from 1) is durable, before any task heard of it: no sink has
// committed it. The run after a crash there restores it and commits its
// transactions. A bounded job's final checkpoint counts.
func AtCheckpoint(k int) Point { return Point{checkpoint: k} }

func (p Point) String() string {
	if p.operator != "" {
		return fmt.Sprintf("after %d records of operator %q", p.records, p.operator)
	}
	return fmt.Sprintf("at the run's checkpoint %d", p.checkpoint)
}

// JobRun is what RunJob did.
type JobRun struct {
	// Runs is how many times the pipeline ran: one more than the crashes.
	Runs int
	// Crashes says where each crash struck, and the latest checkpoint
	// completed before it.
	Crashes []string
	// Failures says where each FailAt failure struck.
	Failures []string
	// Restarts counts the failovers within the runs.
	Restarts int64
	// Checkpoints counts the checkpoints completed over all runs.
	Checkpoints int
	// Dir is the checkpoint directory.
	Dir string
	// Err is how the last run ended: nil when it finished,
	// sluice.ErrJobSuspended when Until stopped it.
	Err error
}

// RunJob runs the pipeline with checkpoints into a directory of the test,
// crashing and failing it where the options say, until it finishes (its
// sources are bounded) or Until holds, and returns what happened. A run
// that fails for good, a point never reached, or a run past its timeout
// fails the test. Check the output afterwards (CheckExactlyOnce).
//
//	run := sluicetest.RunJob(t, pipeline, sluicetest.CrashAt(
//		sluicetest.AtCheckpoint(2), sluicetest.AfterRecords("count", 500)))
func RunJob(tb testing.TB, p Pipeline, opts ...RunOption) *JobRun {
	tb.Helper()
	set := runSettings{interval: 50 * time.Millisecond, timeout: SafetyNet, logLevel: slog.LevelWarn}
	for _, o := range opts {
		o(&set)
	}
	r := &jobRunner{tb: tb, pipeline: p, set: set, run: &JobRun{Dir: tb.TempDir()}, logger: testLogger(tb, set.logLevel)}
	r.fails.points = set.fails
	for i := 0; ; i++ {
		var crash *Point
		if i < len(set.crashes) {
			crash = &set.crashes[i]
		}
		crashed := r.runOnce(crash)
		if !crashed {
			break
		}
	}
	if left := r.fails.left(); len(left) > 0 {
		tb.Fatalf("sluicetest: the job ended before FailAt %s", strings.Join(left, ", "))
	}
	return r.run
}

// jobRunner runs the pipeline's runs.
type jobRunner struct {
	tb       testing.TB
	pipeline Pipeline
	set      runSettings
	run      *JobRun
	logger   *slog.Logger
	fails    failPoints
}

// runOnce runs the pipeline once; it reports whether the run crashed (at
// crash, if not nil).
func (r *jobRunner) runOnce(crash *Point) bool {
	tb := r.tb
	tb.Helper()
	r.run.Runs++
	n := r.run.Runs
	st := &runState{ready: make(chan struct{}), crashed: make(chan struct{})}
	opts := []sluice.Option{
		sluice.WithCheckpointing(r.set.interval, r.run.Dir),
		sluice.WithLogger(r.logger.With("run", n)),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(len(r.set.fails), 0)),
		sluice.WithCheckpointListener(func(cs checkpoint.Stats) {
			if cs.Status != checkpoint.StatusCompleted || cs.Kind.IsSavepoint() {
				return
			}
			k := int(st.checkpoints.Add(1))
			st.latest.Store(cs.ID)
			if crash != nil && crash.operator == "" && k == crash.checkpoint {
				st.crashAt(crash, func(j *sluice.Job) { awaitTasksExited(tb, j) })
			}
		}),
	}
	env := sluice.NewEnvironment(append(opts, r.set.options...)...)
	if err := r.buildRun(env, n); err != nil {
		tb.Fatalf("sluicetest: run %d: the pipeline: %v", n, err)
	}
	if crash != nil && crash.operator != "" {
		if err := observe(env.Plan(), crash.operator, func() error { return st.record(crash) }); err != nil {
			tb.Fatalf("sluicetest: CrashAt(%s): %v", crash, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.set.timeout)
	defer cancel()
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		tb.Fatalf("sluicetest: run %d: start the job: %v", n, err)
	}
	st.job = job
	close(st.ready)
	var poll <-chan time.Time
	if r.set.until != nil && crash == nil {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		poll = tick.C
	}
	stopped := false
	for !stopped {
		select {
		case <-job.Done():
			stopped = true
		case <-poll:
			if r.set.until() {
				job.Suspend()
				stopped = true
			}
		}
	}
	err = job.Wait()
	r.run.Restarts += job.Restarts()
	r.run.Checkpoints += int(st.checkpoints.Load())
	select {
	case <-st.crashed:
		if !errors.Is(err, sluice.ErrJobSuspended) {
			tb.Fatalf("sluicetest: run %d crashed %s, then ended with %v", n, crash, err)
		}
		r.run.Crashes = append(r.run.Crashes, fmt.Sprintf("run %d: %s (latest checkpoint %d)", n, crash, st.latestBefore))
		return true
	default:
	}
	r.run.Err = err
	switch {
	case ctx.Err() != nil:
		tb.Fatalf("sluicetest: run %d did not end within %v (RunTimeout): %v", n, r.set.timeout, err)
	case crash != nil:
		tb.Fatalf("sluicetest: run %d ended (%v) before CrashAt %s: make the point earlier, or the job longer", n, errOrFinished(err), crash)
	case err != nil && !(r.set.until != nil && errors.Is(err, sluice.ErrJobSuspended)):
		tb.Fatalf("sluicetest: run %d failed: %v", n, err)
	}
	return false
}

func errOrFinished(err error) string {
	if err == nil {
		return "finished"
	}
	return err.Error()
}

// buildRun calls the pipeline and arms the next FailAt point on its plan.
func (r *jobRunner) buildRun(env *sluice.Environment, n int) error {
	if err := r.pipelineOf(env); err != nil {
		return err
	}
	if err := env.Err(); err != nil {
		return err
	}
	return r.fails.arm(env.Plan(), n, r.run)
}

func (r *jobRunner) pipelineOf(env *sluice.Environment) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return r.pipeline(env)
}

// runState is one run's crash: the job (once started), whether the crash
// struck, and the checkpoints completed.
type runState struct {
	job          *sluice.Job
	ready        chan struct{} // closed once job is set
	once         sync.Once
	crashed      chan struct{}
	records      atomic.Int64
	checkpoints  atomic.Int64
	latest       atomic.Int64
	latestBefore int64
}

// record counts a record of the crash point's operator; at the point it
// crashes the run, and every record from then on is refused.
func (st *runState) record(p *Point) error {
	n := st.records.Add(1)
	if n < p.records {
		return nil
	}
	if n == p.records {
		st.crashAt(p, nil)
	}
	return fmt.Errorf("%w: crashed %s", ErrInjected, p)
}

// crashAt suspends the job at once (a task error that follows is the
// stop, not a failure) and, with wait, waits for its tasks to be gone.
func (st *runState) crashAt(p *Point, wait func(*sluice.Job)) {
	st.once.Do(func() {
		<-st.ready
		st.latestBefore = st.latest.Load()
		st.job.Suspend()
		if wait != nil {
			wait(st.job)
		}
		close(st.crashed)
	})
}

// awaitTasksExited waits until every task of the job has stopped: called
// from the checkpoint listener, it keeps the coordinator from telling
// any task that the checkpoint completed.
func awaitTasksExited(tb testing.TB, j *sluice.Job) {
	deadline := time.Now().Add(SafetyNet)
	for time.Now().Before(deadline) {
		running := false
		for _, m := range j.Metrics() {
			if m.Status == runtime.TaskCreated || m.Status == runtime.TaskRunning {
				running = true
			}
		}
		if !running {
			return
		}
		time.Sleep(time.Millisecond)
	}
	tb.Errorf("sluicetest: the tasks of a crashed run did not stop within %v", SafetyNet)
}

// failPoints are the FailAt points, struck one after the other.
type failPoints struct {
	points []Point
	next   atomic.Int64
	count  []atomic.Int64
}

// arm makes the plan's operators fail at the points still to strike.
func (f *failPoints) arm(plan *runtime.Plan, run int, jr *JobRun) error {
	if f.count == nil {
		f.count = make([]atomic.Int64, len(f.points))
	}
	for i := int(f.next.Load()); i < len(f.points); i++ {
		p, i := f.points[i], i
		if p.operator == "" {
			return fmt.Errorf("FailAt(%s): a failure strikes after records of an operator (AfterRecords)", p)
		}
		f.count[i].Store(0)
		err := observe(plan, p.operator, func() error {
			if int(f.next.Load()) != i || f.count[i].Add(1) != p.records {
				return nil
			}
			f.next.Add(1)
			jr.Failures = append(jr.Failures, fmt.Sprintf("run %d: %s", run, p))
			return fmt.Errorf("%w: failed %s", ErrInjected, p)
		})
		if err != nil {
			return fmt.Errorf("FailAt(%s): %w", p, err)
		}
	}
	return nil
}

// left lists the points not struck.
func (f *failPoints) left() []string {
	var s []string
	for _, p := range f.points[f.next.Load():] {
		s = append(s, p.String())
	}
	return s
}

// observe calls hook before every record the operator named op (name or
// uid) emits; an error of hook is the record's.
func observe(plan *runtime.Plan, op string, hook func() error) error {
	var names []string
	for _, n := range plan.Nodes {
		if n.IsSide() || n.Out == nil {
			continue
		}
		names = append(names, n.Name)
		if n.Name != op && n.UID != op {
			continue
		}
		onRecord := func(any, int64) error { return hook() }
		switch {
		case n.BuildSource != nil:
			build := n.BuildSource
			n.BuildSource = func(sc *runtime.SourceContext, out any) (runtime.SourceDriver, error) {
				return build(sc, n.Out.Observe(out, onRecord, nil))
			}
		case n.BuildWithSides != nil:
			build := n.BuildWithSides
			n.BuildWithSides = func(out any, sides []any) (operators.Operator, []any, error) {
				return build(n.Out.Observe(out, onRecord, nil), sides)
			}
		default:
			build := n.Build
			n.Build = func(out any) (operators.Operator, []any, error) {
				return build(n.Out.Observe(out, onRecord, nil))
			}
		}
		return nil
	}
	return fmt.Errorf("no operator named %q in the job (operators with an output: %s)", op, quoteAll(names))
}
