package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
)

// HeapOptions configures a HeapKeyedBackend.
type HeapOptions struct {
	// MaxParallelism is the number of key groups; 0 means
	// DefaultMaxParallelism.
	MaxParallelism int
	// KeyGroups is the range this backend owns; nil means all key groups.
	KeyGroups *KeyGroupRange
	// Clock is the time source of TTL; nil means SystemClock.
	Clock Clock
}

// HeapKeyedBackend is the pure-Go keyed state backend. It keeps decoded
// values in a hash table per state and key group and takes copy-on-write
// snapshots: the synchronous part pins the current tables (time
// proportional to states × key groups, not to their size) and writes that
// follow go to new layers until the snapshot is written.
//
// It is used from one goroutine (the task's), apart from the StateSnapshot
// it returns. Codecs must be safe for concurrent use: the asynchronous part
// of a snapshot encodes while the task goes on.
type HeapKeyedBackend struct {
	maxPar int
	kgr    KeyGroupRange
	clock  Clock

	key   []byte
	kg    int
	kgIdx int // kg - kgr.Start, or -1 when there is no current key in range
	// keyEpoch changes with the current key; epoch also with any change
	// that can move or freeze an entry (inserts, deletes, snapshots), which
	// invalidates what handles remember between a read and a write.
	keyEpoch    uint64
	epoch       uint64
	voidKey     ckey
	voidScratch []byte

	tables  map[string]heapState
	order   []heapState
	pending map[string]*pendingState
	pendOrd []string
	closed  bool
}

var _ KeyedBackend = (*HeapKeyedBackend)(nil)

// heapState is a registered state of the heap backend.
type heapState interface {
	meta() StateMeta
	newHandle(d Descriptor) (any, error)
	capture() heapCapture
	restore(kgIdx int, records []byte) error
	keys(ns []byte, fn func(key []byte, kg int) error) error
}

// heapCapture is one state's part of a snapshot.
type heapCapture interface {
	write(w *KeyedSnapshotWriter, idx, kgIdx, kg int, now int64) error
	release()
}

// pendingState is a restored state not registered yet: its records, per
// key group, as in the snapshot (without their state index). It is
// immutable, so snapshots share it.
type pendingState struct {
	meta StateMeta
	kgs  map[int][]byte
}

// NewHeapKeyedBackend returns an empty heap backend.
func NewHeapKeyedBackend(opts HeapOptions) (*HeapKeyedBackend, error) {
	maxPar := opts.MaxParallelism
	if maxPar == 0 {
		maxPar = DefaultMaxParallelism
	}
	if maxPar < 1 || maxPar > 1<<15 {
		return nil, fmt.Errorf("heap backend: max parallelism %d out of [1, 32768]", maxPar)
	}
	kgr := KeyGroupRange{Start: 0, End: maxPar - 1}
	if opts.KeyGroups != nil {
		kgr = *opts.KeyGroups
		if kgr.Start < 0 || kgr.End >= maxPar || kgr.Len() == 0 {
			return nil, fmt.Errorf("heap backend: key-group range %v not a non-empty part of [0, %d)", kgr, maxPar)
		}
	}
	clock := opts.Clock
	if clock == nil {
		clock = SystemClock{}
	}
	return &HeapKeyedBackend{
		maxPar:  maxPar,
		kgr:     kgr,
		clock:   clock,
		kg:      -1,
		kgIdx:   -1,
		tables:  make(map[string]heapState),
		pending: make(map[string]*pendingState),
	}, nil
}

// SetCurrentKey implements KeyedBackend.
func (b *HeapKeyedBackend) SetCurrentKey(key []byte, keyGroup int) {
	b.key = append(b.key[:0], key...)
	b.kg = keyGroup
	b.kgIdx = -1
	if b.kgr.Contains(keyGroup) {
		b.kgIdx = keyGroup - b.kgr.Start
	}
	if b.closed {
		b.kgIdx = -1
	}
	b.keyEpoch++
	b.epoch++
	b.voidKey.set(b.key, nil, &b.voidScratch)
}

