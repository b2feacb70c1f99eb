package snapshot

import (
	"fmt"
	"slices"
	"strings"
)

// MetadataVersion is the version of the _metadata format this package
// writes. It reads every version up to it.
const MetadataVersion = 1

// Kinds of snapshot recorded in Metadata.Kind.
const (
	KindCheckpoint     = "checkpoint"
	KindSavepoint      = "savepoint"
	KindFullCheckpoint = "full-checkpoint"
)

// Metadata describes one completed checkpoint or savepoint: per operator
// and subtask, the handles of every piece of state. It is what _metadata
// holds (as JSON).
type Metadata struct {
	Version int    `json:"version"`
	Job     string `json:"job"`
	// RunID is the execution of the job that took the checkpoint: a run
	// restores only checkpoints it, or its restore source, produced.
	RunID string `json:"run_id,omitempty"`
	// Origin is the snapshot the job's lineage was restored from by an
	// explicit restore path (execution.state-recovery.path, as given,
	// cleaned), carried by every checkpoint of the runs that resumed from
	// it; empty for a lineage that began from no state. A start given the
	// same path again resumes the lineage's latest checkpoint instead of
	// restoring the snapshot a second time.
	Origin       string `json:"origin,omitempty"`
	CheckpointID int64  `json:"checkpoint_id"`
	// Kind is KindCheckpoint, KindSavepoint or KindFullCheckpoint.
	Kind string `json:"kind"`
	// TriggerTimestamp and CompletionTimestamp are unix milliseconds.
	TriggerTimestamp    int64          `json:"trigger_timestamp"`
	CompletionTimestamp int64          `json:"completion_timestamp"`
	Subtasks            []SubtaskState `json:"subtasks"`
}

// SubtaskState is the state of one subtask of one operator.
type SubtaskState struct {
	OperatorUID    string `json:"operator_uid"`
	Subtask        int    `json:"subtask"`
	Parallelism    int    `json:"parallelism"`
	MaxParallelism int    `json:"max_parallelism,omitempty"`
	// Finished marks a subtask that had finished (reached the end of its
	// input) when the checkpoint was taken: restored, it finishes at once.
	Finished           bool                  `json:"finished,omitempty"`
	OperatorState      []OperatorStateHandle `json:"operator_state,omitempty"`
	KeyedState         []KeyedStateHandle    `json:"keyed_state,omitempty"`
	InputChannelState  []ChannelStateHandle  `json:"input_channel_state,omitempty"`
	OutputChannelState []ChannelStateHandle  `json:"output_channel_state,omitempty"`
	// Committables are the two-phase-commit sink's pre-committed
	// transactions, opaque to the framework, committed once the checkpoint
	// is complete and again (idempotently) after a restore.
	Committables [][]byte `json:"committables,omitempty"`
	// CommittableKind is the kind of the committables, as the sink names
	// it (sink.KindedCommittables: "kafka-transaction", "file"), which
	// inspect decodes them by; empty in checkpoints of earlier versions,
	// whose committables are decoded by trying every decoder.
	CommittableKind string `json:"committable_kind,omitempty"`
	// Figures are the task's checkpoint figures; recorded on the first
	// (head) operator of a chained task.
	Figures *Figures `json:"figures,omitempty"`
}

