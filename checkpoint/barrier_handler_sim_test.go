package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestBarrierHandlerConsistentCut simulates one task with several FIFO
// input channels fed by upstreams that interleave records, barriers and an
// end of partition, with priority barriers that overtake queued records,
// promotions at the alignment deadline on both ends, and random polling of
// the unblocked channels. For every checkpoint the task takes it checks
// invariant 2 of DESIGN.md on the input side: what the snapshot reflects
// (the records processed before it) plus the persisted channel state is
// exactly, in order, the records each upstream sent before its barrier —
// nothing lost, nothing twice. In at-least-once mode it checks that nothing
// before the barrier is missing.
func TestBarrierHandlerConsistentCut(t *testing.T) {
	modes := []struct {
		name  string
		mode  Mode
		align Alignment
	}{
		{"aligned", ExactlyOnce, Aligned},
		{"unaligned", ExactlyOnce, Unaligned},
		{"aligned-with-timeout", ExactlyOnce, AlignedWithTimeout},
		{"at-least-once", AtLeastOnce, Aligned},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			taken := 0
			for seed := uint64(0); seed < 400; seed++ {
				taken += runCutSimulation(t, seed, m.mode, m.align)
				if t.Failed() {
					t.Fatalf("seed %d failed", seed)
				}
			}
			if taken < 400 {
				t.Fatalf("only %d checkpoints taken over all seeds: the simulation does not exercise the handler", taken)
			}
		})
	}
}

type simItem struct {
	kind      int // simRecord, simBarrier, simEOP
	seq       int
	id        int64
	prio      bool
	overtaken []int
}

const (
	simRecord = iota
	simBarrier
	simEOP
)

type simChannel struct {
	upstream  []simItem
	queue     []simItem
	nprio     int // priority items at the head of queue
	blocked   bool
	processed int
	cut       map[int64]int // records sent before barrier id
}

