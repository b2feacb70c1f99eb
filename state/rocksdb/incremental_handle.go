package rocksdb

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/sluicehq/sluice/state"
)

// handleFormat is the format of a handle of RocksDB files alone;
// changelogFormat that of a changelog checkpoint's (Changelog set), which
// builds that refuse it must not restore without its segments.
const (
	handleFormat    = 1
	changelogFormat = 2
)

// IncrementalHandle describes one subtask's incremental checkpoint: the
// files of its RocksDB checkpoint and where they were uploaded. The runtime
// stores it (Encode) in the checkpoint metadata and registers its shared
// files with the shared state registry: a shared file may be deleted only
// when no retained checkpoint's handle references it.
type IncrementalHandle struct {
	Format       int   `json:"format"`
	CheckpointID int64 `json:"checkpoint_id"`
	// LocalName is the local checkpoint directory (under the working
	// directory's checkpoints/), for local recovery.
	LocalName      string              `json:"local_name"`
	MaxParallelism int                 `json:"max_parallelism"`
	KeyGroups      state.KeyGroupRange `json:"key_groups"`
	// BaseCheckpointID is the completed checkpoint whose uploads the files
	// with Reused set come from (-1: none). A registry that no longer holds
	// one of them (the base was subsumed meanwhile) must decline this
	// checkpoint.
	BaseCheckpointID int64        `json:"base_checkpoint_id"`
	Files            []HandleFile `json:"files"`
	// CheckpointedSize is what this checkpoint uploaded, in bytes (Flink's
	// checkpointed_size); StateSize what it references in all (state_size).
	CheckpointedSize int64 `json:"checkpointed_size"`
	StateSize        int64 `json:"state_size"`
	// MaterializedID is the checkpoint at whose barrier the RocksDB
	// checkpoint of Files was taken (a changelog handle's materialization;
	// CheckpointID otherwise); Changelog the segments of the value-like
	// states' writes after it, up to this checkpoint's barrier, oldest
	// first: a restore applies them in order over Files. Every file of a
	// changelog handle is shared: later checkpoints reference them.
	MaterializedID int64        `json:"materialized_id,omitempty"`
	Changelog      []HandleFile `json:"changelog,omitempty"`
}

// HandleFile is one file of an incremental checkpoint.
type HandleFile struct {
	// Name is the file's name in the RocksDB checkpoint.
	Name string `json:"name"`
	// Ref is the Uploader's reference.
	Ref    []byte `json:"ref"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
	// Shared: an SST or OPTIONS file (or any file of a changelog
	// backend), shared state that later checkpoints may reference;
	// otherwise private to this checkpoint.
	Shared bool `json:"shared"`
	// Reused: uploaded by an earlier checkpoint (BaseCheckpointID), only
	// referenced by this one.
	Reused bool `json:"reused,omitempty"`
}

// Encode encodes the handle for the checkpoint metadata (JSON).
func (h *IncrementalHandle) Encode() ([]byte, error) {
	return json.Marshal(h)
}

// DecodeIncrementalHandle decodes what Encode made. Malformed data fails
// with state.ErrCorruptSnapshot.
func DecodeIncrementalHandle(data []byte) (*IncrementalHandle, error) {
	var h IncrementalHandle
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("decode rocksdb incremental handle: %w: %w", state.ErrCorruptSnapshot, err)
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	return &h, nil
}

func (h *IncrementalHandle) validate() error {
	bad := func(why string, args ...any) error {
		return fmt.Errorf("rocksdb incremental handle of checkpoint %d: %s: %w: %w", h.CheckpointID, fmt.Sprintf(why, args...), errBadHandle, state.ErrCorruptSnapshot)
	}
	switch {
	case h.Format != handleFormat && h.Format != changelogFormat:
		return bad("format %d, this build reads %d and %d", h.Format, handleFormat, changelogFormat)
	case (h.Format == changelogFormat) != (len(h.Changelog) > 0):
		return bad("format %d with %d changelog segments", h.Format, len(h.Changelog))
	case len(h.Changelog) > 0 && h.MaterializedID >= h.CheckpointID:
		return bad("materialized at %d, not before it", h.MaterializedID)
	case h.MaxParallelism < 1 || h.MaxParallelism > 1<<15:
		return bad("max parallelism %d", h.MaxParallelism)
	case h.KeyGroups.Start < 0 || h.KeyGroups.End >= h.MaxParallelism || h.KeyGroups.Len() == 0:
		return bad("key groups %v", h.KeyGroups)
	case !plainName(h.LocalName):
		return bad("local name %q", h.LocalName)
	}
	seen := make(map[string]bool)
	for _, f := range h.Files {
		if !plainName(f.Name) || seen[f.Name] || f.Size < 0 || len(f.Ref) == 0 {
			return bad("file %q", f.Name)
		}
		seen[f.Name] = true
	}
	if !seen["CURRENT"] {
		return bad("no CURRENT file")
	}
	for _, f := range h.Changelog {
		if !plainName(f.Name) || seen[f.Name] || f.Size < 0 || len(f.Ref) == 0 || !f.Shared {
			return bad("changelog segment %q", f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

// plainName reports whether name is a plain file name (no directories).
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name
}

// SharedFiles returns the shared files of the RocksDB checkpoint (its SST
// and OPTIONS files; every file in a changelog backend's): what later
// checkpoints may reference.
func (h *IncrementalHandle) SharedFiles() []HandleFile {
	var out []HandleFile
	for _, f := range h.Files {
		if f.Shared {
			out = append(out, f)
		}
	}
	return out
}

// AllFiles returns every file the handle uses: the RocksDB checkpoint's
// and the changelog segments.
func (h *IncrementalHandle) AllFiles() []HandleFile {
	return append(slices.Clone(h.Files), h.Changelog...)
}

// PrivateFiles returns the files private to this checkpoint, deleted with
// it.
func (h *IncrementalHandle) PrivateFiles() []HandleFile {
	var out []HandleFile
	for _, f := range h.Files {
		if !f.Shared {
			out = append(out, f)
		}
	}
	return out
}
