package storage_test

import (
	"context"
	"errors"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/checkpoint/storage/faultfs"
	"github.com/sluicehq/sluice/checkpoint/storage/storagetest"
)

// The contract suite against the POSIX backend: on the real file system,
// through faultfs (no faults armed), and on a file system without link(2).
func TestPOSIXBackendContract(t *testing.T) {
	for name, fsys := range map[string]func() storage.FS{
		"osfs":    func() storage.FS { return storage.OSFS{} },
		"faultfs": func() storage.FS { return faultfs.New(storage.OSFS{}) },
		"no-link": func() storage.FS { return noLinkFS{} },
	} {
		t.Run(name, func(t *testing.T) {
			storagetest.Run(t, func(t *testing.T) storage.Backend {
				return storage.NewPOSIX(fsys(), filepath.Join(t.TempDir(), "root"))
			})
		})
	}
}

// The storage suite (commit, recovery, discard, garbage collection) on
// the POSIX backend; the S3 backend's tests run the same suite.
func TestPOSIXStorageSuite(t *testing.T) {
	storagetest.RunStorage(t, func(t *testing.T) storage.Backend {
		return storage.NewPOSIX(storage.OSFS{}, filepath.Join(t.TempDir(), "job-1"))
	})
}

// noLinkFS is an FS without the Linker capability.
type noLinkFS struct{ inner storage.OSFS }

func (n noLinkFS) Create(name string) (storage.File, error)   { return n.inner.Create(name) }
func (n noLinkFS) Open(name string) (storage.File, error)     { return n.inner.Open(name) }
func (n noLinkFS) Rename(o, nn string) error                  { return n.inner.Rename(o, nn) }
func (n noLinkFS) Remove(name string) error                   { return n.inner.Remove(name) }
func (n noLinkFS) RemoveAll(name string) error                { return n.inner.RemoveAll(name) }
func (n noLinkFS) MkdirAll(name string, p fs.FileMode) error  { return n.inner.MkdirAll(name, p) }
func (n noLinkFS) ReadDir(name string) ([]fs.DirEntry, error) { return n.inner.ReadDir(name) }
func (n noLinkFS) Stat(name string) (fs.FileInfo, error)      { return n.inner.Stat(name) }
func (n noLinkFS) SyncDir(name string) error                  { return n.inner.SyncDir(name) }

// The suite can fail: each broken backend breaks the one behaviour it is
// named after, and the suite's case for it reports an error.
func TestContractCatchesBrokenBackends(t *testing.T) {
	for name, tc := range map[string]struct {
		wrap func(*storage.POSIX) storage.Backend
		want string // the case that must fail
	}{
		"put-if-absent overwrites":  {func(p *storage.POSIX) storage.Backend { return overwriting{p} }, "put-if-absent-refuses-an-existing-key"},
		"list by directory":         {func(p *storage.POSIX) storage.Backend { return dirListing{p} }, "list-returns-exactly-the-keys-under-a-prefix"},
		"delete fails when missing": {func(p *storage.POSIX) storage.Backend { return strictDelete{p} }, "delete-batch-is-idempotent"},
		"writes in place":           {func(p *storage.POSIX) storage.Backend { return inPlace{p} }, "partial-write-never-visible-under-its-key"},
	} {
		t.Run(name, func(t *testing.T) {
			for _, c := range storagetest.Cases() {
				if c.Name != tc.want {
					continue
				}
				b := tc.wrap(storage.NewPOSIX(storage.OSFS{}, t.TempDir()))
				if err := c.Run(context.Background(), b); err == nil {
					t.Fatalf("case %s passed against a backend whose %s", c.Name, name)
				} else {
					t.Logf("caught: %v", err)
				}
				return
			}
			t.Fatalf("no case %s", tc.want)
		})
	}
}

type overwriting struct{ *storage.POSIX }

func (o overwriting) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return o.Put(ctx, key, data)
}

// dirListing lists a prefix as the directory it names, as a naive port
// of ReadDir would: "chk-1" lists chk-1/ but not chk-10/ or chk-1x.
type dirListing struct{ *storage.POSIX }

