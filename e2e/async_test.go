package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
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

// asyncJob is the async tests' job: records records at rate with event
// timestamps, each looked up in svc by an ordered or unordered wait of
// capacity, at the parallelism opPar (0: 1), then through the
// maybe-crash map; parallelism 1 elsewhere, checkpoints every 10 ms.
func asyncJob(t *testing.T, records int64, rate float64, ordered bool, capacity int, svc *slowService) *job[[2]int64] {
	return &job[[2]int64]{opts: crashOptions(t.TempDir(), 10*time.Millisecond, sluice.WithParallelism(1)), records: records, rate: rate, outDir: t.TempDir(),
		build: func(j *job[[2]int64], env *sluice.Environment) *sluice.Stream[[2]int64] {
			par := sluice.Parallelism(max(j.opPar, 1))
			s := datagen(j, env, "gen", index, index, sluice.ForMonotonousTimestamps[int64]())
			fn := sluice.AsyncFunc[int64, [2]int64](func(ctx context.Context, v int64, rf sluice.ResultFuture[[2]int64]) {
				svc.call(ctx, v, func(a int64, err error) {
					if err != nil {
						rf.CompleteExceptionally(err)
						return
					}
					rf.Complete([2]int64{v, a})
				})
			})
			var res *sluice.Stream[[2]int64]
			if ordered {
				res = sluice.OrderedWait(s, fn, 10*time.Second, capacity, sluice.UID("lookup"), par)
			} else {
				res = sluice.UnorderedWait(s, fn, 10*time.Second, capacity, sluice.UID("lookup"), par)
			}
			return maybeCrash(j, res, "maybe-crash", par)
		}}
}

// checkAnswers fails t unless got holds every record's answer once (in
// the records' order if ordered).
func checkAnswers(t *testing.T, got [][2]int64, records int64, ordered bool) {
	t.Helper()
	seen := make([]int, records)
	for i, g := range got {
		if g[0] < 0 || g[0] >= records || g[1] != answer(g[0]) {
			t.Fatalf("committed result %d is %v, not a record and its answer", i, g)
		}
		seen[g[0]]++
		if ordered && g[0] != int64(i) {
			t.Fatalf("ordered wait: committed result %d is for record %d", i, g[0])
		}
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("record %d committed %d times", v, n)
		}
	}
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
			svc := &slowService{crash: newCrashes(rng, 2, records)}
			r := asyncJob(t, records, 20000, c.ordered, c.capacity, svc)
			r.mapCrash, r.commitCrash = newCrashes(rng, 1, records), newCrashes(rng, 1, 10)
			job := r.run(t)
			if f := svc.crash.count(); f == 0 {
				t.Fatal("no service call crashed")
			}
			if m := svc.most.Load(); m > int64(c.capacity) {
				t.Fatalf("%d calls in flight at once, capacity %d", m, c.capacity)
			}
			if c.capacity > 1 && svc.most.Load() < 2 {
				t.Fatalf("at most %d call in flight with capacity %d: the calls did not overlap", svc.most.Load(), c.capacity)
			}
			checkAnswers(t, r.output(t), records, c.ordered)
			t.Logf("%d records, %d calls, %d restarts, at most %d in flight", records, svc.calls.Load(), job.Restarts(), svc.most.Load())
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
	svc := &slowService{}
	r := asyncJob(t, records, 3000, false, 100, svc)
	r.opPar = 2
	job := r.start(t)
	await(t, "a third of the input", func() bool { return svc.calls.Load() > records/3 })
	sp := stopWithSavepoint(t, job)
	if n := svc.calls.Load(); n >= records {
		t.Fatalf("the first run called all %d records; the test needs a stop midway", n)
	}
	r2 := r.rescaled(3, 1e6, sluice.WithRestoreFrom(sp))
	mustExecute(t, r2.env())
	checkAnswers(t, r2.output(t), records, false)
}
