package checkpoint

import "time"

// The aligned-with-timeout switch (execution.checkpointing.aligned-checkpoint-timeout).
// A checkpoint starts aligned; once it is older than the timeout (its
// barrier's trigger time plus the timeout) it switches to unaligned, on
// both ends of every channel:
//   - downstream, a task still aligning takes its snapshot unaligned, and
//     promotes the barriers still queued in its input channels;
//   - upstream, a task that forwarded the barrier in order promotes it in
//     its outputs if it is still queued there.
// A barrier that arrives as a priority event (promoted upstream) switches
// the task at once.

func (h *exactlyOnce) timedOut(now time.Time) bool {
	return h.barrier.Options.Alignment == AlignedWithTimeout && !now.Before(h.barrier.alignmentDeadline())
}

// requestTimer asks for a timer at at, once.
func (h *exactlyOnce) requestTimer(at time.Time, acts []Action) []Action {
	if h.timerAt.Equal(at) {
		return acts
	}
	h.timerAt = at
	return append(acts, RegisterTimer{At: at})
}

func (h *exactlyOnce) onTimer(now time.Time) []Action {
	var acts []Action
	if h.pending && !h.unaligned && h.timedOut(now) {
		acts = h.startUnaligned(now, -1, 0, acts)
	}
	if !h.outAt.IsZero() && !now.Before(h.outAt) {
		acts = append(acts, PromoteOutputBarrier{ID: h.outID})
		h.outAt = time.Time{}
	}
	// Re-arm what is still ahead, in case the timer fired early.
	h.timerAt = time.Time{}
	if h.pending && !h.unaligned && h.barrier.Options.Alignment == AlignedWithTimeout {
		acts = h.requestTimer(h.barrier.alignmentDeadline(), acts)
	}
	if !h.outAt.IsZero() {
		acts = h.requestTimer(h.outAt, acts)
	}
	return acts
}
