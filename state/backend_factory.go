package state

import (
	"io"
	"log/slog"
)

// BackendOptions say which subtask of which keyed operator a keyed backend
// serves.
type BackendOptions struct {
	Job            string
	OperatorUID    string
	Subtask        int
	Parallelism    int
	MaxParallelism int
	KeyGroups      KeyGroupRange
	// Logger is the job's logger with the operator's attributes, where
	// the backend logs; nil outside a job (slog.Default()).
	Logger *slog.Logger
}

// BackendFactory makes the keyed state backend of one subtask of a keyed
// operator: the runtime calls it once per subtask and attempt, for
// several subtasks at once (their restores run in parallel), so it must be
// safe for concurrent use.
type BackendFactory func(o BackendOptions) (KeyedBackend, error)

// HeapBackendFactory is the default BackendFactory: the pure-Go heap
// backend.
func HeapBackendFactory(o BackendOptions) (KeyedBackend, error) {
	kgr := o.KeyGroups
	return NewHeapKeyedBackend(HeapOptions{MaxParallelism: o.MaxParallelism, KeyGroups: &kgr})
}

// Uploader stores the files of an incremental snapshot in checkpoint
// storage. shared files (immutable, such as RocksDB's SST files) may be
// referenced by later checkpoints; the others belong to this checkpoint
// only. It returns an opaque reference that Download is given back.
type Uploader interface {
	Upload(name string, r io.Reader, size int64, shared bool) (ref []byte, err error)
}

// Download opens the file a reference from Uploader points to.
type Download func(ref []byte) (io.ReadCloser, error)

// IncrementalBackend is a keyed backend whose checkpoints write only what
// changed since the last confirmed one (RocksDB). Savepoints still use
// the canonical full snapshot of KeyedBackend.Snapshot.
type IncrementalBackend interface {
	KeyedBackend
	// Incremental reports whether checkpoints should be incremental.
	Incremental() bool
	// SnapshotIncrementalState is the synchronous part of an incremental
	// checkpoint.
	SnapshotIncrementalState(checkpointID int64) (IncrementalStateSnapshot, error)
	// RestoreIncrementalState restores from the handles (as returned by
	// IncrementalStateSnapshot.Upload) of every old subtask whose key
	// groups overlap this backend's, keeping only owned key groups.
	RestoreIncrementalState(handles [][]byte, download Download) error
	// NotifyCheckpointComplete and NotifyCheckpointAborted tell the backend
	// which uploads later checkpoints may reference (checkpoints only,
	// never savepoints).
	NotifyCheckpointComplete(checkpointID int64)
	NotifyCheckpointAborted(checkpointID int64)
}

// IncrementalStateSnapshot is an incremental snapshot whose synchronous
// part is done.
type IncrementalStateSnapshot interface {
	// Upload is the asynchronous part: it uploads the files checkpoint
	// storage does not hold yet and references the rest.
	Upload(u Uploader) (IncrementalUpload, error)
	// Release frees the snapshot's local files.
	Release()
}

// IncrementalUpload is what the asynchronous part of an incremental
// snapshot produced.
type IncrementalUpload struct {
	// Handle is the backend's handle of the snapshot (opaque bytes), which
	// RestoreIncrementalState takes back.
	Handle []byte
	// Refs are the references (from Uploader) of every file the snapshot
	// uses, uploaded now or by an earlier checkpoint: checkpoint storage
	// counts them so that no file a retained checkpoint uses is deleted.
	Refs [][]byte
	// CheckpointedSize is the bytes uploaded now; StateSize the bytes the
	// snapshot references in all.
	CheckpointedSize, StateSize int64
}

// RestoreDisclaimer is an incremental backend that can be told, after a
// restore, that the restored snapshot is not the job's to reference (a
// NO_CLAIM restore, or a snapshot outside the job's directory): its next
// checkpoint then writes every file anew instead of referencing the
// restored snapshot's shared files.
type RestoreDisclaimer interface {
	DisclaimRestored()
}
