package checkpoint

import "time"

// The unaligned path of the exactly-once handler: on the first barrier the
// snapshot is taken at once and the barrier forwarded as a priority event;
// the channel state of the checkpoint is then (a) the output buffers the
// forwarded barrier overtook, (b) on every channel, the buffers polled
// before that channel's barrier, and (c) the buffers a priority barrier
// overtook in its input channel (brought as copies) or that a promotion
// returned.

// startUnaligned takes the snapshot now, unaligned. ch is the channel whose
// barrier arrived now (with overtaken copies), or -1 (a timer or a trigger).
func (h *exactlyOnce) startUnaligned(now time.Time, ch, overtaken int, acts []Action) []Action {
	b := h.barrier
	h.unaligned = true
	acts = append(acts,
		StartCheckpoint{
			Barrier:    b,
			Unaligned:  true,
			StartDelay: h.startDelay(),
			Alignment:  nonNegative(now.Sub(h.firstAt)),
			Processed:  h.processed,
		},
		ForwardBarrier{Barrier: b.AsUnaligned(), Priority: true},
		PersistOvertakenOutput{ID: b.ID},
	)
	if h.blocked {
		// The blocked channels hold data after their barrier: it is
		// processed after the snapshot, as it should be.
		acts = append(acts, UnblockAll{})
		h.blocked = false
	}
	h.outAt = time.Time{}
	if ch >= 0 {
		h.arrived.add(ch)
		h.remaining--
		if overtaken > 0 {
			acts = append(acts, PersistOvertakenInput{Channel: ch, ID: b.ID})
		}
	}
	if b.Options.Alignment == AlignedWithTimeout {
		// Switched from aligned: upstream barriers of this checkpoint may
		// still be queued in order behind data in the input channels.
		for c := 0; c < h.n; c++ {
			if !h.arrived.has(c) && !h.closed.has(c) {
				acts = append(acts, PromoteInputBarrier{Channel: c, ID: b.ID})
			}
		}
	}
	if h.remaining == 0 {
		h.pending, h.unaligned = false, false
		acts = append(acts, InputStateComplete{ID: b.ID})
	}
	return acts
}

// arriveUnaligned handles a barrier of the checkpoint whose snapshot is
// already taken: the channel's state is complete.
func (h *exactlyOnce) arriveUnaligned(ch, overtaken int, acts []Action) []Action {
	h.arrived.add(ch)
	h.remaining--
	if overtaken > 0 && !h.promoted.has(ch) {
		acts = append(acts, PersistOvertakenInput{Channel: ch, ID: h.cur})
	}
	if h.remaining == 0 {
		h.pending, h.unaligned = false, false
		acts = append(acts, InputStateComplete{ID: h.cur})
	}
	return acts
}

// AwaitedChannels appends to dst the open channels that have not
// delivered the barrier of checkpoint id while its unaligned snapshot is
// taken and its input channel state collected, and returns it; nothing
// otherwise. A task may complete such a channel's state when its priority
// barrier arrives, before its own goroutine polls it: what the channel
// delivered before that barrier is then known.
func (h *exactlyOnce) AwaitedChannels(id int64, dst []int) []int {
	if !h.pending || !h.unaligned || h.cur != id {
		return dst
	}
	for c := 0; c < h.n; c++ {
		if !h.arrived.has(c) && !h.closed.has(c) {
			dst = append(dst, c)
		}
	}
	return dst
}
