package rocksdb

import (
	"bytes"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
)

// Uploader stores the files of an incremental checkpoint; the runtime
// adapts checkpoint storage to it. Upload may be called from several
// goroutines at once (Options.TransferThreads).
type Uploader interface {
	// Upload stores the file name, size bytes read from r, and returns an
	// opaque reference to it, which the handle records and RestoreIncremental
	// hands back to the download function. shared is true for SST and
	// OPTIONS files, which later checkpoints may reference (shared state:
	// store them where the shared state registry counts references); false
	// for files private to this checkpoint (MANIFEST, CURRENT). Names repeat across
	// subtasks and restores: the reference must be unique.
	Upload(name string, r io.Reader, size int64, shared bool) (ref []byte, err error)
}

// IncrementalSnapshot is an incremental checkpoint whose synchronous part
// is done: the write buffers frozen at the barrier. A background job of
// the backend writes them into RocksDB, flushes the memtables and, with
// local recovery, takes the RocksDB checkpoint (hard links) in a local
// directory, without it lists the database's live files, their deletion
// held off until Release (live_checkpoint.go); Upload waits for it.
type IncrementalSnapshot struct {
	b         *Backend
	id        int64
	localName string
	dir       string
	kgr       state.KeyGroupRange
	maxPar    int
	// SyncDuration is how long the synchronous part took.
	SyncDuration time.Duration

	// ready is closed when the background job has set files, or err and
	// no directory; LocalDuration is how long that job took.
	ready         chan struct{}
	files         []localFile
	err           error
	LocalDuration time.Duration
	// plan is set for a changelog checkpoint (changelog.go), which has no
	// local directory of its own; seq is the changelog's count of direct
	// writes at the barrier.
	plan *clPlan
	seq  uint64
	// live: a checkpoint without a local directory (live_checkpoint.go);
	// liveHeld while the file deletions of liveDB (generation liveGen)
	// are disabled for it.
	live     bool
	liveHeld bool
	liveDB   *grocksdb.DB
	liveGen  uint64

	mu       sync.Mutex
	started  bool
	finished bool
	ok       bool
	released bool
}

type localFile struct {
	name string
	size int64
	// data is the file's contents when it is read from memory (a
	// checkpoint without a local directory: live_checkpoint.go).
	data []byte
}

// incState is the backend's bookkeeping of incremental checkpoints,
// guarded by Backend.mu.
type incState struct {
	// uploads: the shared files of each successful upload that is neither
	// confirmed nor aborted yet, by checkpoint.
	uploads map[int64]map[string]HandleFile
	// base: the shared files of the last completed checkpoint, which later
	// checkpoints reference instead of uploading them again.
	base          map[string]HandleFile
	baseID        int64
	lastCompleted int64
	// local: the local checkpoint directories kept for local recovery.
	local map[int64]string
	// inflight: local checkpoint directories of unreleased snapshots.
	inflight map[string]bool
	cleaned  bool
}

func (s *incState) init() {
	s.uploads = make(map[int64]map[string]HandleFile)
	s.base = make(map[string]HandleFile)
	s.baseID, s.lastCompleted = -1, -1
	s.local = make(map[int64]string)
	s.inflight = make(map[string]bool)
}

