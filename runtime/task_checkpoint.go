package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/network/event"
	"github.com/sluicehq/sluice/state"
)

// errStopTask is the mail that ends a task after a stop-with-savepoint.
var errStopTask = errors.New("stop task")

// SnapshottingSource is implemented by source drivers whose position is
// part of every checkpoint: they write it into their operator state in the
// synchronous part.
type SnapshottingSource interface {
	SnapshotState(checkpointID int64) error
}

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
}

// pendingSnapshot is one checkpoint of this task from its synchronous part
// until its asynchronous part starts.
type pendingSnapshot struct {
	barrier   checkpoint.Barrier
	fig       checkpoint.TaskFigures
	syncDone  bool
	inputDone bool
	// outputDone is false while an aligned barrier that may still be
	// promoted (aligned-with-timeout) is queued in an output.
	outputDone bool
	units      []unitSnapshot
	input      map[int][]byte // persisted input channel state by task channel
	output     []outputChunk
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
	return c
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
// open inputs (a source).
func (t *Task) triggerCheckpoint(b checkpoint.Barrier) error {
	if t.cp == nil || t.finished {
		return nil
	}
	return t.cp.step(checkpoint.TriggerReceived{Barrier: b}, nil)
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
	if p := t.cp.pending[id]; p != nil {
		p.release()
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
		var ls []operators.CheckpointListener
		if l, ok := u.op.(operators.CheckpointListener); ok && u.op != nil {
			ls = append(ls, l)
		}
		if u.op == nil && t.src != nil {
			if l, ok := t.src.(operators.CheckpointListener); ok {
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
	}
	return nil
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
	return c.exec(c.handler.Step(time.Now(), ev), boe)
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
				p.input[pi.Channel] = append(p.input[pi.Channel], data...)
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
				p.output = append(p.output, c.overtaken...)
				p.outputDone = true
			}
			c.overtaken = nil
			if p != nil {
				c.maybeAsync(p)
			}
		case checkpoint.PersistInput:
			// Only OnBuffer asks for it; handled in onBuffer.
		case checkpoint.PersistOvertakenInput:
			if p := c.pending[a.ID]; p != nil && boe != nil {
				for _, b := range boe.Overtaken {
					p.input[a.Channel] = append(p.input[a.Channel], b...)
				}
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
			for pi, part := range t.partitions {
				for sub := 0; sub < part.NumSubpartitions(); sub++ {
					ov, found := part.PromoteEvent(sub, matchBarrier(a.ID))
					if found && p != nil {
						for _, b := range ov {
							p.output = append(p.output, outputChunk{partition: pi, sub: sub, data: b})
						}
					}
				}
			}
			if p != nil {
				p.outputDone = true
				c.maybeAsync(p)
			}
		case checkpoint.InputStateComplete:
			if p := c.pending[a.ID]; p != nil {
				p.inputDone = true
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
		p.outputDone = true
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
		case c.pending[p.id()] != p || p.outputDone:
		case c.barrierQueued(p.id()):
			keep = append(keep, p)
		default:
			p.outputDone = true
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
		p.release()
		delete(c.pending, id)
	}
	if g := c.t.att.gateway; g != nil {
		c.t.toCoordinator(g.Decline(DeclineCheckpoint{From: c.t.ref(), CheckpointID: id, Reason: reason, Err: err}))
	}
}

// snapshotSync is the synchronous part of a checkpoint, on the task
// goroutine: every operator captures its state (the backends' snapshots
// are copy-on-write), and for an unaligned checkpoint the partial records
// held by the input readers start the input channel state.
func (c *taskCheckpoints) snapshotSync(a checkpoint.StartCheckpoint) error {
	t := c.t
	start := time.Now()
	id := a.Barrier.ID
	p := &pendingSnapshot{
		barrier: a.Barrier,
		fig: checkpoint.TaskFigures{
			StartDelay: a.StartDelay, Alignment: a.Alignment, ProcessedData: a.Processed, Unaligned: a.Unaligned,
		},
		input: map[int][]byte{},
		// The output side is complete when the barrier is forwarded
		// (ForwardBarrier / PersistOvertakenOutput); a sink has none.
		outputDone: len(t.partitions) == 0,
	}
	c.pending[id] = p
	for _, u := range t.units {
		us := unitSnapshot{unit: u}
		if u.op == nil {
			if s, ok := t.src.(SnapshottingSource); ok {
				if err := s.SnapshotState(id); err != nil {
					return operators.Wrap(u.ctx, fmt.Errorf("snapshot source for checkpoint %d: %w", id, err))
				}
			}
		} else if s, ok := u.op.(operators.StateSnapshotter); ok {
			cm, err := s.SnapshotState(id)
			if err != nil {
				return operators.Wrap(u.ctx, err)
			}
			us.committables = cm
		}
		var err error
		if us.op, err = u.ctx.OperatorState.Snapshot(id); err != nil {
			return operators.Wrap(u.ctx, fmt.Errorf("snapshot operator state for checkpoint %d: %w", id, err))
		}
		if kb := u.ctx.KeyedState; kb != nil {
			// Checkpoints of an incremental backend write what changed;
			// savepoints are always full, in the canonical format.
			if ib, ok := kb.(state.IncrementalBackend); ok && ib.Incremental() && a.Barrier.Options.Kind == checkpoint.KindCheckpoint {
				us.incremental, err = ib.SnapshotIncrementalState(id)
			} else {
				us.keyed, err = kb.Snapshot(id)
			}
			if err != nil {
				us.op.Release()
				return operators.Wrap(u.ctx, fmt.Errorf("snapshot keyed state for checkpoint %d: %w", id, err))
			}
		}
		p.units = append(p.units, us)
	}
	if a.Unaligned {
		for _, gi := range t.gates {
			for _, ci := range gi.channels {
				if pend := ci.reader.Pending(); len(pend) > 0 {
					ch := gi.offset + ci.index
					p.input[ch] = append(p.input[ch], pend...)
				}
			}
		}
		for ch, data := range c.promoted[id] {
			p.input[ch] = append(p.input[ch], data...)
		}
		delete(c.promoted, id)
	} else {
		p.inputDone = true
	}
	p.fig.Sync = time.Since(start)
	p.syncDone = true
	c.maybeAsync(p)
	return nil
}

// maybeAsync starts the asynchronous part once the synchronous part is
// done and the channel state is complete.
func (c *taskCheckpoints) maybeAsync(p *pendingSnapshot) {
	if !p.syncDone || !p.inputDone || !p.outputDone || c.pending[p.id()] != p || c.closed {
		return
	}
	delete(c.pending, p.id())
	t := c.t
	g := t.att.gateway
	c.async.Add(1)
	go func() {
		defer c.async.Done()
		start := time.Now()
		states, sizes, err := c.writeRecovering(p)
		p.release()
		if err != nil {
			t.toCoordinator(g.Decline(DeclineCheckpoint{From: t.ref(), CheckpointID: p.id(), Reason: checkpoint.ReasonAsyncFailure,
				Err: fmt.Errorf("task %s: write checkpoint %d: %w", t.name, p.id(), err)}))
			return
		}
		p.fig.Async = time.Since(start)
		p.fig.CheckpointedSize = sizes.written
		p.fig.StateSize = sizes.state
		p.fig.PersistedData = sizes.persisted
		t.toCoordinator(g.Acknowledge(AcknowledgeCheckpoint{From: t.ref(), CheckpointID: p.id(), States: states, Figures: p.fig}))
	}()
}

// writeRecovering is write with a panic (in a state backend's upload, a
// user's snapshot code) turned into an error: the checkpoint is declined
// instead of the process crashing.
func (c *taskCheckpoints) writeRecovering(p *pendingSnapshot) (states []storage.SubtaskState, sz snapshotSizes, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.t.logger.Error("panic in the asynchronous part of a checkpoint; declining it", "checkpoint", p.id(), "panic", r, "stack", string(debug.Stack()))
			states, err = nil, fmt.Errorf("panic in the asynchronous part: %v", r)
		}
	}()
	return c.write(p)
}

// snapshotSizes are the figures of a task's asynchronous part: bytes
// written now, bytes of state referenced (more than written for an
// incremental checkpoint), and bytes of channel state.
type snapshotSizes struct{ written, state, persisted int64 }

// write is the asynchronous part: every operator's state streams, and the
// channel state on the head operator.
func (c *taskCheckpoints) write(p *pendingSnapshot) ([]storage.SubtaskState, snapshotSizes, error) {
	t := c.t
	var sz snapshotSizes
	loc, err := t.att.driver.location(p.id())
	if err != nil {
		return nil, sz, err
	}
	states := make([]storage.SubtaskState, 0, len(p.units))
	for i, us := range p.units {
		u := us.unit
		owner := fmt.Sprintf("%s-%d", u.node.UID, t.subtask)
		st := storage.SubtaskState{
			OperatorUID: u.node.UID, Subtask: t.subtask,
			Parallelism: t.vertex.Parallelism, MaxParallelism: t.vertex.MaxParallelism,
			Committables: us.committables,
		}
		h, err := writeStream(loc, owner+"-op", us.op)
		if err != nil {
			return nil, sz, fmt.Errorf("operator state of %q: %w", u.node.Name, err)
		}
		sz.written += h.Size
		sz.state += h.Size
		st.OperatorState = []storage.OperatorStateHandle{{Name: operatorStateName, Distribution: storage.DistributeSplit, Handle: h}}
		if us.keyed != nil || us.incremental != nil {
			kgr := u.ctx.KeyedState.KeyGroupRange()
			kh := storage.KeyedStateHandle{KeyGroups: storage.KeyGroupRange{Start: kgr.Start, End: kgr.End}, Backend: backendHeap}
			if us.keyed != nil {
				h, err := writeStream(loc, owner+"-keyed", us.keyed)
				if err != nil {
					return nil, sz, fmt.Errorf("keyed state of %q: %w", u.node.Name, err)
				}
				sz.written += h.Size
				sz.state += h.Size
				kh.Handle = &h
			} else {
				files, up, err := uploadIncremental(loc, owner, us.incremental)
				if err != nil {
					return nil, sz, fmt.Errorf("incremental keyed state of %q: %w", u.node.Name, err)
				}
				sz.written += up.CheckpointedSize
				sz.state += up.StateSize
				kh.Backend, kh.Files = backendIncremental, files
			}
			st.KeyedState = []storage.KeyedStateHandle{kh}
		}
		if i == 0 && (len(p.input) > 0 || len(p.output) > 0) {
			in, out, n, err := writeChannelState(loc, owner+"-channels", p)
			if err != nil {
				return nil, sz, fmt.Errorf("channel state: %w", err)
			}
			st.InputChannelState, st.OutputChannelState = in, out
			sz.written += n
			sz.state += n
			sz.persisted += n
		}
		states = append(states, st)
	}
	return states, sz, nil
}

// incrementalHandleName is the named handle that holds an incremental
// backend's own handle, inline in _metadata.
const incrementalHandleName = "_backend_handle"

// uploadIncremental runs the asynchronous part of an incremental snapshot
// against checkpoint storage: new files go to the shared directory (or the
// checkpoint's own for private ones), and every file the snapshot uses is
// listed in the metadata, so the shared-state registry counts it.
func uploadIncremental(loc *storage.Location, owner string, s state.IncrementalStateSnapshot) ([]storage.NamedHandle, state.IncrementalUpload, error) {
	up, err := s.Upload(storageUploader{loc: loc, owner: owner})
	if err != nil {
		return nil, up, err
	}
	files := []storage.NamedHandle{{Name: incrementalHandleName,
		Handle: storage.StateHandle{Size: int64(len(up.Handle)), CRC32C: storage.Checksum(up.Handle), Inline: up.Handle}}}
	for _, ref := range up.Refs {
		var h storage.StateHandle
		if err := json.Unmarshal(ref, &h); err != nil {
			return nil, up, fmt.Errorf("reference %q of an uploaded file: %w", ref, err)
		}
		files = append(files, storage.NamedHandle{Name: h.Path, Handle: h})
	}
	return files, up, nil
}

// storageUploader adapts checkpoint storage to state.Uploader: a
// reference is the JSON of the file's storage.StateHandle.
type storageUploader struct {
	loc   *storage.Location
	owner string
}

func (u storageUploader) Upload(name string, r io.Reader, size int64, shared bool) ([]byte, error) {
	var s *storage.StateStream
	if shared {
		var err error
		if s, err = u.loc.CreateSharedStream(u.owner + "-" + name); err != nil {
			return nil, err
		}
	} else {
		s = u.loc.CreateStateStream(u.owner + "-" + name)
	}
	n, err := io.Copy(s, r)
	if err == nil && n != size {
		err = fmt.Errorf("upload %s: read %d bytes, want %d", name, n, size)
	}
	if err != nil {
		s.Abort()
		return nil, err
	}
	h, err := s.Close()
	if err != nil {
		return nil, err
	}
	return json.Marshal(h)
}

func writeStream(loc *storage.Location, owner string, w io.WriterTo) (storage.StateHandle, error) {
	s := loc.CreateStateStream(owner)
	if _, err := w.WriteTo(s); err != nil {
		s.Abort()
		return storage.StateHandle{}, err
	}
	return s.Close()
}

// writeChannelState writes the persisted in-flight data of a task in one
// stream: input channels by task channel index, then output subpartitions
// (Gate is the partition's index).
func writeChannelState(loc *storage.Location, owner string, p *pendingSnapshot) (in, out []storage.ChannelStateHandle, n int64, err error) {
	s := loc.CreateStateStream(owner)
	var off int64
	for _, ch := range slices.Sorted(maps.Keys(p.input)) {
		data := p.input[ch]
		if len(data) == 0 {
			continue
		}
		if _, err := s.Write(data); err != nil {
			s.Abort()
			return nil, nil, 0, err
		}
		in = append(in, storage.ChannelStateHandle{Channel: ch, Offset: off, Length: int64(len(data))})
		off += int64(len(data))
	}
	for _, c := range p.output {
		if _, err := s.Write(c.data); err != nil {
			s.Abort()
			return nil, nil, 0, err
		}
		out = append(out, storage.ChannelStateHandle{Gate: c.partition, Channel: c.sub, Offset: off, Length: int64(len(c.data))})
		off += int64(len(c.data))
	}
	h, err := s.Close()
	if err != nil {
		return nil, nil, 0, err
	}
	for i := range in {
		in[i].Handle = h
	}
	for i := range out {
		out[i].Handle = h
	}
	return in, out, h.Size, nil
}

// close releases the snapshots in progress and waits for the
// asynchronous parts.
func (c *taskCheckpoints) close() {
	c.closed = true
	for id, p := range c.pending {
		p.release()
		delete(c.pending, id)
	}
	c.async.Wait()
}

// channel maps a task channel index to its gate and the channel in it.
func (t *Task) channel(ch int) (*gateInput, int) {
	for _, gi := range t.gates {
		if ch < gi.offset+len(gi.channels) {
			return gi, ch - gi.offset
		}
	}
	panic(fmt.Sprintf("runtime: task %s has no channel %d", t.name, ch))
}

// replayChannelState puts the restored in-flight data back before any new
// input: output buffers into their subpartitions, then the input channel
// state through each channel's record reader into the operators.
func (t *Task) replayChannelState() error {
	start := time.Now()
	defer func() { t.att.replayed(time.Since(start)) }()
	if len(t.units) == 0 {
		return nil
	}
	head := t.units[0]
	if len(head.inputState) == 0 && len(head.outputState) == 0 {
		return nil
	}
	r := t.att.restore
	read := func(h storage.ChannelStateHandle) ([]byte, error) {
		data, err := r.snap.ReadAll(h.Handle)
		t.att.restoreCounters.bytes.Add(h.Length)
		if err != nil {
			return nil, fmt.Errorf("%w channel state of task %s from checkpoint %d: %w", ErrRestore, t.name, r.id(), err)
		}
		if h.Offset+h.Length > int64(len(data)) {
			return nil, fmt.Errorf("%w channel state of task %s from checkpoint %d: range beyond its stream", ErrRestore, t.name, r.id())
		}
		return data[h.Offset : h.Offset+h.Length], nil
	}
	for _, h := range head.outputState {
		if h.Gate >= len(t.partitions) || h.Channel >= t.partitions[h.Gate].NumSubpartitions() {
			return fmt.Errorf("%w: checkpoint %d holds output state of partition %d subpartition %d, which task %s does not have",
				ErrRestore, r.id(), h.Gate, h.Channel, t.name)
		}
		data, err := read(h)
		if err != nil {
			return err
		}
		if err := t.partitions[h.Gate].WriteRaw(t.ctx, h.Channel, data); err != nil {
			return fmt.Errorf("task %s: replay output channel state: %w", t.name, err)
		}
	}
	// Every channel's restored input goes into its reader before any is
	// processed: a checkpoint whose barrier comes during the replay (the
	// task polls priority events between records) then finds all the
	// restored records not yet processed in the readers' pending bytes,
	// and persists them again, instead of losing those of the channels
	// not replayed yet.
	var restored []*channelInput
	for _, h := range head.inputState {
		if h.Channel >= t.numChannels {
			return fmt.Errorf("%w: checkpoint %d holds input state of channel %d, which task %s does not have",
				ErrRestore, r.id(), h.Channel, t.name)
		}
		data, err := read(h)
		if err != nil {
			return err
		}
		gi, local := t.channel(h.Channel)
		ci := gi.channels[local]
		ci.reader.FeedRaw(data)
		restored = append(restored, ci)
	}
	for _, ci := range restored {
		t.cur = ci
		for t.cur != nil {
			if _, err := t.processInput(); err != nil {
				return err
			}
		}
	}
	return nil
}
