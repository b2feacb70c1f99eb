package runtime

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/network/event"
	"github.com/sluicehq/sluice/state"
)

// errStopTask is the mail that ends a task after a stop-with-savepoint.
var errStopTask = errors.New("stop task")

// SnapshottingSource is implemented by source drivers whose position is
// part of every checkpoint (operators.Source): they write it into their
// operator state in the synchronous part, as user functions do.
type SnapshottingSource = operators.FunctionSnapshotter

// taskCheckpoints is a task's part of checkpointing: its barrier handler,
// the snapshots in progress, and their asynchronous parts.
type taskCheckpoints struct {
	t       *Task
	handler checkpoint.BarrierHandler
	pending map[int64]*pendingSnapshot
	// overtaken output buffers of the last priority barrier, until
	// PersistOvertakenOutput says which checkpoint they belong to.
	overtaken []outputChunk
	async     sync.WaitGroup
	closed    bool
	// Announced aligned-with-timeout checkpoints: the deadline timer is
	// armed once; promoted holds, per checkpoint and channel, the buffers
	// a promotion at the deadline overtook before the handler started it.
	announced map[int64]bool
	promoted  map[int64]map[int][]byte
	// watched are the snapshots whose aligned-with-timeout barrier is
	// still queued in an output (watchOutput). While watchArmed, every
	// event leaving an output queue posts one recheck mail (watchMail
	// while it is queued); both flags are read by the network's
	// goroutines.
	watched    []*pendingSnapshot
	watchArmed atomic.Bool
	watchMail  atomic.Bool

	// live is the unaligned snapshot whose input channel state may be
	// completed off the task goroutine (finishEarly); recMu makes polling
	// a data buffer and recording it one step for finishEarly.
	live  atomic.Pointer[pendingSnapshot]
	recMu sync.Mutex
}

// pendingSnapshot is one checkpoint of this task from its synchronous part
// until its asynchronous part starts.
type pendingSnapshot struct {
	barrier   checkpoint.Barrier
	fig       checkpoint.TaskFigures
	syncDone  bool
	syncEnd   time.Time // the asynchronous part starts here, as Flink's
	inputDone bool
	// outputDone is false while an aligned barrier that may still be
	// promoted (aligned-with-timeout) is queued in an output.
	outputDone bool
	units      []unitSnapshot
	input      map[int][]byte // persisted input channel state by task channel
	output     []outputChunk

	// Once the snapshot is live (taskCheckpoints.live), mu guards input,
	// syncDone, inputDone, outputDone and the fields below against
	// finishEarly.
	mu sync.Mutex
	// awaiting are the channels whose barrier the handler waits for; done
	// those whose state is complete: their priority barrier arrived and
	// what it overtook is recorded, by finishEarly or by the task.
	awaiting []int
	done     map[int]bool
	launched bool // the asynchronous part started (it releases the snapshot)
	released bool // aborted or closed: it never starts
}

type outputChunk struct {
	partition, sub int
	data           []byte
}

type unitSnapshot struct {
	unit         *opUnit
	op, keyed    state.StateSnapshot
	incremental  state.IncrementalStateSnapshot // instead of keyed
	committables [][]byte
}

func (p *pendingSnapshot) id() int64 { return p.barrier.ID }

// completeOutput records the output channel state's last chunks and marks
// it complete, under mu: a live snapshot's finishEarly, on its own
// goroutine, reads outputDone to launch the asynchronous part, which
// reads output.
// A task without outputs starts with its output complete (its
// asynchronous part may have started): there are no chunks then, and
// output is left alone.
func (p *pendingSnapshot) completeOutput(chunks []outputChunk) {
	p.mu.Lock()
	if len(chunks) > 0 {
		p.output = append(p.output, chunks...)
	}
	p.outputDone = true
	p.mu.Unlock()
}

// isOutputDone reads outputDone under mu.
func (p *pendingSnapshot) isOutputDone() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outputDone
}

