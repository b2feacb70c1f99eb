package rocksdb

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// dirStorage is checkpoint storage in a directory, as the runtime's:
// shared files under shared/, private ones under private/, each upload
// under a unique name. failAfter > 0 makes uploads after that many
// started fail midway (a crash during the asynchronous part).
type dirStorage struct {
	root string

	mu        sync.Mutex
	seq       int
	files     int
	bytes     int64
	failAfter int
}

func newDirStorage(t testing.TB) *dirStorage {
	root := t.TempDir()
	for _, d := range []string{"shared", "private"} {
		check(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	return &dirStorage{root: root}
}

func (s *dirStorage) Upload(name string, r io.Reader, size int64, shared bool) ([]byte, error) {
	s.mu.Lock()
	s.seq++
	seq := s.seq
	// Uploads run in parallel (TransferThreads): count those started,
	// not those done, or all of a checkpoint's may start before the
	// first is counted and none fail.
	fail := s.failAfter > 0 && seq-1 >= s.failAfter
	s.mu.Unlock()
	sub := "private"
	if shared {
		sub = "shared"
	}
	rel := filepath.Join(sub, fmt.Sprintf("%06d-%s", seq, name))
	f, err := os.Create(filepath.Join(s.root, rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fail {
		_, _ = io.CopyN(f, r, size/2)
		return nil, errors.New("storage unavailable")
	}
	n, err := io.Copy(f, r)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.files++
	s.bytes += n
	s.mu.Unlock()
	return []byte(rel), nil
}

func (s *dirStorage) download(ref []byte) (io.ReadCloser, error) {
	return os.Open(filepath.Join(s.root, string(ref)))
}

func (s *dirStorage) counts() (int, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files, s.bytes
}

// listDir returns the files in a storage subdirectory.
func (s *dirStorage) listDir(t testing.TB, sub string) []string {
	entries, err := os.ReadDir(filepath.Join(s.root, sub))
	check(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, filepath.Join(sub, e.Name()))
	}
	sort.Strings(out)
	return out
}

// registry is the runtime's shared state registry with a retention of one
// completed checkpoint: on completion of a checkpoint, its shared files are
// registered, then the previous checkpoint is discarded: its private files
// are deleted, and its shared files whose count drops to zero.
type registry struct {
	s        *dirStorage
	counts   map[string]int
	retained []*IncrementalHandle
}

func newRegistry(s *dirStorage) *registry { return &registry{s: s, counts: map[string]int{}} }

func (r *registry) complete(t testing.TB, hs []*IncrementalHandle) {
	t.Helper()
	for _, h := range hs {
		for _, f := range h.AllFiles() {
			if !f.Shared {
				continue
			}
			if f.Reused && r.counts[string(f.Ref)] == 0 {
				t.Fatalf("checkpoint %d references %s (%s), which no retained checkpoint holds", h.CheckpointID, f.Name, f.Ref)
			}
			r.counts[string(f.Ref)]++
		}
	}
	for _, h := range r.retained {
		for _, f := range h.AllFiles() {
			ref := string(f.Ref)
			if !f.Shared {
				check(t, os.Remove(filepath.Join(r.s.root, ref)))
				continue
			}
			if r.counts[ref]--; r.counts[ref] == 0 {
				delete(r.counts, ref)
				check(t, os.Remove(filepath.Join(r.s.root, ref)))
			}
		}
	}
	r.retained = hs
}

// checkFiles verifies on the filesystem that shared/ and private/ hold
// exactly the files the retained checkpoints reference.
func (r *registry) checkFiles(t testing.TB) {
	t.Helper()
	var shared, private []string
	for _, h := range r.retained {
		for _, f := range h.AllFiles() {
			if f.Shared {
				shared = append(shared, string(f.Ref))
			} else {
				private = append(private, string(f.Ref))
			}
		}
	}
	shared = slices.Compact(slices.Sorted(slices.Values(shared)))
	sort.Strings(private)
	if got := r.s.listDir(t, "shared"); !slices.Equal(got, shared) {
		t.Fatalf("shared directory holds %d files %v, retained checkpoints reference %d %v", len(got), got, len(shared), shared)
	}
	if got := r.s.listDir(t, "private"); !slices.Equal(got, private) {
		t.Fatalf("private directory holds %v, retained checkpoints reference %v", got, private)
	}
}

// smallFiles makes RocksDB write small SST files, so that a test with a
// few MiB of state has many of them and compacts.
func smallFiles(o Options) Options {
	o.WriteBufferSize = 128 << 10
	o.TargetFileSize = 128 << 10
	o.MaxLevelBase = 512 << 10
	o.BlockCacheSize = 4 << 20
	return o
}

var valueDesc = state.ValueStateDescriptor[string]{Name: "v"}

func keyName(i int) string { return fmt.Sprintf("key-%06d", i) }

// putAll writes vals[i] under keyName(i) for the given indexes.
func putAll(t testing.TB, b *Backend, vals []string, idx []int) {
	t.Helper()
	v, err := state.GetValueState(b, valueDesc)
	check(t, err)
	for _, i := range idx {
		k := []byte(keyName(i))
		kg := state.KeyGroupFor(k, b.MaxParallelism())
		if !b.KeyGroupRange().Contains(kg) {
			continue
		}
		b.SetCurrentKey(k, kg)
		check(t, v.Update(vals[i]))
	}
}

// verifyAll checks that b holds exactly vals (its key groups' part).
func verifyAll(t testing.TB, b *Backend, vals []string) {
	t.Helper()
	v, err := state.GetValueState(b, valueDesc)
	check(t, err)
	n := 0
	for i, want := range vals {
		k := []byte(keyName(i))
		kg := state.KeyGroupFor(k, b.MaxParallelism())
		if !b.KeyGroupRange().Contains(kg) {
			continue
		}
		n++
		b.SetCurrentKey(k, kg)
		got, ok, err := v.Value()
		check(t, err)
		if !ok || got != want {
			t.Fatalf("%s = %.20q %v, want %.20q", keyName(i), got, ok, want)
		}
	}
	keys := 0
	check(t, b.Keys("v", nil, func([]byte, int) error { keys++; return nil }))
	if keys != n {
		t.Fatalf("backend has %d keys, want %d", keys, n)
	}
}

func randomValue(rng *rand.Rand, i int) string {
	b := make([]byte, 100)
	for j := range b {
		b[j] = byte('a' + rng.IntN(26))
	}
	return fmt.Sprintf("%d:%s", i, b)
}

func checkpoint(t testing.TB, b *Backend, id int64, u Uploader) *IncrementalHandle {
	t.Helper()
	snap, err := b.SnapshotIncremental(id)
	check(t, err)
	defer snap.Release()
	h, err := snap.Upload(u)
	check(t, err)
	return h
}

// roundTrip encodes and decodes a handle, as the metadata does.
func roundTrip(t testing.TB, h *IncrementalHandle) *IncrementalHandle {
	t.Helper()
	data, err := h.Encode()
	check(t, err)
	h2, err := DecodeIncrementalHandle(data)
	check(t, err)
	return h2
}

// TestIncrementalUploadsOnlyNewFiles: over many checkpoints in which 1% of
// the keys change, each checkpoint uploads exactly the SST files the
// previous (completed) one did not have and references the rest; with a
// retention of one checkpoint, shared storage holds exactly the files of
// the retained checkpoint, and it restores.
func TestIncrementalUploadsOnlyNewFiles(t *testing.T) {
	const n, rounds = 20000, 15
	rng := rand.New(rand.NewPCG(1, 2))
	b := newTestBackend(t, smallFiles(Options{}))
	closeLater(t, b)
	stor := newDirStorage(t)
	reg := newRegistry(stor)
	vals := make([]string, n)
	all := make([]int, n)
	for i := range n {
		vals[i], all[i] = randomValue(rng, i), i
	}
	putAll(t, b, vals, all)
	var prev *IncrementalHandle
	reusedTotal, uploadedTotal, stateTotal := 0, int64(0), int64(0)
	for id := int64(1); id <= rounds; id++ {
		if id > 1 {
			changed := make([]int, n/100)
			for j := range changed {
				changed[j] = rng.IntN(n)
				vals[changed[j]] = randomValue(rng, changed[j])
			}
			putAll(t, b, vals, changed)
		}
		files0, bytes0 := stor.counts()
		h := roundTrip(t, checkpoint(t, b, id, stor))
		files1, bytes1 := stor.counts()
		prevFiles := map[string]HandleFile{}
		if prev != nil {
			for _, f := range prev.SharedFiles() {
				prevFiles[f.Name] = f
			}
		}
		uploaded := 0
		var uploadedBytes int64
		for _, f := range h.Files {
			pf, inPrev := prevFiles[f.Name]
			switch {
			case !f.Shared:
				if f.Reused {
					t.Fatalf("checkpoint %d: private file %s reused", id, f.Name)
				}
			case inPrev != f.Reused:
				t.Fatalf("checkpoint %d: %s in the previous checkpoint %v, reused %v", id, f.Name, inPrev, f.Reused)
			case f.Reused && string(pf.Ref) != string(f.Ref):
				t.Fatalf("checkpoint %d: %s reused with ref %s, uploaded as %s", id, f.Name, f.Ref, pf.Ref)
			}
			if !f.Reused {
				uploaded++
				uploadedBytes += f.Size
			} else {
				reusedTotal++
			}
		}
		if files1-files0 != uploaded || bytes1-bytes0 != uploadedBytes || h.CheckpointedSize != uploadedBytes {
			t.Fatalf("checkpoint %d: storage got %d files, %d bytes; handle uploaded %d files, %d bytes, checkpointed size %d",
				id, files1-files0, bytes1-bytes0, uploaded, uploadedBytes, h.CheckpointedSize)
		}
		if prev != nil {
			uploadedTotal += h.CheckpointedSize
			stateTotal += h.StateSize
		}
		b.NotifyCheckpointComplete(id)
		reg.complete(t, []*IncrementalHandle{h})
		reg.checkFiles(t)
		prev = h
	}
	if reusedTotal == 0 {
		t.Fatal("no checkpoint referenced a file of an earlier one")
	}
	t.Logf("after the first: uploaded %d of %d bytes referenced (%.1f%%)", uploadedTotal, stateTotal, 100*float64(uploadedTotal)/float64(stateTotal))
	if uploadedTotal*2 > stateTotal {
		t.Fatalf("incremental checkpoints uploaded %d bytes of %d referenced: more than half", uploadedTotal, stateTotal)
	}
	// The retained checkpoint restores, by download (another directory).
	r := newTestBackend(t, smallFiles(Options{}))
	closeLater(t, r)
	check(t, r.RestoreIncremental([]*IncrementalHandle{prev}, stor.download))
	verifyAll(t, r, vals)
	// The restored backend references the restored checkpoint's files.
	putAll(t, r, vals, []int{1, 2, 3})
	h := checkpoint(t, r, rounds+1, stor)
	reused := 0
	for _, f := range h.Files {
		if f.Reused {
			reused++
		}
	}
	if reused == 0 || h.BaseCheckpointID != rounds {
		t.Fatalf("first checkpoint after restore reused %d files of checkpoint %d", reused, h.BaseCheckpointID)
	}
	reg.complete(t, []*IncrementalHandle{h})
	reg.checkFiles(t)
}

// TestIncrementalCrashDuringUpload: an upload failing midway leaves the
// previous checkpoint restorable, and the next checkpoint does not
// reference what the failed one uploaded.
func TestIncrementalCrashDuringUpload(t *testing.T) {
	const n = 5000
	rng := rand.New(rand.NewPCG(3, 4))
	b := newTestBackend(t, smallFiles(Options{}))
	closeLater(t, b)
	stor := newDirStorage(t)
	vals := make([]string, n)
	all := make([]int, n)
	for i := range n {
		vals[i], all[i] = randomValue(rng, i), i
	}
	putAll(t, b, vals, all)
	h1 := checkpoint(t, b, 1, stor)
	b.NotifyCheckpointComplete(1)
	vals1 := slices.Clone(vals)

	for i := range n / 10 {
		vals[i] = randomValue(rng, i)
	}
	putAll(t, b, vals, all[:n/10])
	stor.failAfter = stor.files + 1 // one more file, then fail
	snap, err := b.SnapshotIncremental(2)
	check(t, err)
	if _, err := snap.Upload(stor); err == nil || !strings.Contains(err.Error(), "storage unavailable") {
		t.Fatalf("upload with failing storage: %v", err)
	}
	if _, err := snap.Upload(stor); err == nil {
		t.Fatal("a second Upload of the same snapshot")
	}
	snap.Release()
	b.NotifyCheckpointAborted(2)
	if _, err := os.Stat(snap.dir); !os.IsNotExist(err) {
		t.Fatalf("local checkpoint of the failed upload still there: %v", err)
	}

	// The previous checkpoint restores (storage still holds the debris of
	// the failed upload, which the runtime deletes).
	r := newTestBackend(t, smallFiles(Options{}))
	closeLater(t, r)
	check(t, r.RestoreIncremental([]*IncrementalHandle{roundTrip(t, h1)}, stor.download))
	verifyAll(t, r, vals1)

	// The next checkpoint references only checkpoint 1's uploads.
	stor.failAfter = 0
	h3 := checkpoint(t, b, 3, stor)
	refs1 := map[string]bool{}
	for _, f := range h1.Files {
		refs1[string(f.Ref)] = true
	}
	for _, f := range h3.Files {
		if f.Reused && !refs1[string(f.Ref)] {
			t.Fatalf("checkpoint 3 reuses %s (%s), not uploaded by checkpoint 1", f.Name, f.Ref)
		}
	}
	b.NotifyCheckpointComplete(3)
	r3 := newTestBackend(t, smallFiles(Options{}))
	closeLater(t, r3)
	check(t, r3.RestoreIncremental([]*IncrementalHandle{h3}, stor.download))
	verifyAll(t, r3, vals)
}

// TestIncrementalRescale takes incremental checkpoints through parallelism
// 2 -> 3 -> 1 -> 4: after each restore every key exists exactly once, with
// its value, list and map.
func TestIncrementalRescale(t *testing.T) {
	const maxPar, n = 32, 2000
	stor := newDirStorage(t)
	ld := state.ListStateDescriptor[int64]{Name: "l"}
	md := state.MapStateDescriptor[string, int64]{Name: "m"}
	vals := make([]string, n)
	all := make([]int, n)
	for i := range n {
		vals[i], all[i] = fmt.Sprint("v0-", i), i
	}
	var handles []*IncrementalHandle
	id := int64(0)
	for idx := range 2 {
		r := state.RangeFor(maxPar, 2, idx)
		b := newTestBackend(t, Options{MaxParallelism: maxPar, KeyGroups: &r})
		putAll(t, b, vals, all)
		l, err := state.GetListState(b, ld)
		check(t, err)
		m, err := state.GetMapState(b, md)
		check(t, err)
		for i := range n {
			k := []byte(keyName(i))
			if kg := state.KeyGroupFor(k, maxPar); r.Contains(kg) {
				b.SetCurrentKey(k, kg)
				check(t, l.AddAll([]int64{int64(i), int64(i + 1)}))
				check(t, m.Put("i", int64(i)))
			}
		}
		id++
		handles = append(handles, roundTrip(t, checkpoint(t, b, id, stor)))
		check(t, b.Close())
	}
	for step, p := range []int{3, 1, 4} {
		seen := map[string]int{}
		var next []*IncrementalHandle
		for idx := range p {
			r := state.RangeFor(maxPar, p, idx)
			b := newTestBackend(t, Options{MaxParallelism: maxPar, KeyGroups: &r})
			// All old handles: the backend ignores those not overlapping.
			rev := slices.Clone(handles)
			slices.Reverse(rev)
			check(t, b.RestoreIncremental(rev, stor.download))
			verifyAll(t, b, vals)
			l, err := state.GetListState(b, ld)
			check(t, err)
			m, err := state.GetMapState(b, md)
			check(t, err)
			check(t, b.Keys("v", nil, func(k []byte, kg int) error {
				seen[string(k)]++
				if !r.Contains(kg) {
					t.Fatalf("step %d: subtask %d/%d has %s of key group %d outside %v", step, idx, p, k, kg, r)
				}
				return nil
			}))
			for i := range n {
				k := []byte(keyName(i))
				kg := state.KeyGroupFor(k, maxPar)
				if !r.Contains(kg) {
					continue
				}
				b.SetCurrentKey(k, kg)
				got, err := l.Get()
				check(t, err)
				if !slices.Equal(got, []int64{int64(i), int64(i + 1)}) {
					t.Fatalf("step %d: %s list = %v", step, k, got)
				}
				if v, ok, err := m.Get("i"); err != nil || !ok || v != int64(i) {
					t.Fatalf("step %d: %s map = %d %v %v", step, k, v, ok, err)
				}
			}
			// Change every value this subtask owns for the next step.
			for i := range n {
				if kg := state.KeyGroupFor([]byte(keyName(i)), maxPar); r.Contains(kg) {
					vals[i] = fmt.Sprintf("v%d-%d", step+1, i)
				}
			}
			putAll(t, b, vals, all)
			id++
			next = append(next, checkpoint(t, b, id, stor))
			check(t, b.Close())
		}
		if len(seen) != n {
			t.Fatalf("step %d (parallelism %d): %d distinct keys, want %d", step, p, len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("step %d: key %s in %d subtasks", step, k, c)
			}
		}
		handles = next
	}
}

// TestLocalRecovery: with local recovery on, a restore on the same working
// directory uses the local checkpoint without downloading; a local copy
// that does not match falls back to downloading; local copies of subsumed
// checkpoints are deleted.
func TestLocalRecovery(t *testing.T) {
	dir, opts, b, stor, vals, h1 := firstLocalCheckpoint(t)
	vals[1] = "B"
	putAll(t, b, vals, []int{1})
	h2 := checkpoint(t, b, 2, stor)
	local := func() []string {
		entries, _ := os.ReadDir(filepath.Join(dir, "checkpoints"))
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	if got := local(); len(got) != 2 {
		t.Fatalf("local checkpoints before completing 2: %v", got)
	}
	b.NotifyCheckpointComplete(2)
	if got := local(); !slices.Equal(got, []string{h2.LocalName}) {
		t.Fatalf("local checkpoints after completing 2: %v, want [%s]", got, h2.LocalName)
	}
	check(t, b.Close())

	noDownload := func(ref []byte) (io.ReadCloser, error) {
		t.Errorf("downloaded %s despite a local copy", ref)
		return nil, errors.New("no download")
	}
	b2 := newTestBackend(t, opts)
	check(t, b2.RestoreIncremental([]*IncrementalHandle{h2}, noDownload))
	verifyAll(t, b2, vals)
	if f := b2.Restored(); f.DownloadedBytes != 0 || f.LocalFiles != len(h2.Files) || f.LocalBytes != h2.StateSize {
		t.Fatalf("local recovery figures %+v, want %d files, %d bytes local, none downloaded", f, len(h2.Files), h2.StateSize)
	}
	check(t, b2.Close())
	if got := local(); !slices.Equal(got, []string{h2.LocalName}) {
		t.Fatalf("local checkpoints after a local recovery: %v", got)
	}

	// A local copy that differs from the checkpoint is never restored:
	// the restore downloads every file, and the state is the checkpoint's.
	var sst string
	for _, f := range h2.Files {
		if f.Shared {
			sst = filepath.Join(dir, "checkpoints", h2.LocalName, f.Name)
		}
	}
	fallsBack := func(what string) {
		t.Helper()
		var downloads atomic.Int64 // the download function runs on several goroutines
		b := newTestBackend(t, opts)
		defer b.Close()
		check(t, b.RestoreIncremental([]*IncrementalHandle{h2}, func(ref []byte) (io.ReadCloser, error) {
			downloads.Add(1)
			return stor.download(ref)
		}))
		if int(downloads.Load()) != len(h2.Files) {
			t.Fatalf("%s: downloaded %d files, want %d", what, downloads.Load(), len(h2.Files))
		}
		if f := b.Restored(); f.LocalFiles != 0 || f.DownloadedBytes != h2.StateSize {
			t.Fatalf("%s: restore figures %+v, want %d bytes downloaded, none local", what, f, h2.StateSize)
		}
		verifyAll(t, b, vals)
	}
	localDir := filepath.Dir(sst)
	saved := map[string][]byte{}
	entries, err := os.ReadDir(localDir)
	check(t, err)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(localDir, e.Name()))
		check(t, err)
		saved[e.Name()] = data
	}
	// putBack writes the local copy again (a restore that does not use it
	// deletes it), with change applied to the SST file's bytes.
	putBack := func(change func([]byte) []byte) {
		check(t, os.RemoveAll(localDir))
		check(t, os.MkdirAll(localDir, 0o755))
		for name, data := range saved {
			if filepath.Join(localDir, name) == sst {
				data = change(slices.Clone(data))
			}
			check(t, os.WriteFile(filepath.Join(localDir, name), data, 0o644))
		}
	}
	putBack(func(b []byte) []byte { b[len(b)/2] ^= 1; return b })
	fallsBack("a local file of the same size with a flipped bit")
	putBack(func(b []byte) []byte { return b[:10] })
	fallsBack("a truncated local file")
	check(t, os.RemoveAll(filepath.Join(dir, "checkpoints")))
	fallsBack("no local copy")
	// The copy put back as it was is used again.
	putBack(func(b []byte) []byte { return b })
	b4 := newTestBackend(t, opts)
	check(t, b4.RestoreIncremental([]*IncrementalHandle{h2}, noDownload))
	verifyAll(t, b4, vals)
	check(t, b4.Close())
	_ = h1
}

// A restore opens one database, the checkpoint's: New leaves the empty
// one for a first use that never comes, and neither opens the database
// the last run left (with local recovery, a killed worker's), which New
// discards. (Each open of RocksDB costs milliseconds: a restore from the
// local copy of a small state took an empty open, a close and the
// checkpoint's open, after the stale database's open and close.)
func TestRestoreOpensOnlyTheCheckpointsDatabase(t *testing.T) {
	dir, opts, b, _, vals, h := firstLocalCheckpoint(t)
	// The process dies: its database stays in the working directory,
	// with its lock file, which it no longer holds.
	check(t, b.lock.Close())
	b.lock = nil
	b.closeDB()
	if _, err := os.Stat(filepath.Join(dir, "db", "CURRENT")); err != nil {
		t.Fatalf("the dead run's database is not there: %v", err)
	}
	b2 := newTestBackend(t, opts)
	defer b2.Close()
	if b2.opens != 0 {
		t.Fatalf("New opened %d databases, want none (the stale one is discarded unopened, the empty one deferred)", b2.opens)
	}
	if _, err := os.Stat(filepath.Join(dir, "db")); !os.IsNotExist(err) {
		t.Fatalf("the stale database was not discarded: %v", err)
	}
	check(t, b2.RestoreIncremental([]*IncrementalHandle{h}, func(ref []byte) (io.ReadCloser, error) {
		return nil, fmt.Errorf("downloaded %s despite a local copy", ref)
	}))
	verifyAll(t, b2, vals)
	if b2.opens != 1 {
		t.Fatalf("the restore opened %d databases, want 1 (the checkpoint's)", b2.opens)
	}
	// A backend used without a restore opens its empty database then.
	b3 := newTestBackend(t, Options{})
	defer b3.Close()
	putAll(t, b3, vals, []int{0})
	if b3.opens != 1 {
		t.Fatalf("a backend used without a restore opened %d databases, want 1", b3.opens)
	}
}

// firstLocalCheckpoint is a backend with local recovery in dir holding
// vals, and its completed checkpoint 1 (uploaded to stor) with its local
// copy.
func firstLocalCheckpoint(t *testing.T) (dir string, opts Options, b *Backend, stor *dirStorage, vals []string, h *IncrementalHandle) {
	t.Helper()
	dir = t.TempDir()
	opts = Options{Dir: dir, LocalRecovery: true}
	b = newTestBackend(t, opts)
	stor = newDirStorage(t)
	vals = []string{"a", "b", "c"}
	putAll(t, b, vals, []int{0, 1, 2})
	h = checkpoint(t, b, 1, stor)
	b.NotifyCheckpointComplete(1)
	return dir, opts, b, stor, vals, h
}

// TestRestoreMissingOrCorruptFile: a missing or corrupt file fails the
// restore with an error naming the file and the checkpoint.
func TestRestoreMissingOrCorruptFile(t *testing.T) {
	b := newTestBackend(t, Options{})
	closeLater(t, b)
	stor := newDirStorage(t)
	putAll(t, b, []string{"x", "y"}, []int{0, 1})
	h := checkpoint(t, b, 7, stor)
	var sst HandleFile
	for _, f := range h.Files {
		if f.Shared {
			sst = f
		}
	}
	path := filepath.Join(stor.root, string(sst.Ref))
	data, err := os.ReadFile(path)
	check(t, err)

	restore := func() error {
		r := newTestBackend(t, Options{})
		defer r.Close()
		return r.RestoreIncremental([]*IncrementalHandle{h}, stor.download)
	}
	wantNamed := func(err error, what string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), sst.Name) || !strings.Contains(err.Error(), "checkpoint 7") {
			t.Fatalf("%s: %v, want an error naming %s and checkpoint 7", what, err, sst.Name)
		}
	}
	check(t, os.Remove(path))
	err = restore()
	wantNamed(err, "missing file")
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v, want os.ErrNotExist", err)
	}
	bad := slices.Clone(data)
	bad[len(bad)/2] ^= 1
	check(t, os.WriteFile(path, bad, 0o644))
	err = restore()
	wantNamed(err, "corrupt file")
	if !errors.Is(err, state.ErrCorruptSnapshot) {
		t.Fatalf("corrupt file: %v, want ErrCorruptSnapshot", err)
	}
	check(t, os.WriteFile(path, data[:len(data)-1], 0o644))
	err = restore()
	wantNamed(err, "truncated file")
	check(t, os.WriteFile(path, data, 0o644))
	check(t, restore())
}

