package storage_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/checkpoint/storage/faultfs"
)

// syncCountingFS counts the fsyncs of files and directories by path.
type syncCountingFS struct {
	storage.OSFS
	mu    sync.Mutex
	syncs map[string]int
}

func (c *syncCountingFS) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.Contains(name, ".inprogress-") {
		name = name[:strings.Index(name, ".inprogress-")] + ".inprogress"
	}
	c.syncs[name]++
}

func (c *syncCountingFS) Create(name string) (storage.File, error) {
	f, err := c.OSFS.Create(name)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, fs: c, name: name}, nil
}

func (c *syncCountingFS) Open(name string) (storage.File, error) {
	f, err := c.OSFS.Open(name)
	if err != nil {
		return nil, err
	}
	return &countedFile{File: f, fs: c, name: name}, nil
}

func (c *syncCountingFS) SyncDir(name string) error {
	c.count(name + "/")
	return c.OSFS.SyncDir(name)
}

type countedFile struct {
	storage.File
	fs   *syncCountingFS
	name string
}

func (f *countedFile) Sync() error {
	f.fs.count(f.name)
	return f.File.Sync()
}

// writeStreams writes n private state streams of 100 KiB into loc and
// returns a metadata referencing them.
func writeStreams(t *testing.T, loc *storage.Location, n int) (*storage.Metadata, []string) {
	t.Helper()
	md := &storage.Metadata{Version: 1, CheckpointID: loc.ID(), Kind: storage.KindCheckpoint}
	var paths []string
	for i := range n {
		w := loc.CreateStateStream(fmt.Sprintf("op-%d", i))
		if _, err := w.Write(bytes.Repeat([]byte{byte(i)}, 100<<10)); err != nil {
			t.Fatal(err)
		}
		h, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, w.Path())
		md.Subtasks = append(md.Subtasks, storage.SubtaskState{OperatorUID: fmt.Sprintf("op-%d", i),
			OperatorState:     []storage.OperatorStateHandle{{Name: "s", Handle: h}},
			InputChannelState: []storage.ChannelStateHandle{{Channel: 0, Handle: h, Offset: 0, Length: h.Size}}})
	}
	return md, paths
}

// TestCommitSyncsTheTasksFilesOnce counts fsyncs: a task's state stream is
// published without one (its acknowledgement waits for none), and the
// checkpoint's commit fsyncs each private file it references exactly once
// (a file referenced twice, by operator and channel state, too), the
// _metadata's file once, the job directory and the checkpoint's directory
// once each — nothing else: not the shared directory, in which this
// checkpoint named no file.
func TestCommitSyncsTheTasksFilesOnce(t *testing.T) {
	cfs := &syncCountingFS{syncs: map[string]int{}}
	st, _ := newStorage(t, cfs, 0)
	loc, err := st.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	md, paths := writeStreams(t, loc, n)
	if len(cfs.syncs) != 0 {
		t.Fatalf("fsyncs before the commit: %v", cfs.syncs)
	}
	metaPath, err := loc.WriteMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		metaPath + ".inprogress": 1,
		st.JobDir() + "/":        1,
		loc.Dir() + "/":          1,
	}
	for _, p := range paths {
		want[p] = 1
	}
	for k, v := range cfs.syncs {
		if want[k] != v {
			t.Errorf("%s fsynced %d times, want %d", k, v, want[k])
		}
	}
	for k := range want {
		if cfs.syncs[k] == 0 {
			t.Errorf("%s never fsynced", k)
		}
	}
	rec, err := st.Recover()
	if err != nil || rec.Latest().Metadata.CheckpointID != 1 {
		t.Fatalf("Recover = %+v, %v", rec, err)
	}
}

// TestCommitFailsWhenATaskFileCannotBeSynced: the fsync of a task's file,
// deferred to the commit, fails; the commit fails naming the file, and no
// _metadata is published, so the checkpoint never counts as complete.
func TestCommitFailsWhenATaskFileCannotBeSynced(t *testing.T) {
	ffs := faultfs.New(storage.OSFS{})
	st, _ := newStorage(t, ffs, 0)
	loc, err := st.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	md, paths := writeStreams(t, loc, 3)
	ffs.Inject(faultfs.Rule{Op: faultfs.OpSync, PathContains: filepath.Base(paths[1])})
	_, err = loc.WriteMetadata(md)
	if !errors.Is(err, faultfs.ErrInjected) || !strings.Contains(err.Error(), paths[1]) {
		t.Fatalf("WriteMetadata = %v: want the injected failure naming %s", err, paths[1])
	}
	if _, serr := os.Stat(filepath.Join(loc.Dir(), "_metadata")); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("_metadata published after a failed commit: %v", serr)
	}
	entries, _ := os.ReadDir(loc.Dir())
	for _, e := range entries {
		if strings.Contains(e.Name(), ".inprogress-") {
			t.Errorf("temporary file %s left", e.Name())
		}
	}
	if rec, err := st.Recover(); err == nil && slices.ContainsFunc(rec.Retained, func(s *storage.Snapshot) bool { return s.Metadata.CheckpointID == 1 }) {
		t.Fatalf("checkpoint 1 recovered after a failed commit: %+v", rec)
	}
}