func (p *pendingSnapshot) release() {
	for _, u := range p.units {
		if u.op != nil {
			u.op.Release()
		}
		if u.keyed != nil {
			u.keyed.Release()
		}
		if u.incremental != nil {
			u.incremental.Release()
		}
	}
}

func newTaskCheckpoints(t *Task) *taskCheckpoints {
	c := &taskCheckpoints{
		t:         t,
		handler:   checkpoint.NewBarrierHandler(t.job.cfg.Checkpoint.Mode, t.numChannels),
		pending:   map[int64]*pendingSnapshot{},
		announced: map[int64]bool{},
		promoted:  map[int64]map[int][]byte{},
	}
	for _, p := range t.partitions {
		p.OnEventSent(c.onEventSent)
	}
	if _, ok := c.handler.(checkpoint.UnalignedInputAwaiter); ok {
		for _, gi := range t.gates {
			off := gi.offset
			gi.gate.OnPriorityEvent(func(ch int, ev event.Event, overtaken [][]byte) {
				b, ok := ev.(event.Barrier)
				if p := c.live.Load(); ok && p != nil && p.id() == b.ID {
					go c.finishEarly(p, off+ch, overtaken)
				}
			})
		}
	}
	return c
}

// finishEarly completes the input channel state of channel ch of the live
// unaligned snapshot p when its priority barrier arrives, on a goroutine of
// its own: the task's may be in the middle of a long record, and the
// barrier would wait for it (and the whole checkpoint with it) before it
// is polled. Once the barrier is queued, nothing the channel holds or
// receives is polled before it, so the channel's state is what the task
// recorded since the snapshot (complete: recMu) and the buffers the
// barrier overtook. When that completes the last awaited channel, the
// asynchronous part starts; the task polls the barriers later as usual
// and finds their channels done.
func (c *taskCheckpoints) finishEarly(p *pendingSnapshot, ch int, overtaken [][]byte) {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	p.mu.Lock()
	if p.launched || p.released || p.done[ch] || !slices.Contains(p.awaiting, ch) {
		p.mu.Unlock()
		return
	}
	p.done[ch] = true
	for _, b := range overtaken {
		p.input[ch] = append(p.input[ch], b...)
	}
	p.markInputIfDoneLocked()
	launch := c.readyLocked(p)
	if launch {
		p.fig.EarlyInput = true
	}
	p.mu.Unlock()
	if launch {
		c.live.CompareAndSwap(p, nil)
		c.launch(p)
	}
}

// markInputIfDoneLocked marks a live snapshot's input complete when every
// awaited channel is done (p.mu is held).
func (p *pendingSnapshot) markInputIfDoneLocked() {
	if p.done == nil {
		return // not live: the handler says when (InputStateComplete)
	}
	for _, a := range p.awaiting {
		if !p.done[a] {
			return
		}
	}
	p.inputDone = true
}

// publishLive makes p, just taken unaligned, live when some channel's
// barrier is still awaited.
func (c *taskCheckpoints) publishLive(p *pendingSnapshot) {
	aw, ok := c.handler.(checkpoint.UnalignedInputAwaiter)
	if !ok || p.barrier.Options.Alignment != checkpoint.Unaligned {
		return
	}
	p.awaiting = aw.AwaitedChannels(p.id(), nil)
	if len(p.awaiting) == 0 {
		return
	}
	p.done = map[int]bool{}
	c.live.Store(p)
}

// refreshLive follows the handler after a step: channels that ended are
// no longer awaited, which may complete the live snapshot's input.
func (c *taskCheckpoints) refreshLive() {
	p := c.live.Load()
	if p == nil {
		return
	}
	aw := c.handler.(checkpoint.UnalignedInputAwaiter)
	p.mu.Lock()
	if p.launched || p.released {
		p.mu.Unlock()
		c.live.CompareAndSwap(p, nil)
		return
	}
	p.awaiting = aw.AwaitedChannels(p.id(), p.awaiting[:0])
	if len(p.awaiting) == 0 {
		p.mu.Unlock()
		c.live.CompareAndSwap(p, nil) // the handler completes it (InputStateComplete)
		return
	}
	p.mu.Unlock()
	c.maybeAsyncChecked(p)
}