func TestHandleDecode(t *testing.T) {
	h := &IncrementalHandle{Format: handleFormat, CheckpointID: 3, LocalName: "chk-3", MaxParallelism: 128,
		KeyGroups: state.KeyGroupRange{Start: 0, End: 63}, BaseCheckpointID: -1,
		Files: []HandleFile{{Name: "CURRENT", Ref: []byte("r1"), Size: 16}, {Name: "000009.sst", Ref: []byte("r2"), Size: 100, Shared: true}}}
	got := roundTrip(t, h)
	if fmt.Sprint(got) != fmt.Sprint(h) {
		t.Fatalf("round trip: %+v, want %+v", got, h)
	}
	for _, bad := range []string{
		"not json",
		`{"format":9}`,
		strings.Replace(mustEncode(t, h), `"000009.sst"`, `"../../etc/passwd"`, 1),
		strings.Replace(mustEncode(t, h), `"CURRENT"`, `"OTHER"`, 1),
	} {
		if _, err := DecodeIncrementalHandle([]byte(bad)); !errors.Is(err, state.ErrCorruptSnapshot) {
			t.Errorf("decode %.40q: %v, want ErrCorruptSnapshot", bad, err)
		}
	}
	if got := len(h.SharedFiles()) + len(h.PrivateFiles()); got != 2 {
		t.Fatalf("shared + private = %d files", got)
	}
}

