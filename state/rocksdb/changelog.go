package rocksdb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
)

// Changelog checkpoints (Options.Changelog), as Flink's changelog state
// backend: a checkpoint of a backend whose writes since its last
// materialization all went through value-like states' write buffers
// stores what changed since the barrier before (a segment per barrier,
// in checkpoint storage), beside the files of that materialization, an
// earlier RocksDB checkpoint. The write buffers track the entries written
// since the last barrier (writeBuffer.dirty); the barrier copies those
// into the segment (takeDelta: key, value or deletion of each, nothing
// else) and unmarks them. It freezes no
// buffer and writes nothing into RocksDB: the buffers keep accumulating
// across barriers, reads find the latest value in them, and they go into
// RocksDB only when one fills (a spill), at a materialization, or when
// the deltas outgrow their bound (add). A spill between two barriers
// first copies the spilled buffer's entries not in a segment yet into
// the state's carry (carryOver), which the next segment starts with, so
// a segment holds every change since the barrier before, spilled or
// still buffered, in the order written (a key spilled and written again
// appears twice, the later last; a restore applies entries in order).
// A checkpoint then costs the copy and the upload of what changed since
// the last completed checkpoint; no drain, SST file, memtable flush,
// compaction or RocksDB checkpoint. A restore restores the
// materialization and applies the segments over it in order.
//
// Materializations: a checkpoint that cannot build on one (the first, the
// first after a restore, any after a write into RocksDB that no segment
// carries: list and map states, new states, a read of RocksDB as a
// whole) takes the incremental path, and is one: it freezes and drains
// every buffer. Beside that, every Options.MaterializeInterval a
// checkpoint's barrier freezes every buffer and a background job drains
// them and takes a RocksDB checkpoint (the state at that barrier); the
// first checkpoint after it is ready uploads its files, and later ones
// build on it once that checkpoint completes.
//
// A handle built on the last completed checkpoint references its files
// and segments and uploads the segments of the barriers since; one built
// on a new materialization uploads every segment since it. Segments are
// uploaded again by each checkpoint until one that holds them completes,
// so a handle never references the uploads of a checkpoint that may
// still be aborted.
type changelogState struct {
	// seq counts the writes into RocksDB that no segment carries. A
	// materialization (and a handle built on it) taken at seq s is good
	// for a later checkpoint only while seq is still s.
	seq uint64
	// deltas are the buffers frozen at each barrier since the oldest
	// point a later checkpoint may build on, oldest first.
	deltas []*delta
	// base is the last completed checkpoint's handle, if later ones may
	// build on it.
	base *clUpload
	// mat is the background materialization not adopted by a completed
	// checkpoint yet; lastMat when the last one was started.
	mat     *materialization
	lastMat time.Time
	// adoptedDir is the local directory of the materialization the base
	// builds on, if the background job took it (kept for local recovery,
	// deleted when another is adopted).
	adoptedDir string
	// uploads are the handles uploaded and not confirmed yet, by
	// checkpoint (made at the first); guarded by Backend.mu.
	uploads map[int64]*clUpload
}

// clUpload is an uploaded handle and the seq of its materialization.
type clUpload struct {
	h   *IncrementalHandle
	seq uint64
}

// delta is what changed between a barrier and the one before: its
// segment, encoded at the barrier (takeDelta; nil if nothing changed).
type delta struct {
	id   int64
	data []byte
}

// materialization is a RocksDB checkpoint taken by a background job after
// the drain of checkpoint id's buffers: the state at id's barrier.
type materialization struct {
	id    int64
	seq   uint64
	name  string
	dir   string
	ready chan struct{}
	files []localFile
	err   error
}

// clPlan is how a changelog checkpoint is built: on base (its files and
// segments referenced), or on mat (its files uploaded), plus the deltas
// after either.
type clPlan struct {
	base   *IncrementalHandle
	mat    *materialization
	matID  int64
	seq    uint64
	deltas []*delta
}