// onAnnouncement arms, once per checkpoint, a timer at the barrier's
// alignment deadline.
func (c *taskCheckpoints) onAnnouncement(b checkpoint.Barrier) {
	if c.announced[b.ID] || b.Options.Alignment != checkpoint.AlignedWithTimeout {
		return
	}
	c.announced[b.ID] = true
	deadline := b.TriggerTime().Add(b.Options.AlignedTimeout)
	c.t.timers.At(deadline.UnixMilli(), func() error { return c.announcedDeadline(b.ID) })
}

// announcedDeadline promotes barrier id in every input channel where it
// is still queued, when the handler has not started that checkpoint: the
// barrier is then polled as a priority event and the checkpoint goes
// unaligned; the buffers it overtook are its input state.
func (c *taskCheckpoints) announcedDeadline(id int64) error {
	if pid, ok := c.handler.Pending(); ok && pid >= id {
		return nil // the handler runs this checkpoint and its own timeout
	}
	for _, gi := range c.t.gates {
		for _, ci := range gi.channels {
			ov, found := gi.gate.PromoteEvent(ci.index, matchBarrier(id))
			if !found {
				continue
			}
			if c.promoted[id] == nil {
				c.promoted[id] = map[int][]byte{}
			}
			ch := gi.offset + ci.index
			for _, b := range ov {
				c.promoted[id][ch] = append(c.promoted[id][ch], b...)
			}
		}
	}
	return nil
}

// forget drops the bookkeeping of checkpoints up to id.
func (c *taskCheckpoints) forget(id int64) {
	for k := range c.announced {
		if k <= id {
			delete(c.announced, k)
		}
	}
	for k := range c.promoted {
		if k <= id {
			delete(c.promoted, k)
		}
	}
}

// triggerCheckpoint is the coordinator's trigger mail for a task without
// open inputs (a source). After the barrier of a stop-with-savepoint, a
// source emits nothing more: the savepoint is the job's last state, so
// what the restored job reads again was never seen downstream (an
// at-least-once sink would otherwise get it twice).
func (t *Task) triggerCheckpoint(b checkpoint.Barrier, stop bool) error {
	if t.cp == nil || t.finished {
		return nil
	}
	if err := t.cp.step(checkpoint.TriggerReceived{Barrier: b}, nil); err != nil {
		return err
	}
	if stop && t.src != nil {
		t.stoppedAt = b.ID
	}
	return nil
}

func (t *Task) notifyComplete(id int64) error {
	if t.cp == nil {
		return nil
	}
	t.cp.forget(id)
	if err := t.cp.step(checkpoint.CheckpointCompleted{ID: id}, nil); err != nil {
		return err
	}
	return t.notifyUnits(id, true)
}

func (t *Task) notifyAborted(id int64) error {
	if t.cp == nil {
		return nil
	}
	if id == t.stoppedAt {
		t.stoppedAt = 0 // the stop failed: the job carries on
	}
	if p := t.cp.pending[id]; p != nil {
		t.cp.drop(p) // its asynchronous part may have started (finishEarly)
		delete(t.cp.pending, id)
	}
	t.cp.forget(id)
	if err := t.cp.step(checkpoint.CheckpointAborted{ID: id}, nil); err != nil {
		return err
	}
	return t.notifyUnits(id, false)
}

// notifyUnits passes a notification to every operator, source and keyed
// backend of the chain that listens for it.
func (t *Task) notifyUnits(id int64, complete bool) error {
	for _, u := range t.units {
		var src SourceDriver
		if u.op == nil {
			src = t.src
		}
		if err := notifyUnit(u, src, id, complete); err != nil {
			return err
		}
	}
	return nil
}

