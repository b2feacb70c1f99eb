package storage_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// TestDisposeSavepoint: a savepoint's directory goes, by its directory or
// its _metadata; a checkpoint and a directory without _metadata stay.
func TestDisposeSavepoint(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	write := func(kind string, loc *storage.Location) string {
		h := writeStream(t, loc.CreateStateStream("op"), []byte("state"))
		md := &storage.Metadata{Version: 1, CheckpointID: loc.ID(), Kind: kind, Subtasks: []storage.SubtaskState{{
			OperatorUID: "op", KeyedState: []storage.KeyedStateHandle{{Handle: &h, KeyGroupOffsets: []int64{0}}},
		}}}
		p, err := loc.WriteMetadata(md)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, byMetadata := range []bool{false, true} {
		dir, err := st.NewSavepointDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		loc, err := st.SavepointAt(dir, 3)
		if err != nil {
			t.Fatal(err)
		}
		meta := write(storage.KindSavepoint, loc)
		target := dir
		if byMetadata {
			target = meta
		}
		if err := storage.DisposeSavepoint(context.Background(), nil, target, nil); err != nil {
			t.Fatalf("dispose %s: %v", target, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("savepoint %s still there after disposal (%v)", dir, err)
		}
	}

	// Only what the savepoint references goes: a file of someone else's
	// in its directory stays.
	dir, err := st.NewSavepointDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := st.SavepointAt(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	meta := write(storage.KindSavepoint, sp)
	foreign := filepath.Join(filepath.Dir(meta), "notes", "keep.txt")
	if err := os.MkdirAll(filepath.Dir(foreign), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(foreign, []byte("not the savepoint's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := storage.DisposeSavepoint(context.Background(), nil, meta, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("disposal deleted a file the savepoint does not reference: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(meta), "*"))
	if len(left) != 1 || filepath.Base(left[0]) != "notes" {
		t.Errorf("after disposal the directory holds %v, want the foreign file only", left)
	}

	loc, err := st.Checkpoint(4)
	if err != nil {
		t.Fatal(err)
	}
	meta = write(storage.KindCheckpoint, loc)
	if err := storage.DisposeSavepoint(context.Background(), nil, filepath.Dir(meta), nil); !errors.Is(err, storage.ErrNotASavepoint) {
		t.Fatalf("dispose a checkpoint: %v, want ErrNotASavepoint", err)
	}
	if _, err := os.Stat(meta); err != nil {
		t.Fatalf("the checkpoint was touched: %v", err)
	}

	empty := t.TempDir()
	keep := filepath.Join(empty, "file")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := storage.DisposeSavepoint(context.Background(), nil, empty, nil); err == nil {
		t.Fatal("a directory without _metadata was disposed of")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a directory without _metadata lost a file: %v", err)
	}
}
