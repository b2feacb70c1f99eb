package state

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sluicehq/sluice/codec"
)

// heapHandle is what every heap state handle has: its table, namespace,
// and the entry its last read found, which a following write of the same
// key reuses (one hash lookup per read-modify-write).
type heapHandle[V any] struct {
	t         *heapTable[V]
	b         *HeapKeyedBackend
	ns        []byte
	nsKey     ckey
	nsScratch []byte
	nsEpoch   uint64

	cEpoch    uint64 // b.epoch when cPtr was found; 0: nothing remembered
	cPtr      *V
	cWritable bool
}

func newHeapHandle[V any](t *heapTable[V]) heapHandle[V] {
	return heapHandle[V]{t: t, b: t.b}
}

func (h *heapHandle[V]) SetNamespace(ns []byte) {
	if len(ns) == 0 {
		h.ns = nil
	} else {
		h.ns = append(h.ns[:0:0], ns...)
	}
	h.nsEpoch, h.cEpoch = 0, 0
}

// key returns the composite key of the current key and the handle's
// namespace.
func (h *heapHandle[V]) key() *ckey {
	if h.ns == nil {
		return &h.b.voidKey
	}
	if h.nsEpoch != h.b.keyEpoch {
		h.nsKey.set(h.b.key, h.ns, &h.nsScratch)
		h.nsEpoch = h.b.keyEpoch
	}
	return &h.nsKey
}

// kg returns the index of the current key group.
func (h *heapHandle[V]) kg() (int, error) {
	if h.b.kgIdx < 0 {
		if h.b.closed {
			return 0, fmt.Errorf("state %q: %w", h.t.m.Name, ErrClosed)
		}
		return 0, fmt.Errorf("state %q: key group %d, range %v: %w", h.t.m.Name, h.b.kg, h.b.kgr, ErrNoCurrentKey)
	}
	return h.b.kgIdx, nil
}

// read returns the current entry (nil if none) and remembers it.
func (h *heapHandle[V]) read(kg int) *V {
	if h.t.ttl.on {
		h.t.sweep(ttlSweepPerAccess, h.key())
	}
	top := h.t.tops[kg]
	v, l := lookup(top, h.key())
	h.cEpoch, h.cPtr = h.b.epoch, v
	h.cWritable = v != nil && l == top && top.refs.Load() == 0
	return v
}

// write returns the current entry, writable, creating it if needed.
func (h *heapHandle[V]) write(kg int) (v *V, existed bool) {
	if h.cEpoch == h.b.epoch && h.cWritable {
		return h.cPtr, true
	}
	if h.t.ttl.on {
		h.t.sweep(ttlSweepPerAccess, h.key())
	}
	v, existed = h.t.mut(kg, h.key())
	h.cEpoch, h.cPtr, h.cWritable = h.b.epoch, v, true
	return v, existed
}

func (h *heapHandle[V]) clear(kg int) {
	h.t.del(kg, h.key())
	h.cEpoch = 0
}

func (h *heapHandle[V]) Clear() error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	h.clear(kg)
	return nil
}

// nsKeyFor builds the composite key of the current key in namespace ns.
func (h *heapHandle[V]) nsKeyFor(ns []byte, k *ckey, scratch *[]byte) {
	k.set(h.b.key, ns, scratch)
}

func (h *heapHandle[V]) now() int64 {
	if h.t.ttl.on {
		return h.t.ttl.now()
	}
	return 0
}

// cell is the entry of value, reducing and aggregating states: the value
// and, with TTL, its timestamp.
type cell[T any] struct {
	v  T
	ts int64
}

