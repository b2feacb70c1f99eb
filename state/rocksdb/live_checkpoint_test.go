package rocksdb

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/linxGnu/grocksdb"
)

// TestLiveCheckpointHoldsItsFiles: without local recovery an incremental
// checkpoint makes no local directory; the SST files it lists stay in the
// database's directory until it is released, though a compaction makes
// them obsolete before the upload, and are deleted then; the checkpoint
// restores to the state at its barrier once the whole working directory
// is gone.
func TestLiveCheckpointHoldsItsFiles(t *testing.T) {
	opts := smallFiles(Options{})
	opts.Dir = t.TempDir()
	b := newTestBackend(t, opts)
	closeLater(t, b)
	stor := newDirStorage(t)
	rng := rand.New(rand.NewPCG(9, 10))
	vals := make([]string, 3000)
	idx := make([]int, len(vals))
	for i := range vals {
		vals[i], idx[i] = randomValue(rng, i), i
	}
	putAll(t, b, vals, idx)
	checkpoint(t, b, 1, stor)
	b.NotifyCheckpointComplete(1)
	for i := 0; i < len(vals); i += 3 {
		vals[i] = randomValue(rng, i)
	}
	putAll(t, b, vals, idx)
	at2 := append([]string(nil), vals...)

	snap, err := b.SnapshotIncremental(2)
	check(t, err)
	check(t, snap.wait())
	if !snap.live {
		t.Fatal("a checkpoint without local recovery is not taken from the live files")
	}
	var ssts []string
	for _, f := range snap.files {
		if isSST(f.name) {
			ssts = append(ssts, filepath.Join(b.dbDir, f.name))
		}
	}
	if len(ssts) < 2 {
		t.Fatalf("checkpoint 2 lists %d SST files, want several", len(ssts))
	}
	// Writes after the barrier, and a compaction that makes every listed
	// file obsolete.
	for i := 1; i < len(vals); i += 3 {
		vals[i] = randomValue(rng, i)
	}
	putAll(t, b, vals, idx)
	for _, s := range b.order {
		b.db.CompactRangeCF(s.cf, grocksdb.Range{})
	}
	for _, p := range ssts {
		if !isFile(p) {
			t.Fatalf("%s, listed by checkpoint 2, deleted before its upload", filepath.Base(p))
		}
	}
	h, err := snap.Upload(stor)
	check(t, err)
	snap.Release()
	gone := 0
	for _, p := range ssts {
		if !isFile(p) {
			gone++
		}
	}
	if gone == 0 {
		t.Fatal("no file of checkpoint 2 deleted after its release, though a compaction replaced them")
	}
	if entries, _ := os.ReadDir(b.chkDir); len(entries) != 0 {
		t.Fatalf("local checkpoint directories without local recovery: %d", len(entries))
	}

	r := newTestBackend(t, Options{Dir: filepath.Join(t.TempDir(), "restored")})
	closeLater(t, r)
	check(t, b.Close())
	check(t, os.RemoveAll(opts.Dir))
	check(t, r.RestoreIncremental([]*IncrementalHandle{roundTrip(t, h)}, stor.download))
	verifyAll(t, r, at2)
}
