package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
)

// The async I/O tests call a slow in-process service for every record of
// a datagen, with capacity 1 and 100, ordered and unordered, and crashes
// injected in the calls (the service fails a call while others are in
// flight), after the operator, and in the commits. The committed results
// must be the service's answer for every record exactly once, in the
// records' order for ordered waits: the inputs in flight at a checkpoint
// come back from it and are called again.

// slowService answers v with answer(v) after a delay of 0-3 ms, on its
// own goroutines, and counts the calls in flight.
type slowService struct {
	inFlight, most, calls atomic.Int64
	crash                 *crashes
}

func answer(v int64) int64 { return v*10 + 7 }

func (s *slowService) call(ctx context.Context, v int64, done func(int64, error)) {
	n := s.inFlight.Add(1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	s.calls.Add(1)
	crash := s.crash.hit()
	go func() {
		tm := time.NewTimer(time.Duration(uint64(v)*2654435761%4) * time.Millisecond)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done(): // the operator gave up on the call (its task failed)
		}
		s.inFlight.Add(-1)
		switch {
		case ctx.Err() != nil:
			done(0, ctx.Err())
		case crash:
			done(0, fmt.Errorf("service call for %d: %w", v, errInjectedCrash))
		default:
			done(answer(v), nil)
		}
	}()
}

type asyncRun struct {
	records, rate int64
	ordered       bool
	capacity      int
	svc           *slowService
	mapCrash      *crashes
	commitCrash   *crashes
	outDir, cpDir string
	par           int // of the async operator (0: 1)
	seen          *atomic.Int64
	opts          []sluice.Option
}

func (r *asyncRun) env() *sluice.Environment {
	env := sluice.NewEnvironment(append([]sluice.Option{
		sluice.WithParallelism(1),
		sluice.WithBufferTimeout(2 * time.Millisecond),
		sluice.WithCheckpointing(10*time.Millisecond, r.cpDir),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(100, 5*time.Millisecond)),
		quietLogger(),
	}, r.opts...)...)
	par := sluice.Parallelism(max(r.par, 1))
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(r.records),
		source.DatagenRate(float64(r.rate)), source.DatagenTimestamps(func(i int64) int64 { return i }))
	s := sluice.FromSource(env, gen, sluice.ForMonotonousTimestamps[int64](), "gen", sluice.UID("gen"))
	svc, seen := r.svc, r.seen
	fn := sluice.AsyncFunc[int64, [2]int64](func(ctx context.Context, v int64, rf sluice.ResultFuture[[2]int64]) {
		if seen != nil {
			seen.Add(1)
		}
		svc.call(ctx, v, func(a int64, err error) {
			if err != nil {
				rf.CompleteExceptionally(err)
				return
			}
			rf.Complete([2]int64{v, a})
		})
	})
	var res *sluice.Stream[[2]int64]
	if r.ordered {
		res = sluice.OrderedWait(s, fn, 10*time.Second, r.capacity, sluice.UID("lookup"), par)
	} else {
		res = sluice.UnorderedWait(s, fn, 10*time.Second, r.capacity, sluice.UID("lookup"), par)
	}
	mc := r.mapCrash
	res = sluice.Map(res, func(v [2]int64) ([2]int64, error) {
		if mc.hit() {
			return v, fmt.Errorf("map of %v: %w", v, errInjectedCrash)
		}
		return v, nil
	}, sluice.UID("maybe-crash"), par)
	cc := r.commitCrash
	fs := filesink.New[[2]int64](r.outDir, codec.JSON[[2]int64]{}, filesink.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		filesink.WithCommitHook(func(id int64) error {
			if cc.hit() {
				return fmt.Errorf("commit of checkpoint %d: %w", id, errInjectedCrash)
			}
			return nil
		}))
	sluice.SinkTo(res, fs, sluice.UID("files"))
	return env
}

