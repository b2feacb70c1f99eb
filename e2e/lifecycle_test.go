package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

var errBoom = errors.New("boom")

// TestJobCompletes: a bounded job finishes, Wait returns nil, every task
// reports FINISHED, and no goroutine is left.
func TestJobCompletes(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv(sluice.WithParallelism(2))
	s := sluice.FromSource(env, source.FromSlice(ints(0, 1000)), sluice.NoWatermarks[int64](), "numbers")
	m := sluice.Map(s, func(v int64) (int64, error) { return v + 1, nil }, sluice.Name("inc"))
	r := sluice.Reduce(sluice.KeyBy(m, func(v int64) int64 { return v % 7 }), func(a, b int64) (int64, error) { return a + b, nil })
	out := sink.NewCollect[int64]()
	sluice.SinkTo(r, out)
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	awaitClosed(t, "the job to end", job.Done())
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if job.Status() != runtime.JobFinished {
		t.Fatalf("status %v, want FINISHED", job.Status())
	}
	if out.Len() != 1000 {
		t.Fatalf("collected %d records, want 1000", out.Len())
	}
	var recsIn, recsOut int64
	for _, m := range job.Metrics() {
		if m.Status != runtime.TaskFinished {
			t.Errorf("task %s (%d) is %v after the job finished", m.Vertex, m.Subtask, m.Status)
		}
		if strings.HasPrefix(m.Vertex, "numbers") {
			recsOut += m.RecordsOut
		} else {
			recsIn += m.RecordsIn
		}
	}
	if recsIn != 1000 || recsOut != 1000 {
		t.Errorf("metrics count %d records out of the sources and %d into the reducers, want 1000 each", recsOut, recsIn)
	}
	job.Cancel() // after the end: no effect
	if err := job.Wait(); err != nil || job.Status() != runtime.JobFinished {
		t.Fatalf("Cancel after the end changed the outcome: %v, %v", err, job.Status())
	}
}

// failingSink's writers fail on a given value.
type failingSink struct{ bad int64 }

func (s failingSink) NewWriter(sink.WriterContext) (sink.Writer[int64], error) {
	return failingWriter(s), nil
}

type failingWriter struct{ bad int64 }

func (w failingWriter) Write(v int64, _ int64) error {
	if v == w.bad {
		return fmt.Errorf("write %d: %w", v, errBoom)
	}
	return nil
}
func (w failingWriter) Flush(bool) error { return nil }
func (w failingWriter) Close() error     { return nil }

type failingProcess struct{ bad int64 }

func (p *failingProcess) ProcessElement(_ *sluice.KeyedContext[int64], v int64, out sluice.Collector[int64]) error {
	if v == p.bad {
		return errBoom
	}
	out.Collect(v)
	return nil
}

type failingCo struct{ bad int64 }

func (c *failingCo) ProcessElement1(_ *sluice.CoContext, v int64, out sluice.Collector[int64]) error {
	out.Collect(v)
	return nil
}

func (c *failingCo) ProcessElement2(_ *sluice.CoContext, v string, out sluice.Collector[int64]) error {
	if v == fmt.Sprint(c.bad) {
		return errBoom
	}
	return nil
}

