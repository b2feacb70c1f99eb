package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
)

// relay passes records on; it stops in a record while held, until let
// go.
type relay struct {
	held, letGo chan struct{}
	hold        *atomic.Bool
	heldOnce    *sync.Once
}

func (r *relay) Map(v int64) (int64, error) {
	if r.hold.Load() {
		r.heldOnce.Do(func() { close(r.held) })
		<-r.letGo
	}
	return v, nil
}

// stallAfterSnapshot is a keyed function that, once it has taken the
// snapshot of a checkpoint, stops in its next record until let go.
type stallAfterSnapshot struct {
	snapshotted   chan int64
	stalled       chan struct{}
	letGo         chan struct{}
	stall         bool
	once          sync.Once
	snapshotCount int
	failed        bool // the stalled record failed the task, once
}

func (s *stallAfterSnapshot) SnapshotState(id int64) error {
	s.snapshotCount++
	if s.snapshotCount == 1 {
		s.stall = true
		s.snapshotted <- id
	}
	return nil
}

func (s *stallAfterSnapshot) ProcessElement(_ *sluice.KeyedContext[int64], v int64, out sluice.Collector[int64]) error {
	if s.stall {
		s.stall = false
		s.once.Do(func() { close(s.stalled) })
		<-s.letGo
		if !s.failed {
			// Restart from the checkpoint completed meanwhile.
			s.failed = true
			return fmt.Errorf("record %d after the snapshot: %w", v, errInjectedCrash)
		}
	}
	out.Collect(v)
	return nil
}

// TestUnalignedCheckpointCompletesWhileTaskIsInARecord: an unaligned
// checkpoint whose last barrier reaches a task while the task is in the
// middle of a long record completes without waiting for that record. The
// task reads two sources, one of them through a relay. It takes its
// snapshot at the first barrier (the direct source's); the relay is held
// in a record, so its barrier comes later, while the task is stalled in
// its next record; once that barrier has arrived, the input channel state
// is complete and the checkpoint completes, the task still stalled. The
// stalled record then fails the task; restored from that checkpoint, the
// job commits every record once.
func TestUnalignedCheckpointCompletesWhileTaskIsInARecord(t *testing.T) {
	completed := make(chan int64, 16)
	out := t.TempDir()
	env := newEnv(
		sluice.WithParallelism(1),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(3, 10*time.Millisecond)),
		sluice.WithBufferTimeout(time.Millisecond),
		sluice.WithCheckpointing(time.Hour, t.TempDir()), // triggered by the test only
		sluice.WithUnalignedCheckpoints(0),
		sluice.WithCheckpointListener(func(cs checkpoint.Stats) {
			if cs.Status == checkpoint.StatusCompleted {
				completed <- cs.ID
			}
		}),
	)
	const records, relayBase = 3000, 1 << 20
	gen := func(name string, base int64) *sluice.Stream[int64] {
		g := source.NewDatagen(func(i int64) int64 { return base + i }, source.DatagenCount(records), source.DatagenRate(2000))
		return sluice.FromSource(env, g, sluice.NoWatermarks[int64](), name, sluice.UID(name), sluice.Parallelism(1))
	}
	r := &relay{held: make(chan struct{}), letGo: make(chan struct{}), hold: &atomic.Bool{}, heldOnce: &sync.Once{}}
	relayed := sluice.RichMap[int64, int64](gen("via-relay", relayBase), r, sluice.Name("relay"), sluice.UID("relay"),
		sluice.Parallelism(1), sluice.DisableChaining())
	op := &stallAfterSnapshot{snapshotted: make(chan int64, 1), stalled: make(chan struct{}), letGo: make(chan struct{})}
	both := sluice.Union(gen("direct", 0), relayed)
	res := sluice.Process[int64, int64, int64](sluice.KeyBy(both, func(v int64) int64 { return v % 7 }), op,
		sluice.Name("stall"), sluice.UID("stall"), sluice.Parallelism(1))
	sluice.SinkTo(res, filesink.New[int64](out, codec.JSON[int64]{}), sluice.UID("files"), sluice.Parallelism(1))
	job := mustStart(t, env)
	var letGoRelay, letGoOp sync.Once
	t.Cleanup(func() { // before the job is cancelled (cleanups run last first)
		letGoRelay.Do(func() { close(r.letGo) })
		letGoOp.Do(func() { close(op.letGo) })
	})

	// The relay stops in a record: its barrier will wait for it.
	r.hold.Store(true)
	select {
	case <-r.held:
	case <-time.After(safetyNet):
		t.Fatal("the relay never got a record")
	}
	trig := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
		defer cancel()
		_, err := job.TriggerCheckpoint(ctx, false)
		trig <- err
	}()
	var id int64
	select {
	case id = <-op.snapshotted:
	case <-time.After(safetyNet):
		t.Fatal("the task never took the snapshot at the direct source's barrier")
	}
	select {
	case <-op.stalled:
	case <-time.After(safetyNet):
		t.Fatal("the task never got a record after its snapshot")
	}
	select {
	case got := <-completed:
		t.Fatalf("checkpoint %d completed before the relay's barrier arrived (checkpoint %d)", got, id)
	default:
	}
	// The relay's barrier now reaches the task while it is in a record.
	letGoRelay.Do(func() { close(r.letGo) })
	select {
	case got := <-completed:
		if got != id {
			t.Fatalf("checkpoint %d completed, want %d", got, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("checkpoint %d did not complete while the task was in a record: its last barrier waited for the record", id)
	}
	r.hold.Store(false)
	letGoOp.Do(func() { close(op.letGo) })
	if err := <-trig; err != nil {
		t.Fatalf("TriggerCheckpoint: %v", err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job failed: %v", err)
	}
	if job.Restarts() != 1 {
		t.Fatalf("%d restarts, want 1 (from checkpoint %d)", job.Restarts(), id)
	}
	got, err := filesink.ReadCommitted(out, codec.JSON[int64]{})
	if err != nil {
		t.Fatal(err)
	}
	want := append(ints(0, records), ints(relayBase, relayBase+records)...)
	if d := sameMultiset(got, want); d != "" {
		t.Fatalf("committed output after the restore from checkpoint %d: %s", id, d)
	}
}

// TestUnalignedEarlyInputExactlyOnce: unaligned checkpoints whose input
// channel state is often completed while the task is in a record (the
// counting task sleeps every few records) restore to exact output across
// crashes.
func TestUnalignedEarlyInputExactlyOnce(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	const records, keys = 20000, 50
	var early atomic.Int64
	r := crashCount(t, "unaligned", records, keys, 10*time.Millisecond, 10)
	r.mapCrash, r.opCrash, r.commitCrash = newCrashes(rng, 2, records), newCrashes(rng, 2, records), newCrashes(rng, 1, 20)
	r.extra = []sluice.Option{sluice.WithCheckpointListener(func(cs checkpoint.Stats) {
		if cs.Status != checkpoint.StatusCompleted {
			return
		}
		for _, ts := range cs.Tasks {
			if ts.Figures.EarlyInput {
				early.Add(1)
			}
		}
	})}
	restarts := r.run(t).Restarts()
	if crashes := r.crashed(); crashes < 3 || restarts < 1 {
		t.Fatalf("%d crashes injected, %d restarts; the test needs several", crashes, restarts)
	}
	if early.Load() == 0 {
		t.Fatal("no checkpoint completed its input channel state early: the test did not exercise it")
	}
	got := r.output(t)
	checkExactCounts(t, got, expectedCounts(records, keys))
	t.Logf("%d task checkpoints completed early, %d restarts, %d committed records", early.Load(), restarts, len(got))
}
