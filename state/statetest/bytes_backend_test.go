package statetest_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/statetest"
)

// bytesBackend is a byte-level keyed backend built the way the RocksDB
// backend is: it stores only bytes, implements the state.Raw* stores and
// lets the descriptors bind typed handles over them, writes and reads the
// canonical snapshot format with the exported writer and reader. It is a
// reference for the interfaces, not a backend to use: its snapshots copy.
type bytesBackend struct {
	maxPar int
	kgr    state.KeyGroupRange
	clock  state.Clock
	key    []byte
	kg     int
	states map[string]*bstate
	order  []*bstate
}

type bstate struct {
	meta       state.StateMeta
	registered bool
	// per key group, per composite (key, ns): the value, list or map.
	vals  map[int]map[string][]byte
	lists map[int]map[string][][]byte
	maps  map[int]map[string]map[string][]byte
}

func newBytesBackend(t testing.TB, cfg statetest.Config) state.KeyedBackend {
	maxPar := cfg.MaxParallelism
	if maxPar == 0 {
		maxPar = state.DefaultMaxParallelism
	}
	kgr := state.KeyGroupRange{Start: 0, End: maxPar - 1}
	if cfg.KeyGroups != nil {
		kgr = *cfg.KeyGroups
	}
	return &bytesBackend{maxPar: maxPar, kgr: kgr, clock: cfg.Clock, kg: -1, states: map[string]*bstate{}}
}

func TestBytesBackendSuite(t *testing.T) {
	statetest.Run(t, newBytesBackend)
}

func composite(key, ns []byte) string {
	return string(append(binary.AppendUvarint(nil, uint64(len(key))), append(slices.Clone(key), ns...)...))
}

func splitComposite(c string) (key, ns []byte) {
	n, w := binary.Uvarint([]byte(c))
	return []byte(c[w : w+int(n)]), []byte(c[w+int(n):])
}

func (b *bytesBackend) SetCurrentKey(key []byte, kg int) {
	b.key = append(b.key[:0], key...)
	b.kg = kg
}

func (b *bytesBackend) CurrentKey() ([]byte, int)          { return b.key, b.kg }
func (b *bytesBackend) KeyGroupRange() state.KeyGroupRange { return b.kgr }
func (b *bytesBackend) MaxParallelism() int                { return b.maxPar }
func (b *bytesBackend) Close() error                       { return nil }

func (b *bytesBackend) States() []state.StateMeta {
	var out []state.StateMeta
	for _, s := range b.order {
		if s.registered {
			out = append(out, s.meta)
		}
	}
	return out
}

func newBstate(m state.StateMeta) *bstate {
	return &bstate{meta: m, vals: map[int]map[string][]byte{}, lists: map[int]map[string][][]byte{}, maps: map[int]map[string]map[string][]byte{}}
}

func (b *bytesBackend) CreateState(d state.Descriptor) (any, error) {
	m, err := d.Meta()
	if err != nil {
		return nil, err
	}
	s := b.states[m.Name]
	if s != nil {
		if err := s.meta.Compatible(m); err != nil {
			return nil, err
		}
		s.meta.TTL = m.TTL
	} else {
		s = newBstate(m)
		b.states[m.Name] = s
		b.order = append(b.order, s)
	}
	s.registered = true
	store := &rawStore{b: b, s: s}
	switch m.Kind {
	case state.KindList:
		return d.Bind(rawList{store}, b.clock)
	case state.KindMap:
		return d.Bind(rawMap{store}, b.clock)
	default:
		return d.Bind(rawValue{store}, b.clock)
	}
}

// rawStore is the part of the Raw* stores that finds the current key.
type rawStore struct {
	b *bytesBackend
	s *bstate
}

func (r *rawStore) loc(ns []byte) (int, string, error) {
	if !r.b.kgr.Contains(r.b.kg) {
		return 0, "", fmt.Errorf("key group %d: %w", r.b.kg, state.ErrNoCurrentKey)
	}
	return r.b.kg, composite(r.b.key, ns), nil
}

type rawValue struct{ *rawStore }

func (r rawValue) Get(ns []byte) ([]byte, bool, error) {
	kg, c, err := r.loc(ns)
	if err != nil {
		return nil, false, err
	}
	v, ok := r.s.vals[kg][c]
	return v, ok, nil
}

func (r rawValue) Put(ns, v []byte) error {
	kg, c, err := r.loc(ns)
	if err != nil {
		return err
	}
	if r.s.vals[kg] == nil {
		r.s.vals[kg] = map[string][]byte{}
	}
	r.s.vals[kg][c] = slices.Clone(v)
	return nil
}

func (r rawValue) Delete(ns []byte) error {
	kg, c, err := r.loc(ns)
	if err != nil {
		return err
	}
	delete(r.s.vals[kg], c)
	return nil
}