// TestFailingFunctionNamesOperatorAndSubtask: whatever kind of operator
// fails, the job fails with an *operators.Error naming the operator (as set
// with sluice.Name) and the subtask, wrapping the cause; every goroutine
// exits.
//
// The values 0..999 come from a slice source of parallelism 2 (subtask i
// emits the values v with v%2 == i); the failing value 501 is therefore
// handled by subtask 1 of operators reached by forward edges, and by the
// owner of its key after a keyBy.
func TestFailingFunctionNamesOperatorAndSubtask(t *testing.T) {
	const bad = 501
	cases := []struct {
		name    string
		subtask int
		build   func(s *sluice.Stream[int64]) *sluice.Stream[int64]
		sink    sink.Sink[int64]
	}{
		{name: "map", subtask: 1, build: func(s *sluice.Stream[int64]) *sluice.Stream[int64] {
			return sluice.Map(s, func(v int64) (int64, error) {
				if v == bad {
					return 0, errBoom
				}
				return v, nil
			}, sluice.Name("failing"))
		}},
		{name: "filter", subtask: 1, build: func(s *sluice.Stream[int64]) *sluice.Stream[int64] {
			return sluice.Filter(s, func(v int64) (bool, error) {
				if v == bad {
					return false, errBoom
				}
				return true, nil
			}, sluice.Name("failing"))
		}},
		{name: "flatmap after a chained map", subtask: 1, build: func(s *sluice.Stream[int64]) *sluice.Stream[int64] {
			s = sluice.Map(s, func(v int64) (int64, error) { return v, nil }, sluice.Name("innocent"))
			return sluice.FlatMap(s, func(v int64, out sluice.Collector[int64]) error {
				out.Collect(v)
				if v == bad {
					return errBoom
				}
				return nil
			}, sluice.Name("failing"))
		}},
		{name: "keyed process", subtask: ownerOf(bad, 128, 2), build: func(s *sluice.Stream[int64]) *sluice.Stream[int64] {
			return sluice.Process[int64, int64, int64](sluice.KeyBy(s, func(v int64) int64 { return v }), &failingProcess{bad: bad}, sluice.Name("failing"))
		}},
		{name: "reduce", subtask: ownerOf(bad%10, 128, 2), build: func(s *sluice.Stream[int64]) *sluice.Stream[int64] {
			return sluice.Reduce(sluice.KeyBy(s, func(v int64) int64 { return v % 10 }), func(acc, v int64) (int64, error) {
				if v == bad {
					return 0, errBoom
				}
				return acc + v, nil
			}, sluice.Name("failing"))
		}},
		{name: "coprocess", subtask: 0, build: func(s *sluice.Stream[int64]) *sluice.Stream[int64] {
			strs := sluice.Map(s, func(v int64) (string, error) { return fmt.Sprint(v), nil }, sluice.Name("format"), sluice.Parallelism(1))
			return sluice.CoProcess[int64, string, int64](sluice.Connect(s, strs), &failingCo{bad: bad}, sluice.Name("failing"), sluice.Parallelism(1))
		}},
		{name: "sink", subtask: 1, build: func(s *sluice.Stream[int64]) *sluice.Stream[int64] { return s }, sink: failingSink{bad: bad}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			env := newEnv(sluice.WithParallelism(2))
			s := sluice.FromSource(env, source.FromSlice(ints(0, 1000)), sluice.NoWatermarks[int64](), "numbers")
			var snk sink.Sink[int64] = sink.NewDiscard[int64]()
			opts := []sluice.OpOption{sluice.Name("out")}
			if tc.sink != nil {
				snk = tc.sink
				opts = []sluice.OpOption{sluice.Name("failing")}
			}
			sluice.SinkTo(tc.build(s), snk, opts...)
			job, err := env.ExecuteAsync(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			err = job.Wait()
			if !errors.Is(err, errBoom) {
				t.Fatalf("job error %v does not wrap the cause", err)
			}
			var oe *operators.Error
			if !errors.As(err, &oe) {
				t.Fatalf("job error %v is not an *operators.Error", err)
			}
			if oe.Operator != "failing" || oe.Subtask != tc.subtask || oe.Parallelism == 0 {
				t.Fatalf("error names operator %q subtask %d/%d, want %q subtask %d", oe.Operator, oe.Subtask, oe.Parallelism, "failing", tc.subtask)
			}
			msg := err.Error()
			if !strings.Contains(msg, `"failing"`) || !strings.Contains(msg, fmt.Sprintf("subtask %d/", tc.subtask)) || !strings.Contains(msg, "boom") {
				t.Fatalf("message %q does not name the operator, subtask and cause", msg)
			}
			if job.Status() != runtime.JobFailed {
				t.Fatalf("status %v, want FAILED", job.Status())
			}
			failed := 0
			for _, m := range job.Metrics() {
				if m.Status == runtime.TaskFailed {
					failed++
				}
				if m.Status == runtime.TaskRunning || m.Status == runtime.TaskCreated {
					t.Errorf("task %s (%d) still %v after Wait", m.Vertex, m.Subtask, m.Status)
				}
			}
			if failed == 0 {
				t.Error("no task reports FAILED")
			}
		})
	}
}

// TestPanickingFunctionFailsJob: a panic in a user function fails the job
// (it does not crash the process), and every goroutine exits.
func TestPanickingFunctionFailsJob(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv(sluice.WithParallelism(2))
	s := sluice.FromSource(env, source.FromSlice(ints(0, 1000)), sluice.NoWatermarks[int64](), "numbers")
	m := sluice.Map(s.Rebalance(), func(v int64) (int64, error) {
		if v == 700 {
			panic("user bug")
		}
		return v, nil
	}, sluice.Name("panicky"), sluice.Parallelism(3))
	sluice.SinkTo(m, sink.NewDiscard[int64]())
	err := execute(t, env)
	if err == nil || !strings.Contains(err.Error(), "panic") || !strings.Contains(err.Error(), "user bug") {
		t.Fatalf("job error %v, want the panic", err)
	}
	if !strings.Contains(err.Error(), "panicky") {
		t.Fatalf("job error %v does not name the task", err)
	}
}

