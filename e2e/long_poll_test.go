package e2e

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// burstSource's one reader emits, in its first PollNext, the record 0
// and then fillers (1) until the job's sink has seen the 0 (or
// burstGuard passed), as a reader that emits a batch per poll through a
// slow chained operator does; then it ends.
type burstSource struct {
	seen *once
	// duringPoll is set when the 0 reached the sink before the poll that
	// emitted it returned.
	duringPoll bool
}

// burstGuard bounds the first poll: only reached when the 0 is never
// sent while the poll lasts.
const burstGuard = 5 * time.Second

func (s *burstSource) Bounded() bool { return true }

func (s *burstSource) NewReader(source.ReaderContext) (source.Reader[int64], error) {
	return &burstReader{s: s}, nil
}

type burstReader struct {
	s     *burstSource
	polls int
}

func (r *burstReader) PollNext(out source.Output[int64]) (source.Status, error) {
	if r.polls++; r.polls > 1 {
		return source.EndOfInput, nil
	}
	if err := out.Collect(0, source.NoTimestamp); err != nil {
		return source.MoreAvailable, err
	}
	for end := time.Now().Add(burstGuard); time.Now().Before(end); {
		select {
		case <-r.s.seen.C():
			r.s.duringPoll = true
			return source.MoreAvailable, nil
		case <-time.After(200 * time.Microsecond):
		}
		if err := out.Collect(1, source.NoTimestamp); err != nil {
			return source.MoreAvailable, err
		}
	}
	return source.MoreAvailable, nil
}

func (r *burstReader) Available() <-chan struct{} { return closedCh }
func (r *burstReader) Close() error               { return nil }

// TestBufferTimeoutFlushesDuringALongPoll: the buffer timeout sends a
// record written in the middle of a long source poll while the poll
// lasts, as Flink's output flusher does, instead of after the poll. The
// source task's chain splits the 0 and the fillers to two exchanges;
// the 0's buffer never fills, so only the buffer timeout sends it. The
// reader keeps emitting fillers until the 0 reached the sink: with the
// flush done only between polls, the 0 waited for the poll's end (after
// hundreds of milliseconds, the Kafka reader's batch through the
// benchmark's paced map after a restart).
func TestBufferTimeoutFlushesDuringALongPoll(t *testing.T) {
	src := &burstSource{seen: newOnce()}
	env := newEnv(sluice.WithParallelism(2), sluice.WithBufferTimeout(time.Millisecond))
	in := sluice.FromSource(env, src, sluice.NoWatermarks[int64](), "burst", sluice.Parallelism(1))
	zero := sluice.Filter(in, func(v int64) (bool, error) { return v == 0, nil }, sluice.Parallelism(1))
	fillers := sluice.Filter(in, func(v int64) (bool, error) { return v != 0, nil }, sluice.Parallelism(1))
	seen := sluice.Map(zero, func(v int64) (int64, error) { src.seen.close(); return v, nil })
	sluice.SinkTo(seen, sink.NewDiscard[int64]())
	sluice.SinkTo(sluice.Map(fillers, func(v int64) (int64, error) { return v, nil }), sink.NewDiscard[int64]())
	mustExecute(t, env)
	if !src.duringPoll {
		t.Fatalf("the record 0 did not reach its consumer while the poll that emitted it lasted (%v, fillers written all along): the buffer timeout did not send it", burstGuard)
	}
}

// yieldSource's one reader emits, in its first poll, records until its
// output says the task wants its goroutine back (source.Yielder), or
// burstGuard passed; then it ends.
type yieldSource struct {
	// yielded is set when the first poll ended because the task asked.
	yielded bool
	// notYielder is set when the output is not a source.Yielder.
	notYielder bool
}

func (s *yieldSource) Bounded() bool { return true }

func (s *yieldSource) NewReader(source.ReaderContext) (source.Reader[int64], error) {
	return &yieldReader{s: s}, nil
}

type yieldReader struct {
	s     *yieldSource
	polls int
}

func (r *yieldReader) PollNext(out source.Output[int64]) (source.Status, error) {
	if r.polls++; r.polls > 1 {
		return source.EndOfInput, nil
	}
	y, ok := out.(source.Yielder)
	if !ok {
		r.s.notYielder = true
		return source.MoreAvailable, nil
	}
	for end := time.Now().Add(burstGuard); time.Now().Before(end); {
		if err := out.Collect(1, source.NoTimestamp); err != nil {
			return source.MoreAvailable, err
		}
		if y.ShouldYield() {
			r.s.yielded = true
			return source.MoreAvailable, nil
		}
		time.Sleep(200 * time.Microsecond)
	}
	return source.MoreAvailable, nil
}

func (r *yieldReader) Available() <-chan struct{} { return closedCh }
func (r *yieldReader) Close() error               { return nil }

// TestSourcePollYieldsToMail: the output a source task gives its reader
// tells a reader that emits a batch per poll when the task has mail (here
// the buffer timeout's), so that the mail (a checkpoint's trigger) waits
// for one record and not the batch. A reader that emits until told, with
// the runtime never telling, reaches burstGuard.
func TestSourcePollYieldsToMail(t *testing.T) {
	src := &yieldSource{}
	env := newEnv(sluice.WithParallelism(2), sluice.WithBufferTimeout(time.Millisecond))
	in := sluice.FromSource(env, src, sluice.NoWatermarks[int64](), "batches", sluice.Parallelism(1))
	sluice.SinkTo(sluice.Map(in, func(v int64) (int64, error) { return v, nil }), sink.NewDiscard[int64]())
	mustExecute(t, env)
	switch {
	case src.notYielder:
		t.Fatal("the output given to PollNext is not a source.Yielder")
	case !src.yielded:
		t.Fatalf("the reader emitted for %v without being told to yield, while the buffer timeout (1 ms) put mail every millisecond", burstGuard)
	}
}