func cellOps[T any](m StateMeta, c codec.Codec[T], clock Clock, handle func(t *heapTable[cell[T]], d Descriptor) (any, error)) tableOps[cell[T]] {
	ttl := newTTL(m.TTL, clock)
	deep := deepCopier(c)
	ops := tableOps[cell[T]]{
		clone: func(v *cell[T]) cell[T] {
			if deep == nil {
				return *v
			}
			return cell[T]{v: deep(v.v), ts: v.ts}
		},
		cloneOnRead: deep != nil,
		write: func(w *KeyedSnapshotWriter, idx int, key, ns []byte, v *cell[T], now int64, buf *[]byte) error {
			b := (*buf)[:0]
			if ttl.on {
				b = AppendTTLTimestamp(b, v.ts)
			}
			b, err := c.Append(b, v.v)
			*buf = b
			if err != nil {
				return fmt.Errorf("encode value: %w", err)
			}
			return w.Value(idx, key, ns, b)
		},
		restore: func(rec *KeyedRecord, v *cell[T]) error {
			b := rec.Value
			if ttl.on {
				var err error
				if v.ts, b, err = SplitTTLValue(b); err != nil {
					return err
				}
			}
			x, err := c.Decode(b)
			if err != nil {
				return fmt.Errorf("decode value: %w", err)
			}
			v.v = x
			return nil
		},
		handle: handle,
	}
	if ttl.on {
		ops.live = func(v *cell[T], now int64) bool { return !ttl.expired(v.ts, now) }
	}
	return ops
}

// cellHandle is the common part of value, reducing and aggregating
// handles.
type cellHandle[T any] struct {
	heapHandle[cell[T]]
}

// get returns the value with TTL handling. For an update (forWrite)
// expired counts as absent and is not refreshed.
func (h *cellHandle[T]) get(kg int, forWrite bool) (T, bool) {
	p := h.read(kg)
	if p == nil {
		var zero T
		return zero, false
	}
	if !h.t.ttl.on {
		return h.mutable(kg, p).v, true
	}
	ttl := &h.t.ttl
	now := ttl.now()
	if ttl.expired(p.ts, now) {
		v := p.v
		h.clear(kg)
		if ttl.retExp && !forWrite {
			return v, true
		}
		var zero T
		return zero, false
	}
	if ttl.onRead && !forWrite {
		w, _ := h.write(kg)
		w.ts = now
		return w.v, true
	}
	return h.mutable(kg, p).v, true
}

// mutable returns p, the entry read last, or when p sits in a read-only
// layer that a snapshot may be encoding and its values hold references,
// the entry copied up into the writable layer: what user code may change
// in place (an accumulator, a value it updates) is never the snapshot's.
func (h *heapHandle[V]) mutable(kg int, p *V) *V {
	if h.cWritable || !h.t.ops.cloneOnRead {
		return p
	}
	w, _ := h.write(kg)
	return w
}

func (h *cellHandle[T]) put(kg int, v T) {
	p, _ := h.write(kg)
	p.v = v
	if h.t.ttl.on {
		p.ts = h.t.ttl.now()
	}
}

// merge folds the values in the source namespaces into target.
func (h *cellHandle[T]) merge(target []byte, sources [][]byte, f func(a, b T) T) error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	now := h.now()
	var k ckey
	var scratch []byte
	var acc T
	have := false
	for _, src := range sources {
		h.nsKeyFor(src, &k, &scratch)
		p, _ := lookup(h.t.tops[kg], &k)
		if p == nil {
			continue
		}
		if h.t.isLive(p, now) {
			if have {
				acc = f(acc, p.v)
			} else {
				acc, have = p.v, true
			}
		}
		h.t.del(kg, &k)
	}
	h.cEpoch = 0
	if !have {
		return nil
	}
	h.nsKeyFor(target, &k, &scratch)
	p, existed := h.t.mut(kg, &k)
	if existed && h.t.isLive(p, now) {
		acc = f(p.v, acc)
	}
	p.v, p.ts = acc, now
	return nil
}

// heapValue is the heap ValueState.
type heapValue[T any] struct{ cellHandle[T] }

func (h *heapValue[T]) Value() (T, bool, error) {
	if v, ok, done := h.probeFast(); done {
		return v, ok, nil
	}
	kg, err := h.kg()
	if err != nil {
		var zero T
		return zero, false, err
	}
	if !h.t.ttl.on { // the hot path, kept short
		if p := h.read(kg); p != nil {
			return h.mutable(kg, p).v, true, nil
		}
		var zero T
		return zero, false, nil
	}
	v, ok := h.get(kg, false)
	return v, ok, nil
}