// TestCancel: an unbounded job stops on Cancel; Wait returns an error that
// matches ErrJobCanceled and context.Canceled; no goroutine is left.
func TestCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv(sluice.WithParallelism(2))
	s := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }), sluice.NoWatermarks[int64](), "unbounded")
	ks := sluice.KeyBy(s, func(v int64) int64 { return v % 100 })
	out := sink.NewDiscard[int64]()
	sluice.SinkTo(sluice.Reduce(ks, func(a, b int64) (int64, error) { return a + b, nil }), out)
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	await(t, "records at the sink", func() bool { return out.Count() > 1000 })
	if job.Status() != runtime.JobRunning {
		t.Fatalf("status %v while running", job.Status())
	}
	job.Cancel()
	err = job.Wait()
	if !errors.Is(err, sluice.ErrJobCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after Cancel: %v, want ErrJobCanceled and context.Canceled", err)
	}
	if job.Status() != runtime.JobCanceled {
		t.Fatalf("status %v, want CANCELED", job.Status())
	}
	for _, m := range job.Metrics() {
		if m.Status != runtime.TaskCanceled {
			t.Errorf("task %s (%d) is %v, want CANCELED", m.Vertex, m.Subtask, m.Status)
		}
	}
}

// TestCancelByContext: cancelling the context given to Execute suspends
// the job (a process shutting down): Execute returns ErrJobSuspended, not
// ErrJobCanceled.
func TestCancelByContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv(sluice.WithParallelism(2))
	s := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }), sluice.NoWatermarks[int64](), "unbounded")
	out := sink.NewDiscard[int64]()
	sluice.SinkTo(sluice.Map(s.Rebalance(), func(v int64) (int64, error) { return -v, nil }), out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- env.Execute(ctx) }()
	await(t, "records at the sink", func() bool { return out.Count() > 1000 })
	cancel()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = <-done
	}
	if !errors.Is(err, sluice.ErrJobSuspended) || !errors.Is(err, context.Canceled) || errors.Is(err, sluice.ErrJobCanceled) {
		t.Fatalf("Execute after cancelling its context: %v, want ErrJobSuspended and context.Canceled", err)
	}
}

// TestCancelBeforeStart: a context that is already cancelled suspends the
// job at once.
func TestCancelBeforeStart(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv()
	s := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }), sluice.NoWatermarks[int64](), "unbounded")
	sluice.SinkTo(s, sink.NewDiscard[int64]())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := env.Execute(ctx); !errors.Is(err, sluice.ErrJobSuspended) {
		t.Fatalf("Execute with a cancelled context: %v, want ErrJobSuspended", err)
	}
}

// TestCancelBackpressuredJob: a source blocked on a full output (its sink
// is stuck) stops on Cancel too.
func TestCancelBackpressuredJob(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv(sluice.WithBufferSize(128))
	release := newOnce()
	var seen atomic.Int64
	s := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }), sluice.NoWatermarks[int64](), "unbounded")
	stuck := sluice.Map(s.Rebalance(), func(v int64) (int64, error) {
		seen.Add(1)
		<-release.C() // blocks the task until the test lets it go
		return v, nil
	}, sluice.Name("stuck"))
	sluice.SinkTo(stuck, sink.NewDiscard[int64]())
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { // also on failure, so that goleak sees nothing left
		job.Cancel()
		release.close()
		_ = job.Wait()
	}()
	var srcBp bool
	await(t, "the source to be backpressured", func() bool {
		for _, m := range job.Metrics() {
			if strings.HasPrefix(m.Vertex, "unbounded") && m.BackPressuredTime > 0 {
				srcBp = true
			}
		}
		return srcBp && seen.Load() == 1
	})
	job.Cancel()
	release.close()
	if err := job.Wait(); !errors.Is(err, sluice.ErrJobCanceled) {
		t.Fatalf("Wait: %v", err)
	}
}

// badCodec is codec.Int that refuses to decode one value.
type badCodec struct{ bad int64 }

var errBadValue = errors.New("undecodable value")