func runCutSimulation(t *testing.T, seed uint64, mode Mode, align Alignment) (taken int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	n := 1 + rng.IntN(4)
	const numCheckpoints = 4
	timeout := time.Duration(5+rng.IntN(30)) * time.Millisecond
	chans := make([]*simChannel, n)
	for c := range chans {
		ch := &simChannel{cut: map[int64]int{}}
		records := rng.IntN(25)
		last := int64(numCheckpoints)
		if rng.IntN(4) == 0 {
			last = rng.Int64N(numCheckpoints + 1) // ends before the later barriers
		}
		pos := make([]int, last)
		for i := range pos {
			pos[i] = rng.IntN(records + 1)
		}
		slices.Sort(pos)
		seq, b := 0, 0
		for seq < records || b < len(pos) {
			if b < len(pos) && pos[b] == seq {
				ch.upstream = append(ch.upstream, simItem{kind: simBarrier, id: int64(b + 1)})
				ch.cut[int64(b+1)] = seq
				b++
				continue
			}
			ch.upstream = append(ch.upstream, simItem{kind: simRecord, seq: seq})
			seq++
		}
		for id := last + 1; id <= numCheckpoints; id++ {
			ch.cut[id] = records
		}
		ch.upstream = append(ch.upstream, simItem{kind: simEOP})
		chans[c] = ch
	}

	h := NewBarrierHandler(mode, n)
	now := time.UnixMilli(1000)
	triggered := map[int64]int64{} // checkpoint -> trigger time, unix ms
	snapshot := map[int64][]int{}  // records processed per channel at the snapshot
	state := map[int64][][]int{}   // persisted input channel state
	verified := map[int64]bool{}
	aborted := map[int64]bool{}
	var timers []time.Time
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("seed %d (%d channels): %s\nhandler: %s", seed, n, fmt.Sprintf(format, args...), h)
	}

	verify := func(id int64) {
		taken++
		verified[id] = true
		for c, ch := range chans {
			p := snapshot[id][c]
			want := []int{}
			for s := p; s < ch.cut[id]; s++ {
				want = append(want, s)
			}
			got := state[id][c]
			if got == nil {
				got = []int{}
			}
			if mode == AtLeastOnce {
				if p < ch.cut[id] || len(got) > 0 {
					fail("checkpoint %d channel %d: processed %d before the snapshot, %d records precede the barrier, persisted %v", id, c, p, ch.cut[id], got)
				}
				continue
			}
			if !slices.Equal(got, want) {
				fail("checkpoint %d channel %d: snapshot reflects records [0,%d), channel state %v, want %v (barrier after %d records)", id, c, p, got, want, ch.cut[id])
			}
		}
	}

	var current *simItem // the item being handled, for PersistInput / PersistOvertakenInput
	var execute func(acts []Action)
	execute = func(acts []Action) {
		for _, a := range acts {
			switch a := a.(type) {
			case BlockChannel:
				chans[a.Channel].blocked = true
			case UnblockAll:
				for _, ch := range chans {
					ch.blocked = false
				}
			case StartCheckpoint:
				if _, dup := snapshot[a.Barrier.ID]; dup {
					fail("checkpoint %d started twice", a.Barrier.ID)
				}
				snap := make([]int, n)
				for c, ch := range chans {
					snap[c] = ch.processed
				}
				snapshot[a.Barrier.ID] = snap
				state[a.Barrier.ID] = make([][]int, n)
				if a.Unaligned && (mode == AtLeastOnce || align == Aligned) {
					fail("checkpoint %d went unaligned", a.Barrier.ID)
				}
				if !a.Unaligned {
					verify(a.Barrier.ID)
				}
			case PersistInput:
				if current == nil || current.kind != simRecord {
					fail("persist-input without a polled record")
				}
				state[a.ID][a.Channel] = append(state[a.ID][a.Channel], current.seq)
			case PersistOvertakenInput:
				if current == nil || current.kind != simBarrier || len(current.overtaken) == 0 {
					fail("persist-overtaken-input without overtaken copies")
				}
				state[a.ID][a.Channel] = append(state[a.ID][a.Channel], current.overtaken...)
			case PromoteInputBarrier:
				ch := chans[a.Channel]
				for i := ch.nprio; i < len(ch.queue); i++ {
					if it := ch.queue[i]; it.kind == simBarrier && it.id == a.ID {
						var over []int
						for _, r := range ch.queue[ch.nprio:i] {
							over = append(over, r.seq)
						}
						state[a.ID][a.Channel] = append(state[a.ID][a.Channel], over...)
						// A network may flag the promoted barrier as priority with
						// the copies again: the handler must not persist them twice.
						it.prio, it.overtaken = true, over
						ch.queue = slices.Delete(ch.queue, i, i+1)
						ch.queue = slices.Insert(ch.queue, ch.nprio, it)
						ch.nprio++
						execute(h.Step(now, InputBarrierPromoted{Channel: a.Channel, ID: a.ID}))
						break
					}
				}
			case InputStateComplete:
				verify(a.ID)
			case RegisterTimer:
				timers = append(timers, a.At)
			case AbortCheckpoint:
				if a.Reason != ReasonSubsumed {
					fail("abort %d for %s", a.ID, a.Reason)
				}
				aborted[a.ID] = true
			case ForwardBarrier, PersistOvertakenOutput, ForwardCancel, PromoteOutputBarrier:
			default:
				fail("unexpected action %v", a)
			}
		}
	}

	for step := 0; ; step++ {
		if step > 20000 {
			fail("no progress")
			return taken
		}
		now = now.Add(time.Duration(rng.IntN(3)) * time.Millisecond)
		// Timers that are due.
		if len(timers) > 0 && rng.IntN(3) == 0 {
			due := false
			timers = slices.DeleteFunc(timers, func(at time.Time) bool {
				if !now.Before(at) {
					due = true
					return true
				}
				return false
			})
			if due {
				current = nil
				execute(h.Step(now, TimerFired{}))
			}
		}
		// Upstream promotes a barrier still queued after its deadline.
		if align == AlignedWithTimeout && rng.IntN(4) == 0 {
			c := rng.IntN(n)
			ch := chans[c]
			for i := ch.nprio; i < len(ch.queue); i++ {
				it := ch.queue[i]
				if it.kind == simBarrier && !now.Before(time.UnixMilli(triggered[it.id]).Add(timeout)) {
					for _, r := range ch.queue[ch.nprio:i] {
						it.overtaken = append(it.overtaken, r.seq)
					}
					it.prio = true
					ch.queue = slices.Delete(ch.queue, i, i+1)
					ch.queue = slices.Insert(ch.queue, ch.nprio, it)
					ch.nprio++
					break
				}
			}
		}
		// Pushes and polls.
		var pushable, pollable []int
		for c, ch := range chans {
			if len(ch.upstream) > 0 && len(ch.queue) < 6 && !(ch.upstream[0].kind == simBarrier && slices.ContainsFunc(ch.queue, func(it simItem) bool { return it.kind == simBarrier })) {
				pushable = append(pushable, c)
			}
			if !ch.blocked && len(ch.queue) > 0 {
				pollable = append(pollable, c)
			}
		}
		if len(pushable) == 0 && len(pollable) == 0 {
			if len(timers) > 0 {
				now = now.Add(timeout)
				continue
			}
			break
		}
		if len(pollable) == 0 || (len(pushable) > 0 && rng.IntN(2) == 0) {
			c := pushable[rng.IntN(len(pushable))]
			ch := chans[c]
			it := ch.upstream[0]
			ch.upstream = ch.upstream[1:]
			if it.kind == simBarrier {
				if _, ok := triggered[it.id]; !ok {
					triggered[it.id] = now.UnixMilli()
				}
				if align == Unaligned && mode == ExactlyOnce {
					it.prio = true
					for _, r := range ch.queue[ch.nprio:] {
						it.overtaken = append(it.overtaken, r.seq)
					}
					ch.queue = slices.Insert(ch.queue, ch.nprio, it)
					ch.nprio++
					continue
				}
			}
			ch.queue = append(ch.queue, it)
			continue
		}
		c := pollable[rng.IntN(len(pollable))]
		ch := chans[c]
		it := ch.queue[0]
		ch.queue = ch.queue[1:]
		if ch.nprio > 0 {
			ch.nprio--
		}
		current = &it
		switch it.kind {
		case simRecord:
			if it.seq != ch.processed {
				fail("channel %d polled record %d, want %d: FIFO broken", c, it.seq, ch.processed)
			}
			execute(h.OnBuffer(c, 1))
			ch.processed++
		case simBarrier:
			b := Barrier{ID: it.id, Timestamp: triggered[it.id], Options: Options{Kind: KindCheckpoint, Alignment: align}}
			if align == AlignedWithTimeout {
				b.Options.AlignedTimeout = timeout
			}
			execute(h.Step(now, BarrierReceived{Channel: c, Barrier: b, Priority: it.prio, Overtaken: len(it.overtaken)}))
		case simEOP:
			execute(h.Step(now, ChannelEnded{Channel: c}))
		}
	}
	for id := range triggered {
		if !verified[id] && !aborted[id] {
			fail("checkpoint %d neither taken nor aborted", id)
		}
		if aborted[id] && mode == ExactlyOnce && align == Aligned {
			fail("checkpoint %d aborted", id)
		}
	}
	if newest := maxTriggered(triggered); newest > 0 && !verified[newest] {
		fail("the newest checkpoint %d, with nothing to subsume it, was not taken", newest)
	}
	if _, pending := h.Pending(); pending {
		fail("still pending at the end")
	}
	return taken
}

func maxTriggered(m map[int64]int64) (id int64) {
	for k := range m {
		id = max(id, k)
	}
	return id
}
