package e2e

import (
	"context"
	"fmt"
	"github.com/sluicehq/sluice/internal/testutil"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/source"
)

// TestMain fails the package if any goroutine outlives the tests; the
// lifecycle tests also check after each test with goleak.VerifyNone.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// safetyNet bounds every job and every await: it is never reached by a
// passing test, it only turns a hang into a failure.
const safetyNet = testutil.SafetyNet

// quietLogger keeps the job's start/stop logs out of the test output.
func quietLogger() sluice.Option {
	if os.Getenv("SLUICE_TEST_LOGS") != "" {
		return sluice.WithLogger(slog.Default())
	}
	return sluice.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// newEnv returns an environment with quiet logs and the given options.
func newEnv(opts ...sluice.Option) *sluice.Environment {
	return sluice.NewEnvironment(append([]sluice.Option{quietLogger()}, opts...)...)
}

// execute runs the job to its end under the safety net.
func execute(t *testing.T, env *sluice.Environment) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	err := env.Execute(ctx)
	if ctx.Err() != nil {
		t.Fatalf("job did not end within the safety net of %v: %v", safetyNet, err)
	}
	return err
}

// mustExecute runs the job and fails the test if it does not finish.
func mustExecute(t *testing.T, env *sluice.Environment) {
	t.Helper()
	if err := execute(t, env); err != nil {
		t.Fatalf("job failed: %v", err)
	}
}

// await and awaitClosed are the shared helpers' (internal/testutil).
var (
	await       = testutil.Await
	awaitClosed = testutil.AwaitClosed
)

func ints(from, to int64) []int64 {
	out := make([]int64, 0, to-from)
	for v := from; v < to; v++ {
		out = append(out, v)
	}
	return out
}

func sorted[T interface{ ~int | ~int64 | ~string }](s []T) []T {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// sameMultiset reports the first difference between two multisets, or "".
func sameMultiset[T interface{ ~int | ~int64 | ~string }](got, want []T) string {
	g, w := sorted(got), sorted(want)
	if slices.Equal(g, w) {
		return ""
	}
	gc, wc := map[T]int{}, map[T]int{}
	for _, v := range g {
		gc[v]++
	}
	for _, v := range w {
		wc[v]++
	}
	var diffs []string
	for v, n := range wc {
		if gc[v] != n {
			diffs = append(diffs, fmt.Sprintf("%v: got %d want %d", v, gc[v], n))
		}
	}
	for v, n := range gc {
		if _, ok := wc[v]; !ok {
			diffs = append(diffs, fmt.Sprintf("%v: got %d want 0", v, n))
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 10 {
		diffs = append(diffs[:10], "...")
	}
	return fmt.Sprintf("got %d records, want %d; differences: %v", len(got), len(want), diffs)
}

// once closes a channel at most once, from any goroutine.
type once struct {
	ch chan struct{}
	o  sync.Once
}

func newOnce() *once               { return &once{ch: make(chan struct{})} }
func (o *once) close()             { o.o.Do(func() { close(o.ch) }) }
func (o *once) C() <-chan struct{} { return o.ch }

// A step of a scriptSource reader.
type step struct {
	emit    bool
	v, ts   int64
	wm      bool
	wmTs    int64
	waitFor <-chan struct{}
}

func rec(v, ts int64) step            { return step{emit: true, v: v, ts: ts} }
func wmark(ts int64) step             { return step{wm: true, wmTs: ts} }
func waitFor(ch <-chan struct{}) step { return step{waitFor: ch} }

// scriptSource is a test source whose subtask i runs scripts[i]: emit a
// record, emit a watermark, or wait (NothingAvailable) until a channel is
// closed; then it ends. Bounded: it ends once its script is done.
type scriptSource struct {
	scripts [][]step
}

func newScriptSource(scripts ...[]step) *scriptSource {
	return &scriptSource{scripts: scripts}
}

func (s *scriptSource) Bounded() bool { return true }

func (s *scriptSource) NewReader(ctx source.ReaderContext) (source.Reader[int64], error) {
	if ctx.Parallelism != len(s.scripts) {
		return nil, fmt.Errorf("script source has %d scripts, run with parallelism %d", len(s.scripts), ctx.Parallelism)
	}
	return &scriptReader{steps: s.scripts[ctx.Subtask]}, nil
}

type scriptReader struct {
	steps []step
	next  int
	avail <-chan struct{}
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (r *scriptReader) PollNext(out source.Output[int64]) (source.Status, error) {
	r.avail = closedCh
	if r.next == len(r.steps) {
		return source.EndOfInput, nil
	}
	st := r.steps[r.next]
	switch {
	case st.emit:
		if err := out.Collect(st.v, st.ts); err != nil {
			return source.MoreAvailable, err
		}
	case st.wm:
		if err := out.EmitWatermark(st.wmTs); err != nil {
			return source.MoreAvailable, err
		}
	case st.waitFor != nil:
		select {
		case <-st.waitFor:
		default:
			r.avail = st.waitFor
			return source.NothingAvailable, nil
		}
	}
	r.next++
	return source.MoreAvailable, nil
}

func (r *scriptReader) Available() <-chan struct{} { return r.avail }
func (r *scriptReader) Close() error               { return nil }

// stopWithSavepoint stops job with a savepoint (without draining), waits
// for it to end, and returns the savepoint's path.
func stopWithSavepoint(t *testing.T, job *sluice.Job) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	sp, err := job.StopWithSavepoint(ctx, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("stopped job: %v", err)
	}
	return sp
}

// mustStart starts the job under the safety net; at the end of the test
// the job is cancelled (if still running) and waited for.
func mustStart(t *testing.T, env *sluice.Environment) *sluice.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		cancel()
		t.Fatalf("ExecuteAsync: %v", err)
	}
	t.Cleanup(func() {
		job.Cancel()
		_ = job.Wait()
		cancel()
	})
	return job
}