func (c badCodec) Append(dst []byte, v int64) ([]byte, error) {
	return codec.Int[int64]{}.Append(dst, v)
}
func (c badCodec) Decode(src []byte) (int64, error) {
	v, err := codec.Int[int64]{}.Decode(src)
	if err == nil && v == c.bad {
		return 0, fmt.Errorf("value %d: %w", v, errBadValue)
	}
	return v, err
}

// TestDecodeFailureNamesEdgeSubtaskAndPosition: a record that cannot be
// decoded fails the job with runtime.ErrDecode naming the edge, the
// consuming subtask and the record's position in its channel.
//
// One source subtask sends 0..99 round robin to two sink subtasks, so 13
// is the 7th record (1, 3, ..., 13) on the channel of subtask 1.
func TestDecodeFailureNamesEdgeSubtaskAndPosition(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv()
	s := sluice.FromSource(env, source.FromSlice(ints(0, 100)), sluice.NoWatermarks[int64](), "numbers",
		sluice.WithCodec[int64](badCodec{bad: 13}))
	out := sink.NewCollect[int64]()
	sluice.SinkTo(s.Rebalance(), out, sluice.Name("out"), sluice.Parallelism(2))
	err := execute(t, env)
	if !errors.Is(err, runtime.ErrDecode) {
		t.Fatalf("job error %v, want ErrDecode", err)
	}
	if !errors.Is(err, errBadValue) {
		t.Fatalf("job error %v does not wrap the codec's error", err)
	}
	msg := err.Error()
	for _, want := range []string{`"numbers" -> "out"`, "subtask 1", "channel 0", "record #7"} {
		if !strings.Contains(msg, want) {
			t.Errorf("decode error %q does not contain %q", msg, want)
		}
	}
	for _, v := range out.Values() {
		if v == 13 {
			t.Error("the undecodable record reached the sink")
		}
	}
}

// failingSource's reader fails after emitting a few records.
type failingSource struct{}

func (failingSource) Bounded() bool { return true }
func (failingSource) NewReader(ctx source.ReaderContext) (source.Reader[int64], error) {
	return &failingReader{subtask: ctx.Subtask}, nil
}

type failingReader struct {
	subtask int
	n       int64
}

func (r *failingReader) PollNext(out source.Output[int64]) (source.Status, error) {
	if r.subtask == 1 && r.n == 10 {
		return source.MoreAvailable, fmt.Errorf("read: %w", errBoom)
	}
	r.n++
	return source.MoreAvailable, out.Collect(r.n, source.NoTimestamp)
}
func (r *failingReader) Available() <-chan struct{} { return closedCh }
func (r *failingReader) Close() error               { return nil }

// TestFailingSourceNamesOperator: a source reader's error fails the job
// naming the source and its subtask.
func TestFailingSourceNamesOperator(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv(sluice.WithParallelism(2))
	s := sluice.FromSource[int64](env, failingSource{}, sluice.NoWatermarks[int64](), "flaky")
	sluice.SinkTo(s.Rebalance(), sink.NewDiscard[int64]())
	err := execute(t, env)
	var oe *operators.Error
	if !errors.Is(err, errBoom) || !errors.As(err, &oe) || oe.Operator != "flaky" || oe.Subtask != 1 {
		t.Fatalf("job error %v (%+v), want the source \"flaky\" subtask 1 and the cause", err, oe)
	}
}

// failingTimer fails in OnTimer.
type failingTimer struct{}

func (failingTimer) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, _ sluice.Collector[int64]) error {
	ctx.Timers().RegisterEventTimeTimer(ctx.Timestamp())
	return nil
}

func (failingTimer) OnTimer(_ *sluice.KeyedContext[int64], ts int64, _ sluice.Collector[int64]) error {
	if ts == 42 {
		return errBoom
	}
	return nil
}

// TestFailingTimerNamesOperator: an error from OnTimer fails the job
// naming the operator and the timer.
func TestFailingTimerNamesOperator(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv()
	s := sluice.FromSource(env, source.FromSlice(ints(0, 100), source.SliceTimestamps(func(v int64) int64 { return v })),
		sluice.NoWatermarks[int64](), "events")
	p := sluice.Process[int64, int64, int64](sluice.KeyBy(s, func(v int64) int64 { return v % 3 }), failingTimer{}, sluice.Name("timers"))
	sluice.SinkTo(p, sink.NewDiscard[int64]())
	err := execute(t, env)
	var oe *operators.Error
	if !errors.Is(err, errBoom) || !errors.As(err, &oe) || oe.Operator != "timers" || !strings.Contains(err.Error(), "timer at 42") {
		t.Fatalf("job error %v, want operator \"timers\", the timer and the cause", err)
	}
}
