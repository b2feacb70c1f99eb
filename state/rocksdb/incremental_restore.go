package rocksdb

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
)

// Download opens an uploaded file by the reference its Uploader returned.
// It is called from several goroutines at once (Options.TransferThreads).
type Download func(ref []byte) (io.ReadCloser, error)

// RestoreIncremental restores incremental checkpoints: the handles of the
// old subtasks whose key groups overlap this backend's (others are
// ignored). It must be called before any state is created.
//
// With one handle of exactly this backend's key groups, the database is
// the checkpoint's: taken from the local checkpoint directory when it is
// still there and its files have the recorded sizes and CRC32C (local
// recovery; a copy that differs is never used), else downloaded; later checkpoints then reference its files. Otherwise
// (rescaling) the handle overlapping most becomes the database, cut to the
// owned key groups with range deletions, and the owned key groups of the
// others are copied into it from temporary databases.
//
// A missing or corrupt file fails naming the file and the checkpoint
// (corruption wraps state.ErrCorruptSnapshot); after a failure the backend
// is unusable and must be closed.
func (b *Backend) RestoreIncremental(handles []*IncrementalHandle, download Download) error {
	if b.db == nil && !b.deferred {
		return state.ErrClosed
	}
	if b.used {
		return fmt.Errorf("rocksdb backend: restore after states were created: %w", state.ErrRestore)
	}
	var hs []*IncrementalHandle
	for _, h := range handles {
		if err := h.validate(); err != nil {
			return err
		}
		if h.MaxParallelism != b.maxPar {
			return fmt.Errorf("rocksdb backend: checkpoint %d has max parallelism %d, backend %d: %w", h.CheckpointID, h.MaxParallelism, b.maxPar, state.ErrRestore)
		}
		if overlap(h.KeyGroups, b.kgr) > 0 {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return nil
	}
	for i, h := range hs {
		for _, o := range hs[:i] {
			if overlap(h.KeyGroups, o.KeyGroups) > 0 {
				return fmt.Errorf("rocksdb backend: checkpoints %d and %d both hold key groups %v and %v: %w", o.CheckpointID, h.CheckpointID, o.KeyGroups, h.KeyGroups, state.ErrRestore)
			}
		}
	}
	b.deferred = false // the checkpoint's database is opened instead
	b.closeDB()
	if err := os.RemoveAll(b.dbDir); err != nil {
		return fmt.Errorf("rocksdb backend: clear %s: %w", b.dbDir, err)
	}
	var err error
	if len(hs) == 1 && hs[0].KeyGroups == b.kgr {
		err = b.restoreWhole(hs[0], download)
	} else {
		err = b.restoreRescaled(hs, download)
	}
	if err != nil {
		b.closeDB()
		return err
	}
	b.clRestored()
	b.key, b.kg, b.inRange = nil, -1, false
	return b.writeMeta()
}

func overlap(a, b state.KeyGroupRange) int {
	return max(0, min(a.End, b.End)-max(a.Start, b.Start)+1)
}

// restoreWhole makes the checkpoint of h the database.
func (b *Backend) restoreWhole(h *IncrementalHandle, download Download) error {
	local, err := b.materialize(h, b.dbDir, download)
	if err != nil {
		return err
	}
	if err := b.openExisting(b.dbDir); err != nil {
		return fmt.Errorf("checkpoint %d: %w", h.CheckpointID, err)
	}
	if err := b.applyChangelog(h, b.kgr.Start, b.kgr.End, download); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// The restored checkpoint is retained until a later one completes, so
	// its shared files can be referenced until then.
	b.inc.base = make(map[string]HandleFile)
	for _, f := range h.SharedFiles() {
		b.inc.base[f.Name] = f
	}
	b.inc.baseID, b.inc.lastCompleted = h.CheckpointID, h.CheckpointID
	if local != "" && b.opts.LocalRecovery {
		b.inc.local[h.CheckpointID] = local
	}
	b.cleanStaleLocal()
	return nil
}

// restoreRescaled builds the database from the overlapping parts of
// several checkpoints (or a part of one).
func (b *Backend) restoreRescaled(hs []*IncrementalHandle, download Download) error {
	sort.SliceStable(hs, func(i, j int) bool {
		return overlap(hs[i].KeyGroups, b.kgr) > overlap(hs[j].KeyGroups, b.kgr)
	})
	if _, err := b.materialize(hs[0], b.dbDir, download); err != nil {
		return err
	}
	if err := b.openExisting(b.dbDir); err != nil {
		return fmt.Errorf("checkpoint %d: %w", hs[0].CheckpointID, err)
	}
	if err := b.clipToRange(); err != nil {
		return fmt.Errorf("checkpoint %d: %w", hs[0].CheckpointID, err)
	}
	if err := b.applyOwnedChangelog(hs[0], download); err != nil {
		return err
	}
	for i, h := range hs[1:] {
		tmp := filepath.Join(b.opts.Dir, fmt.Sprintf("%s%d", tmpPrefix, i))
		err := b.copyFrom(h, tmp, download)
		if rmErr := os.RemoveAll(tmp); rmErr != nil && err == nil {
			err = rmErr
		}
		if err != nil {
			return fmt.Errorf("checkpoint %d: %w", h.CheckpointID, err)
		}
		if err := b.applyOwnedChangelog(h, download); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.cleanStaleLocal()
	b.mu.Unlock()
	return nil
}

// applyOwnedChangelog applies h's changelog segments to the key groups
// both h and the backend hold: the segments of each old subtask after its
// key groups were copied (key groups of different subtasks never meet).
func (b *Backend) applyOwnedChangelog(h *IncrementalHandle, download Download) error {
	return b.applyChangelog(h, max(b.kgr.Start, h.KeyGroups.Start), min(b.kgr.End, h.KeyGroups.End), download)
}

// clipToRange deletes the key groups outside the backend's range: whole
// SST files where they lie outside it, range deletions for the rest.
func (b *Backend) clipToRange() error {
	var ranges []grocksdb.Range
	if b.kgr.Start > 0 {
		ranges = append(ranges, grocksdb.Range{Start: kgBound(0), Limit: kgBound(b.kgr.Start)})
	}
	if b.kgr.End+1 < b.maxPar {
		ranges = append(ranges, grocksdb.Range{Start: kgBound(b.kgr.End + 1), Limit: kgBound(b.maxPar)})
	}
	for _, s := range b.order {
		for _, r := range ranges {
			if err := b.db.DeleteFileInRangeCF(s.cf, r); err != nil {
				return fmt.Errorf("state %q: delete files outside key groups %v: %w", s.meta.Name, b.kgr, err)
			}
			if err := b.db.DeleteRangeCF(b.nopts.wo, s.cf, r.Start, r.Limit); err != nil {
				return fmt.Errorf("state %q: delete outside key groups %v: %w", s.meta.Name, b.kgr, err)
			}
		}
	}
	return nil
}

// copyFrom opens h's checkpoint in dir (read-only) and copies the owned
// key groups of every state into the database.
func (b *Backend) copyFrom(h *IncrementalHandle, dir string, download Download) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if _, err := b.materialize(h, dir, download); err != nil {
		return err
	}
	r, err := b.openRaw(dir, true)
	if err != nil {
		return err
	}
	defer r.close()
	m, err := b.readMeta(r)
	if err != nil {
		return err
	}
	if m == nil {
		return nil
	}
	b.listSeq = max(b.listSeq, m.ListSeq)
	lo, hi := max(b.kgr.Start, h.KeyGroups.Start), min(b.kgr.End, h.KeyGroups.End)
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	for _, sm := range m.States {
		src := r.cfs[cfName(sm)]
		if src == nil {
			return fmt.Errorf("rocksdb backend: database %s: state %q has no column family: %w", dir, sm.Name, state.ErrCorruptSnapshot)
		}
		dst := b.states[sm.Name]
		if dst == nil {
			if dst, err = b.addState(sm); err != nil {
				return err
			}
		} else if merged, err := dst.meta.Merge(sm); err != nil {
			return fmt.Errorf("checkpoints disagree: %w", err)
		} else {
			dst.meta = merged
		}
		if err := b.copyRange(r.db, src, dst.cf, lo, hi, wb); err != nil {
			return fmt.Errorf("state %q: copy key groups %d-%d: %w", sm.Name, lo, hi, err)
		}
	}
	return nil
}

func (b *Backend) copyRange(src *grocksdb.DB, from, to *grocksdb.ColumnFamilyHandle, lo, hi int, wb *grocksdb.WriteBatch) error {
	ro := newIterOptions()
	defer ro.Destroy()
	ro.SetFillCache(false)
	ro.SetIterateUpperBound(kgBound(hi + 1))
	it := src.NewIteratorCF(ro, from)
	defer it.Close()
	size := 0
	for it.Seek(kgBound(lo)); it.Valid(); it.Next() {
		k, v := it.Key().Data(), it.Value().Data()
		wb.PutCF(to, k, v)
		size += len(k) + len(v)
		if size >= 4<<20 {
			if err := b.flushBatch(wb); err != nil {
				return err
			}
			size = 0
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("rocksdb iterate: %w", err)
	}
	return b.flushBatch(wb)
}

// materialize puts the files of h into dir: hard links (or copies) from
// the local checkpoint directory when it holds h's files, each of the
// recorded size and checksum, else downloads. It returns the local
// directory it used, or "".
func (b *Backend) materialize(h *IncrementalHandle, dir string, download Download) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("rocksdb backend: %w", err)
	}
	local, why := b.matchingLocal(h)
	if local != "" {
		err := linkFiles(local, dir, h.Files)
		if err == nil {
			b.restoredFrom(h, true)
			return local, nil
		}
		why = err.Error()
		// Start over: the links share their files with the local copy.
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("rocksdb backend: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("rocksdb backend: %w", err)
		}
	}
	if why != "" {
		b.log.Warn("rocksdb backend: local copy unusable, downloading", "checkpoint", h.CheckpointID,
			"dir", filepath.Join(b.chkDir, h.LocalName), "cause", why)
	}
	if download == nil {
		return "", fmt.Errorf("rocksdb backend: checkpoint %d: no local copy and no download function: %w", h.CheckpointID, state.ErrRestore)
	}
	err := parallel(b.opts.TransferThreads, len(h.Files), func(i int) error {
		return downloadFile(h, h.Files[i], dir, download)
	})
	if err == nil {
		b.restoredFrom(h, false)
	}
	return "", err
}

