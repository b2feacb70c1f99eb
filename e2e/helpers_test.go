package e2e

import (
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/source"
)

// TestMain fails the package if any goroutine outlives the tests; the
// lifecycle tests also check after each test with goleak.VerifyNone.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The helpers every job test shares (internal/testjob, internal/testutil):
// safetyNet bounds every job and every await; it is never reached by a
// passing test, it only turns a hang into a failure.
const safetyNet = testutil.SafetyNet

var (
	newEnv            = testjob.NewEnv
	execute           = testjob.Execute
	mustExecute       = testjob.MustExecute
	mustStart         = testjob.MustStart
	stopWithSavepoint = testjob.StopWithSavepoint
	await             = testutil.Await
	awaitClosed       = testutil.AwaitClosed
)

func ints(from, to int64) []int64 {
	out := make([]int64, 0, to-from)
	for v := from; v < to; v++ {
		out = append(out, v)
	}
	return out
}

// sameMultiset reports how got differs from want as multisets (records
// repeated, missing, not expected: sluicetest.CheckExactlyOnce), or "".
func sameMultiset[T comparable](got, want []T) string {
	if err := sluicetest.CheckExactlyOnce(got, want); err != nil {
		return err.Error()
	}
	return ""
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