// probeFast is read for the common case, with no calls: a current key in
// range, the default namespace, no TTL, an inline key and a key group with
// one layer. done is false when the case does not apply.
func (h *heapValue[T]) probeFast() (v T, ok, done bool) {
	b := h.b
	kg := b.kgIdx
	if kg < 0 || h.ns != nil || h.t.ttl.on || b.voidKey.hi == 0 {
		return v, false, false
	}
	top := h.t.tops[kg]
	if top.below != nil {
		return v, false, false
	}
	p, dead, found := top.tab.findInline(b.voidKey.lo, b.voidKey.hi)
	h.cEpoch, h.cPtr, h.cWritable = b.epoch, nil, false
	if !found || dead {
		return v, false, true
	}
	h.cPtr, h.cWritable = p, top.refs.Load() == 0
	if !h.cWritable && h.t.ops.cloneOnRead {
		return v, false, false // a snapshot holds it: the slow path copies it up
	}
	return p.v, true, true
}

func (h *heapValue[T]) Update(v T) error {
	if h.cEpoch == h.b.epoch && h.cWritable && !h.t.ttl.on {
		h.cPtr.v = v
		return nil
	}
	kg, err := h.kg()
	if err != nil {
		return err
	}
	h.put(kg, v)
	return nil
}

func (d ValueStateDescriptor[T]) heapState(b *HeapKeyedBackend, m StateMeta) heapState {
	return newHeapTable(b, m, cellOps(m, orDefault(d.Codec), b.clock, func(t *heapTable[cell[T]], _ Descriptor) (any, error) {
		return &heapValue[T]{cellHandle[T]{newHeapHandle(t)}}, nil
	}))
}

// heapReducing is the heap ReducingState.
type heapReducing[T any] struct {
	cellHandle[T]
	reduce func(a, b T) T
}

func (h *heapReducing[T]) Get() (T, bool, error) {
	kg, err := h.kg()
	if err != nil {
		var zero T
		return zero, false, err
	}
	v, ok := h.get(kg, false)
	return v, ok, nil
}

func (h *heapReducing[T]) Add(v T) error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	if cur, ok := h.get(kg, true); ok {
		v = h.reduce(cur, v)
	}
	h.put(kg, v)
	return nil
}

func (h *heapReducing[T]) MergeNamespaces(target []byte, sources [][]byte) error {
	return h.merge(target, sources, h.reduce)
}

func (d ReducingStateDescriptor[T]) heapState(b *HeapKeyedBackend, m StateMeta) heapState {
	return newHeapTable(b, m, cellOps(m, orDefault(d.Codec), b.clock, func(t *heapTable[cell[T]], d Descriptor) (any, error) {
		dd, ok := d.(ReducingStateDescriptor[T])
		if !ok {
			return nil, fmt.Errorf("state %q: descriptor %T for a reducing state of %T: %w", t.m.Name, d, *new(T), ErrIncompatibleState)
		}
		return &heapReducing[T]{cellHandle[T]{newHeapHandle(t)}, dd.Reduce}, nil
	}))
}

// heapAggregating is the heap AggregatingState.
type heapAggregating[IN, ACC, OUT any] struct {
	cellHandle[ACC]
	agg AggregateFunction[IN, ACC, OUT]
}

func (h *heapAggregating[IN, ACC, OUT]) Get() (OUT, bool, error) {
	var zero OUT
	kg, err := h.kg()
	if err != nil {
		return zero, false, err
	}
	acc, ok := h.get(kg, false)
	if !ok {
		return zero, false, nil
	}
	return h.agg.GetResult(acc), true, nil
}

func (h *heapAggregating[IN, ACC, OUT]) Add(v IN) error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	acc, ok := h.get(kg, true)
	if !ok {
		acc = h.agg.CreateAccumulator()
	}
	h.put(kg, h.agg.Add(v, acc))
	return nil
}

func (h *heapAggregating[IN, ACC, OUT]) MergeNamespaces(target []byte, sources [][]byte) error {
	return h.merge(target, sources, h.agg.Merge)
}

func (d AggregatingStateDescriptor[IN, ACC, OUT]) heapState(b *HeapKeyedBackend, m StateMeta) heapState {
	return newHeapTable(b, m, cellOps(m, orDefault(d.AccCodec), b.clock, func(t *heapTable[cell[ACC]], d Descriptor) (any, error) {
		dd, ok := d.(AggregatingStateDescriptor[IN, ACC, OUT])
		if !ok {
			return nil, fmt.Errorf("state %q: descriptor %T for an aggregating state: %w", t.m.Name, d, ErrIncompatibleState)
		}
		return &heapAggregating[IN, ACC, OUT]{cellHandle[ACC]{newHeapHandle(t)}, dd.Aggregate}, nil
	}))
}