// RestoreFigures say where a backend's restore took its files from: the
// local copy of the checkpoint (local recovery) or the checkpoint storage.
// A rescaled restore adds up the checkpoints it read.
type RestoreFigures struct {
	// LocalFiles and LocalBytes were taken from local copies.
	LocalFiles int
	LocalBytes int64
	// DownloadedFiles and DownloadedBytes were downloaded.
	DownloadedFiles int
	DownloadedBytes int64
}

// Restored returns the figures of the backend's restores so far.
func (b *Backend) Restored() RestoreFigures {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.restoreFigures
}

// restoredFrom counts h's files as taken locally or downloaded, and logs
// it.
func (b *Backend) restoredFrom(h *IncrementalHandle, local bool) {
	var n int64
	for _, f := range h.Files {
		n += f.Size
	}
	b.mu.Lock()
	if local {
		b.restoreFigures.LocalFiles += len(h.Files)
		b.restoreFigures.LocalBytes += n
	} else {
		b.restoreFigures.DownloadedFiles += len(h.Files)
		b.restoreFigures.DownloadedBytes += n
	}
	b.mu.Unlock()
	if local {
		b.log.Info("rocksdb backend: local recovery", "checkpoint", h.CheckpointID, "key_groups", fmt.Sprintf("%d-%d", h.KeyGroups.Start, h.KeyGroups.End),
			"files", len(h.Files), "bytes", n, "downloaded_bytes", 0)
	} else {
		b.log.Info("rocksdb backend: downloaded checkpoint", "checkpoint", h.CheckpointID, "key_groups", fmt.Sprintf("%d-%d", h.KeyGroups.Start, h.KeyGroups.End),
			"files", len(h.Files), "downloaded_bytes", n)
	}
}