func mustEncode(t testing.TB, h *IncrementalHandle) string {
	data, err := h.Encode()
	check(t, err)
	return string(data)
}

// TestIncrementalCheckpointOfSmallBuffers: the checkpoints of a job that
// only updates value state write each state's buffered entries as one SST
// file that RocksDB ingests, however few (drainForCheckpoint), so that the
// listing of the live files finds the memtable empty and flushes nothing,
// and write the metadata only when it changed (a new state); every
// checkpoint restores what it covered.
func TestIncrementalCheckpointOfSmallBuffers(t *testing.T) {
	b := newTestBackend(t, Options{})
	closeLater(t, b)
	stor := newDirStorage(t)
	vals := make([]string, 500)
	all := make([]int, len(vals))
	for i := range vals {
		vals[i], all[i] = fmt.Sprint("v", i), i
	}
	putAll(t, b, vals, all)
	metaWrites := b.metaWrites
	cf := b.states[valueDesc.Name].cf
	var listed []uint64 // the value state's memtable entries when the live files are listed
	b.testHookCheckpoint = func(id int64, drained bool) {
		if !drained {
			return
		}
		n, ok := b.db.GetIntPropertyCF("rocksdb.num-entries-active-mem-table", cf)
		if !ok {
			t.Error("no rocksdb.num-entries-active-mem-table")
		}
		listed = append(listed, n)
	}
	h1 := roundTrip(t, checkpoint(t, b, 1, stor))
	b.NotifyCheckpointComplete(1)
	vals1 := slices.Clone(vals)
	for i := range 50 {
		vals[i*7] = fmt.Sprint("w", i)
	}
	putAll(t, b, vals, all[:350])
	h2 := roundTrip(t, checkpoint(t, b, 2, stor))
	if n := b.spillSeq.Load(); n != 2 {
		t.Errorf("two checkpoints of one state ingested %d SST files, want 2", n)
	}
	if !slices.Equal(listed, []uint64{0, 0}) {
		t.Errorf("the value state's memtable held %v entries when the two checkpoints listed the live files, want none (nothing to flush)", listed)
	}
	if b.metaWrites != metaWrites {
		t.Errorf("the metadata was written %d times by two checkpoints of value writes, want 0", b.metaWrites-metaWrites)
	}
	// A new state changes the metadata: the next checkpoint writes it.
	ls, err := state.GetListState(b, state.ListStateDescriptor[string]{Name: "l"})
	check(t, err)
	k := []byte(keyName(0))
	b.SetCurrentKey(k, state.KeyGroupFor(k, b.MaxParallelism()))
	check(t, ls.Add("x"))
	h3 := roundTrip(t, checkpoint(t, b, 3, stor))
	if b.metaWrites == metaWrites {
		t.Error("the checkpoint after a new state did not write the metadata")
	}
	for _, c := range []struct {
		h    *IncrementalHandle
		vals []string
	}{{h1, vals1}, {h2, vals}, {h3, vals}} {
		r := newTestBackend(t, Options{})
		check(t, r.RestoreIncremental([]*IncrementalHandle{c.h}, stor.download))
		verifyAll(t, r, c.vals)
		if c.h == h3 {
			ls, err := state.GetListState(r, state.ListStateDescriptor[string]{Name: "l"})
			check(t, err)
			r.SetCurrentKey(k, state.KeyGroupFor(k, r.MaxParallelism()))
			got, err := ls.Get()
			check(t, err)
			if !slices.Equal(got, []string{"x"}) {
				t.Errorf("restored list state = %q, want [x]", got)
			}
		}
		check(t, r.Close())
	}
}