// CurrentKey implements KeyedBackend.
func (b *HeapKeyedBackend) CurrentKey() ([]byte, int) {
	if b.kg < 0 {
		return nil, -1
	}
	return b.key, b.kg
}

// KeyGroupRange implements KeyedBackend.
func (b *HeapKeyedBackend) KeyGroupRange() KeyGroupRange { return b.kgr }

// MaxParallelism implements KeyedBackend.
func (b *HeapKeyedBackend) MaxParallelism() int { return b.maxPar }

// RestoredState implements RestoredStates.
func (b *HeapKeyedBackend) RestoredState(name string) (StateMeta, bool) {
	if p := b.pending[name]; p != nil {
		return p.meta, true
	}
	return StateMeta{}, false
}

// CreateState implements KeyedBackend.
func (b *HeapKeyedBackend) CreateState(d Descriptor) (any, error) {
	if b.closed {
		return nil, ErrClosed
	}
	m, err := d.Meta()
	if err != nil {
		return nil, err
	}
	if t, ok := b.tables[m.Name]; ok {
		if err := t.meta().Compatible(m); err != nil {
			return nil, err
		}
		return t.newHandle(d)
	}
	p := b.pending[m.Name]
	if p != nil {
		if err := p.meta.Compatible(m); err != nil {
			return nil, fmt.Errorf("restored %w", err)
		}
	}
	t := d.heapState(b, m)
	if p != nil {
		for kg, recs := range p.kgs {
			if err := t.restore(kg-b.kgr.Start, recs); err != nil {
				return nil, fmt.Errorf("state %q: restore key group %d: %w", m.Name, kg, err)
			}
		}
		delete(b.pending, m.Name)
		b.pendOrd = slices.DeleteFunc(b.pendOrd, func(n string) bool { return n == m.Name })
	}
	b.tables[m.Name] = t
	b.order = append(b.order, t)
	return t.newHandle(d)
}

// States implements KeyedBackend.
func (b *HeapKeyedBackend) States() []StateMeta {
	out := make([]StateMeta, 0, len(b.order))
	for _, t := range b.order {
		out = append(out, t.meta())
	}
	return out
}

// Keys implements KeyedBackend.
func (b *HeapKeyedBackend) Keys(state string, namespace []byte, fn func(key []byte, keyGroup int) error) error {
	t, ok := b.tables[state]
	if !ok {
		return fmt.Errorf("state %q: %w", state, ErrUnknownState)
	}
	return t.keys(namespace, fn)
}

// Close implements KeyedBackend. Snapshots taken before stay writable.
func (b *HeapKeyedBackend) Close() error {
	b.closed = true
	b.kgIdx = -1
	b.tables, b.order, b.pending, b.pendOrd = nil, nil, nil, nil
	return nil
}

// Snapshot implements KeyedBackend: it pins the current layer of every
// state and key group.
func (b *HeapKeyedBackend) Snapshot(checkpointID int64) (StateSnapshot, error) {
	if b.closed {
		return nil, ErrClosed
	}
	s := &heapSnapshot{
		maxPar: b.maxPar,
		kgr:    b.kgr,
		now:    b.clock.Now().UnixMilli(),
	}
	for _, t := range b.order {
		s.metas = append(s.metas, t.meta())
		s.caps = append(s.caps, t.capture())
	}
	for _, name := range b.pendOrd {
		p := b.pending[name]
		s.metas = append(s.metas, p.meta)
		s.pending = append(s.pending, p)
	}
	b.epoch++ // captured entries are read-only now
	return s, nil
}

type heapSnapshot struct {
	maxPar   int
	kgr      KeyGroupRange
	now      int64
	metas    []StateMeta
	caps     []heapCapture
	pending  []*pendingState
	released atomic.Bool
}

