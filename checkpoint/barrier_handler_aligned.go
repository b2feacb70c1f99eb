package checkpoint

import "time"

// The aligned path of the exactly-once handler: a channel that delivered
// barrier n is blocked until barrier n has arrived on every open channel;
// then the snapshot is taken, the barrier forwarded in order, and every
// channel unblocked. No channel state: all data before the barrier was
// processed before the snapshot, all data after it is processed after.

func (h *exactlyOnce) arriveAligned(now time.Time, ch int, acts []Action) []Action {
	h.arrived.add(ch)
	h.remaining--
	if h.remaining == 0 {
		return h.completeAligned(now, acts)
	}
	h.blocked = true
	acts = append(acts, BlockChannel{Channel: ch})
	if h.barrier.Options.Alignment == AlignedWithTimeout {
		acts = h.requestTimer(h.barrier.alignmentDeadline(), acts)
	}
	return acts
}

// completeAligned takes the snapshot once the alignment is over.
func (h *exactlyOnce) completeAligned(now time.Time, acts []Action) []Action {
	b := h.barrier
	acts = append(acts,
		StartCheckpoint{
			Barrier:    b,
			StartDelay: h.startDelay(),
			Alignment:  nonNegative(now.Sub(h.firstAt)),
			Processed:  h.processed,
		},
		ForwardBarrier{Barrier: b},
	)
	acts = h.reset(acts)
	if b.Options.Alignment == AlignedWithTimeout {
		// The forwarded barrier may get stuck behind data in the outputs:
		// at the deadline it is promoted (see onTimer).
		h.outID, h.outAt = b.ID, b.alignmentDeadline()
		acts = h.requestTimer(h.outAt, acts)
	}
	return acts
}
