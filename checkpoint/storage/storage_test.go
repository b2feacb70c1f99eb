package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/checkpoint/storage/faultfs"
)

func newStorage(t *testing.T, fsys storage.FS, inline int) (*storage.Storage, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	st, err := storage.New(fsys, t.TempDir(), "job-1", storage.Options{
		InlineThreshold: inline,
		Logger:          slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, &logs
}

func writeStream(t *testing.T, w *storage.StateStream, data []byte) storage.StateHandle {
	t.Helper()
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	h, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// completeCheckpoint writes checkpoint id with one private file, one inline
// stream and the given shared files (names reused from earlier ones when
// given as handles), and returns its metadata.
func completeCheckpoint(t *testing.T, st *storage.Storage, id int64, shared ...storage.StateHandle) *storage.Metadata {
	t.Helper()
	loc, err := st.Checkpoint(id)
	if err != nil {
		t.Fatal(err)
	}
	private := writeStream(t, loc.CreateStateStream("map-0"), bytes.Repeat([]byte{byte(id)}, 4096))
	md := &storage.Metadata{
		Version: storage.MetadataVersion, Job: "job-1", CheckpointID: id, Kind: storage.KindCheckpoint,
		TriggerTimestamp: 1000 * id, CompletionTimestamp: 1000*id + 10,
		Subtasks: []storage.SubtaskState{{
			OperatorUID: "map", Subtask: 0, Parallelism: 1, MaxParallelism: 128,
			OperatorState:     []storage.OperatorStateHandle{{Name: "offsets", Distribution: storage.DistributeSplit, Handle: private, Offsets: []int64{0, 2048}}},
			InputChannelState: []storage.ChannelStateHandle{{Channel: 1, Handle: private, Offset: 10, Length: 100}},
			Committables:      [][]byte{[]byte("txn-" + fmt.Sprint(id))},
			Figures:           &storage.Figures{StartDelayMillis: 3, PersistedData: 100, Unaligned: true},
		}},
	}
	var files []storage.NamedHandle
	for i, h := range shared {
		files = append(files, storage.NamedHandle{Name: fmt.Sprintf("%06d.sst", i), Handle: h})
	}
	md.Subtasks[0].KeyedState = []storage.KeyedStateHandle{{KeyGroups: storage.KeyGroupRange{Start: 0, End: 127}, Backend: "rocksdb", Files: files}}
	if _, err := loc.WriteMetadata(md); err != nil {
		t.Fatal(err)
	}
	return md
}

func sharedFile(t *testing.T, st *storage.Storage, id int64, content string) storage.StateHandle {
	t.Helper()
	loc, err := st.Checkpoint(id)
	if err != nil {
		t.Fatal(err)
	}
	w, err := loc.CreateSharedStream("rocksdb-0")
	if err != nil {
		t.Fatal(err)
	}
	return writeStream(t, w, []byte(content))
}

func TestStateStreamRoundTrip(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 64)
	loc, err := st.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	small := writeStream(t, loc.CreateStateStream("op/with:odd name"), []byte("tiny"))
	if !small.IsInline() || string(small.Inline) != "tiny" {
		t.Fatalf("small stream not inline: %+v", small)
	}
	big := bytes.Repeat([]byte("0123456789"), 10_000)
	w := loc.CreateStateStream("op")
	for i := 0; i < len(big); i += 333 {
		if _, err := w.Write(big[i:min(i+333, len(big))]); err != nil {
			t.Fatal(err)
		}
	}
	h, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if h.IsInline() || h.Size != int64(len(big)) || strings.ContainsAny(h.Path, "/: ") {
		t.Fatalf("big stream handle %+v", h)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("write after close succeeded")
	}
	md := &storage.Metadata{Version: 1, CheckpointID: 1, Kind: storage.KindCheckpoint, Subtasks: []storage.SubtaskState{{
		OperatorUID: "op", OperatorState: []storage.OperatorStateHandle{{Name: "a", Handle: small}, {Name: "b", Handle: h}},
	}}}
	if _, err := loc.WriteMetadata(md); err != nil {
		t.Fatal(err)
	}
	snap, err := storage.LoadSnapshot(storage.OSFS{}, loc.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		h    storage.StateHandle
		data []byte
	}{{small, []byte("tiny")}, {h, big}} {
		got, err := snap.ReadAll(want.h)
		if err != nil || !bytes.Equal(got, want.data) {
			t.Fatalf("read back %d bytes, err %v; want %d bytes", len(got), err, len(want.data))
		}
	}
	// An aborted stream leaves no file behind.
	w = loc.CreateStateStream("aborted")
	if _, err := w.Write(big); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if _, err := os.Stat(w.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("aborted stream left %s: %v", w.Path(), err)
	}
}

func TestReadDetectsCorruption(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	md := completeCheckpoint(t, st, 1)
	h := md.Subtasks[0].OperatorState[0].Handle
	snap, err := storage.LoadSnapshot(storage.OSFS{}, st.CheckpointDir(1))
	if err != nil {
		t.Fatal(err)
	}
	path := snap.Path(h)
	orig, _ := os.ReadFile(path)
	for name, mutate := range map[string]func([]byte) []byte{
		"flipped byte": func(b []byte) []byte { c := slices.Clone(b); c[len(c)/2] ^= 0x40; return c },
		"truncated":    func(b []byte) []byte { return b[:len(b)-1] },
		"extended":     func(b []byte) []byte { return append(slices.Clone(b), 0) },
		"empty":        func(b []byte) []byte { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, mutate(orig), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(path, orig, 0o644)
			_, err := snap.ReadAll(h)
			var fe *storage.FileError
			if !errors.Is(err, storage.ErrCorrupt) || !errors.As(err, &fe) || fe.Path != path {
				t.Fatalf("ReadAll = %v, want ErrCorrupt naming %s", err, path)
			}
			if err := snap.Verify(); !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("Verify = %v", err)
			}
		})
	}
	os.Remove(path)
	if _, err := snap.ReadAll(h); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestMetadataEncoding(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	md := completeCheckpoint(t, st, 3, sharedFile(t, st, 3, "sst"))
	data, err := storage.EncodeMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	back, err := storage.DecodeMetadata(data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := storage.EncodeMetadata(back)
	if err != nil || !bytes.Equal(again, data) || back.Subtasks[0].Figures.PersistedData != 100 || string(back.Subtasks[0].Committables[0]) != "txn-3" {
		t.Fatalf("round trip changed the metadata:\n%s\n%s", data, again)
	}
	// Every truncation, and every single-byte change, is detected.
	for n := 0; n < len(data); n++ {
		if _, err := storage.DecodeMetadata(data[:n]); !errors.Is(err, storage.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	for i := 0; i < len(data); i += 7 {
		c := slices.Clone(data)
		c[i] ^= 0x01
		if _, err := storage.DecodeMetadata(c); err == nil {
			t.Fatalf("byte %d flipped: decoded", i)
		}
	}
	newer := *md
	newer.Version = storage.MetadataVersion + 1
	if _, err := storage.EncodeMetadata(&newer); !errors.Is(err, storage.ErrUnsupportedVersion) {
		t.Fatalf("newer version: %v", err)
	}
}

func TestMetadataValidate(t *testing.T) {
	base := func() *storage.Metadata {
		return &storage.Metadata{Version: 1, CheckpointID: 1, Kind: storage.KindCheckpoint, Subtasks: []storage.SubtaskState{{OperatorUID: "op"}}}
	}
	for name, mutate := range map[string]func(*storage.Metadata){
		"path escapes": func(md *storage.Metadata) {
			md.Subtasks[0].OperatorState = []storage.OperatorStateHandle{{Handle: storage.StateHandle{Path: "../x"}}}
		},
		"dot path": func(md *storage.Metadata) {
			md.Subtasks[0].OperatorState = []storage.OperatorStateHandle{{Handle: storage.StateHandle{Path: ".."}}}
		},
		"inline size": func(md *storage.Metadata) {
			md.Subtasks[0].OperatorState = []storage.OperatorStateHandle{{Handle: storage.StateHandle{Inline: []byte("ab"), Size: 3}}}
		},
		"kind":      func(md *storage.Metadata) { md.Kind = "snapshot" },
		"version 0": func(md *storage.Metadata) { md.Version = 0 },
		"channel range": func(md *storage.Metadata) {
			md.Subtasks[0].InputChannelState = []storage.ChannelStateHandle{{Handle: storage.StateHandle{Path: "f", Size: 10}, Offset: 5, Length: 6}}
		},
		"key-group count": func(md *storage.Metadata) {
			md.Subtasks[0].KeyedState = []storage.KeyedStateHandle{{KeyGroups: storage.KeyGroupRange{Start: 0, End: 3}, Handle: &storage.StateHandle{Path: "f"}, KeyGroupOffsets: []int64{0}}}
		},
		"shared in savepoint": func(md *storage.Metadata) {
			md.Kind = storage.KindSavepoint
			md.Subtasks[0].KeyedState = []storage.KeyedStateHandle{{Files: []storage.NamedHandle{{Name: "1.sst", Handle: storage.StateHandle{Path: "x", Shared: true}}}}}
		},
	} {
		md := base()
		mutate(md)
		if err := md.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestRecoverFallsBackAndNamesTheFile(t *testing.T) {
	st, logs := newStorage(t, storage.OSFS{}, 0)
	for id := int64(1); id <= 3; id++ {
		completeCheckpoint(t, st, id)
	}
	// An orphan: a checkpoint that never completed.
	if _, err := st.Checkpoint(5); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Recover()
	if err != nil || rec.Latest().Metadata.CheckpointID != 3 || len(rec.Retained) != 3 || rec.MaxID != 5 || !slices.Equal(rec.Orphans, []int64{5}) {
		t.Fatalf("Recover = %+v, %v", rec, err)
	}
	if logs.Len() != 0 {
		t.Fatalf("logged on a clean recovery: %s", logs)
	}

	// chk-3: a state file with a flipped byte.
	snap3 := rec.Retained[0]
	bad := snap3.Path(snap3.Metadata.Subtasks[0].OperatorState[0].Handle)
	data, _ := os.ReadFile(bad)
	data[0] ^= 0xff
	os.WriteFile(bad, data, 0o644)
	// chk-2: truncated metadata.
	meta2 := filepath.Join(st.CheckpointDir(2), "_metadata")
	m, _ := os.ReadFile(meta2)
	os.WriteFile(meta2, m[:len(m)/2], 0o644)

	rec, err = st.Recover()
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Latest().Metadata.CheckpointID; got != 1 {
		t.Fatalf("restoring from %d, want 1", got)
	}
	if len(rec.Unusable) != 2 || rec.Unusable[0].ID != 3 || rec.Unusable[1].ID != 2 {
		t.Fatalf("unusable %+v", rec.Unusable)
	}
	for _, want := range []string{bad, meta2, "falling back"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log does not mention %q:\n%s", want, logs)
		}
	}

	// chk-1: a missing file. Nothing is usable: the error names every file.
	snap1 := rec.Latest()
	missing := snap1.Path(snap1.Metadata.Subtasks[0].OperatorState[0].Handle)
	os.Remove(missing)
	rec, err = st.Recover()
	if !errors.Is(err, storage.ErrNoUsableCheckpoint) || rec.Latest() != nil {
		t.Fatalf("Recover = %v", err)
	}
	for _, want := range []string{bad, meta2, missing} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
	if rec.MaxID != 5 {
		t.Fatalf("MaxID %d", rec.MaxID)
	}

	empty, _ := newStorage(t, storage.OSFS{}, 0)
	if _, err := empty.Recover(); !errors.Is(err, storage.ErrNoCheckpoint) {
		t.Fatalf("empty: %v", err)
	}
}

func TestWriteMetadataFailuresLeaveNoCompleteCheckpoint(t *testing.T) {
	steps := []faultfs.Rule{
		{Op: faultfs.OpCreate, PathContains: "_metadata", Err: faultfs.ErrPermission},
		{Op: faultfs.OpWrite, PathContains: "_metadata", Err: faultfs.ErrDiskFull, Torn: 17},
		{Op: faultfs.OpSync, PathContains: "_metadata"},
		{Op: faultfs.OpClose, PathContains: "_metadata"},
		{Op: faultfs.OpSyncDir, PathContains: "shared"},
		{Op: faultfs.OpRename, PathContains: "_metadata"},
	}
	for _, rule := range steps {
		t.Run(rule.Op.String(), func(t *testing.T) {
			ffs := faultfs.New(storage.OSFS{})
			st, _ := newStorage(t, ffs, 0)
			completeCheckpoint(t, st, 1)
			ffs.Inject(rule)
			loc, err := st.Checkpoint(2)
			if err != nil {
				t.Fatal(err)
			}
			md := &storage.Metadata{Version: 1, Job: "job-1", CheckpointID: 2, Kind: storage.KindCheckpoint}
			if rule.Op == faultfs.OpSyncDir {
				// The commit fsyncs the shared directory only when
				// the checkpoint named a new file in it.
				w, err := loc.CreateSharedStream("op-0")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write([]byte("shared state")); err != nil {
					t.Fatal(err)
				}
				h, err := w.Close()
				if err != nil {
					t.Fatal(err)
				}
				md.Subtasks = []storage.SubtaskState{{OperatorUID: "op",
					KeyedState: []storage.KeyedStateHandle{{Files: []storage.NamedHandle{{Name: "f", Handle: h}}}}}}
			}
			_, err = loc.WriteMetadata(md)
			if err == nil {
				t.Fatal("WriteMetadata succeeded")
			}
			if rule.Err != nil && !errors.Is(err, rule.Err.(*fs.PathError).Err) {
				t.Fatalf("error %v does not wrap %v", err, rule.Err)
			}
			entries, _ := os.ReadDir(loc.Dir())
			if len(entries) != 0 {
				t.Fatalf("left %v in %s", entries, loc.Dir())
			}
			ffs.Reset()
			rec, err := st.Recover()
			if err != nil || rec.Latest().Metadata.CheckpointID != 1 || !slices.Equal(rec.Orphans, []int64{2}) {
				t.Fatalf("Recover = %+v, %v", rec, err)
			}
		})
	}
	// A failed directory sync after the rename may leave _metadata visible:
	// the caller discards the location, and recovery never sees it.
	t.Run("sync-dir after rename", func(t *testing.T) {
		ffs := faultfs.New(storage.OSFS{})
		st, _ := newStorage(t, ffs, 0)
		completeCheckpoint(t, st, 1)
		ffs.Inject(faultfs.Rule{Op: faultfs.OpSyncDir, PathContains: "chk-2"})
		loc, _ := st.Checkpoint(2)
		if _, err := loc.WriteMetadata(&storage.Metadata{Version: 1, CheckpointID: 2, Kind: storage.KindCheckpoint}); err == nil {
			t.Fatal("WriteMetadata succeeded")
		}
		ffs.Reset()
		if err := st.DiscardCheckpoint(2, nil); err != nil {
			t.Fatal(err)
		}
		rec, err := st.Recover()
		if err != nil || rec.Latest().Metadata.CheckpointID != 1 {
			t.Fatalf("Recover = %+v, %v", rec, err)
		}
	})
}

func TestStateStreamWriteFailures(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 200_000)
	for name, tc := range map[string]struct {
		rule     *faultfs.Rule
		diskFull int64
		want     error
	}{
		"disk full":         {diskFull: 50_000, want: syscall.ENOSPC},
		"permission denied": {rule: &faultfs.Rule{Op: faultfs.OpCreate, Err: faultfs.ErrPermission}, want: fs.ErrPermission},
		"torn write":        {rule: &faultfs.Rule{Op: faultfs.OpWrite, Torn: 100, Err: faultfs.ErrDiskFull}, want: syscall.ENOSPC},
		"close":             {rule: &faultfs.Rule{Op: faultfs.OpClose}, want: faultfs.ErrInjected},
	} {
		t.Run(name, func(t *testing.T) {
			ffs := faultfs.New(storage.OSFS{})
			st, _ := newStorage(t, ffs, 0)
			loc, err := st.Checkpoint(1)
			if err != nil {
				t.Fatal(err)
			}
			if tc.rule != nil {
				ffs.Inject(*tc.rule)
			}
			if tc.diskFull > 0 {
				ffs.DiskFull(tc.diskFull)
			}
			w := loc.CreateStateStream("op")
			_, werr := w.Write(data)
			_, cerr := w.Close()
			err = errors.Join(werr, cerr)
			if cerr == nil || !errors.Is(err, tc.want) || !strings.Contains(err.Error(), w.Path()) {
				t.Fatalf("write %v, close %v: want an error wrapping %v and naming %s", werr, cerr, tc.want, w.Path())
			}
			if len(ffs.Injected()) == 0 {
				t.Fatal("nothing injected")
			}
			if _, err := os.Stat(w.Path()); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("failed stream left its file: %v", err)
			}
		})
	}
}

func TestSavepointsAreSelfContained(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	dir, err := st.NewSavepointDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	loc, err := st.SavepointAt(dir, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loc.CreateSharedStream("rocksdb"); !errors.Is(err, storage.ErrSharedInSavepoint) {
		t.Fatalf("shared stream in a savepoint: %v", err)
	}
	h := writeStream(t, loc.CreateStateStream("op"), []byte("savepoint state"))
	md := &storage.Metadata{Version: 1, CheckpointID: 7, Kind: storage.KindSavepoint, Subtasks: []storage.SubtaskState{{
		OperatorUID: "op", KeyedState: []storage.KeyedStateHandle{{Handle: &h, KeyGroupOffsets: []int64{0}}},
	}}}
	withShared := *md
	withShared.Subtasks = []storage.SubtaskState{{OperatorUID: "op", KeyedState: []storage.KeyedStateHandle{{Files: []storage.NamedHandle{{Name: "1.sst", Handle: storage.StateHandle{Path: "x", Shared: true}}}}}}}
	if _, err := loc.WriteMetadata(&withShared); !errors.Is(err, storage.ErrSharedInSavepoint) {
		t.Fatalf("savepoint metadata with shared files: %v", err)
	}
	if _, err := loc.WriteMetadata(md); err != nil {
		t.Fatal(err)
	}
	// Moved elsewhere, it still loads.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	snap, err := storage.LoadSnapshot(storage.OSFS{}, filepath.Join(moved, "_metadata"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := snap.ReadAll(*snap.Metadata.Subtasks[0].KeyedState[0].Handle)
	if err != nil || string(got) != "savepoint state" {
		t.Fatalf("read %q, %v", got, err)
	}
	if err := st.DiscardSavepoint(moved); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(moved); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("savepoint not discarded")
	}
	// A checkpoint location refuses savepoint metadata and the reverse.
	cloc, _ := st.Checkpoint(8)
	if _, err := cloc.WriteMetadata(&storage.Metadata{Version: 1, CheckpointID: 8, Kind: storage.KindSavepoint}); !errors.Is(err, storage.ErrInvalidMetadata) {
		t.Fatalf("savepoint metadata in a checkpoint location: %v", err)
	}
}

func TestDiscardAndSharedFiles(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	a := sharedFile(t, st, 1, "a")
	b := sharedFile(t, st, 1, "b")
	completeCheckpoint(t, st, 1, a, b)
	c := sharedFile(t, st, 2, "c")
	md2 := completeCheckpoint(t, st, 2, b, c)
	if got := md2.SharedFiles(); len(got) != 2 {
		t.Fatalf("shared files %v", got)
	}
	orphan := sharedFile(t, st, 3, "never referenced")
	rec, err := st.Recover()
	if err != nil {
		t.Fatal(err)
	}
	unref, err := st.CollectSharedGarbage()
	if err != nil || !slices.Equal(unref, []string{orphan.Path}) {
		t.Fatalf("collected %v, %v; want [%s]", unref, err, orphan.Path)
	}
	if again, err := st.CollectSharedGarbage(); err != nil || len(again) != 0 {
		t.Fatalf("second collection removed %v, %v", again, err)
	}

	// Checkpoint 1 is discarded: only a is no longer referenced.
	reg := storage.NewSharedRegistry()
	for _, s := range rec.Retained {
		reg.Register(s.Metadata.CheckpointID, s.Metadata.SharedFiles())
	}
	free := reg.Release(1)
	if !slices.Equal(free, []string{a.Path}) {
		t.Fatalf("freed %v", free)
	}
	if err := st.DiscardCheckpoint(1, free); err != nil {
		t.Fatal(err)
	}
	if err := st.DiscardCheckpoint(1, free); err != nil {
		t.Fatalf("discard is not idempotent: %v", err)
	}
	rec, err = st.Recover()
	if err != nil || len(rec.Retained) != 1 || rec.Latest().Metadata.CheckpointID != 2 {
		t.Fatalf("after discard: %+v, %v", rec, err)
	}
	if err := st.DiscardCheckpoint(1, []string{"../escape"}); err == nil {
		t.Fatal("discarded a path outside the shared directory")
	}
}

func TestNewRefusesBadArguments(t *testing.T) {
	for _, job := range []string{"", "..", "a/b"} {
		if _, err := storage.New(storage.OSFS{}, t.TempDir(), job, storage.Options{}); err == nil {
			t.Errorf("job %q accepted", job)
		}
	}
	if _, err := storage.New(storage.OSFS{}, "", "job", storage.Options{}); err == nil {
		t.Error("empty directory accepted")
	}
	ffs := faultfs.New(storage.OSFS{})
	ffs.Inject(faultfs.Rule{Op: faultfs.OpMkdirAll, Err: faultfs.ErrPermission})
	if _, err := storage.New(ffs, t.TempDir(), "job", storage.Options{}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("mkdir failure: %v", err)
	}
}

var _ = io.EOF

// A snapshot loaded by a relative path keeps it relative (the runtime
// compares it with the configured checkpoint directory), and "." works.
func TestLoadSnapshotByRelativePath(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	completeCheckpoint(t, st, 1)
	t.Chdir(st.JobDir())
	snap, err := storage.LoadSnapshot(storage.OSFS{}, "chk-1")
	if err != nil || snap.Dir != "chk-1" {
		t.Fatalf("LoadSnapshot(chk-1) = %+v, %v", snap, err)
	}
	t.Chdir("chk-1")
	snap, err = storage.LoadSnapshot(storage.OSFS{}, ".")
	if err != nil || snap.Metadata.CheckpointID != 1 {
		t.Fatalf(`LoadSnapshot(".") = %+v, %v`, snap, err)
	}
}

// TestStateStreamMixedWrites writes a stream in small and large writes in
// every order (a large write goes to the file directly until a small one
// starts the stream's buffer, after which the buffer keeps their order),
// over the inline threshold, and reads it back whole through a committed
// checkpoint, checksum included.
func TestStateStreamMixedWrites(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 1<<10)
	loc, err := st.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	sizes := [][]int{
		{100, 20 << 10, 3, 70 << 10, 5, 40 << 10, 1},
		{64 << 10, 64 << 10, 17 << 10},
		{1000, 900, 64 << 10, 7},
		{16<<10 - 1, 16 << 10, 2},
	}
	md := &storage.Metadata{Version: 1, CheckpointID: 1, Kind: storage.KindCheckpoint}
	var want [][]byte
	for i, ws := range sizes {
		w := loc.CreateStateStream(fmt.Sprintf("op-%d", i))
		var all []byte
		for j, n := range ws {
			p := make([]byte, n)
			for k := range p {
				p[k] = byte(i*31 + j*7 + k%251)
			}
			if _, err := w.Write(p); err != nil {
				t.Fatal(err)
			}
			all = append(all, p...)
		}
		h, err := w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if h.IsInline() {
			t.Fatalf("stream %d of %d bytes inline", i, len(all))
		}
		want = append(want, all)
		md.Subtasks = append(md.Subtasks, storage.SubtaskState{OperatorUID: fmt.Sprintf("op-%d", i),
			OperatorState: []storage.OperatorStateHandle{{Name: "s", Handle: h}}})
	}
	if _, err := loc.WriteMetadata(md); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Recover()
	if err != nil {
		t.Fatal(err)
	}
	snap := rec.Latest()
	for i, sub := range snap.Metadata.Subtasks {
		got, err := snap.ReadAll(sub.OperatorState[0].Handle)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if !bytes.Equal(got, want[i]) {
			t.Fatalf("stream %d: read %d bytes back, not the %d written", i, len(got), len(want[i]))
		}
	}
}