func TestAsyncIOExactlyOnceUnderFailures(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, c := range []struct {
		capacity int
		ordered  bool
	}{{1, true}, {100, true}, {1, false}, {100, false}} {
		t.Run(fmt.Sprintf("capacity %d ordered %v", c.capacity, c.ordered), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(c.capacity)))
			records := int64(3000)
			if c.capacity == 1 {
				records = 400 // one call at a time, of 1.5 ms on average
			}
			r := &asyncRun{
				records: records, rate: 20000, ordered: c.ordered, capacity: c.capacity,
				svc:         &slowService{crash: newCrashes(rng, 2, records)},
				mapCrash:    newCrashes(rng, 1, records),
				commitCrash: newCrashes(rng, 1, 10),
				outDir:      t.TempDir(), cpDir: t.TempDir(),
			}
			job, err := r.env().ExecuteAsync(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := job.Wait(); err != nil {
				t.Fatalf("job failed: %v", err)
			}
			if f := r.svc.crash.fired.Load(); f == 0 {
				t.Fatal("no service call crashed")
			}
			if m := r.svc.most.Load(); m > int64(c.capacity) {
				t.Fatalf("%d calls in flight at once, capacity %d", m, c.capacity)
			}
			if c.capacity > 1 && r.svc.most.Load() < 2 {
				t.Fatalf("at most %d call in flight with capacity %d: the calls did not overlap", r.svc.most.Load(), c.capacity)
			}
			got, err := filesink.ReadCommitted(r.outDir, codec.JSON[[2]int64]{})
			if err != nil {
				t.Fatal(err)
			}
			seen := make([]int, records)
			for i, g := range got {
				if g[0] < 0 || g[0] >= records || g[1] != answer(g[0]) {
					t.Fatalf("committed result %d is %v, not a record and its answer", i, g)
				}
				seen[g[0]]++
				if c.ordered && g[0] != int64(i) {
					t.Fatalf("ordered wait: committed result %d is for record %d", i, g[0])
				}
			}
			for v, n := range seen {
				if n != 1 {
					t.Fatalf("record %d committed %d times", v, n)
				}
			}
			t.Logf("%d records, %d calls, %d restarts, at most %d in flight", records, r.svc.calls.Load(), job.Restarts(), r.svc.most.Load())
		})
	}
}

// TestAsyncIORescale stops a job with the async operator at parallelism 2
// with a savepoint while calls are in flight, and finishes the input from
// it at parallelism 3: the inputs in flight (operator list state) are
// dealt to the new subtasks and called again; every record's answer is
// committed once.
func TestAsyncIORescale(t *testing.T) {
	const records = 3000
	seen := &atomic.Int64{}
	r := &asyncRun{records: records, rate: 3000, capacity: 100, par: 2, svc: &slowService{}, seen: seen,
		outDir: t.TempDir(), cpDir: t.TempDir()}
	job, err := r.env().ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	await(t, "a third of the input", func() bool { return seen.Load() > records/3 })
	sp := stopWithSavepoint(t, job)
	if n := seen.Load(); n >= records {
		t.Fatalf("the first run called all %d records; the test needs a stop midway", n)
	}
	r2 := *r
	r2.par, r2.rate, r2.seen = 3, 1e6, nil
	r2.opts = []sluice.Option{sluice.WithRestoreFrom(sp)}
	mustExecute(t, r2.env())
	got, err := filesink.ReadCommitted(r.outDir, codec.JSON[[2]int64]{})
	if err != nil {
		t.Fatal(err)
	}
	seenOut := make([]int, records)
	for i, g := range got {
		if g[0] < 0 || g[0] >= records || g[1] != answer(g[0]) {
			t.Fatalf("committed result %d is %v, not a record and its answer", i, g)
		}
		seenOut[g[0]]++
	}
	for v, n := range seenOut {
		if n != 1 {
			t.Fatalf("record %d committed %d times", v, n)
		}
	}
}