// matchingLocal returns the local checkpoint directory of h if it holds
// every file of h with its recorded size and CRC32C (a copy that differs,
// however it came to, is never restored), else "" and, when there was a
// copy, why it is not used.
func (b *Backend) matchingLocal(h *IncrementalHandle) (string, string) {
	dir := filepath.Join(b.chkDir, h.LocalName)
	if _, err := os.Stat(dir); err != nil {
		return "", ""
	}
	for _, f := range h.Files {
		fi, err := os.Stat(filepath.Join(dir, f.Name))
		switch {
		case err != nil:
			return "", err.Error()
		case !fi.Mode().IsRegular() || fi.Size() != f.Size:
			return "", fmt.Sprintf("file %s: %d bytes, the checkpoint's has %d", f.Name, fi.Size(), f.Size)
		}
	}
	err := parallel(b.opts.TransferThreads, len(h.Files), func(i int) error {
		f := h.Files[i]
		sum, err := fileCRC32C(filepath.Join(dir, f.Name))
		if err != nil {
			return err
		}
		if sum != f.CRC32C {
			return fmt.Errorf("file %s: checksum %08x, the checkpoint's is %08x", f.Name, sum, f.CRC32C)
		}
		return nil
	})
	if err != nil {
		return "", err.Error()
	}
	return dir, ""
}