// writeShared writes a shared state stream of 100 KiB through loc and
// returns its handle and file.
func writeShared(t *testing.T, loc *storage.Location, owner string) (storage.StateHandle, string) {
	t.Helper()
	w, err := loc.CreateSharedStream(owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte{7}, 100<<10)); err != nil {
		t.Fatal(err)
	}
	h, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return h, w.Path()
}

// TestCommitSyncsTheNewSharedFiles: a shared file (an incremental
// backend's upload) is published without an fsync too; the commit of the
// checkpoint it was written for fsyncs it once, and the commit of a later
// checkpoint that references it again does not. The shared directory is
// fsynced by the commits of the checkpoints that named a new file in it,
// and by no other.
func TestCommitSyncsTheNewSharedFiles(t *testing.T) {
	cfs := &syncCountingFS{syncs: map[string]int{}}
	st, _ := newStorage(t, cfs, 0)
	loc1, err := st.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	old, oldPath := writeShared(t, loc1, "rocksdb-0-000007.sst")
	if len(cfs.syncs) != 0 {
		t.Fatalf("fsyncs before the commit: %v", cfs.syncs)
	}
	md := func(id int64, hs ...storage.StateHandle) *storage.Metadata {
		ks := storage.KeyedStateHandle{}
		for i, h := range hs {
			ks.Files = append(ks.Files, storage.NamedHandle{Name: fmt.Sprint(i), Handle: h})
		}
		return &storage.Metadata{Version: 1, CheckpointID: id, Kind: storage.KindCheckpoint,
			Subtasks: []storage.SubtaskState{{OperatorUID: "op", KeyedState: []storage.KeyedStateHandle{ks}}}}
	}
	if _, err := loc1.WriteMetadata(md(1, old)); err != nil {
		t.Fatal(err)
	}
	if cfs.syncs[oldPath] != 1 {
		t.Fatalf("the shared file of checkpoint 1 fsynced %d times by its commit, want 1", cfs.syncs[oldPath])
	}
	loc2, err := st.Checkpoint(2)
	if err != nil {
		t.Fatal(err)
	}
	fresh, freshPath := writeShared(t, loc2, "rocksdb-0-000009.sst")
	if _, err := loc2.WriteMetadata(md(2, old, fresh)); err != nil {
		t.Fatal(err)
	}
	if cfs.syncs[freshPath] != 1 || cfs.syncs[oldPath] != 1 {
		t.Fatalf("after checkpoint 2's commit: new shared file fsynced %d times, want 1; checkpoint 1's %d times, want 1",
			cfs.syncs[freshPath], cfs.syncs[oldPath])
	}
	sharedDir := filepath.Join(st.JobDir(), "shared") + "/"
	if cfs.syncs[sharedDir] != 2 {
		t.Fatalf("the shared directory fsynced %d times by the commits of two checkpoints with a new shared file each, want 2", cfs.syncs[sharedDir])
	}
	// Checkpoint 3 references the shared files of completed checkpoints
	// only, checkpoint 4 none at all: their commits leave the shared
	// directory alone.
	loc3, err := st.Checkpoint(3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loc3.WriteMetadata(md(3, old, fresh)); err != nil {
		t.Fatal(err)
	}
	loc4, err := st.Checkpoint(4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loc4.WriteMetadata(md(4)); err != nil {
		t.Fatal(err)
	}
	if cfs.syncs[sharedDir] != 2 || cfs.syncs[freshPath] != 1 || cfs.syncs[oldPath] != 1 {
		t.Fatalf("after checkpoints 3 and 4: the shared directory fsynced %d times, want 2; the shared files %d and %d times, want 1",
			cfs.syncs[sharedDir], cfs.syncs[oldPath], cfs.syncs[freshPath])
	}
	if cfs.syncs[loc3.Dir()+"/"] != 1 || cfs.syncs[loc4.Dir()+"/"] != 1 {
		t.Fatalf("the directories of checkpoints 3 and 4 fsynced %d and %d times, want 1", cfs.syncs[loc3.Dir()+"/"], cfs.syncs[loc4.Dir()+"/"])
	}
	rec, err := st.Recover()
	if err != nil || rec.Latest().Metadata.CheckpointID != 4 {
		t.Fatalf("Recover = %+v, %v", rec, err)
	}
}

// TestCommitFailsWhenASharedFileCannotBeSynced: the deferred fsync of a
// shared file written for the checkpoint fails; no _metadata is
// published.
func TestCommitFailsWhenASharedFileCannotBeSynced(t *testing.T) {
	ffs := faultfs.New(storage.OSFS{})
	st, _ := newStorage(t, ffs, 0)
	loc, err := st.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	h, p := writeShared(t, loc, "rocksdb-0-000007.sst")
	md := &storage.Metadata{Version: 1, CheckpointID: 1, Kind: storage.KindCheckpoint,
		Subtasks: []storage.SubtaskState{{OperatorUID: "op", KeyedState: []storage.KeyedStateHandle{{Files: []storage.NamedHandle{{Name: "f", Handle: h}}}}}}}
	ffs.Inject(faultfs.Rule{Op: faultfs.OpSync, PathContains: filepath.Base(p)})
	if _, err := loc.WriteMetadata(md); !errors.Is(err, faultfs.ErrInjected) {
		t.Fatalf("WriteMetadata = %v: want the injected failure", err)
	}
	if _, serr := os.Stat(filepath.Join(loc.Dir(), "_metadata")); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("_metadata published after a failed commit: %v", serr)
	}
}

// TestUploadFileLinksAndTheCommitSyncsIt: a shared file uploaded with
// StateUploader.UploadFile on a POSIX location is a hard link to the local
// file (the same inode, no copy), not fsynced before the commit, which
// fsyncs it under its key before _metadata is published; the checkpoint
// restores it. A file system without link(2) declines (the caller copies),
// and so does a private file.
func TestUploadFileLinksAndTheCommitSyncsIt(t *testing.T) {
	cfs := &syncCountingFS{syncs: map[string]int{}}
	st, _ := newStorage(t, cfs, 0)
	loc, err := st.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "000012.sst")
	data := bytes.Repeat([]byte("sst"), 1000)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	summed := 0
	checksum := func() (uint32, error) { summed++; return storage.Checksum(data), nil }
	u := storage.StateUploader{Loc: loc, Owner: "op-0"}
	if _, ok, err := u.UploadFile("000012.sst", src, int64(len(data)), false, checksum); ok || err != nil || summed != 0 {
		t.Fatalf("UploadFile of a private file = %v, %v (%d checksums); want it declined unread", ok, err, summed)
	}
	ref, ok, err := u.UploadFile("000012.sst", src, int64(len(data)), true, checksum)
	if err != nil || !ok {
		t.Fatalf("UploadFile = %v, %v", ok, err)
	}
	var h storage.StateHandle
	if err := json.Unmarshal(ref, &h); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(st.JobDir(), "shared", h.Path)
	sfi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	lfi, err := os.Stat(linked)
	if err != nil || !os.SameFile(sfi, lfi) {
		t.Fatalf("%s is not a link to %s (%v)", linked, src, err)
	}
	if !h.Shared || h.Size != int64(len(data)) || h.CRC32C != storage.Checksum(data) || h.DurableAt != 1 {
		t.Fatalf("handle %+v", h)
	}
	if len(cfs.syncs) != 0 {
		t.Fatalf("fsyncs before the commit: %v", cfs.syncs)
	}
	md := &storage.Metadata{Version: 1, CheckpointID: 1, Kind: storage.KindCheckpoint, Subtasks: []storage.SubtaskState{{
		OperatorUID: "op", KeyedState: []storage.KeyedStateHandle{{Files: []storage.NamedHandle{{Name: "000012.sst", Handle: h}}}}}}}
	if _, err := loc.WriteMetadata(md); err != nil {
		t.Fatal(err)
	}
	if cfs.syncs[linked] != 1 {
		t.Errorf("the commit fsynced the linked file %d times, want 1 (%v)", cfs.syncs[linked], cfs.syncs)
	}
	rec, err := st.Recover()
	if err != nil {
		t.Fatal(err)
	}
	snap := rec.Latest()
	got, err := snap.ReadAll(snap.Metadata.Subtasks[0].KeyedState[0].Files[0].Handle)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("restored %d bytes, %v; want the file's %d", len(got), err, len(data))
	}

	nst, _ := newStorage(t, noLinkFS{}, 0)
	nloc, err := nst.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := (storage.StateUploader{Loc: nloc, Owner: "op-0"}).UploadFile("000012.sst", src, int64(len(data)), true, checksum); ok || err != nil || summed != 1 {
		t.Fatalf("UploadFile without link(2) = %v, %v (%d checksums); want it declined unread", ok, err, summed)
	}

	// A checksum that fails: the link is deleted, the upload fails.
	failed := errors.New("read failed")
	if _, ok, err := u.UploadFile("000013.sst", src, int64(len(data)), true, func() (uint32, error) { return 0, failed }); ok || !errors.Is(err, failed) {
		t.Fatalf("UploadFile with a failing checksum = %v, %v", ok, err)
	}
	entries, err := os.ReadDir(filepath.Join(st.JobDir(), "shared"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("shared directory after a failed link: %v, %v; want only the first link", entries, err)
	}
}