// TestIncrementalManifestStaysSmall: every checkpoint uploads the whole
// MANIFEST, which each flush (one per checkpoint) and compaction extends;
// RocksDB rolls it over past maxManifestSize (here 4 KiB), so that over
// many checkpoints it stays near that size rather than growing with the
// job's age, and the last checkpoint still restores.
func TestIncrementalManifestStaysSmall(t *testing.T) {
	const rounds, limit = 300, 4 << 10
	b := newTestBackend(t, Options{maxManifest: limit})
	closeLater(t, b)
	stor := newDirStorage(t)
	vals := make([]string, 50)
	all := make([]int, len(vals))
	var h *IncrementalHandle
	largest := int64(0)
	for id := int64(1); id <= rounds; id++ {
		for i := range vals {
			vals[i], all[i] = fmt.Sprint("v", id, "-", i), i
		}
		putAll(t, b, vals, all)
		h = checkpoint(t, b, id, stor)
		b.NotifyCheckpointComplete(id)
		for _, f := range h.Files {
			if strings.HasPrefix(f.Name, "MANIFEST-") && id > rounds/2 {
				largest = max(largest, f.Size)
			}
		}
	}
	if largest == 0 || largest > 2*limit {
		t.Fatalf("the MANIFEST uploaded by the last %d checkpoints was up to %d bytes, want at most %d (rolled over past %d)", rounds/2, largest, 2*limit, limit)
	}
	r := newTestBackend(t, Options{})
	check(t, r.RestoreIncremental([]*IncrementalHandle{roundTrip(t, h)}, stor.download))
	verifyAll(t, r, vals)
	check(t, r.Close())
}

