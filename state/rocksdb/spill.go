package rocksdb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
)

// ErrValueTooLarge: a value-like state's value or key of 2 GiB or more,
// which a write buffer cannot hold.
var ErrValueTooLarge = errors.New("value too large for a write buffer")

// cfBuffer is the write buffers of a value-like state: the active one,
// which the task goroutine reads and writes, and the frozen ones, which
// background writes (writeJob) carry into RocksDB while the task still
// reads them (RocksDB's active and immutable memtables). A buffer is
// frozen when it fills (a spill, at most one full one at a time) and at
// every checkpoint's barrier (the checkpoint's drain), or, with changelog
// checkpoints, only at a materialization's barrier (changelog.go).
type cfBuffer struct {
	active *writeBuffer
	frozen []*frozenBuffer // oldest first; reads look newest first
	spare  *writeBuffer
	err    error // a failed background write: the buffer is unusable
	// clean is a read cache: the latest value (or deletion) of entries
	// already in RocksDB, which reads look into after the frozen buffers
	// and before RocksDB (nil for TTL states). See mergeClean.
	clean *writeBuffer
	// carry: with changelog checkpoints, segment sections of the entries
	// spilled since the last barrier before any segment held them, which
	// the next barrier's segment starts with (carryOver, takeDelta).
	carry []byte
}

// frozenBuffer is a write buffer no longer written, on its way into
// RocksDB. The job that writes it sets err and closes done; only then does
// the task goroutine drop it (its entries are in RocksDB by then) or
// reuse its memory.
type frozenBuffer struct {
	w    *writeBuffer
	done chan struct{}
	err  error
}

// newCFBuffer returns the buffers of a state: with a read cache if cache,
// with write buffers that track their changes if track (changelog
// checkpoints).
func newCFBuffer(cache, track bool) *cfBuffer {
	wb := &cfBuffer{active: newWriteBuffer()}
	wb.active.track = track
	if cache {
		wb.clean = newWriteBuffer()
	}
	return wb
}

func (f *frozenBuffer) finished() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// bufGet looks key up in s's buffers, newest first.
func (b *Backend) bufGet(s *cfState, key []byte) (value []byte, dead, found bool) {
	wb := s.buf
	if v, d, ok := wb.active.get(key); ok {
		return v, d, true
	}
	for i := len(wb.frozen) - 1; i >= 0; i-- {
		if v, d, ok := wb.frozen[i].w.get(key); ok {
			return v, d, true
		}
	}
	if wb.clean != nil {
		return wb.clean.get(key)
	}
	return nil, false, false
}

// mergeClean records the entries of w, which are now in RocksDB, in the
// read cache of s, over the older ones there. Every write of a value-like
// state reaches RocksDB through a buffer, and the buffers in the order
// they were written (frozen buffers oldest first, after those the active
// one), so the cache holds the latest value of each of its keys unless a
// newer one is in a buffer, which reads look into first. A read of a
// value written before the last checkpoint then needs no call into
// RocksDB (a cgo call, a memtable and several sorted runs: at 100 K
// records/s with 50 ms checkpoints, where a buffer holds one interval's
// keys, those reads were a fifth of the job's CPU). The cache is emptied
// when it would grow past cleanCacheSize, and when a buffer too large for
// it went into RocksDB: it must never hold an older value than RocksDB.
func (b *Backend) mergeClean(s *cfState, w *writeBuffer) {
	wb := s.buf
	if wb.clean == nil || w.empty() {
		return
	}
	limit := b.cleanCacheSize()
	if w.size() > limit {
		wb.clean.reset()
		return
	}
	if wb.clean.size()+w.size() > limit {
		wb.clean.reset()
	}
	w.each(func(k, v []byte, dead bool) { wb.clean.set(k, v, dead) })
}

// cleanCacheSize bounds the read cache of each value-like state: a
// quarter of its write buffer.
func (b *Backend) cleanCacheSize() int64 { return b.opts.WriteBufferSize / 4 }

// bufSet buffers a write of key in s (a deletion if dead). A full active
// buffer is first frozen and written into RocksDB in the background,
// after waiting for the buffers frozen before it.
func (b *Backend) bufSet(s *cfState, key, value []byte, dead bool) error {
	wb := s.buf
	if wb.err != nil {
		return wb.err
	}
	if len(value) >= deadBit || len(key) >= deadBit {
		return fmt.Errorf("state %q: %d-byte value of a %d-byte key: %w", s.meta.Name, len(value), len(key), ErrValueTooLarge)
	}
	if wb.active.size() >= b.opts.WriteBufferSize {
		if err := b.seal(s); err != nil {
			return err
		}
	}
	if dead {
		wb.active.del(key)
	} else {
		wb.active.put(key, value)
	}
	return nil
}

