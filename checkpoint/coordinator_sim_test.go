package checkpoint

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// TestCoordinatorInvariants drives coordinators with random configurations
// through random acknowledgements, declines, metadata failures, savepoints
// and timeouts, and checks after every call:
//   - ids only grow, each checkpoint ends once (completed or aborted);
//   - at most max-concurrent checkpoints (savepoints aside) are pending;
//   - a periodic checkpoint never starts before the min pause after the
//     last completion;
//   - no completed checkpoint references a deleted shared file, and no
//     retained one loses a file to a discard (invariant 3);
//   - the retained checkpoints are the newest completed ones;
//   - the job fails exactly when the consecutive counted failures exceed the
//     tolerated number.
func TestCoordinatorInvariants(t *testing.T) {
	seen := map[string]int{}
	for seed := uint64(0); seed < 150; seed++ {
		simulateCoordinator(t, seed, seen)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	for _, what := range []string{"completed", "aborted", "discarded", "retention", "fail-job", "savepoint", "reuse", "metadata-failure"} {
		if seen[what] == 0 {
			t.Errorf("no %s in any run: the simulation misses a path (%v)", what, seen)
		}
	}
}

func simulateCoordinator(t *testing.T, seed uint64, seen map[string]int) {
	rng := rand.New(rand.NewPCG(seed, 3))
	cfg := Config{
		Interval:            time.Second,
		Timeout:             []time.Duration{1500 * time.Millisecond, 4 * time.Second}[rng.IntN(2)],
		MinPause:            []time.Duration{0, 500 * time.Millisecond, 2 * time.Second}[rng.IntN(3)],
		MaxConcurrent:       1 + rng.IntN(3),
		TolerableFailed:     []int{0, 1, 3, 100}[rng.IntN(4)],
		RetainedCheckpoints: 1 + rng.IntN(3),
		Directory:           "/ck",
	}
	tasks := []TaskInfo{{ID: 0, Vertex: "src", Operators: []string{"src"}}, {ID: 1, Vertex: "src", Subtask: 1, Operators: []string{"src"}},
		{ID: 2, Vertex: "sink", Operators: []string{"sink"}, Upstream: []TaskID{0, 1}}}
	c, err := NewCoordinator("job", cfg, tasks)
	if err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("seed %d %+v: %s\ncoordinator: %s", seed, cfg, fmt.Sprintf(format, args...), c)
	}

	now := time.UnixMilli(0)
	c.Start(now)
	var (
		lastID        int64
		savepoints    = map[int64]bool{}
		open          = map[int64]bool{} // triggered, not ended
		ended         = map[int64]string{}
		writing       = map[int64]bool{}
		metadata      = map[int64]*storage.Metadata{}
		completed     []int64 // notified complete, ascending
		deleted       = map[string]bool{}
		lastComplete  time.Time
		hasComplete   bool
		lastSucceeded int64
		failures      int
		failedJob     bool
		upload        int
	)
	check := func(acts []CoordinatorAction) {
		t.Helper()
		sawFail := false
		for _, a := range acts {
			switch a := a.(type) {
			case Trigger:
				if a.Barrier.ID <= lastID {
					fail("trigger %d after %d", a.Barrier.ID, lastID)
				}
				lastID = a.Barrier.ID
				open[a.Barrier.ID] = true
				if a.Barrier.Options.Kind == KindSavepoint {
					savepoints[a.Barrier.ID] = true
				} else if hasComplete && now.Before(lastComplete.Add(cfg.MinPause)) {
					fail("checkpoint %d triggered at %d, within the min pause after the completion at %d", a.Barrier.ID, now.UnixMilli(), lastComplete.UnixMilli())
				}
			case WriteMetadata:
				id := a.Metadata.CheckpointID
				for _, f := range a.Metadata.SharedFiles() {
					if deleted[f] {
						fail("checkpoint %d completes with deleted shared file %s", id, f)
					}
				}
				metadata[id] = a.Metadata
				writing[id] = true
			case NotifyComplete:
				seen["completed"]++
				end(ended, open, a.ID, "completed", fail)
				if !savepoints[a.ID] {
					completed = append(completed, a.ID)
					lastComplete, hasComplete = now, true
					if a.ID > lastSucceeded {
						lastSucceeded, failures = a.ID, 0
					}
				}
			case SavepointCompleted:
				seen["savepoint"]++
				if !a.Stop {
					end(ended, open, a.ID, "completed", fail)
					lastComplete, hasComplete = now, true
				}
			case NotifyAborted:
				seen["aborted"]++
				end(ended, open, a.ID, "aborted", fail)
				if !savepoints[a.ID] && a.Reason.Counted() && a.ID > lastSucceeded {
					failures++
				}
			case Discard:
				if a.SavepointDir != "" {
					continue
				}
				if open[a.ID] {
					// its metadata was written after a newer checkpoint completed
					end(ended, open, a.ID, "discarded", fail)
					seen["discarded"]++
				} else if slices.Contains(completed, a.ID) {
					seen["retention"]++
				}
				for _, f := range a.Shared {
					deleted[f] = true
				}
				for _, id := range c.Retained() {
					if md := metadata[id]; md != nil {
						for _, f := range md.SharedFiles() {
							if deleted[f] {
								fail("discard of %d deleted %s, referenced by retained checkpoint %d", a.ID, f, id)
							}
						}
					}
				}
			case FailJob:
				seen["fail-job"]++
				sawFail = true
				failedJob = true
				if !errors.Is(a.Err, ErrTolerableFailuresExceeded) {
					fail("fail-job error %v", a.Err)
				}
			case SavepointFailed:
			case AllowFinish:
				fail("unexpected %v", a)
			}
		}
		if (failures > cfg.TolerableFailed) != failedJob || sawFail && c.stopped != true {
			fail("%d consecutive counted failures, %d tolerated, job failed: %t", failures, cfg.TolerableFailed, failedJob)
		}
		n := 0
		for id := range c.pending {
			if !savepoints[id] {
				n++
			}
		}
		if n > cfg.MaxConcurrent {
			fail("%d checkpoints pending, max %d", n, cfg.MaxConcurrent)
		}
		want := completed[max(0, len(completed)-cfg.RetainedCheckpoints):]
		if got := c.Retained(); !failedJob && !slices.Equal(got, want) {
			fail("retained %v, want the newest completed %v", got, want)
		}
	}

	for step := 0; step < 300 && !failedJob; step++ {
		now = now.Add(100 * time.Millisecond)
		check(c.Tick(now))
		if rng.IntN(60) == 0 && !failedJob {
			_, acts, err := c.TriggerSavepoint(now, SavepointRequest{Dir: fmt.Sprintf("/sp/%d", step)})
			if err != nil {
				fail("savepoint: %v", err)
			}
			check(acts)
		}
		for _, id := range slices.Sorted(maps.Keys(open)) {
			p := c.pending[id]
			if p == nil || failedJob {
				continue
			}
			if writing[id] {
				if rng.IntN(3) == 0 {
					var werr error
					if rng.IntN(5) == 0 {
						seen["metadata-failure"]++
						werr = errors.New("disk full")
					}
					delete(writing, id)
					check(c.MetadataWritten(now, id, "chk", werr))
				}
				continue
			}
			for _, task := range slices.Sorted(maps.Keys(p.awaiting)) {
				switch r := rng.IntN(40); {
				case r < 8:
					var files []storage.NamedHandle
					if !savepoints[id] {
						upload++
						files = append(files, storage.NamedHandle{Name: "new", Handle: storage.StateHandle{Path: fmt.Sprintf("u%d", upload), Shared: true}})
						// Reuse a file of the newest checkpoint known complete.
						if len(completed) > 0 {
							if md := metadata[completed[len(completed)-1]]; md != nil {
								for _, f := range md.SharedFiles() {
									files = append(files, storage.NamedHandle{Name: "old-" + f, Handle: storage.StateHandle{Path: f, Shared: true}})
									seen["reuse"]++
									break
								}
							}
						}
					}
					st := storage.SubtaskState{OperatorUID: "op", Subtask: int(task)}
					if files != nil {
						st.KeyedState = []storage.KeyedStateHandle{{Files: files}}
					}
					check(c.Ack(now, task, id, []storage.SubtaskState{st}, TaskFigures{}))
				case r == 8:
					reasons := []Reason{ReasonAsyncFailure, ReasonDeclined, ReasonCancelMarker, ReasonSubsumed, ReasonTaskNotReady}
					check(c.Decline(now, task, id, reasons[rng.IntN(len(reasons))], errors.New("injected")))
				}
				if c.pending[id] == nil {
					break
				}
			}
		}
	}
}

func end(ended map[int64]string, open map[int64]bool, id int64, how string, fail func(string, ...any)) {
	if prev := ended[id]; prev != "" {
		fail("checkpoint %d %s after it was %s", id, how, prev)
	}
	if !open[id] {
		fail("checkpoint %d %s but never triggered", id, how)
	}
	ended[id] = how
	delete(open, id)
}
