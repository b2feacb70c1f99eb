package checkpoint

import (
	"fmt"
	"strings"
	"time"
)

// exactlyOnce is the exactly-once barrier handler (Flink's
// SingleCheckpointBarrierHandler): one checkpoint at a time per input gate,
// taken aligned, unaligned, or aligned until its timeout and unaligned
// after, as its barrier's options say. The aligned path lives in
// barrier_handler_aligned.go, the unaligned one in
// barrier_handler_unaligned.go, the timeout switch in
// barrier_handler_timeout.go.
//
// A newer barrier aborts the pending checkpoint (it cannot complete any
// more: its barriers are behind the newer one in every FIFO channel), and
// barriers of checkpoints older than the newest one seen are ignored.
type exactlyOnce struct {
	n      int
	closed chanSet // channels that ended
	open   int     // channels that did not

	cur       int64 // newest checkpoint seen: pending, taken, aborted or completed
	pending   bool  // cur is aligning, or collecting its in-flight data
	unaligned bool  // cur's snapshot is taken and its input channel state is being collected
	barrier   Barrier
	arrived   chanSet // channels that delivered cur's barrier
	remaining int     // open channels that did not
	promoted  chanSet // channels whose barrier the task promoted (InputBarrierPromoted)
	blocked   bool    // some channel is blocked
	firstAt   time.Time
	processed int64

	timerAt time.Time // the latest timer asked for; zero when none

	// An aligned-with-timeout barrier forwarded in order: if it is still
	// queued in the outputs at outAt, it is promoted (the upstream end of
	// the switch to unaligned).
	outID int64
	outAt time.Time

	// Checkpoints newer than cur that the coordinator aborted before their
	// first barrier arrived here.
	aborted map[int64]struct{}
}

func newExactlyOnce(n int) *exactlyOnce {
	return &exactlyOnce{
		n:        n,
		open:     n,
		closed:   newChanSet(n),
		arrived:  newChanSet(n),
		promoted: newChanSet(n),
	}
}

func (h *exactlyOnce) Pending() (int64, bool) { return h.cur, h.pending }

func (h *exactlyOnce) Step(now time.Time, ev Event) []Action {
	switch e := ev.(type) {
	case BarrierReceived:
		checkChannel(h.n, e.Channel)
		return h.onBarrier(now, e)
	case BufferReceived:
		return h.OnBuffer(e.Channel, e.Size)
	case CancelReceived:
		checkChannel(h.n, e.Channel)
		return h.onCancel(e.ID)
	case ChannelEnded:
		checkChannel(h.n, e.Channel)
		return h.onEndOfPartition(now, e.Channel)
	case TriggerReceived:
		return h.onTrigger(now, e.Barrier)
	case TimerFired:
		return h.onTimer(now)
	case InputBarrierPromoted:
		checkChannel(h.n, e.Channel)
		if h.pending && h.unaligned && e.ID == h.cur {
			h.promoted.add(e.Channel)
		}
		return nil
	case CheckpointAborted:
		return h.onAborted(e.ID)
	case CheckpointCompleted:
		return h.onCompleted(e.ID)
	}
	panic(fmt.Sprintf("checkpoint: unknown barrier handler event %T", ev))
}

func (h *exactlyOnce) OnBuffer(ch, size int) []Action {
	if !h.pending {
		return nil
	}
	checkChannel(h.n, ch)
	if h.unaligned {
		if !h.arrived.has(ch) {
			return []Action{PersistInput{Channel: ch, ID: h.cur}}
		}
		return nil
	}
	h.processed += int64(size)
	return nil
}

func (h *exactlyOnce) onBarrier(now time.Time, e BarrierReceived) []Action {
	ch, b := e.Channel, e.Barrier
	if h.closed.has(ch) {
		return nil // nothing follows the end of a partition
	}
	if b.ID < h.cur || (b.ID == h.cur && !h.pending) {
		return nil // older than the newest checkpoint seen, or already taken or aborted
	}
	var acts []Action
	if b.ID > h.cur {
		if h.pending {
			acts = h.abortPending(acts, ReasonSubsumed)
		}
		h.begin(now, b)
		if _, ok := h.aborted[b.ID]; ok {
			delete(h.aborted, b.ID)
			h.pending = false
			return acts
		}
	}
	if h.arrived.has(ch) {
		return acts
	}
	if h.unaligned {
		return h.arriveUnaligned(ch, e.Overtaken, acts)
	}
	if h.barrier.Options.Alignment == Aligned {
		if e.Priority {
			panic(fmt.Sprintf("checkpoint: priority barrier of aligned %s %d on channel %d: savepoints and aligned checkpoints never travel as priority events",
				h.barrier.Options.Kind, h.cur, ch))
		}
		return h.arriveAligned(now, ch, acts)
	}
	if e.Priority || h.barrier.Options.Alignment == Unaligned || h.timedOut(now) {
		return h.startUnaligned(now, ch, e.Overtaken, acts)
	}
	return h.arriveAligned(now, ch, acts)
}

