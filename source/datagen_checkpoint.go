package source

import (
	"encoding/binary"
	"fmt"
)

// SnapshotState is the reader's position: the next index it will emit, with
// its subtask and parallelism, as one entry of the source's union state.
func (r *datagenReader[T]) SnapshotState(int64) ([][]byte, error) {
	e := binary.AppendUvarint(nil, uint64(r.subtask))
	e = binary.AppendUvarint(e, uint64(r.step))
	e = binary.AppendVarint(e, r.next)
	return [][]byte{e}, nil
}

// restore seeks the reader to the position its subtask had in the restored
// checkpoint. Datagen assigns indexes by subtask, so it restores only at
// the parallelism it was checkpointed with.
func (r *datagenReader[T]) restore(ctx ReaderContext) error {
	for i, e := range ctx.RestoredState {
		sub, n := binary.Uvarint(e)
		par, m := binary.Uvarint(e[max(n, 0):])
		next, k := binary.Varint(e[max(n, 0)+max(m, 0):])
		if n <= 0 || m <= 0 || k <= 0 {
			return fmt.Errorf("datagen: restored state entry %d of checkpoint %d is corrupt: %w", i, ctx.RestoredCheckpointID, ErrCorruptRecord)
		}
		if int(par) != ctx.Parallelism {
			return fmt.Errorf("datagen: checkpoint %d was taken at parallelism %d and cannot be restored at %d: %w",
				ctx.RestoredCheckpointID, par, ctx.Parallelism, ErrInvalidConfig)
		}
		if int(sub) == ctx.Subtask {
			r.next = next
			return nil
		}
	}
	if len(ctx.RestoredState) > 0 {
		return fmt.Errorf("datagen: checkpoint %d holds no position for subtask %d: %w", ctx.RestoredCheckpointID, ctx.Subtask, ErrInvalidConfig)
	}
	return nil
}