// linkingStorage is dirStorage with a FileUploader that hard-links the
// files it is offered into shared/ (checkpoint storage on the same file
// system), or declines them all (refuse: a storage that cannot link).
type linkingStorage struct {
	*dirStorage
	refuse bool
	linked map[string]uint32 // name -> the checksum it was offered with
}

func (s *linkingStorage) UploadFile(name, path string, size int64, shared bool, checksum func() (uint32, error)) ([]byte, bool, error) {
	if s.refuse || !shared {
		return nil, false, nil
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		return nil, false, fmt.Errorf("link %s: size %v, want %d (%v)", path, fi, size, err)
	}
	s.mu.Lock()
	s.seq++
	rel := filepath.Join("shared", fmt.Sprintf("%06d-%s", s.seq, name))
	s.mu.Unlock()
	if err := os.Link(path, filepath.Join(s.root, rel)); err != nil {
		return nil, false, err
	}
	crc, err := checksum()
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	s.linked[name] = crc
	s.mu.Unlock()
	return []byte(rel), true, nil
}

// TestCheckpointLinksSSTFiles: with an uploader that can link local files
// (checkpoint storage on the same file system) a checkpoint's new SST
// files are links to the database's own (the same inode, no copy), with
// their checksums; the MANIFEST, OPTIONS and CURRENT are uploaded as
// before; an uploader that declines gets every file through Upload. Both
// checkpoints restore from storage alone.
func TestCheckpointLinksSSTFiles(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refuse=%v", refuse), func(t *testing.T) {
			b := newTestBackend(t, Options{})
			closeLater(t, b)
			stor := &linkingStorage{dirStorage: newDirStorage(t), refuse: refuse, linked: make(map[string]uint32)}
			vals := make([]string, 300)
			all := make([]int, len(vals))
			for i := range vals {
				vals[i], all[i] = fmt.Sprint("v", i), i
			}
			putAll(t, b, vals, all)
			snap, err := b.SnapshotIncremental(1)
			check(t, err)
			h, err := snap.Upload(stor)
			check(t, err)
			ssts := 0
			for _, f := range h.Files {
				stored := filepath.Join(stor.root, string(f.Ref))
				crc, err := fileCRC32C(stored)
				check(t, err)
				if crc != f.CRC32C {
					t.Errorf("%s: stored checksum %08x, handle's %08x", f.Name, crc, f.CRC32C)
				}
				sfi, err := os.Stat(stored)
				check(t, err)
				lfi, lerr := os.Stat(filepath.Join(b.dbDir, f.Name))
				same := lerr == nil && os.SameFile(sfi, lfi)
				_, offered := stor.linked[f.Name]
				if !isSST(f.Name) {
					if offered || same {
						t.Errorf("%s: linked, want it uploaded", f.Name)
					}
					continue
				}
				ssts++
				switch {
				case refuse && same:
					t.Errorf("%s: stored as a link though the uploader declined", f.Name)
				case !refuse && (!same || stor.linked[f.Name] != f.CRC32C):
					t.Errorf("%s: same file %v, offered with checksum %08x (%v), want a link with %08x", f.Name, same, stor.linked[f.Name], offered, f.CRC32C)
				}
			}
			snap.Release()
			if ssts == 0 {
				t.Fatal("the checkpoint has no SST file")
			}
			if wantUploads := len(h.Files) - ssts; refuse {
				wantUploads = len(h.Files)
				if stor.files != wantUploads {
					t.Errorf("%d files went through Upload, want %d", stor.files, wantUploads)
				}
			} else if stor.files != wantUploads {
				t.Errorf("%d files went through Upload, want %d (all but the SST files)", stor.files, wantUploads)
			}
			b.NotifyCheckpointComplete(1)
			check(t, b.Close())
			r := newTestBackend(t, Options{})
			check(t, r.RestoreIncremental([]*IncrementalHandle{roundTrip(t, h)}, stor.download))
			verifyAll(t, r, vals)
			check(t, r.Close())
		})
	}
}

