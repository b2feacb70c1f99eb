package rocksdb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
)

// fullSnapshot is a full snapshot: a RocksDB snapshot, or with in-place
// updates a local RocksDB checkpoint, written in the canonical keyed
// format by WriteTo.
type fullSnapshot struct {
	b      *Backend
	snap   *grocksdb.Snapshot // nil with a checkpoint
	dir    string             // the local checkpoint; "" with a snapshot
	now    int64
	metas  []state.StateMeta
	cfs    []*grocksdb.ColumnFamilyHandle
	status snapStatus // guarded by b.mu
	abort  atomic.Bool
}

type snapStatus uint8

const (
	snapOpen snapStatus = iota
	snapWriting
	snapDone
)

// Snapshot implements state.KeyedBackend: the synchronous part writes the
// write buffers into RocksDB and takes a RocksDB snapshot (constant time)
// or, with in-place updates (Options.NativeMemtable without
// NoInplaceUpdate), a local checkpoint (a flush and hard links, as an
// incremental checkpoint); WriteTo iterates it.
func (b *Backend) Snapshot(checkpointID int64) (state.StateSnapshot, error) {
	if err := b.ready(); err != nil {
		return nil, err
	}
	if err := b.drainAll(); err != nil {
		return nil, fmt.Errorf("rocksdb snapshot %d: %w", checkpointID, err)
	}
	s := &fullSnapshot{b: b, now: b.clock.Now().UnixMilli()}
	if !b.opts.inplace() {
		s.snap = b.db.NewSnapshot()
	} else {
		// In-place updates turn RocksDB snapshots off for the whole
		// database (a memtable updated in place has no versions to
		// isolate), so the view is a local checkpoint instead.
		dir, err := b.localCheckpoint(fmt.Sprintf("full-%d-%s", checkpointID, b.instance))
		if err != nil {
			return nil, fmt.Errorf("rocksdb snapshot %d: %w", checkpointID, err)
		}
		s.dir = dir
	}
	for _, st := range b.order {
		s.metas = append(s.metas, st.meta)
		s.cfs = append(s.cfs, st.cf)
	}
	b.mu.Lock()
	b.snaps[s] = struct{}{}
	if s.dir != "" {
		b.inc.inflight[s.dir] = true
	}
	b.mu.Unlock()
	return s, nil
}

// Release implements state.StateSnapshot. Called while WriteTo runs, it
// makes WriteTo stop with an error.
func (s *fullSnapshot) Release() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	switch s.status {
	case snapOpen:
		s.releaseLocked()
	case snapWriting:
		s.abort.Store(true)
	}
}

// releaseLocked frees the RocksDB snapshot; b.mu is held and the database
// open.
func (s *fullSnapshot) releaseLocked() {
	if s.status == snapDone {
		return
	}
	s.status = snapDone
	if s.snap != nil {
		s.b.db.ReleaseSnapshot(s.snap)
	}
	if s.dir != "" {
		delete(s.b.inc.inflight, s.dir)
		if err := os.RemoveAll(s.dir); err != nil {
			s.b.log.Warn("rocksdb backend: delete snapshot checkpoint", "dir", s.dir, "err", err)
		}
	}
	delete(s.b.snaps, s)
}

func (s *fullSnapshot) begin() error {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("rocksdb snapshot: %w", state.ErrClosed)
	}
	if s.status != snapOpen {
		return errors.New("rocksdb snapshot: written or released already")
	}
	s.status = snapWriting
	b.writers.Add(1)
	return nil
}

func (s *fullSnapshot) end() {
	s.b.mu.Lock()
	s.status = snapWriting // releaseLocked's guard
	s.releaseLocked()
	s.b.mu.Unlock()
	s.b.writers.Done()
}

// WriteTo implements state.StateSnapshot: it writes the canonical keyed
// snapshot format, key group by key group, leaving out expired entries.
func (s *fullSnapshot) WriteTo(out io.Writer) (int64, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	defer s.end()
	b := s.b
	w, err := state.NewKeyedSnapshotWriter(out, state.KeyedSnapshotHeader{MaxParallelism: b.maxPar, KeyGroups: b.kgr, States: s.metas})
	if err != nil {
		return w.Written(), err
	}
	db, cfs := b.db, s.cfs
	if s.dir != "" {
		r, err := b.openRaw(s.dir, true)
		if err != nil {
			return w.Written(), fmt.Errorf("rocksdb snapshot: %w", err)
		}
		defer r.close()
		db, cfs = r.db, make([]*grocksdb.ColumnFamilyHandle, len(s.metas))
		for i, m := range s.metas {
			if cfs[i] = r.cfs[cfName(m)]; cfs[i] == nil {
				return w.Written(), fmt.Errorf("rocksdb snapshot: checkpoint %s has no column family for state %q", s.dir, m.Name)
			}
		}
	}
	ro := newIterOptions()
	defer ro.Destroy()
	if s.snap != nil {
		ro.SetSnapshot(s.snap)
	}
	ro.SetFillCache(false)
	ro.SetIterateUpperBound(kgBound(b.kgr.End + 1))
	iters := make([]*cursor, len(cfs))
	for i, cf := range cfs {
		it := db.NewIteratorCF(ro, cf)
		defer it.Close()
		it.Seek(kgBound(b.kgr.Start))
		iters[i] = &cursor{it: it}
	}
	for kg := b.kgr.Start; kg <= b.kgr.End; kg++ {
		if s.abort.Load() || b.closing.Load() {
			return w.Written(), errors.New("rocksdb snapshot: released or backend closing while writing")
		}
		if err := w.StartKeyGroup(kg); err != nil {
			return w.Written(), err
		}
		for i, c := range iters {
			if err := s.writeKeyGroup(w, i, kg, c); err != nil {
				return w.Written(), fmt.Errorf("state %q: snapshot key group %d: %w", s.metas[i].Name, kg, err)
			}
		}
	}
	err = w.Close()
	return w.Written(), err
}