// begin makes checkpoint b the pending one.
func (h *exactlyOnce) begin(now time.Time, b Barrier) {
	h.cur, h.pending, h.unaligned, h.barrier = b.ID, true, false, b
	h.arrived.clear()
	h.promoted.clear()
	h.remaining = h.open
	h.blocked = false
	h.firstAt, h.processed = now, 0
	if !h.outAt.IsZero() && h.outID < b.ID {
		h.outAt = time.Time{}
	}
	h.pruneAborted(b.ID - 1)
}

// abortPending aborts the pending checkpoint here: decline it, tell the
// downstream tasks, and poll every channel again.
func (h *exactlyOnce) abortPending(acts []Action, reason Reason) []Action {
	acts = append(acts, AbortCheckpoint{ID: h.cur, Reason: reason}, ForwardCancel{ID: h.cur})
	return h.reset(acts)
}

// reset drops the pending checkpoint without telling anyone.
func (h *exactlyOnce) reset(acts []Action) []Action {
	if h.blocked {
		acts = append(acts, UnblockAll{})
		h.blocked = false
	}
	h.pending, h.unaligned = false, false
	return acts
}

func (h *exactlyOnce) onCancel(id int64) []Action {
	if id < h.cur || (id == h.cur && !h.pending) {
		return nil
	}
	if id == h.cur {
		return h.abortPending(nil, ReasonCancelMarker)
	}
	var acts []Action
	if h.pending {
		acts = h.abortPending(acts, ReasonSubsumed)
	}
	h.cur, h.pending = id, false
	h.pruneAborted(id)
	return append(acts, AbortCheckpoint{ID: id, Reason: ReasonCancelMarker}, ForwardCancel{ID: id})
}

func (h *exactlyOnce) onEndOfPartition(now time.Time, ch int) []Action {
	if h.closed.has(ch) {
		return nil
	}
	h.closed.add(ch)
	h.open--
	if !h.pending || h.arrived.has(ch) {
		return nil
	}
	h.remaining--
	if h.remaining > 0 {
		return nil
	}
	if h.unaligned {
		h.pending, h.unaligned = false, false
		return []Action{InputStateComplete{ID: h.cur}}
	}
	return h.completeAligned(now, nil)
}

func (h *exactlyOnce) onTrigger(now time.Time, b Barrier) []Action {
	if h.open > 0 {
		panic(fmt.Sprintf("checkpoint: TriggerReceived for checkpoint %d on a task with %d open input channels: only tasks without open inputs are triggered directly",
			b.ID, h.open))
	}
	if b.ID <= h.cur {
		return nil
	}
	h.begin(now, b)
	if _, ok := h.aborted[b.ID]; ok {
		delete(h.aborted, b.ID)
		h.pending = false
		return nil
	}
	if b.Options.Alignment == Unaligned || h.timedOut(now) {
		return h.startUnaligned(now, -1, 0, nil)
	}
	return h.completeAligned(now, nil)
}

func (h *exactlyOnce) onAborted(id int64) []Action {
	if id > h.cur {
		if h.aborted == nil {
			h.aborted = make(map[int64]struct{})
		}
		h.aborted[id] = struct{}{}
		return nil
	}
	if !h.outAt.IsZero() && h.outID == id {
		h.outAt = time.Time{}
	}
	if id < h.cur || !h.pending {
		return nil
	}
	return h.reset(nil)
}

func (h *exactlyOnce) onCompleted(id int64) []Action {
	if !h.outAt.IsZero() && h.outID <= id {
		h.outAt = time.Time{}
	}
	if id < h.cur {
		return nil
	}
	var acts []Action
	if h.pending {
		// Completed without this task's snapshot: it was subsumed, and the
		// coordinator already knows.
		acts = h.reset(acts)
	}
	h.cur = id
	h.pruneAborted(id)
	return acts
}

// pruneAborted forgets the aborted checkpoints up to upTo.
func (h *exactlyOnce) pruneAborted(upTo int64) {
	for id := range h.aborted {
		if id <= upTo {
			delete(h.aborted, id)
		}
	}
}

func (h *exactlyOnce) startDelay() time.Duration {
	return nonNegative(h.firstAt.Sub(h.barrier.TriggerTime()))
}

func (h *exactlyOnce) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "exactly-once channels=%d open=%d cur=%d", h.n, h.open, h.cur)
	if h.pending {
		phase := "aligning"
		if h.unaligned {
			phase = "collecting-unaligned"
		}
		fmt.Fprintf(&b, " pending=%s arrived=%s remaining=%d", phase, formatSet(h.arrived, h.n), h.remaining)
		if h.blocked {
			b.WriteString(" blocked")
		}
	}
	if !h.outAt.IsZero() {
		fmt.Fprintf(&b, " output-promotion=%d@%d", h.outID, h.outAt.UnixMilli())
	}
	return b.String()
}

func formatSet(s chanSet, n int) string {
	var parts []string
	for i := 0; i < n; i++ {
		if s.has(i) {
			parts = append(parts, fmt.Sprint(i))
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}
