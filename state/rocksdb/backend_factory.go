package rocksdb

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/state"
)

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Factory returns the state.BackendFactory that gives every keyed operator
// subtask its own RocksDB database under baseDir/<job>/<operator uid>/
// <subtask>, with opts for everything else:
//
//	env := sluice.NewEnvironment(sluice.WithStateBackend(rocksdb.Factory(dir, rocksdb.Options{})))
func Factory(baseDir string, opts Options) state.BackendFactory {
	return func(o state.BackendOptions) (state.KeyedBackend, error) {
		if baseDir == "" {
			return nil, fmt.Errorf("rocksdb state backend: no local directory (state.backend.rocksdb.localdir)")
		}
		op := opts
		op.Dir = filepath.Join(baseDir, unsafeName.ReplaceAllString(o.Job, "-"),
			unsafeName.ReplaceAllString(o.OperatorUID, "-"), strconv.Itoa(o.Subtask))
		op.MaxParallelism = o.MaxParallelism
		if op.Logger == nil {
			op.Logger = o.Logger // the job's
		}
		kgr := o.KeyGroups
		op.KeyGroups = &kgr
		if !op.UnmanagedMemory {
			share := memory.Current().RocksDBShare(o.Parallelism, op.WriteBufferRatio)
			op.WriteBufferSize = max(share.WriteBuffer, minWriteBufferSize)
			op.dbWriteBuffer = share.DBWriteBuffer
			op.sharedCache = share.BlockCache
		}
		return New(op)
	}
}

var _ state.IncrementalBackend = (*Backend)(nil)

// SnapshotIncrementalState is SnapshotIncremental for the runtime, which
// knows backends only by the state package's interfaces.
func (b *Backend) SnapshotIncrementalState(checkpointID int64) (state.IncrementalStateSnapshot, error) {
	s, err := b.SnapshotIncremental(checkpointID)
	if err != nil {
		return nil, err
	}
	return incrementalState{s}, nil
}

type incrementalState struct{ s *IncrementalSnapshot }

func (a incrementalState) Upload(u state.Uploader) (state.IncrementalUpload, error) {
	h, err := a.s.Upload(u)
	if err != nil {
		return state.IncrementalUpload{}, err
	}
	enc, err := h.Encode()
	if err != nil {
		return state.IncrementalUpload{}, err
	}
	up := state.IncrementalUpload{Handle: enc, CheckpointedSize: h.CheckpointedSize, StateSize: h.StateSize}
	for _, f := range h.AllFiles() {
		up.Refs = append(up.Refs, f.Ref)
	}
	return up, nil
}

func (a incrementalState) Release() { a.s.Release() }

// RestoreIncrementalState decodes the handles and restores from them.
func (b *Backend) RestoreIncrementalState(handles [][]byte, download state.Download) error {
	hs := make([]*IncrementalHandle, 0, len(handles))
	for i, raw := range handles {
		h, err := DecodeIncrementalHandle(raw)
		if err != nil {
			return fmt.Errorf("rocksdb: incremental handle %d: %w", i, err)
		}
		hs = append(hs, h)
	}
	return b.RestoreIncremental(hs, Download(download))
}