// directWrite records a write into RocksDB that no segment carries.
func (c *changelogState) directWrite() { c.seq++ }

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// plan chooses how checkpoint id is built, after its delta was recorded:
// nil when it must take the incremental path (and be a materialization).
// On the task goroutine.
func (b *Backend) plan(id int64) *clPlan {
	c := &b.cl
	if m := c.mat; m != nil && closed(m.ready) {
		if m.err != nil || m.seq != c.seq {
			if m.err != nil {
				b.log.Warn("rocksdb backend: background materialization failed", "checkpoint", m.id, "err", m.err)
			}
			b.dropMaterialization(m)
		} else {
			return &clPlan{mat: m, matID: m.id, seq: m.seq, deltas: c.deltasAfter(m.id)}
		}
	}
	if bs := c.base; bs != nil && bs.seq == c.seq && bs.h.CheckpointID < id {
		return &clPlan{base: bs.h, matID: bs.h.MaterializedID, seq: bs.seq, deltas: c.deltasAfter(bs.h.CheckpointID)}
	}
	return nil
}

// add records the delta of a barrier. Deltas are kept until a completed
// checkpoint covers them; when checkpoints keep failing they could pile
// up without end, so past maxDeltaBuffers write buffers' worth they are
// dropped, and the next checkpoint is a materialization.
func (c *changelogState) add(d *delta, bufferSize int64) {
	c.deltas = append(c.deltas, d)
	var size int64
	for _, d := range c.deltas {
		size += int64(len(d.data))
	}
	if size > maxDeltaBuffers*bufferSize {
		c.deltas = nil
		c.directWrite()
	}
}

// maxDeltaBuffers bounds the memory of the deltas kept, in write buffers.
const maxDeltaBuffers = 4

func (c *changelogState) deltasAfter(id int64) []*delta {
	for i, d := range c.deltas {
		if d.id > id {
			return c.deltas[i:]
		}
	}
	return nil
}

// dropMaterialization forgets a background materialization and deletes its
// directory (once its job is done).
func (b *Backend) dropMaterialization(m *materialization) {
	if b.cl.mat == m {
		b.cl.mat = nil
	}
	<-m.ready
	b.mu.Lock()
	delete(b.inc.inflight, m.dir)
	b.mu.Unlock()
	if err := os.RemoveAll(m.dir); err != nil {
		b.log.Warn("rocksdb backend: delete materialization", "dir", m.dir, "err", err)
	}
}

// materialize enqueues a RocksDB checkpoint after the write jobs enqueued
// so far (checkpoint id's drain): the state at id's barrier. frozen are
// the buffers that drain writes: a failed write fails it.
func (b *Backend) startMaterialization(id int64, frozen []*frozenBuffer) {
	name := fmt.Sprintf("mat-%d-%s", id, b.instance)
	m := &materialization{id: id, seq: b.cl.seq, name: name, dir: filepath.Join(b.chkDir, name), ready: make(chan struct{})}
	b.mu.Lock()
	b.inc.inflight[m.dir] = true
	b.mu.Unlock()
	b.cl.mat, b.cl.lastMat = m, time.Now()
	b.lastCheckpoint = b.enqueue(func() {
		defer close(m.ready)
		for _, f := range frozen {
			if f.err != nil {
				m.err = fmt.Errorf("materialization at checkpoint %d: %w", id, f.err)
				return
			}
		}
		if b.writeFailed.Load() {
			m.err = fmt.Errorf("materialization at checkpoint %d: an earlier background write failed", id)
			return
		}
		m.files, m.err = b.localCheckpointFiles(id, name)
	})
}

// clCompleted updates the changelog state when checkpoint id completes:
// its handle becomes the base, and what it covers is dropped. b.mu is
// held.
func (b *Backend) clCompleted(id int64) {
	c := &b.cl
	c.base = c.uploads[id]
	for k := range c.uploads {
		if k <= id {
			delete(c.uploads, k)
		}
	}
	if c.base != nil && c.mat != nil && c.base.h.MaterializedID == c.mat.id {
		if c.adoptedDir != "" && c.adoptedDir != c.mat.dir {
			delete(b.inc.inflight, c.adoptedDir)
			if err := os.RemoveAll(c.adoptedDir); err != nil {
				b.log.Warn("rocksdb backend: delete materialization", "dir", c.adoptedDir, "err", err)
			}
		}
		c.adoptedDir, c.mat = c.mat.dir, nil
	}
	keep := id
	if c.mat != nil {
		keep = min(keep, c.mat.id)
	}
	n := 0
	for n < len(c.deltas) && c.deltas[n].id <= keep {
		c.deltas[n] = nil
		n++
	}
	c.deltas = c.deltas[n:]
}

