package checkpoint

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint/snapshot"
)

// phasesJob is two sources feeding two tasks each reading both.
func phasesJob(t *testing.T) *Coordinator {
	t.Helper()
	tasks := []TaskInfo{
		{ID: 0, Vertex: "src", Subtask: 0, Parallelism: 2, Operators: []string{"src"}},
		{ID: 1, Vertex: "src", Subtask: 1, Parallelism: 2, Operators: []string{"src"}},
		{ID: 2, Vertex: "count", Subtask: 0, Parallelism: 2, Operators: []string{"count"}, Upstream: []TaskID{0, 1}},
		{ID: 3, Vertex: "count", Subtask: 1, Parallelism: 2, Operators: []string{"count"}, Upstream: []TaskID{0, 1}},
	}
	c, err := NewCoordinator("job", Config{Interval: time.Hour, Directory: "/checkpoints", Mode: ExactlyOnce, Unaligned: true}, tasks)
	if err != nil {
		t.Fatal(err)
	}
	c.Start(time.UnixMilli(0))
	return c
}

func phasesStates(c *Coordinator, task TaskID) []snapshot.SubtaskState {
	info := c.byID[task]
	return []snapshot.SubtaskState{{OperatorUID: info.Operators[0], Subtask: info.Subtask, Parallelism: info.Parallelism}}
}

// TestCheckpointPhases drives checkpoints with random figures and ack
// order through the coordinator and checks its breakdown against a plain
// evaluation along the task acknowledging last: every part present and
// non-negative, the parts to the acknowledgement summing to the end-to-end
// duration and all of them to the completion.
func TestCheckpointPhases(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 5))
	ms := func(n int) time.Duration { return time.Duration(rng.IntN(n*1000)) * time.Microsecond }
	for round := range 200 {
		c := phasesJob(t)
		trigger := time.Unix(100, 0).Add(ms(1000))
		acts, err := c.RequestCheckpoint(trigger, KindCheckpoint)
		if err != nil {
			t.Fatal(err)
		}
		tr := acts[len(acts)-1].(Trigger)
		id := tr.Barrier.ID
		if len(tr.Tasks) != 2 {
			t.Fatalf("triggered %v, want the two sources", tr.Tasks)
		}
		// Figures drawn freely: in some rounds they exceed the time to the
		// acknowledgement (a start delay measured from a millisecond
		// timestamp overstates), and the parts must still fit.
		figs := map[TaskID]TaskFigures{}
		ackAt := map[TaskID]time.Time{}
		order := rng.Perm(4)
		at := trigger
		for _, i := range order {
			task := TaskID(i)
			f := TaskFigures{StartDelay: ms(3), Alignment: ms(2), Sync: ms(1), Async: ms(4)}
			if task >= 2 {
				f.StartDelay += ms(3)
			}
			figs[task] = f
			at = at.Add(ms(3))
			if round%4 != 0 {
				// The acknowledgement comes after the task's own parts.
				if own := trigger.Add(f.StartDelay + f.Alignment + f.Sync + f.Async + ms(1)); own.After(at) {
					at = own
				}
			}
			ackAt[task] = at
			acts = c.Ack(at, task, id, phasesStates(c, task), f)
		}
		if len(acts) != 1 {
			t.Fatalf("round %d: after every ack %v, want write-metadata", round, acts)
		}
		written := at.Add(ms(5))
		c.MetadataWritten(written, id, "/checkpoints/chk-1/_metadata", nil)
		notified := written.Add(ms(1))
		c.Notified(notified, id)
		cs, ok := c.CheckpointStats(id)
		if !ok || cs.Status != StatusCompleted {
			t.Fatalf("round %d: checkpoint %d: %+v", round, id, cs)
		}

		last := TaskID(order[3])
		lf := figs[last]
		e2e := ackAt[last].Sub(trigger)
		ph := cs.Phases
		if ph.LastTask != last {
			t.Fatalf("round %d: last task %d, want %d", round, ph.LastTask, last)
		}
		if cs.EndToEndDuration != e2e {
			t.Fatalf("round %d: end to end %v, want %v", round, cs.EndToEndDuration, e2e)
		}
		var sum time.Duration
		for _, p := range ph.Parts() {
			if p.Duration < 0 {
				t.Fatalf("round %d: %s %v < 0", round, p.Name, p.Duration)
			}
			sum += p.Duration
			if p.Name == "ack" && sum != e2e {
				t.Fatalf("round %d: parts to ack sum to %v, want end to end %v (%+v)", round, sum, e2e, ph)
			}
		}
		if sum != notified.Sub(trigger) || ph.Completion != sum {
			t.Fatalf("round %d: parts sum to %v, completion %v, want %v", round, sum, ph.Completion, notified.Sub(trigger))
		}
		if ph.Metadata != written.Sub(ackAt[last]) || ph.Notify != notified.Sub(written) {
			t.Fatalf("round %d: metadata %v notify %v, want %v %v", round, ph.Metadata, ph.Notify, written.Sub(ackAt[last]), notified.Sub(written))
		}
		if lf.StartDelay+lf.Alignment+lf.Sync+lf.Async > e2e {
			continue // clamped: only the sums hold
		}
		source := max(figs[0].StartDelay, figs[1].StartDelay)
		if last < 2 {
			source = lf.StartDelay
		}
		source = min(source, lf.StartDelay)
		want := Phases{
			LastTask: last, TriggerToSource: source, BarrierToLast: lf.StartDelay - source,
			Alignment: lf.Alignment, Sync: lf.Sync, Async: lf.Async,
			Ack:      e2e - lf.StartDelay - lf.Alignment - lf.Sync - lf.Async,
			Metadata: written.Sub(ackAt[last]), Notify: notified.Sub(written), Completion: notified.Sub(trigger),
		}
		if ph != want {
			t.Fatalf("round %d: phases\n%+v, want\n%+v", round, ph, want)
		}
	}
}