// SnapshotIncremental runs the synchronous part of an incremental
// checkpoint: it freezes every state's write buffer (new writes go to a
// new one) and records the metadata, then leaves to a background job,
// after the jobs before it, writing the frozen buffers into RocksDB,
// flushing the memtables and, with local recovery, creating a RocksDB
// checkpoint (hard links to the SST files, copies of the small ones) in
// the local checkpoint directory, else listing the live files of the
// database, which Upload reads from its directory (live_checkpoint.go). Reads see the frozen buffers until they are in RocksDB;
// writes that go into RocksDB directly (list and map states, new states)
// wait for the job, so the checkpoint holds the state at this call
// exactly. A changelog checkpoint between materializations (changelog.go)
// instead copies what changed since the last barrier into its segment
// here, freezes nothing and enqueues no job. Call Upload on the result
// (on any goroutine), then Release.
func (b *Backend) SnapshotIncremental(checkpointID int64) (*IncrementalSnapshot, error) {
	if err := b.ready(); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := b.writeMeta(); err != nil {
		return nil, err
	}
	// Every state's buffers are checked before any is frozen: a buffer
	// frozen must reach a job, or waiting for it would never end.
	for _, s := range b.order {
		if s.buf != nil {
			if err := b.prune(s); err != nil {
				return nil, fmt.Errorf("rocksdb incremental checkpoint %d: %w", checkpointID, err)
			}
		}
	}
	name := fmt.Sprintf("chk-%d-%s", checkpointID, b.instance)
	snap := &IncrementalSnapshot{
		b: b, id: checkpointID, localName: name, dir: filepath.Join(b.chkDir, name),
		kgr: b.kgr, maxPar: b.maxPar, ready: make(chan struct{}), seq: b.cl.seq,
	}
	// A changelog checkpoint's segment is what changed since the last
	// barrier, encoded here; its buffers are drained into RocksDB only
	// for a materialization (changelog.go).
	drain := true
	materialize := false
	if b.opts.Changelog {
		b.cl.add(b.takeDelta(checkpointID), b.opts.WriteBufferSize)
		snap.plan = b.plan(checkpointID)
		if snap.plan != nil {
			materialize = b.cl.mat == nil && time.Since(b.cl.lastMat) >= b.opts.MaterializeInterval
			drain = materialize
		}
	}
	var frozen []frozenState
	var bufs []*frozenBuffer
	if drain {
		for _, s := range b.order {
			if s.buf != nil && !s.buf.active.empty() {
				f := b.freeze(s)
				frozen = append(frozen, frozenState{s, f})
				bufs = append(bufs, f)
			}
		}
	}
	if snap.plan != nil {
		snap.dir = ""
	} else {
		b.cl.lastMat = time.Now() // this checkpoint is a materialization
		if b.opts.LocalRecovery {
			b.mu.Lock()
			b.inc.inflight[snap.dir] = true
			b.mu.Unlock()
		} else {
			snap.dir, snap.live = "", true
		}
	}
	if !drain {
		// A changelog checkpoint between materializations: no background
		// job, RocksDB untouched.
		close(snap.ready)
		snap.SyncDuration = time.Since(start)
		return snap, nil
	}
	b.lastCheckpoint = b.enqueue(func() {
		defer close(snap.ready)
		jobStart := time.Now()
		if b.testHookCheckpoint != nil {
			b.testHookCheckpoint(checkpointID, false)
		}
		drained := true
		for _, fs := range frozen {
			if b.closing.Load() {
				fs.f.err = state.ErrClosed
			} else if err := b.drainForCheckpoint(fs.s, fs.f.w); err != nil {
				fs.f.err = fmt.Errorf("write buffer: %w", err)
			}
			if fs.f.err != nil {
				b.writeFailed.Store(true)
				if drained {
					drained = false
					snap.err = fmt.Errorf("rocksdb incremental checkpoint %d: state %q: %w", checkpointID, fs.s.meta.Name, fs.f.err)
				}
			}
			close(fs.f.done)
		}
		if drained && snap.plan == nil {
			if b.writeFailed.Load() {
				snap.err = fmt.Errorf("rocksdb incremental checkpoint %d: an earlier background write failed", checkpointID)
			} else if snap.live {
				snap.files, snap.liveGen, snap.err = b.liveFiles(checkpointID)
				snap.liveDB, snap.liveHeld = b.db, snap.err == nil
			} else {
				snap.files, snap.err = b.localCheckpointFiles(checkpointID, name)
			}
		}
		snap.LocalDuration = time.Since(jobStart)
	})
	if materialize {
		b.startMaterialization(checkpointID, bufs)
	}
	snap.SyncDuration = time.Since(start)
	return snap, nil
}

// frozenState is a state's buffer frozen at a checkpoint's barrier.
type frozenState struct {
	s *cfState
	f *frozenBuffer
}

// localCheckpointFiles takes the local RocksDB checkpoint name and lists
// its files; on the checkpoint's background job.
func (b *Backend) localCheckpointFiles(id int64, name string) ([]localFile, error) {
	if b.closing.Load() {
		return nil, fmt.Errorf("rocksdb incremental checkpoint %d: %w", id, state.ErrClosed)
	}
	if b.testHookCheckpoint != nil {
		b.testHookCheckpoint(id, true)
	}
	dir, err := b.localCheckpoint(name)
	if err != nil {
		return nil, fmt.Errorf("rocksdb incremental checkpoint %d: %w", id, err)
	}
	files, err := listFiles(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("rocksdb incremental checkpoint %d: %w", id, err)
	}
	return files, nil
}