// listCell is the entry of a list state: the elements and, with TTL,
// their timestamps.
type listCell[T any] struct {
	elems []T
	ts    []int64
}

// heapList is the heap ListState.
type heapList[T any] struct {
	heapHandle[listCell[T]]
}

func (h *heapList[T]) Get() ([]T, error) {
	kg, err := h.kg()
	if err != nil {
		return nil, err
	}
	p := h.read(kg)
	if p == nil || len(p.elems) == 0 {
		return nil, nil
	}
	p = h.mutable(kg, p) // elements that hold references: never the snapshot's
	ttl := &h.t.ttl
	if !ttl.on {
		return slices.Clone(p.elems), nil
	}
	now := ttl.now()
	var out []T
	expired := 0
	for i, v := range p.elems {
		if ttl.expired(p.ts[i], now) {
			expired++
			if !ttl.retExp {
				continue
			}
		}
		out = append(out, v)
	}
	if expired > 0 || ttl.onRead {
		w, _ := h.write(kg)
		n := 0
		for i := range w.elems {
			if !ttl.expired(w.ts[i], now) {
				w.elems[n] = w.elems[i]
				w.ts[n] = w.ts[i]
				if ttl.onRead {
					w.ts[n] = now
				}
				n++
			}
		}
		clear(w.elems[n:])
		w.elems, w.ts = w.elems[:n], w.ts[:n]
		if n == 0 {
			h.clear(kg)
		}
	}
	return out, nil
}

func (h *heapList[T]) Add(v T) error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	w, _ := h.write(kg)
	w.elems = append(w.elems, v)
	if h.t.ttl.on {
		w.ts = append(w.ts, h.t.ttl.now())
	}
	return nil
}

func (h *heapList[T]) AddAll(vs []T) error {
	if len(vs) == 0 {
		return nil
	}
	kg, err := h.kg()
	if err != nil {
		return err
	}
	w, _ := h.write(kg)
	w.elems = append(w.elems, vs...)
	if h.t.ttl.on {
		now := h.t.ttl.now()
		for range vs {
			w.ts = append(w.ts, now)
		}
	}
	return nil
}

func (h *heapList[T]) Update(vs []T) error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		h.clear(kg)
		return nil
	}
	w, _ := h.write(kg)
	w.elems = slices.Clone(vs)
	w.ts = nil
	if h.t.ttl.on {
		now := h.t.ttl.now()
		w.ts = make([]int64, len(vs))
		for i := range w.ts {
			w.ts[i] = now
		}
	}
	return nil
}

func (h *heapList[T]) MergeNamespaces(target []byte, sources [][]byte) error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	now := h.now()
	var k ckey
	var scratch []byte
	var acc listCell[T]
	for _, src := range sources {
		h.nsKeyFor(src, &k, &scratch)
		p, _ := lookup(h.t.tops[kg], &k)
		if p == nil {
			continue
		}
		for i, v := range p.elems {
			if h.t.ttl.on {
				if h.t.ttl.expired(p.ts[i], now) {
					continue
				}
				acc.ts = append(acc.ts, p.ts[i])
			}
			acc.elems = append(acc.elems, v)
		}
		h.t.del(kg, &k)
	}
	h.cEpoch = 0
	if len(acc.elems) == 0 {
		return nil
	}
	h.nsKeyFor(target, &k, &scratch)
	p, _ := h.t.mut(kg, &k)
	p.elems = append(p.elems, acc.elems...)
	if h.t.ttl.on {
		p.ts = append(p.ts, acc.ts...)
	}
	return nil
}