// WriteTo implements StateSnapshot.
func (s *heapSnapshot) WriteTo(out io.Writer) (int64, error) {
	if s.released.Load() {
		return 0, fmt.Errorf("heap snapshot: written or released already")
	}
	defer s.Release()
	w, err := NewKeyedSnapshotWriter(out, KeyedSnapshotHeader{MaxParallelism: s.maxPar, KeyGroups: s.kgr, States: s.metas})
	if err != nil {
		return w.Written(), err
	}
	for kg := s.kgr.Start; kg <= s.kgr.End; kg++ {
		if err := w.StartKeyGroup(kg); err != nil {
			return w.Written(), err
		}
		for i, c := range s.caps {
			if err := c.write(w, i, kg-s.kgr.Start, kg, s.now); err != nil {
				return w.Written(), fmt.Errorf("state %q: snapshot key group %d: %w", s.metas[i].Name, kg, err)
			}
		}
		for j, p := range s.pending {
			if recs := p.kgs[kg]; len(recs) > 0 {
				if err := w.rawRecords(len(s.caps)+j, recs); err != nil {
					return w.Written(), fmt.Errorf("state %q: snapshot key group %d: %w", p.meta.Name, kg, err)
				}
			}
		}
	}
	err = w.Close()
	return w.Written(), err
}

// Release implements StateSnapshot.
func (s *heapSnapshot) Release() {
	if s.released.Swap(true) {
		return
	}
	for _, c := range s.caps {
		c.release()
	}
}

// Restore implements KeyedBackend. Restored states stay encoded until they
// are registered (then decoded with the registrant's codecs); states never
// registered are carried into later snapshots unchanged.
func (b *HeapKeyedBackend) Restore(snapshots ...io.Reader) error {
	if b.closed {
		return ErrClosed
	}
	if len(b.tables) > 0 {
		return fmt.Errorf("heap backend: restore after states were created: %w", ErrRestore)
	}
	owner := make(map[int]int) // key group -> index of the snapshot that had it
	for _, p := range b.pending {
		for kg := range p.kgs {
			owner[kg] = -1
		}
	}
	for i, r := range snapshots {
		var states []*pendingState
		err := ReadKeyedSnapshot(r, b.kgr.Contains,
			func(h *KeyedSnapshotHeader) error {
				if h.MaxParallelism != b.maxPar {
					return fmt.Errorf("snapshot has max parallelism %d, backend %d: %w", h.MaxParallelism, b.maxPar, ErrRestore)
				}
				for _, m := range h.States {
					p := b.pending[m.Name]
					if p == nil {
						p = &pendingState{meta: m, kgs: make(map[int][]byte)}
						b.pending[m.Name] = p
						b.pendOrd = append(b.pendOrd, m.Name)
					} else if merged, err := p.meta.Merge(m); err != nil {
						return fmt.Errorf("snapshots disagree: %w", err)
					} else {
						p.meta = merged
					}
					states = append(states, p)
				}
				return nil
			},
			func(rec *KeyedRecord) error {
				if o, ok := owner[rec.KeyGroup]; ok && o != i {
					return fmt.Errorf("key group %d is in more than one snapshot: %w", rec.KeyGroup, ErrRestore)
				}
				owner[rec.KeyGroup] = i
				p := states[rec.State]
				p.kgs[rec.KeyGroup] = appendRecord(p.kgs[rec.KeyGroup], p.meta.Kind, rec)
				return nil
			})
		if err != nil {
			return fmt.Errorf("heap backend: restore snapshot %d: %w", i, err)
		}
	}
	return nil
}

// appendRecord encodes a record body (without its state index).
func appendRecord(dst []byte, kind Kind, rec *KeyedRecord) []byte {
	dst = appendBytes(appendBytes(dst, rec.Key), rec.Namespace)
	switch kind {
	case KindList:
		dst = binary.AppendUvarint(dst, uint64(len(rec.Elements)))
		for _, e := range rec.Elements {
			dst = appendBytes(dst, e)
		}
	case KindMap:
		dst = appendBytes(appendBytes(dst, rec.UserKey), rec.Value)
	default:
		dst = appendBytes(dst, rec.Value)
	}
	return dst
}

// heapTable is the typed table of one state: per key group, a chain of
// copy-on-write layers.
type heapTable[V any] struct {
	b    *HeapKeyedBackend
	m    StateMeta
	ttl  ttlCtx
	tops []*layer[V]
	ops  tableOps[V]
	// The incremental TTL cleanup's cursor: key group and slot.
	sweepKG, sweepPos int
}

