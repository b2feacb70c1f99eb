package rocksdb

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// TestCheckpointSkipsLocalSyncs: an incremental checkpoint's memtable flush
// and local RocksDB checkpoint write their files through the file system
// without syncs (the counter stays put when the database uses RocksDB's
// default file system, which syncs each of them).
func TestCheckpointSkipsLocalSyncs(t *testing.T) {
	b := newTestBackend(t, Options{})
	closeLater(t, b)
	stor := newDirStorage(t)
	putAll(t, b, []string{"a", "b", "c"}, []int{0, 1, 2})
	before := skippedSyncs()
	checkpoint(t, b, 1, stor)
	if skippedSyncs() == before {
		t.Fatal("the checkpoint's flush and local RocksDB checkpoint skipped no sync: the database syncs its local files")
	}
}

// TestRestoreWithoutTheLocalFiles: checkpoints whose local files were never
// synced restore from checkpoint storage alone once the whole working
// directory is gone (the database, the local checkpoint copies), with and
// without local recovery, whole and rescaled.
func TestRestoreWithoutTheLocalFiles(t *testing.T) {
	for _, local := range []bool{false, true} {
		opts := smallFiles(Options{LocalRecovery: local})
		opts.Dir = t.TempDir()
		b := newTestBackend(t, opts)
		stor := newDirStorage(t)
		rng := rand.New(rand.NewPCG(7, 8))
		vals := make([]string, 3000)
		idx := make([]int, len(vals))
		for i := range vals {
			vals[i], idx[i] = randomValue(rng, i), i
		}
		putAll(t, b, vals, idx)
		h1 := checkpoint(t, b, 1, stor)
		b.NotifyCheckpointComplete(1)
		for i := 0; i < len(vals); i += 7 {
			vals[i] = randomValue(rng, i)
			putAll(t, b, vals, []int{i})
		}
		h2 := roundTrip(t, checkpoint(t, b, 2, stor))
		if h2.BaseCheckpointID != h1.CheckpointID {
			t.Fatalf("local recovery %v: checkpoint 2 references %d, want %d", local, h2.BaseCheckpointID, h1.CheckpointID)
		}
		check(t, b.Close())
		check(t, os.RemoveAll(opts.Dir))

		opts.Dir = filepath.Join(t.TempDir(), "again")
		b2 := newTestBackend(t, opts)
		check(t, b2.RestoreIncremental([]*IncrementalHandle{h2}, stor.download))
		verifyAll(t, b2, vals)
		if f := b2.Restored(); f.LocalFiles != 0 || f.DownloadedFiles != len(h2.Files) {
			t.Fatalf("local recovery %v: restore figures %+v, want all %d files downloaded", local, f, len(h2.Files))
		}
		check(t, b2.Close())

		maxPar := h2.MaxParallelism
		for _, r := range []state.KeyGroupRange{{Start: 0, End: maxPar/2 - 1}, {Start: maxPar / 2, End: maxPar - 1}} {
			o := opts
			o.Dir, o.MaxParallelism, o.KeyGroups = t.TempDir(), maxPar, &r
			part := newTestBackend(t, o)
			check(t, part.RestoreIncremental([]*IncrementalHandle{h2}, stor.download))
			verifyAll(t, part, vals)
			check(t, part.Close())
		}
	}
}

// TestTornDatabaseDiscarded: a database of an earlier run that a crash of
// the machine left without the MANIFEST its CURRENT file names (or with
// an empty CURRENT) is discarded when it holds RocksDB's IDENTITY file,
// as its local files are never synced; without it the directory is not
// taken for a database and is left alone.
func TestTornDatabaseDiscarded(t *testing.T) {
	for _, current := range []string{"MANIFEST-000009\n", ""} {
		dir := t.TempDir()
		db := filepath.Join(dir, dbDirName)
		check(t, os.MkdirAll(db, 0o755))
		check(t, os.WriteFile(filepath.Join(db, "CURRENT"), []byte(current), 0o644))
		check(t, os.WriteFile(filepath.Join(db, "000012.sst"), nil, 0o644))
		check(t, os.WriteFile(filepath.Join(db, "IDENTITY"), []byte("x\n"), 0o644))
		b := newTestBackend(t, Options{Dir: dir})
		putAll(t, b, []string{"a"}, []int{0})
		verifyAll(t, b, []string{"a"})
		if isFile(filepath.Join(db, "000012.sst")) {
			t.Fatalf("CURRENT %q: the torn database's files are still there", current)
		}
		check(t, b.Close())
	}

	dir := t.TempDir()
	db := filepath.Join(dir, dbDirName)
	check(t, os.MkdirAll(db, 0o755))
	check(t, os.WriteFile(filepath.Join(db, "CURRENT"), []byte("MANIFEST-000009\n"), 0o644))
	if b, err := New(Options{Dir: dir}); err == nil {
		b.Close()
		t.Fatal("a directory without IDENTITY was taken for a torn database")
	}
	if !isFile(filepath.Join(db, "CURRENT")) {
		t.Fatal("the directory that is not a database was changed")
	}
}
