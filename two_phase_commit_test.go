package sluice_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// heldSink is a two-phase-commit sink whose writer pre-commits
// asynchronously (sink.AsyncPrecommittingWriter): the pre-commit of the
// first checkpoint with records is held until the test releases it, as a
// Kafka transaction's pre-commit waits for the broker's acknowledgements.
type heldSink struct {
	release  chan struct{}
	released atomic.Bool

	mu      sync.Mutex
	held    int64         // the checkpoint whose pre-commit is held
	after   int           // records written since held's barrier
	wentOn  chan struct{} // closed at the 50th record after held's barrier
	commits []heldCommit
}

type heldCommit struct {
	checkpoint   int64
	committables int
	released     bool
}

func (s *heldSink) NewWriter(sink.WriterContext) (sink.Writer[source.Record], error) {
	return &heldWriter{s: s}, nil
}

func (s *heldSink) NewCommitter(sink.WriterContext) (sink.Committer, error) {
	return heldCommitter{s}, nil
}

type heldWriter struct {
	s       *heldSink
	written int // records since the last pre-commit
}

func (w *heldWriter) Write(source.Record, int64) error {
	w.written++
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.held > 0 {
		if w.s.after++; w.s.after == 50 {
			close(w.s.wentOn)
		}
	}
	return nil
}

func (w *heldWriter) Flush(bool) error { return nil }
func (w *heldWriter) Close() error     { return nil }

func (w *heldWriter) PrepareCommit(id int64) ([][]byte, error) {
	wait, err := w.PrepareCommitAsync(id)
	if err != nil || wait == nil {
		return nil, err
	}
	return wait()
}

func (w *heldWriter) PrepareCommitAsync(id int64) (func() ([][]byte, error), error) {
	if w.written == 0 {
		return nil, nil
	}
	w.written = 0
	c := [][]byte{fmt.Appendf(nil, "txn-%d", id)}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.held != 0 {
		return func() ([][]byte, error) { return c, nil }, nil
	}
	w.s.held = id
	return func() ([][]byte, error) {
		<-w.s.release
		return c, nil
	}, nil
}

type heldCommitter struct{ s *heldSink }

func (c heldCommitter) Commit(_ context.Context, id int64, committables [][]byte) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.commits = append(c.s.commits, heldCommit{id, len(committables), c.s.released.Load()})
	return nil
}

func (heldCommitter) Close() error { return nil }

// A checkpoint completes, and its transactions are committed, only once
// the sink's pre-commit of that checkpoint is done (for Kafka: every
// record of the transaction acknowledged), although the pre-commit runs
// in the checkpoint's asynchronous part and the task goes on processing
// records meanwhile.
func TestCheckpointWaitsForAsyncPrecommit(t *testing.T) {
	s := &heldSink{release: make(chan struct{}), wentOn: make(chan struct{})}
	// heldDone says, when the held checkpoint completes, whether its
	// pre-commit had returned by then.
	heldDone := make(chan bool, 1)
	env := testjob.NewEnv(sluice.WithParallelism(1), sluice.WithCheckpointing(20*time.Millisecond, t.TempDir()),
		sluice.WithCheckpointListener(func(cs checkpoint.Stats) {
			s.mu.Lock()
			held := s.held
			s.mu.Unlock()
			if cs.Status == checkpoint.StatusCompleted && held != 0 && cs.ID == held {
				heldDone <- s.released.Load()
			}
		}))
	gen := source.NewDatagen(source.RandomRecords(1, 8, 4), source.DatagenRate(2000))
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "gen",
		sluice.WithCodec[source.Record](source.RecordCodec{}))
	sluice.SinkTo[source.Record](recs, s, sluice.Name("held"))
	job := testjob.MustStart(t, env)
	release := sync.OnceFunc(func() {
		s.released.Store(true)
		close(s.release)
	})
	t.Cleanup(release) // before the job's cancellation, should the test fail first

	// The task processes 50 records of the next interval while the held
	// checkpoint waits for its pre-commit.
	select {
	case <-s.wentOn:
	case <-heldDone:
		t.Fatal("the checkpoint completed while its pre-commit was held")
	case <-job.Done():
		t.Fatalf("job ended: %v", job.Wait())
	}
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	release()
	select {
	case ok := <-heldDone:
		if !ok {
			t.Fatalf("checkpoint %d completed before its pre-commit returned", held)
		}
	case <-job.Done():
		t.Fatalf("job ended: %v", job.Wait())
	}
	testjob.Await(t, fmt.Sprintf("checkpoint %d committed", held), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.commits) > 0 && s.commits[len(s.commits)-1].checkpoint >= held
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.commits {
		if c.checkpoint >= held && !c.released {
			t.Fatalf("checkpoint %d committed before the pre-commit of checkpoint %d returned", c.checkpoint, held)
		}
		if c.checkpoint == held && c.committables != 1 {
			t.Fatalf("checkpoint %d committed %d committables, want its 1", held, c.committables)
		}
	}
}
