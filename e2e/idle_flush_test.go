package e2e

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// idleSource's one reader emits the record 0 in its first poll, then has
// nothing until the job's sink has seen it (or burstGuard passed); then
// it ends.
type idleSource struct {
	seen *once
	// whileIdle is set when the 0 reached the sink while the reader had
	// nothing more, before its input ended.
	whileIdle bool
}

func (s *idleSource) Bounded() bool { return true }

func (s *idleSource) NewReader(source.ReaderContext) (source.Reader[int64], error) {
	r := &idleReader{s: s, guard: time.After(burstGuard), avail: make(chan struct{})}
	go func() {
		select {
		case <-s.seen.C():
		case <-r.guard:
		}
		close(r.avail)
	}()
	return r, nil
}

type idleReader struct {
	s       *idleSource
	guard   <-chan time.Time
	avail   chan struct{}
	emitted bool
}

func (r *idleReader) PollNext(out source.Output[int64]) (source.Status, error) {
	if !r.emitted {
		r.emitted = true
		return source.NothingAvailable, out.Collect(0, source.NoTimestamp)
	}
	select {
	case <-r.s.seen.C():
		r.s.whileIdle = true
		return source.EndOfInput, nil
	default:
	}
	select {
	case <-r.avail: // the guard passed
		return source.EndOfInput, nil
	default:
		return source.NothingAvailable, nil
	}
}

// Available is ready when the sink saw the 0 or the guard passed.
func (r *idleReader) Available() <-chan struct{} { return r.avail }

func (r *idleReader) Close() error { return nil }

// TestIdleTaskSendsItsBuffers: a task that has nothing to read sends its
// partly filled output buffers at once, not when the buffer timeout (here
// an hour) passes: the timeout bounds the wait of a busy task's records.
// The source emits one record and goes idle until that record has
// crossed the exchange to the next task; without the flush at idle the
// record waits for the end of input (after burstGuard).
func TestIdleTaskSendsItsBuffers(t *testing.T) {
	src := &idleSource{seen: newOnce()}
	env := newEnv(sluice.WithParallelism(2), sluice.WithBufferTimeout(time.Hour))
	in := sluice.FromSource(env, src, sluice.NoWatermarks[int64](), "idle", sluice.Parallelism(1))
	seen := sluice.Map(in, func(v int64) (int64, error) { src.seen.close(); return v, nil })
	sluice.SinkTo(seen, sink.NewDiscard[int64]())
	mustExecute(t, env)
	if !src.whileIdle {
		t.Fatalf("the record reached the next task only at the end of input (after %v idle): the idle source task kept its buffer for the buffer timeout", burstGuard)
	}
}