// uploadChangelog is the asynchronous part of a changelog checkpoint.
func (s *IncrementalSnapshot) uploadChangelog(u Uploader) (*IncrementalHandle, error) {
	p := s.plan
	h := &IncrementalHandle{
		Format: handleFormat, CheckpointID: s.id, MaxParallelism: s.maxPar, KeyGroups: s.kgr,
		BaseCheckpointID: -1, MaterializedID: p.matID,
	}
	if p.base != nil {
		h.LocalName, h.BaseCheckpointID = p.base.LocalName, p.base.CheckpointID
		for _, f := range p.base.Files {
			f.Reused = true
			h.Files = append(h.Files, f)
		}
		for _, f := range p.base.Changelog {
			f.Reused = true
			h.Changelog = append(h.Changelog, f)
		}
	} else {
		h.LocalName = p.mat.name
		var err error
		if h.Files, h.BaseCheckpointID, err = s.uploadFiles(u, p.mat.dir, p.mat.files); err != nil {
			return nil, err
		}
	}
	for _, d := range p.deltas {
		data := d.data
		if data == nil {
			continue
		}
		hf := HandleFile{Name: fmt.Sprintf("changelog-%d", d.id), Size: int64(len(data)), Shared: true}
		if err := uploadReader(u, bytes.NewReader(data), &hf); err != nil {
			return nil, fmt.Errorf("rocksdb changelog checkpoint %d: %w", s.id, err)
		}
		h.Changelog = append(h.Changelog, hf)
	}
	if len(h.Changelog) > 0 {
		h.Format = changelogFormat
	}
	for _, f := range h.AllFiles() {
		h.StateSize += f.Size
		if !f.Reused {
			h.CheckpointedSize += f.Size
		}
	}
	s.record(h, p.seq)
	return h, nil
}

