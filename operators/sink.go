package operators

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/state"
)

// writerStateName is the union list state that holds a StatefulWriter's
// state.
const writerStateName = "sink-writer-state"

// Sink writes every record to a sink.Writer it makes at Open. For a
// two-phase-commit sink it pre-commits at every checkpoint, keeps the
// committables until the checkpoint completes, commits them then, and
// re-commits the restored ones before its writer starts.
type Sink[T any] struct {
	base
	sink      sink.Sink[T]
	writer    sink.Writer[T]
	committer sink.Committer
	writerSt  state.OperatorListState[[]byte]
	// pending committables by checkpoint id, not yet committed.
	pending map[int64][][]byte
}

// NewSink returns the operator that drives s.
func NewSink[T any](s sink.Sink[T]) *Sink[T] { return &Sink[T]{sink: s, pending: map[int64][][]byte{}} }

func (s *Sink[T]) Open(ctx *Context) error {
	s.ctx = ctx
	wctx := sink.WriterContext{
		Context: s.taskContext(),
		Subtask: ctx.Subtask, Parallelism: ctx.Parallelism,
		Restored: ctx.Restored, RestoredCheckpointID: ctx.RestoredCheckpointID,
		RestoredParallelisms: ctx.RestoredParallelisms,
		Logger:               ctx.Logger,
	}
	if ctx.OperatorState != nil {
		st, err := state.GetUnionListState(ctx.OperatorState, state.ListStateDescriptor[[]byte]{Name: writerStateName, Codec: codec.Bytes{}})
		if err != nil {
			return Wrap(ctx, fmt.Errorf("sink writer state: %w", err))
		}
		s.writerSt = st
		if ctx.Restored {
			if wctx.RestoredState, err = st.Get(); err != nil {
				return Wrap(ctx, fmt.Errorf("read restored sink writer state: %w", err))
			}
		}
	}
	if tp, ok := s.sink.(sink.TwoPhaseCommitSink[T]); ok {
		c, err := tp.NewCommitter(wctx)
		if err != nil {
			return Wrap(ctx, fmt.Errorf("open sink committer: %w", err))
		}
		s.committer = c
		s.addReporter(c)
		if len(ctx.RestoredCommittables) > 0 {
			// Re-commit what the restored checkpoint pre-committed, before
			// the writer starts (and may abort lingering transactions).
			if err := c.Commit(s.taskContext(), ctx.RestoredCheckpointID, ctx.RestoredCommittables); err != nil {
				return Wrap(ctx, fmt.Errorf("re-commit %d committables of restored checkpoint %d: %w",
					len(ctx.RestoredCommittables), ctx.RestoredCheckpointID, err))
			}
		}
	}
	w, err := s.sink.NewWriter(wctx)
	if err != nil {
		return Wrap(ctx, fmt.Errorf("open sink writer: %w", err))
	}
	s.writer = w
	s.addReporter(w)
	return nil
}

// addReporter has the task report x's figures when x reports any.
func (s *Sink[T]) addReporter(x any) {
	if rep, ok := x.(report.Reporter); ok {
		s.ctx.Metrics.AddReporter(rep)
	}
}

// CommittableKind is the kind of the sink's committables when the sink
// names it (sink.KindedCommittables), else "".
func (s *Sink[T]) CommittableKind() string {
	if k, ok := s.sink.(sink.KindedCommittables); ok {
		return k.CommittableKind()
	}
	return ""
}

// taskContext is the task's context (cancelled when the task is
// cancelled or fails over), or context.Background() when the operator
// runs without one: the writer and the committer give up blocking calls
// when it is done.
func (s *Sink[T]) taskContext() context.Context {
	if s.ctx == nil || s.ctx.Ctx == nil {
		return context.Background()
	}
	return s.ctx.Ctx
}

func (s *Sink[T]) Collect(v T, ts int64) error {
	if err := s.writer.Write(v, ts); err != nil {
		return Wrap(s.ctx, err)
	}
	return nil
}

func (s *Sink[T]) ProcessWatermark(int64) error { return nil }

// SnapshotState pre-commits (two-phase-commit sinks), flushes (other
// sinks: at-least-once), and stores the writer's state. It returns every
// committable not yet committed, so that a restore from this checkpoint
// commits them all.
func (s *Sink[T]) SnapshotState(checkpointID int64) ([][]byte, error) {
	if sw, ok := s.writer.(sink.StatefulWriter[T]); ok && s.writerSt != nil {
		st, err := sw.SnapshotState(checkpointID)
		if err != nil {
			return nil, Wrap(s.ctx, fmt.Errorf("snapshot sink writer state for checkpoint %d: %w", checkpointID, err))
		}
		if err := s.writerSt.Update(st); err != nil {
			return nil, Wrap(s.ctx, err)
		}
	}
	pw, ok := s.writer.(sink.PrecommittingWriter[T])
	if !ok || s.committer == nil {
		if err := s.writer.Flush(false); err != nil {
			return nil, Wrap(s.ctx, fmt.Errorf("flush sink at checkpoint %d: %w", checkpointID, err))
		}
		return nil, nil
	}
	c, err := pw.PrepareCommit(checkpointID)
	if err != nil {
		return nil, Wrap(s.ctx, fmt.Errorf("pre-commit for checkpoint %d: %w", checkpointID, err))
	}
	if len(c) > 0 {
		s.pending[checkpointID] = c
	}
	var all [][]byte
	for _, id := range slices.Sorted(maps.Keys(s.pending)) {
		all = append(all, s.pending[id]...)
	}
	return all, nil
}

// NotifyCheckpointComplete commits the committables of every checkpoint up
// to id, oldest first.
func (s *Sink[T]) NotifyCheckpointComplete(id int64) error {
	if s.committer == nil {
		return nil
	}
	for _, cid := range slices.Sorted(maps.Keys(s.pending)) {
		if cid > id {
			break
		}
		if err := s.committer.Commit(s.taskContext(), cid, s.pending[cid]); err != nil {
			return Wrap(s.ctx, fmt.Errorf("commit checkpoint %d: %w", cid, err))
		}
		delete(s.pending, cid)
	}
	if l, ok := s.writer.(CheckpointListener); ok {
		return Wrap(s.ctx, l.NotifyCheckpointComplete(id))
	}
	return nil
}

// NotifyCheckpointAborted keeps the committables: a later checkpoint
// covers them.
func (s *Sink[T]) NotifyCheckpointAborted(id int64) error {
	if l, ok := s.writer.(CheckpointListener); ok {
		return Wrap(s.ctx, l.NotifyCheckpointAborted(id))
	}
	return nil
}

// Finish flushes the writer with endOfInput set.
func (s *Sink[T]) Finish() error {
	if err := s.writer.Flush(true); err != nil {
		return Wrap(s.ctx, fmt.Errorf("flush sink at end of input: %w", err))
	}
	return nil
}

func (s *Sink[T]) Close() error {
	var errs []error
	if s.writer != nil {
		if err := s.writer.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close sink writer: %w", err))
		}
		s.writer = nil
	}
	if s.committer != nil {
		if err := s.committer.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close sink committer: %w", err))
		}
		s.committer = nil
	}
	return Wrap(s.ctx, errors.Join(errs...))
}

// Collect and EmitWatermark let the previous operator of a chain call the
// sink directly as its Output.
func (s *Sink[T]) ProcessElement(v T, ts int64) error { return s.Collect(v, ts) }
func (s *Sink[T]) EmitWatermark(wm int64) error       { return s.ProcessWatermark(wm) }