// notifyUnit passes a notification to one operator (or, for a source
// unit, to the source driver src) and its keyed backend.
func notifyUnit(u *opUnit, src SourceDriver, id int64, complete bool) error {
	var ls []operators.CheckpointListener
	if l, ok := u.op.(operators.CheckpointListener); ok && u.op != nil {
		ls = append(ls, l)
	}
	if u.op == nil && src != nil {
		if l, ok := src.(operators.CheckpointListener); ok {
			ls = append(ls, l)
		}
	}
	if ib, ok := u.ctx.KeyedState.(state.IncrementalBackend); ok {
		if complete {
			ib.NotifyCheckpointComplete(id)
		} else {
			ib.NotifyCheckpointAborted(id)
		}
	} else if l, ok := u.ctx.KeyedState.(operators.CheckpointListener); ok && u.ctx.KeyedState != nil {
		ls = append(ls, l)
	}
	for _, l := range ls {
		var err error
		if complete {
			err = l.NotifyCheckpointComplete(id)
		} else {
			err = l.NotifyCheckpointAborted(id)
		}
		if err != nil {
			return operators.Wrap(u.ctx, fmt.Errorf("notify checkpoint %d: %w", id, err))
		}
	}
	return nil
}

// NotifyOperator tells the operator op of node n, opened with oc, and its
// keyed backend that checkpoint id completed (complete) or was aborted,
// as a Task does for each operator of its chain (package sluicetest's
// harnesses notify through it).
func NotifyOperator(n *Node, oc *operators.Context, op operators.Operator, id int64, complete bool) error {
	return notifyUnit(&opUnit{node: n, ctx: oc, op: op}, nil, id, complete)
}

// drainEventTime is the source's part of stop-with-savepoint --drain: the
// end of event time, so that every event-time timer fires first.
func (t *Task) drainEventTime() error {
	if d, ok := t.src.(interface{ EmitWatermark(int64) error }); ok {
		return d.EmitWatermark(operators.MaxWatermark)
	}
	return nil
}

func (c *taskCheckpoints) step(ev checkpoint.Event, boe *network.BufferOrEvent) error {
	err := c.exec(c.handler.Step(time.Now(), ev), boe)
	c.refreshLive()
	return err
}

func (c *taskCheckpoints) onBarrier(ch int, b checkpoint.Barrier, boe *network.BufferOrEvent) error {
	return c.step(checkpoint.BarrierReceived{Channel: ch, Barrier: b, Priority: boe.Priority, Overtaken: len(boe.Overtaken)}, boe)
}

// onBuffer tells the handler about a data buffer polled from channel ch,
// and persists it when it belongs to an unaligned checkpoint's input state.
func (c *taskCheckpoints) onBuffer(ch int, data []byte) error {
	acts := c.handler.OnBuffer(ch, len(data))
	for _, a := range acts {
		if pi, ok := a.(checkpoint.PersistInput); ok {
			if p := c.pending[pi.ID]; p != nil {
				p.mu.Lock()
				if !p.launched && !p.done[pi.Channel] {
					p.input[pi.Channel] = append(p.input[pi.Channel], data...)
				}
				p.mu.Unlock()
			}
			continue
		}
		if err := c.exec([]checkpoint.Action{a}, nil); err != nil {
			return err
		}
	}
	return nil
}

func matchBarrier(id int64) func(ev event.Event) bool {
	return func(ev event.Event) bool {
		b, ok := ev.(event.Barrier)
		return ok && b.ID == id
	}
}

