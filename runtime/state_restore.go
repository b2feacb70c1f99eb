package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/lifecycle"
	"github.com/sluicehq/sluice/state"
)

// ErrRestore is returned (wrapped) when a job cannot restore its state
// from a checkpoint or savepoint; the message names the operator, the
// subtask and the file.
var ErrRestore = lifecycle.ErrRestore

// Names of the state streams a subtask writes per operator.
const (
	operatorStateName  = "operator-state"
	backendHeap        = "full"
	backendIncremental = "incremental"
)

// restoreSnapshot is the checkpoint or savepoint an attempt restores from,
// indexed by operator uid.
type restoreSnapshot struct {
	snap  *storage.Snapshot
	byUID map[string][]storage.SubtaskState
	// owned: the run owns the snapshot and it lives in the job's own
	// directory, so incremental checkpoints may reference its shared files.
	// Otherwise (NO_CLAIM, a snapshot elsewhere) the first checkpoint after
	// the restore writes every file anew.
	owned bool
}

func newRestoreSnapshot(snap *storage.Snapshot, owned bool) *restoreSnapshot {
	r := &restoreSnapshot{snap: snap, byUID: map[string][]storage.SubtaskState{}, owned: owned}
	for _, st := range snap.Metadata.Subtasks {
		r.byUID[st.OperatorUID] = append(r.byUID[st.OperatorUID], st)
	}
	for uid := range r.byUID {
		slices.SortFunc(r.byUID[uid], func(a, b storage.SubtaskState) int { return a.Subtask - b.Subtask })
	}
	return r
}

func (r *restoreSnapshot) id() int64 { return r.snap.Metadata.CheckpointID }

// opUnit is one operator of a task's chain with its state.
type opUnit struct {
	node *Node
	ctx  *operators.Context
	op   operators.Operator // nil for a source
	// channel state to replay (head unit only)
	inputState  []storage.ChannelStateHandle
	outputState []storage.ChannelStateHandle
}

// initState makes the operator's state backends and restores them from the
// attempt's snapshot.
func (t *Task) initState(n *Node, oc *operators.Context) error {
	ob, err := state.NewOperatorStateBackend(t.subtask, t.vertex.Parallelism)
	if err != nil {
		return err
	}
	oc.OperatorState = ob
	if n.Keyed {
		f := t.job.cfg.StateBackend
		if f == nil {
			f = HeapStateBackend
		}
		kb, err := f(StateBackendOptions{
			Job: t.job.cfg.JobName, OperatorUID: n.UID, Subtask: t.subtask,
			Parallelism: t.vertex.Parallelism, MaxParallelism: t.vertex.MaxParallelism,
			KeyGroups: state.RangeFor(t.vertex.MaxParallelism, t.vertex.Parallelism, t.subtask),
			Logger:    oc.Logger,
		})
		if err != nil {
			return fmt.Errorf("create keyed state backend: %w", err)
		}
		oc.KeyedState = kb
	}
	r := t.restore
	if r == nil {
		return nil
	}
	in := stateInit{node: n, oc: oc, restore: r, bytes: &t.restoreCounters.bytes}
	return in.run()
}

// InitOperatorState gives oc the state backends of one subtask of node n
// (the subtask oc names by Subtask, Parallelism and MaxParallelism): its
// operator state backend and, for a keyed node, a keyed backend made by f
// (nil: the heap backend) for the subtask's key-group range, restored
// from snap unless snap is nil as a Task restores them before it opens
// its chain (the same code): operator state redistributed over the new
// parallelism, keyed state from every old subtask whose key groups
// overlap the new range, the committables of the old subtasks i with i
// mod the new parallelism equal to this subtask, and the Restored fields
// of oc set. job names the job to the backend factory. It is the seam
// through which package sluicetest's harnesses run one operator outside
// a Task.
func InitOperatorState(n *Node, oc *operators.Context, f StateBackendFactory, job string, snap *storage.Snapshot) error {
	ob, err := state.NewOperatorStateBackend(oc.Subtask, oc.Parallelism)
	if err != nil {
		return err
	}
	oc.OperatorState = ob
	if n.Keyed {
		if f == nil {
			f = HeapStateBackend
		}
		kb, err := f(StateBackendOptions{
			Job: job, OperatorUID: n.UID, Subtask: oc.Subtask,
			Parallelism: oc.Parallelism, MaxParallelism: oc.MaxParallelism,
			KeyGroups: state.RangeFor(oc.MaxParallelism, oc.Parallelism, oc.Subtask),
		})
		if err != nil {
			return fmt.Errorf("create keyed state backend: %w", err)
		}
		oc.KeyedState = kb
	}
	if snap == nil {
		return nil
	}
	in := stateInit{node: n, oc: oc, restore: newRestoreSnapshot(snap, false)}
	return in.run()
}

// stateInit is the restore of one operator's state backends, made
// already, from a snapshot.
type stateInit struct {
	node    *Node
	oc      *operators.Context
	restore *restoreSnapshot
	bytes   *atomic.Int64 // restored bytes are added here (nil: not counted)
}

