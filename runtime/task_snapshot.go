package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/debug"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/state"
)

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
	incremental := a.Barrier.Options.Kind == checkpoint.KindCheckpoint
	for _, u := range t.units {
		us, err := captureUnit(u, t.src, id, incremental)
		if err != nil {
			return err
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
	p.syncEnd = time.Now()
	p.fig.Sync = p.syncEnd.Sub(start)
	p.syncDone = true
	if a.Unaligned && !p.inputDone {
		c.publishLive(p)
	}
	c.maybeAsync(p)
	return nil
}

// captureUnit is one operator's synchronous part of checkpoint id: its
// StateSnapshotter (for a source unit, the source driver's), then the
// keyed state it holds in memory (its timers: FlushKeyedState) and the
// copy-on-write snapshots of its operator and keyed backends; an
// incremental backend writes only what changed when incremental is set
// (checkpoints, not savepoints, which are always full, in the canonical
// format).
func captureUnit(u *opUnit, src SourceDriver, id int64, incremental bool) (unitSnapshot, error) {
	us := unitSnapshot{unit: u}
	if u.op == nil {
		if s, ok := src.(SnapshottingSource); ok {
			if err := s.SnapshotState(id); err != nil {
				return us, operators.Wrap(u.ctx, fmt.Errorf("snapshot source for checkpoint %d: %w", id, err))
			}
		}
	} else if s, ok := u.op.(operators.StateSnapshotter); ok {
		cm, err := s.SnapshotState(id)
		if err != nil {
			return us, operators.Wrap(u.ctx, err)
		}
		us.committables = cm
	}
	var err error
	if us.op, err = u.ctx.OperatorState.Snapshot(id); err != nil {
		return us, operators.Wrap(u.ctx, fmt.Errorf("snapshot operator state for checkpoint %d: %w", id, err))
	}
	if kb := u.ctx.KeyedState; kb != nil {
		if err := u.ctx.FlushKeyedState(); err != nil {
			us.op.Release()
			return us, operators.Wrap(u.ctx, fmt.Errorf("snapshot keyed state for checkpoint %d: %w", id, err))
		}
		if ib, ok := kb.(state.IncrementalBackend); ok && ib.Incremental() && incremental {
			us.incremental, err = ib.SnapshotIncrementalState(id)
		} else {
			us.keyed, err = kb.Snapshot(id)
		}
		if err != nil {
			us.op.Release()
			return us, operators.Wrap(u.ctx, fmt.Errorf("snapshot keyed state for checkpoint %d: %w", id, err))
		}
	}
	return us, nil
}

// maybeAsync starts the asynchronous part once the synchronous part is
// done and the channel state is complete.
func (c *taskCheckpoints) maybeAsync(p *pendingSnapshot) {
	if c.pending[p.id()] != p || c.closed {
		return
	}
	c.maybeAsyncChecked(p)
}

// maybeAsyncChecked is maybeAsync for a p known to be pending: it also
// forgets p once its asynchronous part started, here or in finishEarly.
func (c *taskCheckpoints) maybeAsyncChecked(p *pendingSnapshot) {
	p.mu.Lock()
	p.markInputIfDoneLocked()
	launch := c.readyLocked(p)
	launched := p.launched
	p.mu.Unlock()
	if !launched {
		return
	}
	delete(c.pending, p.id())
	c.live.CompareAndSwap(p, nil)
	if launch {
		c.launch(p)
	}
}

// readyLocked reports whether p's asynchronous part is to start now, and
// if so marks it started (p.mu is held).
func (c *taskCheckpoints) readyLocked(p *pendingSnapshot) bool {
	if p.launched || p.released || !p.syncDone || !p.inputDone || !p.outputDone {
		return false
	}
	p.launched = true
	c.async.Add(1)
	return true
}

// launch runs the asynchronous part of p (readyLocked said so): write the
// state, then acknowledge.
func (c *taskCheckpoints) launch(p *pendingSnapshot) {
	t := c.t
	g := t.att.gateway
	// Let the goroutines waiting on this P run first: when the
	// coordinator triggers several sources at once, the one woken last
	// runs first and the new goroutine below would take the next turn
	// too, so the other sources' triggers waited for this source's writes
	// (trigger_to_source 0.4-0.6 ms at the median on checkpointdemo, 0.15
	// with the yield).
	goruntime.Gosched()
	go func() {
		defer c.async.Done()
		start := time.Now()
		p.fig.ChannelStateWait = start.Sub(p.syncEnd)
		states, sizes, err := c.writeRecovering(p)
		p.release()
		if err != nil {
			t.toCoordinator(g.Decline(DeclineCheckpoint{From: t.ref(), CheckpointID: p.id(), Reason: checkpoint.ReasonAsyncFailure,
				Err: fmt.Errorf("task %s: write checkpoint %d: %w", t.name, p.id(), err)}))
			return
		}
		p.fig.Async = time.Since(p.syncEnd)
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
	states, sz, err = c.write(p)
	recordCommittableKinds(states, p.units)
	return states, sz, err
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
	loc, err := t.att.location(p.barrier)
	if err != nil {
		return nil, sz, err
	}
	states := make([]storage.SubtaskState, 0, len(p.units))
	for i, us := range p.units {
		st, usz, err := writeUnit(loc, us, t.subtask, t.vertex.Parallelism, t.vertex.MaxParallelism)
		if err != nil {
			return nil, sz, err
		}
		sz.written += usz.written
		sz.state += usz.state
		u := us.unit
		owner := fmt.Sprintf("%s-%d", u.node.UID, t.subtask)
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

// writeUnit is one operator's asynchronous part: it writes the streams
// captureUnit captured into loc and returns the operator's subtask state
// (without channel state, which only the head operator holds).
func writeUnit(loc *storage.Location, us unitSnapshot, subtask, parallelism, maxParallelism int) (storage.SubtaskState, snapshotSizes, error) {
	var sz snapshotSizes
	u := us.unit
	owner := fmt.Sprintf("%s-%d", u.node.UID, subtask)
	st := storage.SubtaskState{
		OperatorUID: u.node.UID, Subtask: subtask,
		Parallelism: parallelism, MaxParallelism: maxParallelism,
		Committables: us.committables,
	}
	h, err := writeStream(loc, owner+"-op", us.op)
	if err != nil {
		return st, sz, fmt.Errorf("operator state of %q: %w", u.node.Name, err)
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
				return st, sz, fmt.Errorf("keyed state of %q: %w", u.node.Name, err)
			}
			sz.written += h.Size
			sz.state += h.Size
			kh.Handle = &h
		} else {
			files, up, err := uploadIncremental(loc, owner, us.incremental)
			if err != nil {
				return st, sz, fmt.Errorf("incremental keyed state of %q: %w", u.node.Name, err)
			}
			sz.written += up.CheckpointedSize
			sz.state += up.StateSize
			kh.Backend, kh.Files = backendIncremental, files
		}
		st.KeyedState = []storage.KeyedStateHandle{kh}
	}
	return st, sz, nil
}

// SnapshotOperator takes the state of one subtask of node n, whose
// operator op was opened with oc (made by InitOperatorState), into loc as
// a Task's checkpoint does: the synchronous part (the operator's
// StateSnapshotter, then its backends' snapshots; full, in the canonical
// format, for a savepoint location), then at once the asynchronous part
// that writes the streams. The SubtaskState is what the Task would
// acknowledge for that operator. Package sluicetest's harnesses snapshot
// through it.
func SnapshotOperator(loc *storage.Location, n *Node, oc *operators.Context, op operators.Operator) (storage.SubtaskState, error) {
	u := &opUnit{node: n, ctx: oc, op: op}
	us, err := captureUnit(u, nil, loc.ID(), !loc.IsSavepoint())
	if err != nil {
		return storage.SubtaskState{}, err
	}
	st, _, err := writeUnit(loc, us, oc.Subtask, oc.Parallelism, oc.MaxParallelism)
	for _, s := range []state.StateSnapshot{us.op, us.keyed} {
		if s != nil {
			s.Release()
		}
	}
	if us.incremental != nil {
		us.incremental.Release()
	}
	return st, err
}

// incrementalHandleName is the named handle that holds an incremental
// backend's own handle, inline in _metadata.
const incrementalHandleName = "_backend_handle"

// uploadIncremental runs the asynchronous part of an incremental snapshot
// against checkpoint storage: new files go to the shared directory (or the
// checkpoint's own for private ones), and every file the snapshot uses is
// listed in the metadata, so the shared-state registry counts it.
func uploadIncremental(loc *storage.Location, owner string, s state.IncrementalStateSnapshot) ([]storage.NamedHandle, state.IncrementalUpload, error) {
	up, err := s.Upload(storage.StateUploader{Loc: loc, Owner: owner})
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

func writeStream(loc *storage.Location, owner string, w io.WriterTo) (storage.StateHandle, error) {
	s := loc.CreateStateStream(owner)
	if _, err := w.WriteTo(s); err != nil {
		s.Abort()
		return storage.StateHandle{}, err
	}
	return s.Close()
}
