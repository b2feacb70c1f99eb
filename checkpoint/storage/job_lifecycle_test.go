package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// A shared file that the bookkeeping says is free but that some _metadata
// on disk still references is kept: invariant 3 holds whatever the
// caller's registry says.
func TestDiscardKeepsFilesReferencedOnDisk(t *testing.T) {
	st, logs := newStorage(t, storage.OSFS{}, 0)
	a := sharedFile(t, st, 1, "a")
	b := sharedFile(t, st, 1, "b")
	completeCheckpoint(t, st, 1, a, b)
	completeCheckpoint(t, st, 2, b)
	// A wrong caller releases b together with checkpoint 1.
	if err := st.DiscardCheckpoint(1, []string{a.Path, b.Path}); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(st.JobDir(), "shared")
	if _, err := os.Stat(filepath.Join(shared, a.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a, referenced by nothing, was kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(shared, b.Path)); err != nil {
		t.Fatalf("b, referenced by checkpoint 2, was deleted: %v", err)
	}
	if !strings.Contains(logs.String(), "still referenced") {
		t.Fatalf("no log line for the kept file:\n%s", logs)
	}
	rec, err := st.Recover()
	if err != nil || len(rec.Unusable) != 0 || rec.Latest().Metadata.CheckpointID != 2 {
		t.Fatalf("checkpoint 2 unusable after the discard: %+v, %v", rec, err)
	}
}

// With a _metadata that cannot be read, nothing shared is deleted: its
// references are unknown.
func TestGarbageCollectionStopsAtUnreadableMetadata(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	a := sharedFile(t, st, 1, "a")
	completeCheckpoint(t, st, 1, a)
	orphan := sharedFile(t, st, 2, "orphan")
	md := filepath.Join(st.CheckpointDir(1), "_metadata")
	data, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	data[3] ^= 0xff
	if err := os.WriteFile(md, data, 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := st.CollectSharedGarbage()
	if !errors.Is(err, storage.ErrReferencesUnknown) || len(removed) != 0 {
		t.Fatalf("collected %v, %v; want nothing and ErrReferencesUnknown", removed, err)
	}
	for _, h := range []storage.StateHandle{a, orphan} {
		if _, err := os.Stat(filepath.Join(st.JobDir(), "shared", h.Path)); err != nil {
			t.Fatalf("%s deleted: %v", h.Path, err)
		}
	}
	if err := st.DiscardCheckpoint(2, []string{orphan.Path}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(st.JobDir(), "shared", orphan.Path)); err != nil {
		t.Fatalf("discard deleted a shared file while references are unknown: %v", err)
	}
}

func TestJobResultRoundTripAndCorruption(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	if r, err := st.ReadJobResult(); r != nil || err != nil {
		t.Fatalf("fresh job: %v, %v", r, err)
	}
	want := &storage.JobResult{JobID: "job-1", RunID: "r1", Status: storage.ResultFailed, Error: "boom", EndTimestamp: 1234, LastCheckpoint: 7, Retained: true}
	if err := st.WriteJobResult(want); err != nil {
		t.Fatal(err)
	}
	got, err := st.ReadJobResult()
	if err != nil || *got != *want {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
	if err := st.WriteJobResult(&storage.JobResult{Status: "RUNNING"}); err == nil {
		t.Fatal("a non-terminal status was recorded")
	}
	data, _ := os.ReadFile(st.JobResultPath())
	for _, bad := range [][]byte{data[:len(data)-1], append([]byte{'x'}, data[1:]...)} {
		if err := os.WriteFile(st.JobResultPath(), bad, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := st.ReadJobResult()
		var fe *storage.FileError
		if !errors.Is(err, storage.ErrCorrupt) || !errors.As(err, &fe) || fe.Path != st.JobResultPath() {
			t.Fatalf("corrupt result: %v; want ErrCorrupt naming %s", err, st.JobResultPath())
		}
	}
	if err := st.ClearJobResult(); err != nil {
		t.Fatal(err)
	}
	if r, err := st.ReadJobResult(); r != nil || err != nil {
		t.Fatalf("after clear: %v, %v", r, err)
	}
}

func TestLockRefusesSecondHolder(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	unlock, err := st.Lock("pid 1 first")
	if err != nil {
		t.Fatal(err)
	}
	same, err := storage.New(storage.OSFS{}, filepath.Dir(st.JobDir()), filepath.Base(st.JobDir()), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := same.Lock("pid 2 second"); !errors.Is(err, storage.ErrJobLocked) || !strings.Contains(err.Error(), "pid 1 first") {
		t.Fatalf("second lock: %v; want ErrJobLocked naming the first holder", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	again, err := same.Lock("pid 2 second")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	_ = again()
	entries, _ := os.ReadDir(st.JobDir())
	if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == ".lock" }) {
		t.Fatal("no lock file")
	}
}
