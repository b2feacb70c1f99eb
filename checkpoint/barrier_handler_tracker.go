package checkpoint

import (
	"fmt"
	"strings"
	"time"
)

// maxTrackedCheckpoints bounds the checkpoints the at-least-once tracker
// follows at once, as Flink's CheckpointBarrierTracker does (50); the
// oldest is dropped beyond it.
const maxTrackedCheckpoints = 50

// tracker is the at-least-once barrier handler (Flink's
// CheckpointBarrierTracker). It never blocks a channel: it counts, per
// checkpoint, the channels that delivered its barrier (or a cancel marker,
// or ended), and takes the snapshot when every channel has. Several
// checkpoints may be in flight; when one is taken, or cancelled, the older
// ones are declined as subsumed (Flink drops them silently; declining frees
// the coordinator's concurrency slots at once, even if the newer one fails
// later).
type tracker struct {
	n      int
	closed chanSet
	open   int

	pending   []*tracked // ascending ids
	latest    int64      // newest checkpoint seen
	completed int64      // newest checkpoint known complete
}

type tracked struct {
	barrier   Barrier
	arrived   chanSet
	remaining int
	aborted   bool
	firstAt   time.Time
}

func newTracker(n int) *tracker {
	return &tracker{n: n, open: n, closed: newChanSet(n)}
}

func (t *tracker) Pending() (int64, bool) {
	for i := len(t.pending) - 1; i >= 0; i-- {
		if !t.pending[i].aborted {
			return t.pending[i].barrier.ID, true
		}
	}
	return 0, false
}

func (t *tracker) OnBuffer(ch, size int) []Action { return nil }

func (t *tracker) Step(now time.Time, ev Event) []Action {
	switch e := ev.(type) {
	case BarrierReceived:
		checkChannel(t.n, e.Channel)
		return t.onBarrier(now, e.Channel, e.Barrier)
	case BufferReceived:
		return nil
	case CancelReceived:
		checkChannel(t.n, e.Channel)
		return t.onCancel(now, e.Channel, e.ID)
	case ChannelEnded:
		checkChannel(t.n, e.Channel)
		return t.onEndOfPartition(now, e.Channel)
	case TriggerReceived:
		return t.onTrigger(now, e.Barrier)
	case TimerFired, InputBarrierPromoted:
		return nil
	case CheckpointAborted:
		if p := t.find(e.ID); p != nil {
			p.aborted = true
		} else if e.ID > t.latest {
			p := t.add(now, Barrier{ID: e.ID})
			p.aborted = true
		}
		return nil
	case CheckpointCompleted:
		t.completed = max(t.completed, e.ID)
		t.latest = max(t.latest, e.ID)
		t.dropThrough(e.ID)
		return nil
	}
	panic(fmt.Sprintf("checkpoint: unknown barrier handler event %T", ev))
}

func (t *tracker) find(id int64) *tracked {
	for _, p := range t.pending {
		if p.barrier.ID == id {
			return p
		}
	}
	return nil
}

// add tracks a checkpoint newer than every tracked one.
func (t *tracker) add(now time.Time, b Barrier) *tracked {
	p := &tracked{barrier: b, arrived: newChanSet(t.n), remaining: t.open, firstAt: now}
	t.pending = append(t.pending, p)
	t.latest = b.ID
	return p
}

// declineOlder drops the checkpoints older than id, declining those not
// aborted already, and the oldest ones beyond maxTrackedCheckpoints.
func (t *tracker) declineOlder(id int64, acts []Action) []Action {
	for len(t.pending) > 0 && (t.pending[0].barrier.ID < id || len(t.pending) > maxTrackedCheckpoints) {
		if p := t.pending[0]; !p.aborted {
			acts = append(acts, AbortCheckpoint{ID: p.barrier.ID, Reason: ReasonSubsumed}, ForwardCancel{ID: p.barrier.ID})
		}
		t.pending = t.pending[1:]
	}
	return acts
}

