package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// StorageCase is one behaviour of checkpoint storage (package storage's
// Storage) on top of a backend: what a job relies on whatever its
// checkpoints are kept on.
type StorageCase struct {
	Name string
	Run  func(st *storage.Storage, b storage.Backend) error
}

// RunStorage runs every storage case on a Storage over a fresh, empty
// backend from newBackend (rooted at the job's directory), with an inline
// threshold of 1 KiB.
func RunStorage(t *testing.T, newBackend func(t *testing.T) storage.Backend) {
	for _, c := range StorageCases() {
		t.Run(c.Name, func(t *testing.T) {
			b := newBackend(t)
			noOpen := func(location string) (storage.Backend, error) {
				return nil, fmt.Errorf("no savepoints in this suite: %s", location)
			}
			st, err := storage.NewOnBackend(b, noOpen, "job-1", storage.Options{InlineThreshold: 1 << 10})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Run(st, b); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// StorageCases returns the storage behaviours.
func StorageCases() []StorageCase {
	return []StorageCase{
		{"commit-then-recover-newest-first", commitRecover},
		{"metadata-is-never-replaced", metadataNeverReplaced},
		{"pending-checkpoint-is-an-orphan", pendingOrphan},
		{"discard-keeps-shared-files-still-referenced", discardShared},
		{"garbage-collection-deletes-only-unreferenced-shared-files", sharedGarbage},
		{"corrupt-newest-falls-back-naming-the-file", corruptFallback},
	}
}

// checkpointFiles is what writeCheckpoint wrote.
type checkpointFiles struct {
	md                      *storage.Metadata
	private, inline, shared []byte
}

// writeCheckpoint writes checkpoint id: a private file (8 KiB), an inline
// stream (100 bytes), a new shared file, and references to reuse (shared
// handles of earlier checkpoints); commit writes its _metadata.
func writeCheckpoint(st *storage.Storage, id int64, commit bool, reuse ...storage.StateHandle) (*checkpointFiles, storage.StateHandle, error) {
	loc, err := st.Checkpoint(id)
	if err != nil {
		return nil, storage.StateHandle{}, err
	}
	f := &checkpointFiles{
		private: bytes.Repeat([]byte{byte(id), 1}, 4<<10),
		inline:  bytes.Repeat([]byte{byte(id), 2}, 50),
		shared:  bytes.Repeat([]byte{byte(id), 3}, 3<<10),
	}
	stream := func(w *storage.StateStream, data []byte) (storage.StateHandle, error) {
		if _, err := w.Write(data); err != nil {
			w.Abort()
			return storage.StateHandle{}, err
		}
		return w.Close()
	}
	priv, err := stream(loc.CreateStateStream("op-0"), f.private)
	if err != nil {
		return nil, storage.StateHandle{}, err
	}
	inl, err := stream(loc.CreateStateStream("op-0"), f.inline)
	if err != nil {
		return nil, storage.StateHandle{}, err
	}
	if !inl.IsInline() || priv.IsInline() {
		return nil, storage.StateHandle{}, fmt.Errorf("inline threshold 1 KiB: a 100-byte stream inline=%t, an 8 KiB one inline=%t", inl.IsInline(), priv.IsInline())
	}
	sw, err := loc.CreateSharedStream("rocksdb-0")
	if err != nil {
		return nil, storage.StateHandle{}, err
	}
	sh, err := stream(sw, f.shared)
	if err != nil {
		return nil, storage.StateHandle{}, err
	}
	files := []storage.NamedHandle{{Name: "new.sst", Handle: sh}}
	for i, h := range reuse {
		files = append(files, storage.NamedHandle{Name: fmt.Sprintf("old-%d.sst", i), Handle: h})
	}
	f.md = &storage.Metadata{
		Version: storage.MetadataVersion, Job: "job-1", CheckpointID: id, Kind: storage.KindCheckpoint,
		TriggerTimestamp: 1000 * id, CompletionTimestamp: 1000*id + 10,
		Subtasks: []storage.SubtaskState{{
			OperatorUID: "op", Subtask: 0, Parallelism: 1, MaxParallelism: 128,
			OperatorState: []storage.OperatorStateHandle{
				{Name: "a", Distribution: storage.DistributeSplit, Handle: priv, Offsets: []int64{0}},
				{Name: "b", Distribution: storage.DistributeSplit, Handle: inl, Offsets: []int64{0}},
			},
			KeyedState: []storage.KeyedStateHandle{{KeyGroups: storage.KeyGroupRange{Start: 0, End: 127}, Backend: "rocksdb", Files: files}},
		}},
	}
	if commit {
		if _, err := loc.WriteMetadata(f.md); err != nil {
			return nil, storage.StateHandle{}, err
		}
	}
	return f, sh, nil
}

func retainedIDs(rec *storage.Recovery) []int64 {
	var ids []int64
	for _, s := range rec.Retained {
		ids = append(ids, s.Metadata.CheckpointID)
	}
	return ids
}

func commitRecover(st *storage.Storage, _ storage.Backend) error {
	f1, sh1, err := writeCheckpoint(st, 1, true)
	if err != nil {
		return err
	}
	f2, _, err := writeCheckpoint(st, 2, true, sh1)
	if err != nil {
		return err
	}
	rec, err := st.Recover()
	if err != nil {
		return err
	}
	if ids := retainedIDs(rec); !slices.Equal(ids, []int64{2, 1}) || len(rec.Unusable) != 0 || rec.MaxID != 2 {
		return fmt.Errorf("recovered %v (unusable %v, max id %d), want [2 1], none, 2", ids, rec.Unusable, rec.MaxID)
	}
	for i, f := range []*checkpointFiles{f2, f1} {
		snap := rec.Retained[i]
		ops := snap.Metadata.Subtasks[0].OperatorState
		for j, want := range [][]byte{f.private, f.inline} {
			got, err := snap.ReadAll(ops[j].Handle)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("checkpoint %d: operator state %s reads back %d bytes, want %d", snap.Metadata.CheckpointID, ops[j].Name, len(got), len(want))
			}
		}
		got, err := snap.ReadAll(snap.Metadata.Subtasks[0].KeyedState[0].Files[0].Handle)
		if err != nil || !bytes.Equal(got, f.shared) {
			return fmt.Errorf("checkpoint %d: shared file reads back %d bytes (%v), want %d", snap.Metadata.CheckpointID, len(got), err, len(f.shared))
		}
	}
	if got := rec.Retained[0].Metadata.SharedFiles(); len(got) != 2 || !slices.Contains(got, sh1.Path) {
		return fmt.Errorf("checkpoint 2 references shared files %v, want its own and %s", got, sh1.Path)
	}
	return nil
}

func metadataNeverReplaced(st *storage.Storage, _ storage.Backend) error {
	f, _, err := writeCheckpoint(st, 1, true)
	if err != nil {
		return err
	}
	loc, err := st.Checkpoint(1)
	if err != nil {
		return err
	}
	other := *f.md
	other.TriggerTimestamp++
	if _, err := loc.WriteMetadata(&other); !errors.Is(err, storage.ErrObjectExists) {
		return fmt.Errorf("second WriteMetadata of checkpoint 1 = %v, want ErrObjectExists", err)
	}
	rec, err := st.Recover()
	if err != nil {
		return err
	}
	if got := rec.Latest().Metadata.TriggerTimestamp; got != f.md.TriggerTimestamp {
		return fmt.Errorf("checkpoint 1's _metadata was replaced: trigger time %d, want %d", got, f.md.TriggerTimestamp)
	}
	return nil
}

func pendingOrphan(st *storage.Storage, _ storage.Backend) error {
	if _, _, err := writeCheckpoint(st, 1, true); err != nil {
		return err
	}
	if _, _, err := writeCheckpoint(st, 2, false); err != nil {
		return err
	}
	rec, err := st.Recover()
	if err != nil {
		return err
	}
	if ids := retainedIDs(rec); !slices.Equal(ids, []int64{1}) || !slices.Equal(rec.Orphans, []int64{2}) || rec.MaxID != 2 {
		return fmt.Errorf("recovered %v, orphans %v, max id %d; want [1], [2], 2", ids, rec.Orphans, rec.MaxID)
	}
	return nil
}

func keysUnder(ctx context.Context, b storage.Backend, prefix string) ([]string, error) {
	var keys []string
	for o, err := range b.List(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		if !o.IsMarker() {
			keys = append(keys, o.Key)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

func discardShared(st *storage.Storage, b storage.Backend) error {
	ctx := context.Background()
	_, sh1, err := writeCheckpoint(st, 1, true)
	if err != nil {
		return err
	}
	rec, err := st.Recover()
	if err != nil {
		return err
	}
	own1 := rec.Latest().Metadata.SharedFiles() // sh1 only
	if _, _, err := writeCheckpoint(st, 2, true, sh1); err != nil {
		return err
	}
	// The caller's bookkeeping claims both of checkpoint 1's shared files
	// are free; checkpoint 2 still references sh1.
	_, sh3, err := writeCheckpoint(st, 3, false)
	if err != nil {
		return err
	}
	if err := st.DiscardCheckpoint(1, append(own1, sh3.Path)); err != nil {
		return err
	}
	if keys, err := keysUnder(ctx, b, "chk-1/"); err != nil || len(keys) != 0 {
		return fmt.Errorf("after the discard, chk-1/ holds %v (%v)", keys, err)
	}
	shared, err := keysUnder(ctx, b, "shared/")
	if err != nil {
		return err
	}
	if !slices.Contains(shared, "shared/"+sh1.Path) {
		return fmt.Errorf("discard deleted shared/%s, which checkpoint 2 references (shared/ holds %v)", sh1.Path, shared)
	}
	if slices.Contains(shared, "shared/"+sh3.Path) {
		return fmt.Errorf("discard kept shared/%s, which no _metadata references", sh3.Path)
	}
	rec, err = st.Recover()
	if err != nil {
		return err
	}
	if err := rec.Latest().Verify(); err != nil {
		return fmt.Errorf("checkpoint 2 after discarding 1: %w", err)
	}
	return nil
}

func sharedGarbage(st *storage.Storage, b storage.Backend) error {
	ctx := context.Background()
	if _, _, err := writeCheckpoint(st, 1, true); err != nil {
		return err
	}
	_, lost, err := writeCheckpoint(st, 2, false) // a crash mid-checkpoint
	if err != nil {
		return err
	}
	removed, err := st.CollectSharedGarbage()
	if err != nil {
		return err
	}
	if !slices.Equal(removed, []string{lost.Path}) {
		return fmt.Errorf("garbage collection removed %v, want [%s]", removed, lost.Path)
	}
	rec, err := st.Recover()
	if err != nil {
		return err
	}
	if err := rec.Latest().Verify(); err != nil {
		return err
	}
	shared, err := keysUnder(ctx, b, "shared/")
	if err != nil || len(shared) != 1 {
		return fmt.Errorf("shared/ holds %v (%v), want checkpoint 1's one file", shared, err)
	}
	return nil
}

func corruptFallback(st *storage.Storage, b storage.Backend) error {
	ctx := context.Background()
	if _, _, err := writeCheckpoint(st, 1, true); err != nil {
		return err
	}
	if _, _, err := writeCheckpoint(st, 2, true); err != nil {
		return err
	}
	keys, err := keysUnder(ctx, b, "chk-2/")
	if err != nil {
		return err
	}
	var victim string
	for _, k := range keys {
		if !strings.HasSuffix(k, "/_metadata") {
			victim = k
		}
	}
	if victim == "" {
		return fmt.Errorf("chk-2/ holds %v: no state file", keys)
	}
	if err := b.Put(ctx, victim, bytes.Repeat([]byte{0xee}, 8<<10)); err != nil {
		return err
	}
	rec, err := st.Recover()
	if err != nil {
		return err
	}
	if ids := retainedIDs(rec); !slices.Equal(ids, []int64{1}) || len(rec.Unusable) != 1 || rec.Unusable[0].ID != 2 {
		return fmt.Errorf("recovered %v, unusable %v; want [1] and checkpoint 2", ids, rec.Unusable)
	}
	if err := rec.Unusable[0].Err; !strings.Contains(err.Error(), b.Path(victim)) {
		return fmt.Errorf("checkpoint 2 unusable with %q, which does not name %s", err, b.Path(victim))
	}
	return nil
}