func (in *stateInit) run() error {
	n, oc, r := in.node, in.oc, in.restore
	olds := r.byUID[n.UID]
	if len(olds) == 0 {
		return nil // an operator new to the job starts empty
	}
	oc.Restored, oc.RestoredCheckpointID = true, r.id()
	oldPar := olds[0].Parallelism
	oc.RestoredParallelisms = []int{oldPar}
	var opHandles []storage.StateHandle
	for _, st := range olds {
		for _, h := range st.OperatorState {
			if h.Name == operatorStateName {
				opHandles = append(opHandles, h.Handle)
			}
		}
		if st.Subtask%oc.Parallelism == oc.Subtask {
			oc.RestoredCommittables = append(oc.RestoredCommittables, st.Committables...)
		}
	}
	if err := in.restoreFrom("operator state", opHandles, oc.OperatorState.Restore); err != nil {
		return err
	}
	if oc.KeyedState != nil {
		mine := oc.KeyedState.KeyGroupRange()
		var kh []storage.StateHandle
		var incremental [][]byte
		for _, st := range olds {
			for _, h := range st.KeyedState {
				if h.KeyGroups.Start > mine.End || h.KeyGroups.End < mine.Start {
					continue
				}
				if h.Handle != nil {
					kh = append(kh, *h.Handle)
				}
				for _, f := range h.Files {
					if f.Name == incrementalHandleName {
						incremental = append(incremental, f.Handle.Inline)
					}
				}
			}
		}
		if len(incremental) > 0 {
			return in.restoreIncremental(incremental)
		}
		if err := in.restoreFrom("keyed state", kh, oc.KeyedState.Restore); err != nil {
			return err
		}
	}
	return nil
}

func (in *stateInit) count(n int64) {
	if in.bytes != nil {
		in.bytes.Add(n)
	}
}

// restoreIncremental restores an incremental backend from the handles of
// the old subtasks, downloading the files they reference.
func (in *stateInit) restoreIncremental(handles [][]byte) error {
	r, n, oc := in.restore, in.node, in.oc
	ib, ok := oc.KeyedState.(state.IncrementalBackend)
	if !ok {
		return fmt.Errorf("%w keyed state of operator %q subtask %d: checkpoint %d (%s) holds incremental state of another backend; restore it with that backend, or take a savepoint (always in the canonical format) and restore from it",
			ErrRestore, n.Name, oc.Subtask, r.id(), r.snap.Dir)
	}
	download := func(ref []byte) (io.ReadCloser, error) {
		var h storage.StateHandle
		if err := json.Unmarshal(ref, &h); err != nil {
			return nil, fmt.Errorf("file reference %q: %w", ref, err)
		}
		in.count(h.Size)
		return r.snap.Open(h)
	}
	if err := ib.RestoreIncrementalState(handles, download); err != nil {
		return fmt.Errorf("%w keyed state of operator %q subtask %d from checkpoint %d (%s): %w",
			ErrRestore, n.Name, oc.Subtask, r.id(), r.snap.Dir, err)
	}
	if d, ok := ib.(state.RestoreDisclaimer); ok && !r.owned {
		d.DisclaimRestored()
	}
	return nil
}

// restoreFrom opens every handle and hands the readers to restore.
func (in *stateInit) restoreFrom(what string, hs []storage.StateHandle, restore func(...io.Reader) error) error {
	if len(hs) == 0 {
		return nil
	}
	r, n, oc := in.restore, in.node, in.oc
	readers := make([]io.Reader, 0, len(hs))
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for _, h := range hs {
		in.count(h.Size)
		rc, err := r.snap.Open(h)
		if err != nil {
			return fmt.Errorf("%w %s of operator %q subtask %d from checkpoint %d (%s): %w",
				ErrRestore, what, n.Name, oc.Subtask, r.id(), r.snap.Dir, err)
		}
		closers = append(closers, rc)
		readers = append(readers, rc)
	}
	if err := restore(readers...); err != nil {
		return fmt.Errorf("%w %s of operator %q subtask %d from checkpoint %d (%s): %w",
			ErrRestore, what, n.Name, oc.Subtask, r.id(), r.snap.Dir, err)
	}
	return nil
}

// channelStateOf returns the in-flight data the restored checkpoint holds
// for this task (recorded on the chain's head operator). Rescaling such a
// checkpoint is refused: its channels no longer exist.
func (t *Task) channelStateOf(head *Node) (in, out []storage.ChannelStateHandle, err error) {
	r := t.restore
	if r == nil {
		return nil, nil, nil
	}
	for _, st := range r.byUID[head.UID] {
		if len(st.InputChannelState) == 0 && len(st.OutputChannelState) == 0 {
			continue
		}
		if st.Parallelism != t.vertex.Parallelism {
			return nil, nil, fmt.Errorf("%w: checkpoint %d holds in-flight data of operator %q taken at parallelism %d, and the job now runs it at %d: restore it at its old parallelism, or rescale from a savepoint (savepoints are always aligned)",
				ErrRestore, r.id(), head.Name, st.Parallelism, t.vertex.Parallelism)
		}
		if st.Subtask == t.subtask {
			in, out = st.InputChannelState, st.OutputChannelState
		}
	}
	return in, out, nil
}