// record keeps an uploaded handle until its checkpoint is confirmed or
// aborted.
func (s *IncrementalSnapshot) record(h *IncrementalHandle, seq uint64) {
	b := s.b
	shared := make(map[string]HandleFile)
	for _, f := range h.SharedFiles() {
		shared[f.Name] = f
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.id > b.inc.lastCompleted {
		b.inc.uploads[s.id] = shared
		if b.opts.Changelog {
			if b.cl.uploads == nil {
				b.cl.uploads = make(map[int64]*clUpload)
			}
			b.cl.uploads[s.id] = &clUpload{h: h, seq: seq}
		}
	}
}

// changelogMagic starts a segment; then sections, each of one state:
// uvarint length + the state's name, uvarint count, and per entry uvarint
// length + key, uvarint tag (0 a deletion, else the value's length + 1) +
// value. A restore applies the sections and their entries in order: a
// state may have several sections, and a key several entries (a spill's
// section, then the buffer's at the barrier), the last one winning.
var changelogMagic = []byte("SLUICECL1")

// appendSegmentEntry appends an entry of a section to out.
func appendSegmentEntry(out, k, v []byte, dead bool) []byte {
	out = binary.AppendUvarint(out, uint64(len(k)))
	out = append(out, k...)
	if dead {
		return binary.AppendUvarint(out, 0)
	}
	out = binary.AppendUvarint(out, uint64(len(v))+1)
	return append(out, v...)
}

// takeDelta encodes what changed in the value-like states since the last
// barrier as checkpoint id's segment: for each state, the sections its
// spills since then carried over (cfBuffer.carry), then the entries of
// its active buffer written since (writeBuffer.appendDirty). Nothing is
// frozen or written into RocksDB. On the task goroutine, at the barrier.
func (b *Backend) takeDelta(id int64) *delta {
	out := slices.Clone(changelogMagic)
	for _, s := range b.order {
		if s.buf == nil {
			continue
		}
		out = append(out, s.buf.carry...)
		s.buf.carry = s.buf.carry[:0]
		out = s.buf.active.appendDirty(out, s.meta.Name)
	}
	if len(out) == len(changelogMagic) {
		out = nil
	}
	return &delta{id: id, data: out}
}

// carryOver keeps the entries of s's active buffer written since the last
// barrier, which a spill is about to write into RocksDB, for the next
// barrier's segment (takeDelta): the segment must hold every change since
// the barrier before, whether it is still buffered or already in RocksDB.
// Past maxDeltaBuffers write buffers' worth they are dropped, and the
// next checkpoint is a materialization.
func (b *Backend) carryOver(s *cfState) {
	wb := s.buf
	if !wb.active.track {
		return
	}
	wb.carry = wb.active.appendDirty(wb.carry, s.meta.Name)
	if int64(len(wb.carry)) > maxDeltaBuffers*b.opts.WriteBufferSize {
		wb.carry = nil
		b.cl.directWrite()
	}
}

var errBadSegment = errors.New("malformed changelog segment")

// decodeSegment calls fn with every entry of a segment, in order.
func decodeSegment(data []byte, fn func(state string, key, value []byte, dead bool) error) error {
	if !bytes.HasPrefix(data, changelogMagic) {
		return errBadSegment
	}
	r := data[len(changelogMagic):]
	bytesOf := func() ([]byte, bool) {
		n, w := binary.Uvarint(r)
		if w <= 0 || n > uint64(len(r)-w) {
			return nil, false
		}
		out := r[w : w+int(n)]
		r = r[w+int(n):]
		return out, true
	}
	for len(r) > 0 {
		name, ok := bytesOf()
		if !ok {
			return errBadSegment
		}
		count, w := binary.Uvarint(r)
		if w <= 0 {
			return errBadSegment
		}
		r = r[w:]
		for range count {
			k, ok := bytesOf()
			if !ok || len(k) < kgLen {
				return errBadSegment
			}
			tag, w := binary.Uvarint(r)
			if w <= 0 || tag > uint64(len(r)-w)+1 {
				return errBadSegment
			}
			r = r[w:]
			var v []byte
			if tag > 0 {
				v, r = r[:tag-1], r[tag-1:]
			}
			if err := fn(string(name), k, v, tag == 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyChangelog applies h's segments, in order, to the key groups lo-hi
// of the open database.
func (b *Backend) applyChangelog(h *IncrementalHandle, lo, hi int, download Download) error {
	if len(h.Changelog) == 0 {
		return nil
	}
	if download == nil {
		return fmt.Errorf("rocksdb backend: checkpoint %d: changelog segments and no download function: %w", h.CheckpointID, state.ErrRestore)
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	size := 0
	for _, f := range h.Changelog {
		data, err := downloadBytes(h, f, download)
		if err != nil {
			return err
		}
		err = decodeSegment(data, func(name string, k, v []byte, dead bool) error {
			if kg := int(binary.BigEndian.Uint16(k)); kg < lo || kg > hi {
				return nil
			}
			s := b.states[name]
			if s == nil {
				return fmt.Errorf("state %q, which the database does not hold: %w", name, errBadSegment)
			}
			if dead {
				wb.DeleteCF(s.cf, k)
			} else {
				wb.PutCF(s.cf, k, v)
			}
			size += len(k) + len(v)
			if size >= 4<<20 {
				size = 0
				return b.flushBatch(wb)
			}
			return nil
		})
		if err == nil {
			err = b.flushBatch(wb)
		}
		if err != nil {
			if errors.Is(err, errBadSegment) {
				err = fmt.Errorf("%w: %w", err, state.ErrCorruptSnapshot)
			}
			return fmt.Errorf("rocksdb backend: checkpoint %d: changelog segment %s: %w", h.CheckpointID, f.Name, err)
		}
	}
	return nil
}

// downloadBytes downloads one file into memory, checking its size and
// checksum.
func downloadBytes(h *IncrementalHandle, f HandleFile, download Download) ([]byte, error) {
	fail := func(err error) error {
		return fmt.Errorf("rocksdb backend: checkpoint %d: file %s (ref %q): %w", h.CheckpointID, f.Name, f.Ref, err)
	}
	rc, err := download(f.Ref)
	if err != nil {
		return nil, fail(fmt.Errorf("download: %w", err))
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, f.Size+1))
	switch {
	case err != nil:
		return nil, fail(fmt.Errorf("download: %w", err))
	case int64(len(data)) != f.Size:
		return nil, fail(fmt.Errorf("%d bytes, want %d: %w", len(data), f.Size, state.ErrCorruptSnapshot))
	case crc32.Checksum(data, crcTable) != f.CRC32C:
		return nil, fail(fmt.Errorf("checksum mismatch: %w", state.ErrCorruptSnapshot))
	}
	return data, nil
}

// clRestored resets the changelog state after a restore: the next
// checkpoint is a materialization (the segments applied are in the
// memtables alone).
func (b *Backend) clRestored() {
	b.cl.directWrite()
	b.cl.base, b.cl.deltas = nil, nil
	for _, s := range b.order {
		if s.buf != nil {
			s.buf.carry = nil
		}
	}
}
