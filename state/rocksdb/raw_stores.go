package rocksdb

import (
	"bytes"
	"fmt"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
)

// store is what the state.Raw* stores of a column family share: the
// backend (its current key) and the state.
type store struct {
	b *Backend
	s *cfState
}

// entry returns the key of the current key's entry in namespace ns (in
// b.kbuf, valid until the next call).
func (st *store) entry(ns []byte) ([]byte, error) {
	b := st.b
	if !b.inRange {
		if b.db == nil {
			return nil, state.ErrClosed
		}
		return nil, fmt.Errorf("key group %d outside %v: %w", b.kg, b.kgr, state.ErrNoCurrentKey)
	}
	b.kbuf = appendNamespace(append(b.kbuf[:0], b.keyPrefix...), ns)
	return b.kbuf, nil
}

// get reads key into b.vbuf.
func (st *store) get(key []byte) ([]byte, bool, error) {
	b := st.b
	v, ok, err := nativeGet(b.db, b.nopts.ro, st.s.cf, key, b.vbuf)
	if err != nil {
		return nil, false, fmt.Errorf("state %q: rocksdb get: %w", st.s.meta.Name, err)
	}
	b.vbuf = v
	return v, ok, nil
}

// put, del and write write into RocksDB directly: after a checkpoint's
// background part (settle), which must not see them.

func (st *store) put(key, value []byte) error {
	st.b.settle()
	if err := st.b.points.put(st.b.db, st.b.nopts.wo, st.s.cf, key, value); err != nil {
		return fmt.Errorf("state %q: rocksdb put: %w", st.s.meta.Name, err)
	}
	return nil
}

func (st *store) del(key []byte) error {
	st.b.settle()
	if err := st.b.points.del(st.b.db, st.b.nopts.wo, st.s.cf, key); err != nil {
		return fmt.Errorf("state %q: rocksdb delete: %w", st.s.meta.Name, err)
	}
	return nil
}

// scan calls fn with every entry whose key starts with prefix, in key
// order, until fn returns false. The iterator reads an implicit snapshot
// taken at its creation, so fn may change entries. Slices are valid during
// the call only.
func (st *store) scan(prefix []byte, fn func(key, value []byte) (bool, error)) error {
	ro := newIterOptions()
	defer ro.Destroy()
	if end := prefixEnd(prefix); end != nil {
		ro.SetIterateUpperBound(end) // a fresh slice: the options keep it
	}
	it := st.b.db.NewIteratorCF(ro, st.s.cf)
	defer it.Close()
	for it.Seek(prefix); it.Valid(); it.Next() {
		cont, err := fn(it.Key().Data(), it.Value().Data())
		if err != nil || !cont {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("rocksdb iterate: %w", err)
	}
	return nil
}

// deletePrefix deletes every entry whose key starts with prefix.
func (st *store) deletePrefix(prefix []byte, wb *grocksdb.WriteBatch) error {
	return st.scan(prefix, func(k, _ []byte) (bool, error) {
		wb.DeleteCF(st.s.cf, k)
		return true, nil
	})
}

func (st *store) write(wb *grocksdb.WriteBatch) error {
	if wb.Count() == 0 {
		return nil
	}
	st.b.settle()
	if err := st.b.db.Write(st.b.nopts.wo, wb); err != nil {
		return fmt.Errorf("rocksdb write: %w", err)
	}
	return nil
}

// valueStore is the state.RawValueState of value, reducing and aggregating
// states: one entry per key and namespace.
type valueStore struct{ *store }

// A value store with write buffers (cfState.buf) reads them before
// RocksDB and writes only them.

func (v valueStore) Get(ns []byte) ([]byte, bool, error) {
	k, err := v.entry(ns)
	if err != nil {
		return nil, false, err
	}
	if v.s.buf != nil {
		if val, dead, ok := v.b.bufGet(v.s, k); ok {
			return val, !dead, nil
		}
	}
	return v.get(k)
}

func (v valueStore) Put(ns, value []byte) error {
	k, err := v.entry(ns)
	if err != nil {
		return err
	}
	if v.s.buf != nil {
		return v.b.bufSet(v.s, k, value, false)
	}
	return v.put(k, value)
}

func (v valueStore) Delete(ns []byte) error {
	k, err := v.entry(ns)
	if err != nil {
		return err
	}
	if v.s.buf != nil {
		return v.b.bufSet(v.s, k, nil, true)
	}
	return v.del(k)
}

// listStore is the state.RawListState: one entry per append, keyed by the
// prefix and a sequence number, holding the appended elements.
type listStore struct{ *store }

func (l listStore) prefix(ns []byte) ([]byte, error) {
	k, err := l.entry(ns)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), k...), nil
}