// localCheckpoint flushes the memtables and takes a RocksDB checkpoint
// (hard links to the SST files, copies of the small ones) in the local
// checkpoint directory name, which it returns.
func (b *Backend) localCheckpoint(name string) (string, error) {
	dir := filepath.Join(b.chkDir, name)
	if err := os.MkdirAll(b.chkDir, 0o755); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	cp, err := b.db.NewCheckpoint()
	if err != nil {
		return "", err
	}
	err = cp.CreateCheckpoint(dir, 0) // 0: always flush the memtables
	cp.Destroy()
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	return dir, nil
}

func listFiles(dir string) ([]localFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []localFile
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		files = append(files, localFile{name: e.Name(), size: fi.Size()})
	}
	return files, nil
}

func isSST(name string) bool { return strings.HasSuffix(name, ".sst") }

// immutable reports whether the file name of a RocksDB checkpoint is
// never written again under that name: an SST file, or an OPTIONS file
// (OPTIONS-<file number>; RocksDB writes a new one, under a new number,
// when the options change). Such a file is shared, and a checkpoint
// references the one the base checkpoint uploaded rather than upload it
// again. Sharing the OPTIONS file keeps it (about 7 KB, the same in every
// checkpoint) out of every checkpoint's _metadata, where the runtime
// would inline it as a private file.
func immutable(name string) bool { return isSST(name) || strings.HasPrefix(name, "OPTIONS-") }

// wait waits for the snapshot's background job: its RocksDB checkpoint,
// or the error that prevented it.
func (s *IncrementalSnapshot) wait() error {
	<-s.ready
	return s.err
}

// CheckpointID is the checkpoint the snapshot belongs to.
func (s *IncrementalSnapshot) CheckpointID() int64 { return s.id }

// Upload runs the asynchronous part: it uploads the SST files that the
// last completed checkpoint did not upload (or the restored checkpoint,
// before any completes) and references the others, uploads the other files
// always, and returns the handle to store in the checkpoint's metadata. It
// runs once; after a failure the checkpoint must be declined (what was
// uploaded is the runtime's to delete) and the previous checkpoints stay
// valid.
func (s *IncrementalSnapshot) Upload(u Uploader) (*IncrementalHandle, error) {
	s.mu.Lock()
	if s.started || s.released {
		s.mu.Unlock()
		return nil, fmt.Errorf("rocksdb incremental checkpoint %d: uploaded or released already", s.id)
	}
	s.started = true
	s.mu.Unlock()
	var h *IncrementalHandle
	var err error
	if s.plan != nil {
		// A changelog checkpoint needs nothing of the background job.
		h, err = s.uploadChangelog(u)
	} else if err = s.wait(); err == nil {
		h, err = s.upload(u)
	}
	s.mu.Lock()
	s.finished, s.ok = true, err == nil
	released := s.released
	s.mu.Unlock()
	if released {
		s.cleanup()
	}
	return h, err
}

func (s *IncrementalSnapshot) upload(u Uploader) (*IncrementalHandle, error) {
	h := &IncrementalHandle{
		Format:           handleFormat,
		CheckpointID:     s.id,
		LocalName:        s.localName,
		MaxParallelism:   s.maxPar,
		KeyGroups:        s.kgr,
		BaseCheckpointID: -1,
		MaterializedID:   s.id,
	}
	var err error
	dir := s.dir
	if s.live {
		dir = s.b.dbDir
	}
	if h.Files, h.BaseCheckpointID, err = s.uploadFiles(u, dir, s.files); err != nil {
		return nil, err
	}
	for _, f := range h.Files {
		h.StateSize += f.Size
		if !f.Reused {
			h.CheckpointedSize += f.Size
		}
	}
	s.record(h, s.seq)
	return h, nil
}