// seal waits for the frozen buffers of s, then freezes the active one and
// writes it into RocksDB in the background (an SST file it ingests).
func (b *Backend) seal(s *cfState) error {
	if err := b.waitFrozen(s); err != nil {
		return err
	}
	if s.buf.active.empty() {
		return nil
	}
	b.carryOver(s) // the next segment carries what it spills
	f := b.freeze(s)
	path := b.spillPath()
	b.enqueue(func() {
		if b.testHookBeforeSpill != nil {
			b.testHookBeforeSpill()
		}
		if b.closing.Load() {
			f.err = state.ErrClosed
		} else if f.err = b.spill(s, f.w, path); f.err != nil {
			b.writeFailed.Store(true)
		}
		close(f.done)
	})
	return nil
}

// freeze moves s's active buffer to its frozen ones and starts a new
// active buffer (on the memory of a drained one if there is one). The
// caller hands the frozen buffer to a write job.
func (b *Backend) freeze(s *cfState) *frozenBuffer {
	wb := s.buf
	f := &frozenBuffer{w: wb.active, done: make(chan struct{})}
	wb.frozen = append(wb.frozen, f)
	wb.active, wb.spare = wb.spare, nil
	if wb.active == nil {
		wb.active = newWriteBuffer()
		wb.active.track = f.w.track
	}
	return f
}

// enqueue runs job on a goroutine of its own after every job enqueued
// before it: the background writes into RocksDB happen in the order the
// task goroutine froze their buffers, and a checkpoint's drain and RocksDB
// checkpoint come after the spills of the buffers frozen before its
// barrier and before those frozen after it. It returns the job's done
// channel. Close waits for the jobs.
func (b *Backend) enqueue(job func()) chan struct{} {
	prev, done := b.lastJob, make(chan struct{})
	b.lastJob = done
	b.spills.Add(1)
	go func() {
		defer b.spills.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		job()
	}()
	return done
}

// prune drops the frozen buffers of s whose entries are in RocksDB,
// oldest first, keeping one's memory for the next active buffer, and
// stops at one still being written. A failed write makes the buffer
// unusable (wb.err); its frozen buffer stays, so reads still see it.
func (b *Backend) prune(s *cfState) error {
	wb := s.buf
	n := 0
	for _, f := range wb.frozen {
		if !f.finished() {
			break
		}
		if f.err != nil {
			if wb.err == nil {
				wb.err = fmt.Errorf("state %q: %w", s.meta.Name, f.err)
			}
			break
		}
		b.mergeClean(s, f.w)
		if wb.spare == nil {
			f.w.reset()
			wb.spare = f.w
		}
		n++
	}
	if n > 0 {
		wb.frozen = slices.Delete(wb.frozen, 0, n)
	}
	return wb.err
}

// waitFrozen waits until every frozen buffer of s is in RocksDB.
func (b *Backend) waitFrozen(s *cfState) error {
	wb := s.buf
	if wb.err != nil {
		return wb.err
	}
	if len(wb.frozen) > 0 && b.testHookWaitSealed != nil {
		b.testHookWaitSealed()
	}
	for _, f := range wb.frozen {
		<-f.done
	}
	return b.prune(s)
}

// settle waits until the background part of every checkpoint taken so
// far (its drain and its RocksDB checkpoint) is done, and counts a write
// into RocksDB that no changelog segment carries. The task goroutine
// calls it before it writes into RocksDB itself (list and map states,
// value states without write buffers, new states, the metadata) or reads
// RocksDB as a whole: such a write must not reach a checkpoint whose
// barrier came before it.
func (b *Backend) settle() {
	b.cl.directWrite()
	if b.lastCheckpoint == nil {
		return
	}
	if b.testHookSettle != nil {
		b.testHookSettle()
	}
	<-b.lastCheckpoint
	b.lastCheckpoint = nil
}