func (d ListStateDescriptor[T]) heapState(b *HeapKeyedBackend, m StateMeta) heapState {
	c := orDefault(d.Codec)
	ttl := newTTL(m.TTL, b.clock)
	deep := deepCopier(c)
	ops := tableOps[listCell[T]]{
		clone: func(v *listCell[T]) listCell[T] {
			elems := slices.Clone(v.elems)
			if deep != nil {
				for i := range elems {
					elems[i] = deep(elems[i])
				}
			}
			return listCell[T]{elems: elems, ts: slices.Clone(v.ts)}
		},
		cloneOnRead: deep != nil,
		write: func(w *KeyedSnapshotWriter, idx int, key, ns []byte, v *listCell[T], now int64, buf *[]byte) error {
			n := len(v.elems)
			if ttl.on {
				n = 0
				for _, ts := range v.ts {
					if !ttl.expired(ts, now) {
						n++
					}
				}
			}
			if err := w.ListStart(idx, key, ns, n); err != nil {
				return err
			}
			for i, e := range v.elems {
				b := (*buf)[:0]
				if ttl.on {
					if ttl.expired(v.ts[i], now) {
						continue
					}
					b = AppendTTLTimestamp(b, v.ts[i])
				}
				b, err := c.Append(b, e)
				*buf = b
				if err != nil {
					return fmt.Errorf("encode list element: %w", err)
				}
				if err := w.ListElement(b); err != nil {
					return err
				}
			}
			return nil
		},
		restore: func(rec *KeyedRecord, v *listCell[T]) error {
			for _, b := range rec.Elements {
				if ttl.on {
					ts, rest, err := SplitTTLValue(b)
					if err != nil {
						return err
					}
					v.ts, b = append(v.ts, ts), rest
				}
				e, err := c.Decode(b)
				if err != nil {
					return fmt.Errorf("decode list element: %w", err)
				}
				v.elems = append(v.elems, e)
			}
			return nil
		},
		handle: func(t *heapTable[listCell[T]], _ Descriptor) (any, error) {
			return &heapList[T]{newHeapHandle(t)}, nil
		},
	}
	ops.live = func(v *listCell[T], now int64) bool {
		if !ttl.on {
			return len(v.elems) > 0
		}
		for _, ts := range v.ts {
			if !ttl.expired(ts, now) {
				return true
			}
		}
		return false
	}
	return newHeapTable(b, m, ops)
}

// mentry is a map state entry: the value and, with TTL, its timestamp.
type mentry[V any] struct {
	v  V
	ts int64
}

// heapMap is the heap MapState; an entry of the table is the whole map of
// a key and namespace.
type heapMap[K comparable, V any] struct {
	heapHandle[map[K]mentry[V]]
}

func (h *heapMap[K, V]) Get(k K) (V, bool, error) {
	var zero V
	kg, err := h.kg()
	if err != nil {
		return zero, false, err
	}
	p := h.read(kg)
	if p == nil {
		return zero, false, nil
	}
	e, ok := (*p)[k]
	if !ok {
		return zero, false, nil
	}
	if p2 := h.mutable(kg, p); p2 != p { // a value that holds references: never the snapshot's
		e = (*p2)[k]
	}
	if ttl := &h.t.ttl; ttl.on {
		now := ttl.now()
		if ttl.expired(e.ts, now) {
			h.remove(kg, k)
			if ttl.retExp {
				return e.v, true, nil
			}
			return zero, false, nil
		}
		if ttl.onRead {
			w, _ := h.write(kg)
			(*w)[k] = mentry[V]{e.v, now}
		}
	}
	return e.v, true, nil
}

func (h *heapMap[K, V]) Put(k K, v V) error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	w, _ := h.write(kg)
	if *w == nil {
		*w = make(map[K]mentry[V])
	}
	(*w)[k] = mentry[V]{v, h.now()}
	return nil
}

func (h *heapMap[K, V]) Contains(k K) (bool, error) {
	kg, err := h.kg()
	if err != nil {
		return false, err
	}
	p := h.read(kg)
	if p == nil {
		return false, nil
	}
	e, ok := (*p)[k]
	if ok && h.t.ttl.on && h.t.ttl.expired(e.ts, h.t.ttl.now()) {
		h.remove(kg, k)
		return false, nil
	}
	return ok, nil
}

func (h *heapMap[K, V]) remove(kg int, k K) {
	p := h.read(kg)
	if p == nil {
		return
	}
	if _, ok := (*p)[k]; !ok {
		return
	}
	w, _ := h.write(kg)
	delete(*w, k)
	if len(*w) == 0 {
		h.clear(kg)
	}
}