// uploadFiles uploads the files of the RocksDB checkpoint in dir that the
// last completed checkpoint did not upload (or the restored checkpoint,
// before any completes) and references the others; it returns the files
// and the checkpoint they reference (-1: none). SST and OPTIONS files
// are shared (immutable), the others too in a changelog backend, whose
// later checkpoints reference them.
func (s *IncrementalSnapshot) uploadFiles(u Uploader, dir string, local []localFile) ([]HandleFile, int64, error) {
	b := s.b
	b.mu.Lock()
	base, baseID := b.inc.base, b.inc.baseID
	b.mu.Unlock()
	files := make([]HandleFile, len(local))
	usedBase := int64(-1)
	var todo []int
	for i, f := range local {
		hf := HandleFile{Name: f.name, Size: f.size, Shared: immutable(f.name) || b.opts.Changelog}
		if bf, ok := base[f.name]; ok && immutable(f.name) && bf.Size == f.size {
			hf.Ref, hf.CRC32C, hf.Reused = bf.Ref, bf.CRC32C, true
			usedBase = baseID
		} else {
			todo = append(todo, i)
		}
		files[i] = hf
	}
	err := parallel(b.opts.TransferThreads, len(todo), func(j int) error {
		hf := &files[todo[j]]
		if data := local[todo[j]].data; data != nil {
			return uploadReader(u, bytes.NewReader(data), hf)
		}
		return uploadFile(u, filepath.Join(dir, hf.Name), hf)
	})
	if err != nil {
		return nil, -1, fmt.Errorf("rocksdb incremental checkpoint %d: %w", s.id, err)
	}
	return files, usedBase, nil
}

// FileUploader is an Uploader that can store a local file without
// copying it: checkpoint storage's StateUploader, which hard-links a
// shared file into a location on the same file system (the checkpoint's
// commit fsyncs it there), then asks checksum for the file's CRC-32C.
// UploadFile returns ok false when it did not store the file (without
// calling checksum); it is then uploaded through Upload.
type FileUploader interface {
	UploadFile(name, path string, size int64, shared bool, checksum func() (uint32, error)) (ref []byte, ok bool, err error)
}

// uploadFile uploads one file, filling in its reference and checksum.
// An SST file, never written again once RocksDB made it, is linked
// rather than copied where the uploader can (FileUploader); its checksum
// is then read from the file.
func uploadFile(u Uploader, path string, hf *HandleFile) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", hf.Name, err)
	}
	defer f.Close()
	if fu, ok := u.(FileUploader); ok && hf.Shared && isSST(hf.Name) {
		var sum uint32
		summed := false
		checksum := func() (uint32, error) {
			cr := &checksumReader{r: io.LimitReader(f, hf.Size), h: crc32.New(crcTable)}
			if _, err := io.Copy(io.Discard, cr); err != nil {
				return 0, fmt.Errorf("read %s: %w", hf.Name, err)
			}
			if cr.n != hf.Size {
				return 0, fmt.Errorf("read %s: %d of %d bytes", hf.Name, cr.n, hf.Size)
			}
			sum, summed = cr.h.Sum32(), true
			return sum, nil
		}
		ref, ok, err := fu.UploadFile(hf.Name, path, hf.Size, hf.Shared, checksum)
		if err != nil {
			return fmt.Errorf("upload %s: %w", hf.Name, err)
		}
		if ok {
			if len(ref) == 0 || !summed {
				return fmt.Errorf("upload %s: the uploader returned an empty reference or stored the file without its checksum", hf.Name)
			}
			hf.Ref, hf.CRC32C = slices.Clone(ref), sum
			return nil
		}
	}
	return uploadReader(u, f, hf)
}