// exec carries out the barrier handler's actions, in order.
func (c *taskCheckpoints) exec(acts []checkpoint.Action, boe *network.BufferOrEvent) error {
	t := c.t
	for len(acts) > 0 {
		act := acts[0]
		acts = acts[1:]
		switch a := act.(type) {
		case checkpoint.BlockChannel:
			gi, local := t.channel(a.Channel)
			gi.gate.Block(local)
		case checkpoint.UnblockAll:
			for _, gi := range t.gates {
				gi.gate.UnblockAll()
			}
		case checkpoint.StartCheckpoint:
			if err := c.snapshotSync(a); err != nil {
				acts = append(c.handler.Step(time.Now(), checkpoint.CheckpointAborted{ID: a.Barrier.ID}), acts...)
				c.abort(a.Barrier.ID, checkpoint.ReasonDeclined, err)
			}
		case checkpoint.ForwardBarrier:
			c.overtaken = nil
			for pi, p := range t.partitions {
				if !a.Priority {
					if err := p.BroadcastEvent(event.Barrier{Barrier: a.Barrier}); err != nil {
						return fmt.Errorf("task %s: forward barrier %d: %w", t.name, a.Barrier.ID, err)
					}
					if a.Barrier.Options.Alignment == checkpoint.AlignedWithTimeout {
						for sub := 0; sub < p.NumSubpartitions(); sub++ {
							if _, err := p.AddPriorityEvent(sub, event.BarrierAnnouncement{Barrier: a.Barrier}); err != nil {
								return fmt.Errorf("task %s: announce barrier %d: %w", t.name, a.Barrier.ID, err)
							}
						}
					}
					continue
				}
				for sub := 0; sub < p.NumSubpartitions(); sub++ {
					ov, err := p.AddPriorityEvent(sub, event.Barrier{Barrier: a.Barrier})
					if err != nil {
						return fmt.Errorf("task %s: forward priority barrier %d: %w", t.name, a.Barrier.ID, err)
					}
					for _, b := range ov {
						c.overtaken = append(c.overtaken, outputChunk{partition: pi, sub: sub, data: b})
					}
				}
			}
			if p := c.pending[a.Barrier.ID]; p != nil && !a.Priority {
				c.watchOutput(p)
			}
		case checkpoint.PersistOvertakenOutput:
			p := c.pending[a.ID]
			if p != nil {
				p.completeOutput(c.overtaken)
			}
			c.overtaken = nil
			if p != nil {
				c.maybeAsync(p)
			}
		case checkpoint.PersistInput:
			// Only OnBuffer asks for it; handled in onBuffer.
		case checkpoint.PersistOvertakenInput:
			if p := c.pending[a.ID]; p != nil && boe != nil {
				p.mu.Lock()
				if !p.launched && !p.done[a.Channel] { // else finishEarly recorded it
					for _, b := range boe.Overtaken {
						p.input[a.Channel] = append(p.input[a.Channel], b...)
					}
				}
				if p.done != nil {
					p.done[a.Channel] = true
				}
				p.mu.Unlock()
			}
		case checkpoint.PromoteInputBarrier:
			gi, local := t.channel(a.Channel)
			ov, found := gi.gate.PromoteEvent(local, matchBarrier(a.ID))
			if found {
				if p := c.pending[a.ID]; p != nil {
					for _, b := range ov {
						p.input[a.Channel] = append(p.input[a.Channel], b...)
					}
				}
				acts = append(c.handler.Step(time.Now(), checkpoint.InputBarrierPromoted{Channel: a.Channel, ID: a.ID}), acts...)
			}
		case checkpoint.PromoteOutputBarrier:
			p := c.pending[a.ID]
			var chunks []outputChunk
			for pi, part := range t.partitions {
				for sub := 0; sub < part.NumSubpartitions(); sub++ {
					ov, found := part.PromoteEvent(sub, matchBarrier(a.ID))
					if found && p != nil {
						for _, b := range ov {
							chunks = append(chunks, outputChunk{partition: pi, sub: sub, data: b})
						}
					}
				}
			}
			if p != nil {
				p.completeOutput(chunks)
				c.maybeAsync(p)
			}
		case checkpoint.InputStateComplete:
			if p := c.pending[a.ID]; p != nil {
				p.mu.Lock()
				p.inputDone = true
				p.mu.Unlock()
				c.maybeAsync(p)
			}
		case checkpoint.RegisterTimer:
			t.timers.At(a.At.UnixMilli(), func() error { return c.step(checkpoint.TimerFired{}, nil) })
		case checkpoint.AbortCheckpoint:
			c.abort(a.ID, a.Reason, fmt.Errorf("task %s aborted checkpoint %d: %s", t.name, a.ID, a.Reason))
		case checkpoint.ForwardCancel:
			for _, p := range t.partitions {
				if err := p.BroadcastEvent(event.CancelCheckpointMarker{ID: a.ID}); err != nil {
					return fmt.Errorf("task %s: forward cancel marker %d: %w", t.name, a.ID, err)
				}
			}
		default:
			return fmt.Errorf("task %s: unknown barrier handler action %s", t.name, act)
		}
	}
	return nil
}