// TestIncrementalSharesOptions: the OPTIONS file is shared state, as the
// SST files are: the checkpoint after a completed one references the
// file that one uploaded rather than upload (or, in the runtime, inline)
// it again, and a restore from that checkpoint reads it.
func TestIncrementalSharesOptions(t *testing.T) {
	b := newTestBackend(t, Options{})
	closeLater(t, b)
	stor := newDirStorage(t)
	vals := make([]string, 300)
	all := make([]int, len(vals))
	for i := range vals {
		vals[i], all[i] = fmt.Sprint("v", i), i
	}
	putAll(t, b, vals, all)
	options := func(h *IncrementalHandle) HandleFile {
		t.Helper()
		for _, f := range h.Files {
			if strings.HasPrefix(f.Name, "OPTIONS-") {
				return f
			}
		}
		t.Fatalf("checkpoint %d has no OPTIONS file: %+v", h.CheckpointID, h.Files)
		return HandleFile{}
	}
	h1 := roundTrip(t, checkpoint(t, b, 1, stor))
	b.NotifyCheckpointComplete(1)
	if o := options(h1); !o.Shared || o.Reused {
		t.Fatalf("first checkpoint's %s: shared %v, reused %v; want shared, uploaded", o.Name, o.Shared, o.Reused)
	}
	for i := range 30 {
		vals[i*3] = fmt.Sprint("w", i)
	}
	putAll(t, b, vals, all[:90])
	h2 := roundTrip(t, checkpoint(t, b, 2, stor))
	o1, o2 := options(h1), options(h2)
	if o2.Name != o1.Name || !o2.Shared || !o2.Reused || string(o2.Ref) != string(o1.Ref) || o2.CRC32C != o1.CRC32C {
		t.Fatalf("second checkpoint's %s: shared %v, reused %v, ref %s; want checkpoint 1's %s, ref %s, reused", o2.Name, o2.Shared, o2.Reused, o2.Ref, o1.Name, o1.Ref)
	}
	r := newTestBackend(t, Options{})
	check(t, r.RestoreIncremental([]*IncrementalHandle{h2}, stor.download))
	verifyAll(t, r, vals)
	check(t, r.Close())
}