// uploadReader uploads hf.Size bytes of r as the file hf, filling in its
// reference and checksum.
func uploadReader(u Uploader, r io.Reader, hf *HandleFile) error {
	cr := &checksumReader{r: io.LimitReader(r, hf.Size), h: crc32.New(crcTable)}
	ref, err := u.Upload(hf.Name, cr, hf.Size, hf.Shared)
	if err != nil {
		return fmt.Errorf("upload %s: %w", hf.Name, err)
	}
	if cr.n != hf.Size {
		return fmt.Errorf("upload %s: the uploader read %d of %d bytes", hf.Name, cr.n, hf.Size)
	}
	if len(ref) == 0 {
		return fmt.Errorf("upload %s: the uploader returned an empty reference", hf.Name)
	}
	hf.Ref, hf.CRC32C = slices.Clone(ref), cr.h.Sum32()
	return nil
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// checksumReader counts and checksums what is read through it.
type checksumReader struct {
	r io.Reader
	h hash.Hash32
	n int64
}

func (c *checksumReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// Release frees the snapshot: it deletes the local checkpoint directory,
// unless local recovery keeps it (a successful upload of a checkpoint not
// subsumed or aborted yet). Call it when done with the snapshot, after
// Upload or instead of it. It is idempotent; called while Upload runs, it
// takes effect when Upload returns.
func (s *IncrementalSnapshot) Release() {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return
	}
	s.released = true
	running := s.started && !s.finished
	s.mu.Unlock()
	if !running {
		s.cleanup()
	}
}

func (s *IncrementalSnapshot) cleanup() {
	_ = s.wait() // the directory is complete, or was never made
	if s.plan != nil {
		return // no directory of its own
	}
	b := s.b
	if s.live {
		if s.liveHeld {
			s.liveHeld = false
			b.enableDeletions(s.liveDB, s.liveGen)
		}
		return
	}
	b.mu.Lock()
	delete(b.inc.inflight, s.dir)
	_, pending := b.inc.uploads[s.id]
	keep := b.opts.LocalRecovery && s.ok && (pending || s.id == b.inc.lastCompleted)
	if keep {
		b.inc.local[s.id] = s.dir
	}
	b.mu.Unlock()
	if !keep {
		if err := os.RemoveAll(s.dir); err != nil {
			b.log.Warn("rocksdb backend: delete local checkpoint", "dir", s.dir, "err", err)
		}
	}
}

// NotifyCheckpointComplete tells the backend that checkpoint id is
// complete: later checkpoints reference its shared files rather than
// upload them, and local copies of older checkpoints are deleted. Call it
// for checkpoints, not savepoints: reporting a checkpoint this backend did
// not upload incrementally (a savepoint, a full snapshot) is safe but makes
// the next checkpoint upload everything.
func (b *Backend) NotifyCheckpointComplete(id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id <= b.inc.lastCompleted {
		return
	}
	b.inc.lastCompleted = id
	// The files of checkpoints before id may be deleted once id subsumes
	// them: the new base is id's files, or nothing if this backend did not
	// upload id.
	b.inc.base, b.inc.baseID = b.inc.uploads[id], id
	if b.inc.base == nil {
		b.inc.base = make(map[string]HandleFile)
	}
	for k := range b.inc.uploads {
		if k <= id {
			delete(b.inc.uploads, k)
		}
	}
	for k, dir := range b.inc.local {
		if k < id {
			b.removeLocal(k, dir)
		}
	}
	if b.opts.Changelog {
		b.clCompleted(id)
	}
	if !b.inc.cleaned {
		b.cleanStaleLocal()
	}
}

// NotifyCheckpointAborted tells the backend that checkpoint id will not
// complete: its uploads are never referenced, its local copy is deleted.
func (b *Backend) NotifyCheckpointAborted(id int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.inc.uploads, id)
	delete(b.cl.uploads, id)
	if dir, ok := b.inc.local[id]; ok && id != b.inc.lastCompleted {
		b.removeLocal(id, dir)
	}
}

// removeLocal deletes a kept local checkpoint; b.mu is held.
func (b *Backend) removeLocal(id int64, dir string) {
	delete(b.inc.local, id)
	if err := os.RemoveAll(dir); err != nil {
		b.log.Warn("rocksdb backend: delete local checkpoint", "dir", dir, "err", err)
	}
}

// cleanStaleLocal deletes the local checkpoint directories this backend
// neither keeps nor writes: those of earlier runs. b.mu is held.
func (b *Backend) cleanStaleLocal() {
	b.inc.cleaned = true
	entries, err := os.ReadDir(b.chkDir)
	if err != nil {
		return
	}
	keep := make(map[string]bool)
	for _, d := range b.inc.local {
		keep[d] = true
	}
	for d := range b.inc.inflight {
		keep[d] = true
	}
	for _, e := range entries {
		p := filepath.Join(b.chkDir, e.Name())
		if !keep[p] {
			if err := os.RemoveAll(p); err != nil {
				b.log.Warn("rocksdb backend: delete stale local checkpoint", "dir", p, "err", err)
			}
		}
	}
}

// parallel runs fn(0..n-1) on up to workers goroutines and returns the
// first error; after an error no new calls start.
func parallel(workers, n int, fn func(i int) error) error {
	if workers > n {
		workers = n
	}
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next >= n {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := recovered(i, fn); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// recovered runs fn(i), turning a panic (in an uploader, a download
// function) into an error: a worker goroutine's panic would otherwise kill
// the process, where a failed upload only declines the checkpoint.
func recovered(i int, fn func(int) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rocksdb backend: panic in file transfer %d: %v", i, r)
		}
	}()
	return fn(i)
}

var errBadHandle = errors.New("malformed incremental handle")