func (d dirListing) List(ctx context.Context, prefix string) iter.Seq2[storage.ObjectInfo, error] {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return d.POSIX.List(ctx, prefix)
}

type strictDelete struct{ *storage.POSIX }

func (s strictDelete) DeleteBatch(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if _, err := s.Stat(ctx, k); err != nil {
			return err
		}
	}
	return s.POSIX.DeleteBatch(ctx, keys)
}

// inPlace streams straight into the final file, as the storage did
// before it had a backend.
type inPlace struct{ *storage.POSIX }

type inPlaceWriter struct{ *os.File }

func (w inPlaceWriter) Commit() error { return w.Close() }
func (w inPlaceWriter) Abort()        { _ = w.Close(); _ = os.Remove(w.Name()) }

func (p inPlace) Create(ctx context.Context, key string) (storage.ObjectWriter, error) {
	name := p.Path(key)
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	return inPlaceWriter{f}, nil
}

// The _metadata commit never replaces a _metadata already there, and says
// so: a second commit of the same checkpoint fails with ErrObjectExists.
func TestWriteMetadataRefusesASecondCommit(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	first := completeCheckpoint(t, st, 1)
	loc, err := st.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	second := *first
	second.RunID = "another run"
	if _, err := loc.WriteMetadata(&second); !errors.Is(err, storage.ErrObjectExists) || !strings.Contains(err.Error(), "_metadata") {
		t.Fatalf("second commit: %v; want ErrObjectExists naming the _metadata", err)
	}
	rec, err := st.Recover()
	if err != nil || rec.Latest().Metadata.RunID != first.RunID {
		t.Fatalf("after a refused commit: %+v, %v", rec, err)
	}
	entries, _ := os.ReadDir(st.CheckpointDir(1))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".inprogress-") {
			t.Fatalf("refused commit left %s", e.Name())
		}
	}
}

// Discarding removes the checkpoint's directory (empty directories are
// pruned as an object store has none), _metadata first, and a savepoint's
// directory likewise; the shared directory comes back when needed.
func TestDiscardPrunesDirectories(t *testing.T) {
	st, _ := newStorage(t, storage.OSFS{}, 0)
	a := sharedFile(t, st, 1, "a")
	completeCheckpoint(t, st, 1, a)
	if err := st.DiscardCheckpoint(1, []string{a.Path}); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{st.CheckpointDir(1), filepath.Join(st.JobDir(), "shared")} {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s left after the discard: %v", dir, err)
		}
	}
	if _, err := os.Stat(st.JobDir()); err != nil {
		t.Fatalf("the job directory went too: %v", err)
	}
	// The next checkpoint writes shared files again.
	b := sharedFile(t, st, 2, "b")
	completeCheckpoint(t, st, 2, b)
	rec, err := st.Recover()
	if err != nil || rec.Latest().Metadata.CheckpointID != 2 || len(rec.Orphans) != 0 {
		t.Fatalf("Recover = %+v, %v", rec, err)
	}
}

// A discard cut short after its _metadata is gone leaves no complete
// checkpoint with a missing file: the _metadata is deleted first.
func TestDiscardDeletesMetadataFirst(t *testing.T) {
	ffs := faultfs.New(storage.OSFS{})
	st, _ := newStorage(t, ffs, 0)
	completeCheckpoint(t, st, 1)
	completeCheckpoint(t, st, 2)
	ffs.Inject(faultfs.Rule{Op: faultfs.OpRemove, PathContains: "chk-2" + string(filepath.Separator) + "map-0"})
	if err := st.DiscardCheckpoint(2, nil); err == nil {
		t.Fatal("discard succeeded with its state file unremovable")
	}
	ffs.Reset()
	rec, err := st.Recover()
	if err != nil || rec.Latest().Metadata.CheckpointID != 1 || len(rec.Unusable) != 0 || len(rec.Orphans) != 1 || rec.Orphans[0] != 2 {
		t.Fatalf("Recover = %+v, %v; want checkpoint 1 latest, 2 an orphan", rec, err)
	}
}
