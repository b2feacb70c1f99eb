package rocksdb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/linxGnu/grocksdb"
)

// ErrValueTooLarge: a value-like state's value or key of 2 GiB or more,
// which a write buffer cannot hold.
var ErrValueTooLarge = errors.New("value too large for a write buffer")

// cfBuffer is the write buffers of a value-like state: the active one,
// which the task goroutine reads and writes, and at most one sealed one,
// full, which a background goroutine writes into RocksDB while the task
// still reads it (RocksDB's active and immutable memtables, with
// Options.WriteBufferCount 2).
type cfBuffer struct {
	active *writeBuffer
	sealed *writeBuffer
	spare  *writeBuffer
	done   chan error // the sealed buffer's spill result
	err    error      // a failed background spill: the buffer is unusable
}

func newCFBuffer() *cfBuffer { return &cfBuffer{active: newWriteBuffer()} }

// bufGet looks key up in s's buffers, newest first.
func (b *Backend) bufGet(s *cfState, key []byte) (value []byte, dead, found bool) {
	wb := s.buf
	if v, d, ok := wb.active.get(key); ok {
		return v, d, true
	}
	if wb.sealed != nil {
		return wb.sealed.get(key)
	}
	return nil, false, false
}

// bufSet buffers a write of key in s (a deletion if dead). A full active
// buffer is first sealed and written into RocksDB in the background,
// after waiting for the one sealed before it.
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

// seal waits for the sealed buffer, then seals the active one and starts
// writing it into RocksDB.
func (b *Backend) seal(s *cfState) error {
	wb := s.buf
	if err := b.waitSealed(s); err != nil {
		return err
	}
	if wb.active.empty() {
		return nil
	}
	wb.sealed, wb.active = wb.active, wb.spare
	wb.spare = nil
	if wb.active == nil {
		wb.active = newWriteBuffer()
	}
	wb.done = make(chan error, 1)
	sealed, done, path := wb.sealed, wb.done, b.spillPath()
	b.spills.Add(1)
	go func() {
		defer b.spills.Done()
		if b.testHookBeforeSpill != nil {
			b.testHookBeforeSpill()
		}
		done <- b.spill(s, sealed, path)
	}()
	return nil
}

// waitSealed waits until the sealed buffer, if any, is in RocksDB, and
// keeps its memory for the next seal.
func (b *Backend) waitSealed(s *cfState) error {
	wb := s.buf
	if wb.err != nil || wb.sealed == nil {
		return wb.err
	}
	if b.testHookWaitSealed != nil {
		b.testHookWaitSealed()
	}
	if err := <-wb.done; err != nil {
		wb.err = fmt.Errorf("state %q: %w", s.meta.Name, err)
		return wb.err
	}
	wb.sealed.reset()
	wb.spare, wb.sealed, wb.done = wb.sealed, nil, nil
	return nil
}

// drain writes every buffered entry of s into RocksDB, on the calling
// goroutine once the sealed buffer is in.
func (b *Backend) drain(s *cfState) error {
	if s.buf == nil {
		return nil
	}
	if err := b.waitSealed(s); err != nil {
		return err
	}
	wb := s.buf
	if wb.active.empty() {
		return nil
	}
	var err error
	if wb.active.size() <= smallDrain {
		err = b.writeBatch(s, wb.active)
	} else {
		err = b.spill(s, wb.active, b.spillPath())
	}
	if err != nil {
		wb.err = fmt.Errorf("state %q: %w", s.meta.Name, err)
		return wb.err
	}
	wb.active.reset()
	return nil
}

// smallDrain is the largest write buffer a drain writes into RocksDB's
// memtable rather than as an SST file it ingests. A checkpoint drains
// every buffer and then flushes the memtables anyway: for the small
// buffers of frequent checkpoints one flush is cheaper than an ingestion
// (an SST file, its fsync and a MANIFEST write per state) followed by
// the flush, and it leaves fewer small files for reads to search.
const smallDrain = 1 << 20

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

// drainAll drains every state's buffers: before a snapshot, or an
// iteration over RocksDB.
func (b *Backend) drainAll() error {
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
// ingests (moves into the database, newer than everything in it). It does
// not change w, and runs on any goroutine.
func (b *Backend) spill(s *cfState, w *writeBuffer, path string) (err error) {
	start := time.Now()
	offs := w.sorted()
	sorted := time.Now()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write buffer: %w", err)
	}
	eo := grocksdb.NewDefaultEnvOptions()
	defer eo.Destroy()
	sw := grocksdb.NewSSTFileWriter(eo, b.nopts.vcf)
	defer sw.Destroy()
	defer os.Remove(path) // left behind only if the ingest failed
	if err := sw.Open(path); err != nil {
		return fmt.Errorf("write buffer: open %s: %w", path, err)
	}
	for _, off := range offs {
		k, v, dead := w.entry(off)
		if dead {
			err = sw.Delete(k)
		} else {
			err = sw.Put(k, v)
		}
		if err != nil {
			return fmt.Errorf("write buffer: write %s: %w", path, err)
		}
	}
	written := time.Now()
	if err := sw.Finish(); err != nil {
		return fmt.Errorf("write buffer: finish %s: %w", path, err)
	}
	io := grocksdb.NewDefaultIngestExternalFileOptions()
	defer io.Destroy()
	io.SetMoveFiles(true)
	if err := b.db.IngestExternalFileCF(s.cf, []string{path}, io); err != nil {
		return fmt.Errorf("write buffer: ingest %s: %w", path, err)
	}
	b.log.Debug("rocksdb backend: write buffer ingested", "state", s.meta.Name, "entries", len(offs),
		"sort", sorted.Sub(start), "write", written.Sub(sorted), "finish_and_ingest", time.Since(written))
	return nil
}
