// Package testjob runs real jobs in tests. Start runs the small job that
// the observability tests (metrics, tracing, api, cmd/sluice) observe: a
// datagen source of parallelism 2, a keyed count and a discarding sink,
// with checkpoints into a temporary directory and a listener that records
// every checkpoint. NewEnv, Execute, MustStart and StopWithSavepoint
// (execute.go) are what every test that runs a job of its own shares (the
// root package's and e2e's): quiet logs, and a safety net that turns a
// hang into a failure.
package testjob

import (
	"context"
	"errors"
	"github.com/sluicehq/sluice/internal/testutil"
	"io/fs"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// SafetyNet bounds every wait: a passing test never reaches it.
const SafetyNet = testutil.SafetyNet

// Options describe the job.
type Options struct {
	// Name is the job name (default "testjob").
	Name string
	// Records bounds the source; 0 runs until cancelled.
	Records int64
	// Rate limits the source, records per second over all subtasks; 0 is
	// as fast as it can.
	Rate float64
	// Keys is the number of distinct keys (default 16).
	Keys int
	// Interval is the checkpoint interval; 0 turns checkpoints off.
	Interval time.Duration
	// Unaligned turns unaligned checkpoints on.
	Unaligned bool
	// Slow makes the keyed count sleep this long per record, so that the
	// source is backpressured.
	Slow time.Duration
	// Payload is the size of each record's payload (default 64 bytes).
	Payload int
	// Options are added to the environment's.
	Options []sluice.Option
	// FailOnce, when set, is a file the keyed count creates when it fails,
	// once, at its 100th record (ErrInjected); the job restarts if its
	// restart strategy lets it.
	FailOnce string
}

// ErrInjected is the failure FailOnce injects.
var ErrInjected = errors.New("testjob: injected failure")

// Run is a started job and what its listener saw.
type Run struct {
	Job *sluice.Job
	// Dir is the checkpoint directory.
	Dir string

	mu      sync.Mutex
	all     []checkpoint.Stats
	changed chan struct{}
	cancel  context.CancelFunc
}

// Vertex names of the job.
const (
	SourceVertex = "gen"
	CountVertex  = "count -> discard"
)

// Start builds and starts the job; the test's cleanup cancels it and waits
// for it to end.
func Start(t testing.TB, o Options) *Run {
	t.Helper()
	if o.Name == "" {
		o.Name = "testjob"
	}
	if o.Keys == 0 {
		o.Keys = 16
	}
	if o.Payload == 0 {
		o.Payload = 64
	}
	r := &Run{Dir: t.TempDir(), changed: make(chan struct{})}
	opts := []sluice.Option{
		sluice.WithJobName(o.Name),
		sluice.WithParallelism(2),
		QuietLogger(),
		sluice.WithCheckpointListener(r.record),
		sluice.WithBufferTimeout(10 * time.Millisecond),
	}
	if o.Interval > 0 {
		opts = append(opts, sluice.WithCheckpointing(o.Interval, r.Dir), sluice.WithSavepointDir(t.TempDir()),
			sluice.WithRestartStrategy(sluice.NoRestart()))
	}
	if o.Unaligned {
		opts = append(opts, sluice.WithUnalignedCheckpoints(0))
	}
	env := sluice.NewEnvironment(append(opts, o.Options...)...)
	var gopts []source.DatagenOption
	if o.Records > 0 {
		gopts = append(gopts, source.DatagenCount(o.Records))
	}
	if o.Rate > 0 {
		gopts = append(gopts, source.DatagenRate(o.Rate))
	}
	gen := source.NewDatagen(source.RandomRecords(1, o.Payload, o.Keys), gopts...)
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "gen",
		sluice.WithCodec[source.Record](source.RecordCodec{}), sluice.UID("gen"))
	counts := sluice.Process[int64, source.Record, int64](
		sluice.KeyBy(recs, func(r source.Record) int64 { return r.Key }),
		&count{slow: o.Slow, failOnce: o.FailOnce}, sluice.Name("count"), sluice.UID("count"),
		sluice.QueryableValueState[int64](QueryableCount, countState))
	sluice.SinkTo(counts, sink.NewDiscard[int64](), sluice.Name("discard"), sluice.UID("discard"))

	ctx, cancel := context.WithTimeout(context.Background(), SafetyNet)
	r.cancel = cancel
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		cancel()
		t.Fatalf("start job: %v", err)
	}
	r.Job = job
	t.Cleanup(func() {
		job.Cancel()
		<-job.Done()
		cancel()
	})
	return r
}

func (r *Run) record(cs checkpoint.Stats) {
	r.mu.Lock()
	r.all = append(r.all, cs)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Checkpoints returns every checkpoint the listener saw, in order.
func (r *Run) Checkpoints() []checkpoint.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]checkpoint.Stats(nil), r.all...)
}

// Completed returns the completed checkpoints (not savepoints) the
// listener saw.
func (r *Run) Completed() []checkpoint.Stats {
	var out []checkpoint.Stats
	for _, cs := range r.Checkpoints() {
		if cs.Status == checkpoint.StatusCompleted && cs.Kind != checkpoint.KindSavepoint {
			out = append(out, cs)
		}
	}
	return out
}

// AwaitCompleted waits until n checkpoints have completed and returns
// them.
func (r *Run) AwaitCompleted(t testing.TB, n int) []checkpoint.Stats {
	t.Helper()
	deadline := time.After(SafetyNet)
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if c := r.Completed(); len(c) >= n {
			return c
		}
		select {
		case <-ch:
		case <-r.Job.Done():
			if c := r.Completed(); len(c) >= n {
				return c
			}
			t.Fatalf("job ended (%v) after %d of %d checkpoints", r.Job.Wait(), len(r.Completed()), n)
		case <-deadline:
			t.Fatalf("timed out (safety net) waiting for %d checkpoints, have %d", n, len(r.Completed()))
		}
	}
}

// Await polls cond until it holds, under the safety net.
func Await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.Await(t, what, cond)
}

// Wait waits for the job to end and returns its outcome.
func (r *Run) Wait(t testing.TB) error {
	t.Helper()
	select {
	case <-r.Job.Done():
	case <-time.After(SafetyNet):
		t.Fatalf("job did not end within the safety net")
	}
	return r.Job.Wait()
}

// QueryableCount is the name under which the job's counts answer
// queries (Job.QueryState, the REST API).
const QueryableCount = "count"

var countState = state.ValueStateDescriptor[int64]{Name: "count"}

// CountPerKey returns the process function of the test job: it counts
// records per key in a ValueState[int64] named "count" and emits each new
// count, sleeping slow per record first.
func CountPerKey(slow time.Duration) sluice.KeyedProcessFunction[int64, source.Record, int64] {
	return &count{slow: slow}
}

// count counts records per key in keyed state.
type count struct {
	slow     time.Duration
	failOnce string
	seen     int
	count    state.ValueState[int64]
}

func (c *count) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, countState)
	return err
}

func (c *count) ProcessElement(_ *sluice.KeyedContext[int64], _ source.Record, out sluice.Collector[int64]) error {
	if c.slow > 0 {
		time.Sleep(c.slow)
	}
	if c.seen++; c.failOnce != "" && c.seen == 100 {
		if _, err := os.Stat(c.failOnce); errors.Is(err, fs.ErrNotExist) {
			if err := os.WriteFile(c.failOnce, nil, 0o644); err != nil {
				return err
			}
			return ErrInjected
		}
	}
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(n)
	return nil
}