type rawList struct{ *rawStore }

func (r rawList) Get(ns []byte, fn func([]byte) error) error {
	kg, c, err := r.loc(ns)
	if err != nil {
		return err
	}
	for _, e := range r.s.lists[kg][c] {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (r rawList) Append(ns []byte, elems [][]byte) error {
	kg, c, err := r.loc(ns)
	if err != nil {
		return err
	}
	if r.s.lists[kg] == nil {
		r.s.lists[kg] = map[string][][]byte{}
	}
	for _, e := range elems {
		r.s.lists[kg][c] = append(r.s.lists[kg][c], slices.Clone(e))
	}
	return nil
}

func (r rawList) Put(ns []byte, elems [][]byte) error {
	if err := r.Delete(ns); err != nil {
		return err
	}
	return r.Append(ns, elems)
}

func (r rawList) Delete(ns []byte) error {
	kg, c, err := r.loc(ns)
	if err != nil {
		return err
	}
	delete(r.s.lists[kg], c)
	return nil
}

type rawMap struct{ *rawStore }

func (r rawMap) Get(ns, uk []byte) ([]byte, bool, error) {
	kg, c, err := r.loc(ns)
	if err != nil {
		return nil, false, err
	}
	v, ok := r.s.maps[kg][c][string(uk)]
	return v, ok, nil
}

func (r rawMap) Put(ns, uk, v []byte) error {
	kg, c, err := r.loc(ns)
	if err != nil {
		return err
	}
	if r.s.maps[kg] == nil {
		r.s.maps[kg] = map[string]map[string][]byte{}
	}
	if r.s.maps[kg][c] == nil {
		r.s.maps[kg][c] = map[string][]byte{}
	}
	r.s.maps[kg][c][string(uk)] = slices.Clone(v)
	return nil
}

func (r rawMap) Delete(ns, uk []byte) error {
	kg, c, err := r.loc(ns)
	if err != nil {
		return err
	}
	delete(r.s.maps[kg][c], string(uk))
	if len(r.s.maps[kg][c]) == 0 {
		delete(r.s.maps[kg], c)
	}
	return nil
}

func (r rawMap) Iterate(ns []byte, fn func(uk, v []byte) (bool, error)) error {
	kg, c, err := r.loc(ns)
	if err != nil {
		return err
	}
	m := maps.Clone(r.s.maps[kg][c]) // a consistent view: fn may change the map
	for _, uk := range slices.Sorted(maps.Keys(m)) {
		if cont, err := fn([]byte(uk), m[uk]); err != nil || !cont {
			return err
		}
	}
	return nil
}

func (r rawMap) DeleteAll(ns []byte) error {
	kg, c, err := r.loc(ns)
	if err != nil {
		return err
	}
	delete(r.s.maps[kg], c)
	return nil
}

// live reports whether a stored value of s is unexpired at now.
func live(s *bstate, v []byte, now int64) bool {
	if !s.meta.TTL.Enabled() {
		return true
	}
	ts, _, err := state.SplitTTLValue(v)
	return err != nil || !state.TTLExpired(s.meta.TTL, ts, now)
}

func liveList(s *bstate, l [][]byte, now int64) [][]byte {
	return slices.DeleteFunc(slices.Clone(l), func(e []byte) bool { return !live(s, e, now) })
}

func liveMap(s *bstate, m map[string][]byte, now int64) map[string][]byte {
	out := maps.Clone(m)
	maps.DeleteFunc(out, func(_ string, v []byte) bool { return !live(s, v, now) })
	return out
}

func (b *bytesBackend) Keys(name string, ns []byte, fn func([]byte, int) error) error {
	s := b.states[name]
	if s == nil || !s.registered {
		return fmt.Errorf("state %q: %w", name, state.ErrUnknownState)
	}
	now := b.clock.Now().UnixMilli()
	type kk struct {
		key []byte
		kg  int
	}
	var keys []kk
	for kg := b.kgr.Start; kg <= b.kgr.End; kg++ {
		for c, v := range s.vals[kg] {
			if k, kns := splitComposite(c); bytes.Equal(kns, ns) && live(s, v, now) {
				keys = append(keys, kk{k, kg})
			}
		}
		for c, l := range s.lists[kg] {
			if k, kns := splitComposite(c); bytes.Equal(kns, ns) && len(liveList(s, l, now)) > 0 {
				keys = append(keys, kk{k, kg})
			}
		}
		for c, m := range s.maps[kg] {
			if k, kns := splitComposite(c); bytes.Equal(kns, ns) && len(liveMap(s, m, now)) > 0 {
				keys = append(keys, kk{k, kg})
			}
		}
	}
	for _, k := range keys {
		if err := fn(k.key, k.kg); err != nil {
			return err
		}
	}
	return nil
}

// Snapshot copies everything: this backend is a reference, not a fast one.
func (b *bytesBackend) Snapshot(int64) (state.StateSnapshot, error) {
	snap := &bytesSnapshot{maxPar: b.maxPar, kgr: b.kgr, now: b.clock.Now().UnixMilli()}
	for _, s := range b.order {
		c := newBstate(s.meta)
		for kg, m := range s.vals {
			c.vals[kg] = maps.Clone(m)
		}
		for kg, m := range s.lists {
			c.lists[kg] = maps.Clone(m)
		}
		for kg, m := range s.maps {
			c.maps[kg] = map[string]map[string][]byte{}
			for k, mm := range m {
				c.maps[kg][k] = maps.Clone(mm)
			}
		}
		snap.states = append(snap.states, c)
	}
	return snap, nil
}

type bytesSnapshot struct {
	maxPar int
	kgr    state.KeyGroupRange
	now    int64
	states []*bstate
	done   atomic.Bool
}

func (s *bytesSnapshot) Release() { s.done.Store(true) }

func (s *bytesSnapshot) WriteTo(out io.Writer) (int64, error) {
	h := state.KeyedSnapshotHeader{MaxParallelism: s.maxPar, KeyGroups: s.kgr}
	for _, st := range s.states {
		h.States = append(h.States, st.meta)
	}
	w, err := state.NewKeyedSnapshotWriter(out, h)
	if err != nil {
		return 0, err
	}
	for kg := s.kgr.Start; kg <= s.kgr.End; kg++ {
		if err := w.StartKeyGroup(kg); err != nil {
			return w.Written(), err
		}
		for i, st := range s.states {
			for _, c := range slices.Sorted(maps.Keys(st.vals[kg])) {
				if v := st.vals[kg][c]; live(st, v, s.now) {
					k, ns := splitComposite(c)
					if err := w.Value(i, k, ns, v); err != nil {
						return w.Written(), err
					}
				}
			}
			for _, c := range slices.Sorted(maps.Keys(st.lists[kg])) {
				l := liveList(st, st.lists[kg][c], s.now)
				if len(l) == 0 {
					continue
				}
				k, ns := splitComposite(c)
				if err := w.ListStart(i, k, ns, len(l)); err != nil {
					return w.Written(), err
				}
				for _, e := range l {
					if err := w.ListElement(e); err != nil {
						return w.Written(), err
					}
				}
			}
			for _, c := range slices.Sorted(maps.Keys(st.maps[kg])) {
				k, ns := splitComposite(c)
				m := liveMap(st, st.maps[kg][c], s.now)
				for _, uk := range slices.Sorted(maps.Keys(m)) {
					if err := w.MapEntry(i, k, ns, []byte(uk), m[uk]); err != nil {
						return w.Written(), err
					}
				}
			}
		}
	}
	err = w.Close()
	return w.Written(), err
}

func (b *bytesBackend) Restore(snaps ...io.Reader) error {
	owner := map[int]int{}
	for i, r := range snaps {
		var idx []*bstate
		err := state.ReadKeyedSnapshot(r, b.kgr.Contains, func(h *state.KeyedSnapshotHeader) error {
			if h.MaxParallelism != b.maxPar {
				return fmt.Errorf("max parallelism %d, want %d: %w", h.MaxParallelism, b.maxPar, state.ErrRestore)
			}
			for _, m := range h.States {
				s := b.states[m.Name]
				if s == nil {
					s = newBstate(m)
					b.states[m.Name] = s
					b.order = append(b.order, s)
				} else if err := s.meta.Compatible(m); err != nil {
					return err
				}
				idx = append(idx, s)
			}
			return nil
		}, func(rec *state.KeyedRecord) error {
			if o, ok := owner[rec.KeyGroup]; ok && o != i {
				return fmt.Errorf("key group %d twice: %w", rec.KeyGroup, state.ErrRestore)
			}
			owner[rec.KeyGroup] = i
			s := idx[rec.State]
			store := &rawStore{b: b, s: s}
			b.SetCurrentKey(rec.Key, rec.KeyGroup)
			switch s.meta.Kind {
			case state.KindList:
				return rawList{store}.Append(rec.Namespace, rec.Elements)
			case state.KindMap:
				return rawMap{store}.Put(rec.Namespace, rec.UserKey, rec.Value)
			default:
				return rawValue{store}.Put(rec.Namespace, rec.Value)
			}
		})
		if err != nil {
			return fmt.Errorf("restore snapshot %d: %w", i, err)
		}
	}
	b.key, b.kg = nil, -1
	return nil
}