// StateHandle points to a stream of state bytes: a file of the checkpoint's
// own directory, a file of the shared directory, or bytes kept inline in
// _metadata (small state).
type StateHandle struct {
	// Path is the file name in the directory of the _metadata, or in the
	// shared directory when Shared is set. Empty for inline state.
	Path   string `json:"path,omitempty"`
	Shared bool   `json:"shared,omitempty"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
	Inline []byte `json:"inline,omitempty"`
	// DurableAt is, for a shared file written without an fsync of its own
	// (checkpoint storage that defers them: POSIX), the checkpoint whose
	// commit makes it durable: the commit of checkpoint DurableAt fsyncs
	// it before its _metadata is published. A later checkpoint that
	// references the file (incremental state) keeps the value, and its
	// commit does not fsync the file again: only a completed checkpoint's
	// shared files are referenced by later ones. 0: durable on its own.
	DurableAt int64 `json:"durable_at,omitempty"`
}

// IsInline reports whether the state is kept in _metadata itself.
func (h StateHandle) IsInline() bool { return h.Path == "" }

// Operator-state distributions on restore with another parallelism.
const (
	// DistributeSplit gives each element of the list to one subtask.
	DistributeSplit = "split"
	// DistributeUnion gives every subtask the whole list.
	DistributeUnion = "union"
	// DistributeBroadcast gives every subtask the same state (all subtasks
	// hold identical copies).
	DistributeBroadcast = "broadcast"
)

// OperatorStateHandle is one named operator (non-keyed) state of a subtask:
// a list of elements in one stream.
type OperatorStateHandle struct {
	Name         string      `json:"name"`
	Distribution string      `json:"distribution"`
	Handle       StateHandle `json:"handle"`
	// Offsets are where each element starts in the stream.
	Offsets []int64 `json:"offsets,omitempty"`
}

// KeyGroupRange is the inclusive range of key groups [Start, End]. It has
// the layout of state.KeyGroupRange, so the two convert into each other.
type KeyGroupRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// KeyedStateHandle is the keyed state of a subtask for a range of key
// groups: either one full-snapshot stream with an offset per key group, or
// the files of an incremental snapshot (some of them shared).
type KeyedStateHandle struct {
	KeyGroups KeyGroupRange `json:"key_groups"`
	// Backend names the state backend that wrote it ("heap", "rocksdb").
	Backend string `json:"backend,omitempty"`
	// Handle and KeyGroupOffsets: a full snapshot, where key group
	// KeyGroups.Start+i starts at KeyGroupOffsets[i] (offsets are optional:
	// a stream framed per key group is read whole and filtered).
	Handle          *StateHandle `json:"handle,omitempty"`
	KeyGroupOffsets []int64      `json:"key_group_offsets,omitempty"`
	// Files: an incremental snapshot, by the backend's local file names.
	Files []NamedHandle `json:"files,omitempty"`
}

// NamedHandle is a handle with the name the state backend knows it by.
type NamedHandle struct {
	Name   string      `json:"name"`
	Handle StateHandle `json:"handle"`
}

// ChannelStateHandle is the in-flight data of one channel persisted by an
// unaligned checkpoint: the byte range [Offset, Offset+Length) of Handle
// (the channels of a subtask may share one stream). For input channel
// state Channel is the input channel index within Gate; for output channel
// state it is the subpartition.
type ChannelStateHandle struct {
	Gate    int         `json:"gate,omitempty"`
	Channel int         `json:"channel"`
	Handle  StateHandle `json:"handle"`
	Offset  int64       `json:"offset"`
	Length  int64       `json:"length"`
}

// Figures are the checkpoint figures of one task, as Flink reports them per
// subtask.
type Figures struct {
	StartDelayMillis int64 `json:"start_delay"`
	AlignmentMillis  int64 `json:"alignment_duration"`
	SyncMillis       int64 `json:"sync_duration"`
	AsyncMillis      int64 `json:"async_duration"`
	ProcessedData    int64 `json:"processed_data"`
	PersistedData    int64 `json:"persisted_data"`
	CheckpointedSize int64 `json:"checkpointed_size"`
	StateSize        int64 `json:"state_size"`
	Unaligned        bool  `json:"unaligned"`
}

// HandleRef is a handle with where it is used, for errors and listings.
type HandleRef struct {
	Where  string
	Handle StateHandle
}

// Handles lists every state handle of the metadata.
func (md *Metadata) Handles() []HandleRef {
	var out []HandleRef
	for _, st := range md.Subtasks {
		at := fmt.Sprintf("%s#%d", st.OperatorUID, st.Subtask)
		for _, h := range st.OperatorState {
			out = append(out, HandleRef{at + " operator state " + h.Name, h.Handle})
		}
		for _, k := range st.KeyedState {
			kg := fmt.Sprintf("%s keyed state [%d,%d]", at, k.KeyGroups.Start, k.KeyGroups.End)
			if k.Handle != nil {
				out = append(out, HandleRef{kg, *k.Handle})
			}
			for _, f := range k.Files {
				out = append(out, HandleRef{kg + " " + f.Name, f.Handle})
			}
		}
		for _, c := range st.InputChannelState {
			out = append(out, HandleRef{fmt.Sprintf("%s input channel %d/%d", at, c.Gate, c.Channel), c.Handle})
		}
		for _, c := range st.OutputChannelState {
			out = append(out, HandleRef{fmt.Sprintf("%s output subpartition %d", at, c.Channel), c.Handle})
		}
	}
	return out
}

// SharedFiles returns the names of the shared files the metadata
// references, sorted, without duplicates.
func (md *Metadata) SharedFiles() []string {
	var names []string
	for _, r := range md.Handles() {
		if r.Handle.Shared {
			names = append(names, r.Handle.Path)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Committables returns every two-phase-commit committable the metadata
// holds: non-empty when sinks had transactions that its completion
// committed.
func (md *Metadata) Committables() [][]byte {
	var out [][]byte
	for _, st := range md.Subtasks {
		out = append(out, st.Committables...)
	}
	return out
}

// StateSize is the total size of the state the metadata references.
func (md *Metadata) StateSize() (n int64) {
	for _, r := range md.Handles() {
		n += r.Handle.Size
	}
	return n
}

// Validate checks that the metadata can be written and restored: a known
// version and kind, paths that stay in their directory, consistent handles,
// and no shared files in a savepoint.
func (md *Metadata) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: checkpoint %d: %s", ErrInvalidMetadata, md.CheckpointID, fmt.Sprintf(format, args...))
	}
	if md.Version < 1 || md.Version > MetadataVersion {
		return fmt.Errorf("%w: version %d, this build reads 1 to %d", ErrUnsupportedVersion, md.Version, MetadataVersion)
	}
	switch md.Kind {
	case KindCheckpoint, KindSavepoint, KindFullCheckpoint:
	default:
		return bad("kind %q", md.Kind)
	}
	for _, r := range md.Handles() {
		h := r.Handle
		switch {
		case h.IsInline():
			if h.Shared || int64(len(h.Inline)) != h.Size {
				return bad("%s: inline state of %d bytes recorded as %d bytes (shared=%t)", r.Where, len(h.Inline), h.Size, h.Shared)
			}
		case h.Inline != nil:
			return bad("%s: both a file and inline bytes", r.Where)
		case !IsPlainName(h.Path):
			return bad("%s: path %q is not a plain file name", r.Where, h.Path)
		case h.Size < 0:
			return bad("%s: negative size", r.Where)
		}
		if h.Shared && md.Kind == KindSavepoint {
			return fmt.Errorf("%w: checkpoint %d: %s references shared file %s", ErrSharedInSavepoint, md.CheckpointID, r.Where, h.Path)
		}
	}
	for _, st := range md.Subtasks {
		for _, k := range st.KeyedState {
			if k.KeyGroups.End < k.KeyGroups.Start-1 {
				return bad("%s#%d: key groups [%d,%d]", st.OperatorUID, st.Subtask, k.KeyGroups.Start, k.KeyGroups.End)
			}
			if k.Handle != nil && len(k.KeyGroupOffsets) > 0 && len(k.KeyGroupOffsets) != k.KeyGroups.End-k.KeyGroups.Start+1 {
				return bad("%s#%d: %d key-group offsets for key groups [%d,%d]", st.OperatorUID, st.Subtask, len(k.KeyGroupOffsets), k.KeyGroups.Start, k.KeyGroups.End)
			}
		}
		for _, c := range append(slices.Clip(st.InputChannelState), st.OutputChannelState...) {
			if c.Gate < 0 || c.Channel < 0 {
				return bad("%s#%d: channel state of gate %d channel %d", st.OperatorUID, st.Subtask, c.Gate, c.Channel)
			}
			// Compared without adding: Offset+Length may overflow.
			if c.Offset < 0 || c.Length < 0 || c.Offset > c.Handle.Size || c.Length > c.Handle.Size-c.Offset {
				return bad("%s#%d: channel %d range [%d,+%d) outside a stream of %d bytes", st.OperatorUID, st.Subtask, c.Channel, c.Offset, c.Length, c.Handle.Size)
			}
		}
	}
	return nil
}

// IsPlainName reports whether p is a plain file name: no directories, not
// "." or "..", no NUL. Handle paths, job ids and shared-file names must be.
func IsPlainName(p string) bool {
	return p != "" && p != "." && p != ".." && !strings.ContainsAny(p, `/\`) && !strings.ContainsRune(p, 0)
}