// ttlSweepPerAccess is how many slots each access to a TTL state checks
// for expired entries, as Flink's incremental cleanup (default 5).
const ttlSweepPerAccess = 5

// sweep checks up to n slots for expired entries and removes them, moving
// a cursor round the key groups; key groups a snapshot pins are skipped.
// It must run before a lookup, never between a lookup and the use of what
// it found: a removal moves entries. It leaves cur, the entry about to be
// accessed, alone.
func (t *heapTable[V]) sweep(n int, cur *ckey) {
	now := t.ttl.now()
	for ; n > 0; n-- {
		top := t.tops[t.sweepKG]
		if top.below != nil || top.refs.Load() != 0 || t.sweepPos >= len(top.tab.slots) {
			t.sweepPos = 0
			t.sweepKG = (t.sweepKG + 1) % len(t.tops)
			continue
		}
		s := &top.tab.slots[t.sweepPos]
		if s.hi != 0 && s.hi&deadBit == 0 && (s.lo != cur.lo || s.hi != cur.hi) && !t.isLive(&s.v, now) {
			k := ckey{lo: s.lo, hi: s.hi}
			top.tab.remove(&k)
			t.b.epoch++
			continue // another entry may have moved into this slot
		}
		t.sweepPos++
	}
}

// tableOps is what differs between the kinds of state.
type tableOps[V any] struct {
	// clone copies an entry out of a read-only layer. For values that hold
	// references (pointers, slices, maps) it is a deep copy through the
	// state's codec, as Flink's copy-on-write heap state copies through the
	// serializer: user code may change what a read returns in place, and a
	// read-only layer is what an asynchronous snapshot is encoding.
	clone func(v *V) V
	// cloneOnRead says that an entry found in a read-only layer must be
	// copied up (clone) before a handle gives it to user code.
	cloneOnRead bool
	// live reports whether an entry has anything unexpired (nil: always).
	live func(v *V, now int64) bool
	// write writes an entry to a snapshot; buf is scratch.
	write func(w *KeyedSnapshotWriter, idx int, key, ns []byte, v *V, now int64, buf *[]byte) error
	// restore merges a snapshot record into an entry.
	restore func(rec *KeyedRecord, v *V) error
	// handle makes a handle.
	handle func(t *heapTable[V], d Descriptor) (any, error)
}

func newHeapTable[V any](b *HeapKeyedBackend, m StateMeta, ops tableOps[V]) *heapTable[V] {
	t := &heapTable[V]{b: b, m: m, ttl: newTTL(m.TTL, b.clock), ops: ops}
	t.tops = make([]*layer[V], b.kgr.Len())
	for i := range t.tops {
		t.tops[i] = &layer[V]{}
	}
	return t
}

func (t *heapTable[V]) meta() StateMeta                     { return t.m }
func (t *heapTable[V]) newHandle(d Descriptor) (any, error) { return t.ops.handle(t, d) }

func (t *heapTable[V]) isLive(v *V, now int64) bool {
	return t.ops.live == nil || t.ops.live(v, now)
}

// writable returns the layer that writes to key group kg go to: the top
// one, after merging unpinned layers down, or a new one above a pinned
// top.
func (t *heapTable[V]) writable(kg int) *layer[V] {
	top := t.tops[kg]
	if top.below == nil && top.refs.Load() == 0 {
		return top
	}
	return t.slowWritable(kg)
}

func (t *heapTable[V]) slowWritable(kg int) *layer[V] {
	top := t.tops[kg]
	for top.below != nil && top.below.refs.Load() == 0 {
		t.merge(top.below, top)
		top = top.below
		t.tops[kg] = top
		t.b.epoch++
	}
	if top.refs.Load() != 0 {
		top = &layer[V]{below: top}
		t.tops[kg] = top
		t.b.epoch++
	}
	return top
}