func (l listStore) Get(ns []byte, fn func(elem []byte) error) error {
	p, err := l.prefix(ns)
	if err != nil {
		return err
	}
	return l.scan(p, func(_, v []byte) (bool, error) {
		return true, eachListElement(v, fn)
	})
}

// appendEntry adds the entry of an append of elems to wb, or writes it.
func (l listStore) appendEntry(prefix []byte, elems [][]byte, wb *grocksdb.WriteBatch) error {
	b := l.b
	b.listSeq++
	b.kbuf = appendSeq(append(b.kbuf[:0], prefix...), b.listSeq)
	b.lbuf = appendListElements(b.lbuf[:0], elems)
	if wb != nil {
		wb.PutCF(l.s.cf, b.kbuf, b.lbuf)
		return nil
	}
	return l.put(b.kbuf, b.lbuf)
}

func (l listStore) Append(ns []byte, elems [][]byte) error {
	if len(elems) == 0 {
		return nil
	}
	p, err := l.prefix(ns)
	if err != nil {
		return err
	}
	return l.appendEntry(p, elems, nil)
}

// Put replaces the list with one entry at sequence 0 (which appends never
// use, so it sorts first), overwriting the entry of the previous Put and
// deleting only the entries appends added since. A list replaced on every
// record (a merging window set) so keeps one key with versions that an
// iterator skips in one seek, where a new key per Put would leave a
// tombstone per Put under the prefix for every later read to step over.
func (l listStore) Put(ns []byte, elems [][]byte) error {
	p, err := l.prefix(ns)
	if err != nil {
		return err
	}
	base := appendSeq(p, 0)
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	if err := l.scan(p, func(k, _ []byte) (bool, error) {
		if !bytes.Equal(k, base) {
			wb.DeleteCF(l.s.cf, k)
		}
		return true, nil
	}); err != nil {
		return err
	}
	if len(elems) > 0 {
		l.b.lbuf = appendListElements(l.b.lbuf[:0], elems)
		wb.PutCF(l.s.cf, base, l.b.lbuf)
	} else {
		wb.DeleteCF(l.s.cf, base)
	}
	return l.write(wb)
}

func (l listStore) Delete(ns []byte) error { return l.Put(ns, nil) }

// mapStore is the state.RawMapState: one entry per map key, keyed by the
// prefix and the map key.
type mapStore struct{ *store }

func (m mapStore) key(ns, userKey []byte) ([]byte, error) {
	k, err := m.entry(ns)
	if err != nil {
		return nil, err
	}
	m.b.kbuf = append(k, userKey...)
	return m.b.kbuf, nil
}

func (m mapStore) Get(ns, userKey []byte) ([]byte, bool, error) {
	k, err := m.key(ns, userKey)
	if err != nil {
		return nil, false, err
	}
	return m.get(k)
}

func (m mapStore) Put(ns, userKey, value []byte) error {
	k, err := m.key(ns, userKey)
	if err != nil {
		return err
	}
	return m.put(k, value)
}

func (m mapStore) Delete(ns, userKey []byte) error {
	k, err := m.key(ns, userKey)
	if err != nil {
		return err
	}
	return m.del(k)
}

func (m mapStore) Iterate(ns []byte, fn func(userKey, value []byte) (bool, error)) error {
	k, err := m.entry(ns)
	if err != nil {
		return err
	}
	p := append([]byte(nil), k...)
	return m.scan(p, func(key, v []byte) (bool, error) {
		return fn(key[len(p):], v)
	})
}

func (m mapStore) DeleteAll(ns []byte) error {
	k, err := m.entry(ns)
	if err != nil {
		return err
	}
	p := append([]byte(nil), k...)
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	if err := m.deletePrefix(p, wb); err != nil {
		return err
	}
	return m.write(wb)
}