// drain writes every buffered entry of s into RocksDB, on the calling
// goroutine once the frozen buffers are in.
func (b *Backend) drain(s *cfState) error {
	if s.buf == nil {
		return nil
	}
	b.settle()
	if err := b.waitFrozen(s); err != nil {
		return err
	}
	wb := s.buf
	if wb.active.empty() {
		return nil
	}
	if err := b.writeBuffered(s, wb.active); err != nil {
		wb.err = fmt.Errorf("state %q: %w", s.meta.Name, err)
		return wb.err
	}
	b.mergeClean(s, wb.active)
	wb.active.reset()
	return nil
}

// writeBuffered writes the entries of w into s's column family: through
// the memtable if there are few (smallDrain), else as an SST file RocksDB
// ingests.
func (b *Backend) writeBuffered(s *cfState, w *writeBuffer) error {
	if w.size() <= smallDrain {
		return b.writeBatch(s, w)
	}
	return b.spill(s, w, b.spillPath())
}

// smallDrain is the largest write buffer a drain outside a checkpoint
// (a full snapshot's, a read of a whole state's) writes into RocksDB's
// memtable rather than as an SST file it ingests: nothing flushes the
// memtable after it, and a write batch of a few entries costs less than
// an SST file and a MANIFEST write. A checkpoint's drain is
// drainForCheckpoint.
const smallDrain = 1 << 20

// drainForCheckpoint writes a buffer frozen at the barrier of a
// checkpoint into s's column family, on the checkpoint's background job:
// one that lists the live files next (liveFiles, or RocksDB's checkpoint
// with local recovery; both flush the memtables), or a changelog
// checkpoint's materialization, which takes a RocksDB checkpoint after it
// (a changelog checkpoint between materializations drains nothing). It
// is always an SST
// file that RocksDB ingests (spill), however small: the memtable and its
// flush would build the same SST file (the column family's table options
// and compression) after a skiplist insert of every entry and a hand-off
// to RocksDB's flush thread, and with the local files never synced
// (nosync_env.go) the ingestion costs no fsync either. The memtable the
// live files' listing would flush is then empty (unless list or map
// states wrote into it directly), and one SST file per state is what the
// flush would have made too. At 20 K records/s with 100 ms checkpoints
// the background job took 3.1-4.2 ms (p50) through the memtable and 1.9
// this way (docs/performance.md).
func (b *Backend) drainForCheckpoint(s *cfState, w *writeBuffer) error {
	return b.spill(s, w, b.spillPath())
}

// writeBatch writes the entries of w into s's column family through one
// write batch (the memtable).
func (b *Backend) writeBatch(s *cfState, w *writeBuffer) error {
	batch := grocksdb.NewWriteBatch()
	defer batch.Destroy()
	for _, off := range w.sorted() {
		k, v, dead := w.entry(off)
		if dead {
			batch.DeleteCF(s.cf, k)
		} else {
			batch.PutCF(s.cf, k, v)
		}
	}
	if err := b.db.Write(b.nopts.wo, batch); err != nil {
		return fmt.Errorf("write buffer: write %d entries: %w", batch.Count(), err)
	}
	return nil
}

// drainAll drains every state's buffers: before a full snapshot.
func (b *Backend) drainAll() error {
	b.settle()
	for _, s := range b.order {
		if err := b.drain(s); err != nil {
			return err
		}
	}
	return nil
}

// spillPath returns a new path for the SST file of a spill.
func (b *Backend) spillPath() string {
	return filepath.Join(b.opts.Dir, spillDirName, fmt.Sprintf("%d.sst", b.spillSeq.Add(1)))
}

// spill writes the entries of w into s's column family: an SST file in
// key order (a deletion for each buffered deletion), which RocksDB then
// ingests (moves into the database, newer than everything in it), in one
// call into RocksDB (nativeSpill). It does not change w, and runs on any
// goroutine.
func (b *Backend) spill(s *cfState, w *writeBuffer, path string) error {
	start := time.Now()
	offs := w.sorted()
	sorted := time.Now()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write buffer: %w", err)
	}
	defer os.Remove(path) // left behind only if the ingest failed
	if err := nativeSpill(b.db, s.cf, b.nopts.vcf, path, w, offs); err != nil {
		return fmt.Errorf("write buffer: spill %d entries into %s: %w", len(offs), path, err)
	}
	b.log.Debug("rocksdb backend: write buffer ingested", "state", s.meta.Name, "entries", len(offs),
		"sort", sorted.Sub(start), "write_and_ingest", time.Since(sorted))
	return nil
}