// merge moves the entries of src into dst, the layer below it (both
// unpinned). Expired entries are dropped on the way.
func (t *heapTable[V]) merge(dst, src *layer[V]) {
	var now int64
	if t.ttl.on {
		now = t.ttl.now()
	}
	src.tab.each(func(k *ckey, _ []byte, v *V, dead bool) bool {
		if !dead && t.ttl.on && !t.isLive(v, now) {
			dead = true
		}
		switch {
		case dead && dst.below == nil:
			dst.tab.remove(k)
		case dead:
			dst.tab.setDead(k)
		default:
			p, _ := dst.tab.upsert(k)
			*p = *v
		}
		return true
	})
}

// mut returns the writable entry of k in key group kg, copying it up from
// a read-only layer or creating it; existed reports whether it was there.
func (t *heapTable[V]) mut(kg int, k *ckey) (v *V, existed bool) {
	top := t.writable(kg)
	if top.below == nil {
		v, existed = top.tab.upsert(k)
		if !existed {
			t.b.epoch++
		}
		return v, existed
	}
	if p, dead, ok := top.tab.find(k); ok && !dead {
		return p, true
	} else if !ok {
		if q, _ := lookup(top.below, k); q != nil {
			c := t.ops.clone(q)
			p, _ := top.tab.upsert(k)
			*p = c
			t.b.epoch++
			return p, true
		}
	}
	p, _ := top.tab.upsert(k)
	t.b.epoch++
	return p, false
}

// del deletes k's entry in key group kg.
func (t *heapTable[V]) del(kg int, k *ckey) {
	top := t.writable(kg)
	t.b.epoch++
	if top.below == nil {
		top.tab.remove(k)
		return
	}
	if q, _ := lookup(top.below, k); q != nil {
		top.tab.setDead(k)
	} else {
		top.tab.remove(k)
	}
}

func (t *heapTable[V]) capture() heapCapture {
	c := &tableCapture[V]{t: t, tops: slices.Clone(t.tops)}
	for _, l := range c.tops {
		l.pin()
	}
	return c
}

type tableCapture[V any] struct {
	t    *heapTable[V]
	tops []*layer[V]
	buf  []byte
}

func (c *tableCapture[V]) write(w *KeyedSnapshotWriter, idx, kgIdx, kg int, now int64) error {
	var err error
	visible(c.tops[kgIdx], func(comp []byte, v *V) bool {
		if !c.t.isLive(v, now) {
			return true
		}
		var key, ns []byte
		if key, ns, err = splitComposite(comp); err != nil {
			return false
		}
		err = c.t.ops.write(w, idx, key, ns, v, now, &c.buf)
		return err == nil
	})
	return err
}

func (c *tableCapture[V]) release() {
	for _, l := range c.tops {
		l.unpin()
	}
}

func (t *heapTable[V]) restore(kgIdx int, records []byte) error {
	d := newDecoder(records)
	var rec KeyedRecord
	var k ckey
	var scratch []byte
	top := t.writable(kgIdx)
	for d.len() > 0 {
		rec = KeyedRecord{Elements: rec.Elements[:0]}
		if err := d.record(t.m.Kind, &rec); err != nil {
			return corrupt("record", err)
		}
		k.set(rec.Key, rec.Namespace, &scratch)
		v, _ := top.tab.upsert(&k)
		if err := t.ops.restore(&rec, v); err != nil {
			return err
		}
	}
	t.b.epoch++
	return nil
}

func (t *heapTable[V]) keys(ns []byte, fn func(key []byte, kg int) error) error {
	var now int64
	if t.ttl.on {
		now = t.ttl.now()
	}
	var keys [][]byte
	for i := range t.tops {
		keys = keys[:0]
		var err error
		visible(t.tops[i], func(comp []byte, v *V) bool {
			var key, kns []byte
			if key, kns, err = splitComposite(comp); err != nil {
				return false
			}
			if bytes.Equal(kns, ns) && t.isLive(v, now) {
				keys = append(keys, bytes.Clone(key))
			}
			return true
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := fn(k, t.b.kgr.Start+i); err != nil {
				return err
			}
		}
	}
	return nil
}