func fileCRC32C(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	crc := crc32.New(crcTable)
	if _, err := io.Copy(crc, f); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return crc.Sum32(), nil
}

// linkFiles hard-links the SST files from src into dst (copying when
// linking fails) and copies the others: the database appends to them.
func linkFiles(src, dst string, files []HandleFile) error {
	for _, f := range files {
		from, to := filepath.Join(src, f.Name), filepath.Join(dst, f.Name)
		if isSST(f.Name) && os.Link(from, to) == nil {
			continue
		}
		if err := copyFile(from, to); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// downloadFile downloads one file into dir, checking its size and checksum.
func downloadFile(h *IncrementalHandle, f HandleFile, dir string, download Download) error {
	fail := func(err error) error {
		return fmt.Errorf("rocksdb backend: checkpoint %d: file %s (ref %q): %w", h.CheckpointID, f.Name, f.Ref, err)
	}
	rc, err := download(f.Ref)
	if err != nil {
		return fail(fmt.Errorf("download: %w", err))
	}
	defer rc.Close()
	out, err := os.Create(filepath.Join(dir, f.Name))
	if err != nil {
		return fail(err)
	}
	crc := crc32.New(crcTable)
	// Read one byte more than expected to notice a longer file.
	n, err := io.Copy(io.MultiWriter(out, crc), io.LimitReader(rc, f.Size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fail(fmt.Errorf("download: %w", err))
	case n != f.Size:
		return fail(fmt.Errorf("%d bytes, want %d: %w", n, f.Size, state.ErrCorruptSnapshot))
	case crc.Sum32() != f.CRC32C:
		return fail(fmt.Errorf("checksum mismatch: %w", state.ErrCorruptSnapshot))
	}
	return nil
}

// DisclaimRestored forgets the shared files of the restored checkpoint:
// the next checkpoint uploads every file rather than reference them, so
// it depends on nothing the job does not own (a NO_CLAIM restore, or a
// checkpoint of another job's directory).
func (b *Backend) DisclaimRestored() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inc.base = make(map[string]HandleFile)
	b.inc.baseID = -1
}