// cursor is an iterator with scratch space for lists.
type cursor struct {
	it    *grocksdb.Iterator
	arena []byte
	elems [][]byte
	list  []byte // prefix of the list being collected
}

// writeKeyGroup writes the entries of key group kg of state i.
func (s *fullSnapshot) writeKeyGroup(w *state.KeyedSnapshotWriter, i, kg int, c *cursor) error {
	m := s.metas[i]
	var lk entryKey // the list being collected
	c.list = c.list[:0]
	flush := func() error {
		if len(c.list) == 0 || len(c.elems) == 0 {
			c.list = c.list[:0]
			return nil
		}
		if err := w.ListStart(i, lk.key, lk.ns, len(c.elems)); err != nil {
			return err
		}
		for _, e := range c.elems {
			if err := w.ListElement(e); err != nil {
				return err
			}
		}
		c.list = c.list[:0]
		return nil
	}
	for ; c.it.Valid(); c.it.Next() {
		e, err := parseEntryKey(c.it.Key().Data())
		if err != nil {
			return err
		}
		if e.kg > kg {
			break
		}
		if e.kg < kg {
			return fmt.Errorf("entry of key group %d out of order", e.kg)
		}
		v := c.it.Value().Data()
		switch m.Kind {
		case state.KindList:
			if !bytes.Equal(e.prefix, c.list) {
				if err := flush(); err != nil {
					return err
				}
				// Keep the key and namespace: the iterator's bytes change.
				c.list = append(c.list, e.prefix...)
				lk, _ = parseEntryKey(c.list)
				c.arena, c.elems = c.arena[:0], c.elems[:0]
			}
			err = eachListElement(v, func(el []byte) error {
				if valueLive(m, el, s.now) {
					c.arena = append(c.arena, el...)
					c.elems = append(c.elems, el) // re-pointed below
				}
				return nil
			})
			if err != nil {
				return err
			}
			// The arena may have moved: point elements into it again.
			off := 0
			for j := range c.elems {
				n := len(c.elems[j])
				c.elems[j] = c.arena[off : off+n : off+n]
				off += n
			}
		case state.KindMap:
			if valueLive(m, v, s.now) {
				if err := w.MapEntry(i, e.key, e.ns, e.suffix, v); err != nil {
					return err
				}
			}
		default:
			if valueLive(m, v, s.now) {
				if err := w.Value(i, e.key, e.ns, v); err != nil {
					return err
				}
			}
		}
	}
	if err := c.it.Err(); err != nil {
		return fmt.Errorf("rocksdb iterate: %w", err)
	}
	return flush()
}

// Restore implements state.KeyedBackend: it reads full snapshots in the
// canonical format (from any backend, at any parallelism), keeping the key
// groups in this backend's range. States restored but not registered are
// kept and carried into later snapshots.
func (b *Backend) Restore(snapshots ...io.Reader) error {
	if err := b.ready(); err != nil {
		return err
	}
	if b.used {
		return fmt.Errorf("rocksdb backend: restore after states were created: %w", state.ErrRestore)
	}
	owner := make(map[int]int)
	for kg := range b.restored {
		owner[kg] = -1
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	var key, val []byte
	for i, r := range snapshots {
		var idx []*cfState
		err := state.ReadKeyedSnapshot(r, b.kgr.Contains,
			func(h *state.KeyedSnapshotHeader) error {
				if h.MaxParallelism != b.maxPar {
					return fmt.Errorf("snapshot has max parallelism %d, backend %d: %w", h.MaxParallelism, b.maxPar, state.ErrRestore)
				}
				for _, m := range h.States {
					s := b.states[m.Name]
					if s == nil {
						var err error
						if s, err = b.addState(m); err != nil {
							return err
						}
					} else if merged, err := s.meta.Merge(m); err != nil {
						return fmt.Errorf("snapshots disagree: %w", err)
					} else {
						s.meta = merged
					}
					idx = append(idx, s)
				}
				return nil
			},
			func(rec *state.KeyedRecord) error {
				if o, ok := owner[rec.KeyGroup]; ok && o != i {
					return fmt.Errorf("key group %d is in more than one snapshot: %w", rec.KeyGroup, state.ErrRestore)
				}
				owner[rec.KeyGroup] = i
				s := idx[rec.State]
				key = appendNamespace(appendKeyPrefix(key[:0], rec.KeyGroup, rec.Key), rec.Namespace)
				switch s.meta.Kind {
				case state.KindList:
					b.listSeq++
					key = appendSeq(key, b.listSeq)
					val = appendListElements(val[:0], rec.Elements)
					wb.PutCF(s.cf, key, val)
				case state.KindMap:
					wb.PutCF(s.cf, append(key, rec.UserKey...), rec.Value)
				default:
					wb.PutCF(s.cf, key, rec.Value)
				}
				if wb.Count() >= 4096 {
					return b.flushBatch(wb)
				}
				return nil
			})
		if err == nil {
			err = b.flushBatch(wb)
		}
		if err != nil {
			return fmt.Errorf("rocksdb backend: restore snapshot %d: %w", i, err)
		}
	}
	for kg := range owner {
		b.restored[kg] = true
	}
	b.key, b.kg, b.inRange = nil, -1, false
	return b.writeMeta()
}

func (b *Backend) flushBatch(wb *grocksdb.WriteBatch) error {
	if wb.Count() == 0 {
		return nil
	}
	if err := b.db.Write(b.nopts.wo, wb); err != nil {
		return fmt.Errorf("rocksdb write: %w", err)
	}
	wb.Clear()
	return nil
}