func (h *heapMap[K, V]) Remove(k K) error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	h.remove(kg, k)
	return nil
}

func (h *heapMap[K, V]) IsEmpty() (bool, error) {
	kg, err := h.kg()
	if err != nil {
		return false, err
	}
	p := h.read(kg)
	return p == nil || !h.t.isLive(p, h.now()), nil
}

func (h *heapMap[K, V]) Iterate(fn func(k K, v V) bool) error {
	kg, err := h.kg()
	if err != nil {
		return err
	}
	p := h.read(kg)
	if p == nil {
		return nil
	}
	m := *h.mutable(kg, p) // values that hold references: never the snapshot's
	ttl := &h.t.ttl
	if !ttl.on {
		for k, e := range m {
			if !fn(k, e.v) {
				break
			}
		}
		return nil
	}
	now := ttl.now()
	var expired, visited []K
	for k, e := range m {
		if ttl.expired(e.ts, now) {
			expired = append(expired, k)
			if !ttl.retExp {
				continue
			}
		} else if ttl.onRead {
			visited = append(visited, k)
		}
		if !fn(k, e.v) {
			break
		}
	}
	for _, k := range expired {
		h.remove(kg, k)
	}
	if len(visited) > 0 {
		if p := h.read(kg); p != nil {
			w, _ := h.write(kg)
			for _, k := range visited {
				if e, ok := (*w)[k]; ok {
					e.ts = now
					(*w)[k] = e
				}
			}
		}
	}
	return nil
}

func (h *heapMap[K, V]) IterateKeys(fn func(k K) bool) error {
	return h.Iterate(func(k K, _ V) bool { return fn(k) })
}

func (d MapStateDescriptor[K, V]) heapState(b *HeapKeyedBackend, m StateMeta) heapState {
	kc, vc := orDefaultKey(d.KeyCodec), orDefault(d.ValueCodec)
	ttl := newTTL(m.TTL, b.clock)
	deep := deepCopier(vc)
	ops := tableOps[map[K]mentry[V]]{
		clone: func(v *map[K]mentry[V]) map[K]mentry[V] {
			m := maps.Clone(*v)
			if deep != nil {
				for k, e := range m {
					m[k] = mentry[V]{deep(e.v), e.ts}
				}
			}
			return m
		},
		cloneOnRead: deep != nil,
		write: func(w *KeyedSnapshotWriter, idx int, key, ns []byte, v *map[K]mentry[V], now int64, buf *[]byte) error {
			for k, e := range *v {
				if ttl.on && ttl.expired(e.ts, now) {
					continue
				}
				kb, err := kc.Append((*buf)[:0], k)
				if err != nil {
					return fmt.Errorf("encode map key: %w", err)
				}
				split := len(kb)
				if ttl.on {
					kb = AppendTTLTimestamp(kb, e.ts)
				}
				kb, err = vc.Append(kb, e.v)
				*buf = kb
				if err != nil {
					return fmt.Errorf("encode map value: %w", err)
				}
				if err := w.MapEntry(idx, key, ns, kb[:split], kb[split:]); err != nil {
					return err
				}
			}
			return nil
		},
		restore: func(rec *KeyedRecord, v *map[K]mentry[V]) error {
			k, err := kc.Decode(rec.UserKey)
			if err != nil {
				return fmt.Errorf("decode map key: %w", err)
			}
			var e mentry[V]
			b := rec.Value
			if ttl.on {
				if e.ts, b, err = SplitTTLValue(b); err != nil {
					return err
				}
			}
			if e.v, err = vc.Decode(b); err != nil {
				return fmt.Errorf("decode map value: %w", err)
			}
			if *v == nil {
				*v = make(map[K]mentry[V])
			}
			(*v)[k] = e
			return nil
		},
		handle: func(t *heapTable[map[K]mentry[V]], _ Descriptor) (any, error) {
			return &heapMap[K, V]{newHeapHandle(t)}, nil
		},
	}
	ops.live = func(v *map[K]mentry[V], now int64) bool {
		if !ttl.on {
			return len(*v) > 0
		}
		for _, e := range *v {
			if !ttl.expired(e.ts, now) {
				return true
			}
		}
		return false
	}
	return newHeapTable(b, m, ops)
}