// dropThrough forgets every tracked checkpoint up to id.
func (t *tracker) dropThrough(id int64) {
	i := 0
	for i < len(t.pending) && t.pending[i].barrier.ID <= id {
		i++
	}
	t.pending = t.pending[i:]
}

// arrive counts channel ch for p; it returns whether p is now complete.
func (t *tracker) arrive(p *tracked, ch int) bool {
	if p.arrived.has(ch) {
		return false
	}
	p.arrived.add(ch)
	p.remaining--
	return p.remaining == 0
}

func (t *tracker) onBarrier(now time.Time, ch int, b Barrier) []Action {
	if t.closed.has(ch) || b.ID <= t.completed {
		return nil
	}
	p := t.find(b.ID)
	var acts []Action
	if p == nil {
		if b.ID <= t.latest {
			return nil // not newer than the newest seen: already taken or dropped
		}
		p = t.add(now, b)
		acts = t.declineOlder(b.ID-maxTrackedCheckpoints+1, acts)
	}
	if !t.arrive(p, ch) {
		return acts
	}
	return t.take(p, acts)
}

// take snapshots complete checkpoint p (unless it was aborted), declines
// the older ones and forgets them all.
func (t *tracker) take(p *tracked, acts []Action) []Action {
	acts = t.declineOlder(p.barrier.ID, acts)
	t.dropThrough(p.barrier.ID)
	if p.aborted {
		return acts
	}
	return append(acts,
		StartCheckpoint{Barrier: p.barrier, StartDelay: nonNegative(p.firstAt.Sub(p.barrier.TriggerTime()))},
		ForwardBarrier{Barrier: p.barrier},
	)
}

func (t *tracker) onCancel(now time.Time, ch int, id int64) []Action {
	if t.closed.has(ch) || id <= t.completed {
		return nil
	}
	var acts []Action
	p := t.find(id)
	switch {
	case p != nil:
		acts = t.declineOlder(id, acts)
		if !p.aborted {
			p.aborted = true
			acts = append(acts, AbortCheckpoint{ID: id, Reason: ReasonCancelMarker}, ForwardCancel{ID: id})
		}
	case id > t.latest:
		acts = t.declineOlder(id, acts)
		p = t.add(now, Barrier{ID: id})
		p.aborted = true
		acts = append(acts, AbortCheckpoint{ID: id, Reason: ReasonCancelMarker}, ForwardCancel{ID: id})
	default:
		return nil // a trailing marker of a checkpoint already dropped
	}
	if t.arrive(p, ch) {
		t.dropThrough(id)
	}
	return acts
}

func (t *tracker) onEndOfPartition(now time.Time, ch int) []Action {
	if t.closed.has(ch) {
		return nil
	}
	t.closed.add(ch)
	t.open--
	var done *tracked
	for _, p := range t.pending {
		if !p.arrived.has(ch) {
			p.remaining--
		}
		if p.remaining == 0 {
			done = p // the newest complete one wins; older ones are subsumed
		}
	}
	if done == nil {
		return nil
	}
	return t.take(done, nil)
}

func (t *tracker) onTrigger(now time.Time, b Barrier) []Action {
	if t.open > 0 {
		panic(fmt.Sprintf("checkpoint: TriggerReceived for checkpoint %d on a task with %d open input channels: only tasks without open inputs are triggered directly",
			b.ID, t.open))
	}
	if b.ID <= t.completed {
		return nil
	}
	p := t.find(b.ID)
	if p == nil {
		if b.ID <= t.latest {
			return nil
		}
		p = t.add(now, b)
	}
	return t.take(p, nil)
}

func (t *tracker) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "at-least-once channels=%d open=%d latest=%d", t.n, t.open, t.latest)
	for _, p := range t.pending {
		fmt.Fprintf(&b, " [%d arrived=%s remaining=%d", p.barrier.ID, formatSet(p.arrived, t.n), p.remaining)
		if p.aborted {
			b.WriteString(" aborted")
		}
		b.WriteString("]")
	}
	return b.String()
}