// watchOutput waits, for an aligned barrier that the timeout may still
// promote, until it has left every output queue (or the timeout promotes
// it): only then is the checkpoint's output channel state complete. The
// network tells when events leave the queues (onEventSent).
func (c *taskCheckpoints) watchOutput(p *pendingSnapshot) {
	if p.barrier.Options.Alignment != checkpoint.AlignedWithTimeout {
		p.completeOutput(nil)
		c.maybeAsync(p)
		return
	}
	// Armed before the check: a barrier sent after it posts a recheck.
	c.watchArmed.Store(true)
	c.watched = append(c.watched, p)
	c.recheckWatched()
}

// onEventSent runs on a network goroutine when events left one of the
// task's output queues: while snapshots are watched, it has the task
// recheck them.
func (c *taskCheckpoints) onEventSent() {
	if !c.watchArmed.Load() || !c.watchMail.CompareAndSwap(false, true) {
		return
	}
	_ = c.t.mailbox.Put(func() error {
		c.watchMail.Store(false)
		c.recheckWatched()
		return nil
	})
}

// recheckWatched completes the output of the watched snapshots whose
// barrier has left every queue, and forgets those done otherwise
// (promoted, aborted).
func (c *taskCheckpoints) recheckWatched() {
	keep := c.watched[:0]
	for _, p := range c.watched {
		switch {
		case c.pending[p.id()] != p || p.isOutputDone():
		case c.barrierQueued(p.id()):
			keep = append(keep, p)
		default:
			p.completeOutput(nil)
			c.maybeAsync(p)
		}
	}
	clear(c.watched[len(keep):])
	c.watched = keep
	if len(keep) == 0 {
		c.watchArmed.Store(false)
	}
}

func (c *taskCheckpoints) barrierQueued(id int64) bool {
	match := matchBarrier(id)
	for _, p := range c.t.partitions {
		for sub := 0; sub < p.NumSubpartitions(); sub++ {
			if p.HasQueuedEvent(sub, match) {
				return true
			}
		}
	}
	return false
}

// abort drops checkpoint id here and declines it to the coordinator.
func (c *taskCheckpoints) abort(id int64, reason checkpoint.Reason, err error) {
	if p := c.pending[id]; p != nil {
		c.drop(p)
		delete(c.pending, id)
	}
	if g := c.t.att.gateway; g != nil {
		c.t.toCoordinator(g.Decline(DeclineCheckpoint{From: c.t.ref(), CheckpointID: id, Reason: reason, Err: err}))
	}
}

// close releases the snapshots in progress and waits for the
// asynchronous parts.
func (c *taskCheckpoints) close() {
	c.closed = true
	for id, p := range c.pending {
		c.drop(p)
		delete(c.pending, id)
	}
	c.async.Wait()
}

// drop releases p unless its asynchronous part started (finishEarly),
// which releases it; either way it never starts after this.
func (c *taskCheckpoints) drop(p *pendingSnapshot) {
	p.mu.Lock()
	launched := p.launched
	p.released = true
	p.mu.Unlock()
	c.live.CompareAndSwap(p, nil)
	if !launched {
		p.release()
	}
}
