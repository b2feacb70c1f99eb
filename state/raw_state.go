package state

import (
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/codec"
)

// The byte-level store interfaces below are what a backend that keeps
// bytes (RocksDB) implements per registered state; Descriptor.Bind wraps
// them into typed handles with the descriptor's codecs and TTL. They are
// scoped to the backend's current key. Returned byte slices are valid until
// the next call on the backend. Values of TTL states carry the timestamp
// prefix (see AppendTTLTimestamp); stores pass them through unchanged.

// RawValueState stores one value per namespace (value, reducing and
// aggregating states).
type RawValueState interface {
	Get(ns []byte) (value []byte, ok bool, err error)
	Put(ns, value []byte) error
	Delete(ns []byte) error
}

// RawListState stores a list of elements per namespace.
type RawListState interface {
	// Get calls fn with each element, oldest first.
	Get(ns []byte, fn func(elem []byte) error) error
	Append(ns []byte, elems [][]byte) error
	// Put replaces the list; no elements deletes it.
	Put(ns []byte, elems [][]byte) error
	Delete(ns []byte) error
}

// RawMapState stores a map per namespace.
type RawMapState interface {
	Get(ns, userKey []byte) (value []byte, ok bool, err error)
	Put(ns, userKey, value []byte) error
	Delete(ns, userKey []byte) error
	// Iterate calls fn with each entry until it returns false. fn may Put
	// and Delete entries of the same map.
	Iterate(ns []byte, fn func(userKey, value []byte) (bool, error)) error
	DeleteAll(ns []byte) error
}

// rawBase is what every byte-level handle has.
type rawBase struct {
	name string
	ns   []byte
	ttl  ttlCtx
	buf  []byte
}

func (h *rawBase) SetNamespace(ns []byte) { h.ns = append(h.ns[:0:0], ns...) }

func (h *rawBase) errf(format string, args ...any) error {
	return fmt.Errorf("state %q: "+format, append([]any{h.name}, args...)...)
}

// unwrap strips and checks the TTL prefix of b. live is false for an
// expired entry; stamp is its timestamp.
func (h *rawBase) unwrap(b []byte, now int64) (v []byte, stamp int64, live bool, err error) {
	if !h.ttl.on {
		return b, 0, true, nil
	}
	stamp, v, err = SplitTTLValue(b)
	if err != nil {
		return nil, 0, false, h.errf("%w", err)
	}
	return v, stamp, !h.ttl.expired(stamp, now), nil
}

// wrap encodes v with c into h.buf, behind a TTL prefix if TTL is on.
func wrapEncode[T any](h *rawBase, c codec.Codec[T], v T, now int64) ([]byte, error) {
	h.buf = h.buf[:0]
	if h.ttl.on {
		h.buf = AppendTTLTimestamp(h.buf, now)
	}
	var err error
	h.buf, err = c.Append(h.buf, v)
	if err != nil {
		return nil, h.errf("encode: %w", err)
	}
	return h.buf, nil
}

func (h *rawBase) now() int64 {
	if h.ttl.on {
		return h.ttl.now()
	}
	return 0
}

// rawGetValue reads a single value with TTL handling: expired values are
// deleted (and returned once with ReturnExpiredIfNotCleanedUp); with
// OnReadAndWrite the timestamp of a live value is refreshed.
func rawGetValue[T any](h *rawBase, raw RawValueState, c codec.Codec[T]) (T, bool, error) {
	var zero T
	b, ok, err := raw.Get(h.ns)
	if err != nil {
		return zero, false, h.errf("get: %w", err)
	}
	if !ok {
		return zero, false, nil
	}
	vb, _, live, err := h.unwrap(b, h.now())
	if err != nil {
		return zero, false, err
	}
	if !live && !h.ttl.retExp {
		if err := raw.Delete(h.ns); err != nil {
			return zero, false, h.errf("delete expired: %w", err)
		}
		return zero, false, nil
	}
	v, err := c.Decode(vb)
	if err != nil {
		return zero, false, h.errf("decode value: %w", err)
	}
	switch {
	case !live:
		if err := raw.Delete(h.ns); err != nil {
			return zero, false, h.errf("delete expired: %w", err)
		}
	case h.ttl.on && h.ttl.onRead:
		if err := rawPutValue(h, raw, c, v); err != nil {
			return zero, false, err
		}
	}
	return v, true, nil
}

func rawPutValue[T any](h *rawBase, raw RawValueState, c codec.Codec[T], v T) error {
	b, err := wrapEncode(h, c, v, h.now())
	if err != nil {
		return err
	}
	if err := raw.Put(h.ns, b); err != nil {
		return h.errf("put: %w", err)
	}
	return nil
}

// rawValue is the byte-level ValueState.
type rawValue[T any] struct {
	rawBase
	raw RawValueState
	c   codec.Codec[T]
}

func (h *rawValue[T]) Value() (T, bool, error) { return rawGetValue(&h.rawBase, h.raw, h.c) }
func (h *rawValue[T]) Update(v T) error        { return rawPutValue(&h.rawBase, h.raw, h.c, v) }
func (h *rawValue[T]) Clear() error            { return h.raw.Delete(h.ns) }

// rawReducing is the byte-level ReducingState.
type rawReducing[T any] struct {
	rawBase
	raw    RawValueState
	c      codec.Codec[T]
	reduce func(a, b T) T
}

func (h *rawReducing[T]) Get() (T, bool, error) { return rawGetValue(&h.rawBase, h.raw, h.c) }
func (h *rawReducing[T]) Clear() error          { return h.raw.Delete(h.ns) }

func (h *rawReducing[T]) Add(v T) error {
	cur, ok, err := h.getQuiet()
	if err != nil {
		return err
	}
	if ok {
		v = h.reduce(cur, v)
	}
	return rawPutValue(&h.rawBase, h.raw, h.c, v)
}

// getQuiet reads the current value for a write: expired counts as absent.
func (h *rawReducing[T]) getQuiet() (T, bool, error) {
	return rawGetLive(&h.rawBase, h.raw, h.c)
}

func rawGetLive[T any](h *rawBase, raw RawValueState, c codec.Codec[T]) (T, bool, error) {
	var zero T
	b, ok, err := raw.Get(h.ns)
	if err != nil || !ok {
		if err != nil {
			err = h.errf("get: %w", err)
		}
		return zero, false, err
	}
	vb, _, live, err := h.unwrap(b, h.now())
	if err != nil || !live {
		return zero, false, err
	}
	v, err := c.Decode(vb)
	if err != nil {
		return zero, false, h.errf("decode value: %w", err)
	}
	return v, true, nil
}

func (h *rawReducing[T]) MergeNamespaces(target []byte, sources [][]byte) error {
	return rawMergeValues(&h.rawBase, h.raw, h.c, target, sources, h.reduce)
}

// rawMergeValues merges the values of the source namespaces into target.
func rawMergeValues[T any](h *rawBase, raw RawValueState, c codec.Codec[T], target []byte, sources [][]byte, merge func(a, b T) T) error {
	saved := h.ns
	defer func() { h.ns = saved }()
	var acc T
	have := false
	for _, src := range sources {
		h.ns = src
		v, ok, err := rawGetLive(h, raw, c)
		if err != nil {
			return err
		}
		if err := raw.Delete(src); err != nil {
			return h.errf("merge: delete source: %w", err)
		}
		if !ok {
			continue
		}
		if have {
			acc = merge(acc, v)
		} else {
			acc, have = v, true
		}
	}
	if !have {
		return nil
	}
	h.ns = target
	cur, ok, err := rawGetLive(h, raw, c)
	if err != nil {
		return err
	}
	if ok {
		acc = merge(cur, acc)
	}
	return rawPutValue(h, raw, c, acc)
}

// rawAggregating is the byte-level AggregatingState.
type rawAggregating[IN, ACC, OUT any] struct {
	rawBase
	raw RawValueState
	c   codec.Codec[ACC]
	agg AggregateFunction[IN, ACC, OUT]
}

func (h *rawAggregating[IN, ACC, OUT]) Get() (OUT, bool, error) {
	acc, ok, err := rawGetValue(&h.rawBase, h.raw, h.c)
	if err != nil || !ok {
		var zero OUT
		return zero, false, err
	}
	return h.agg.GetResult(acc), true, nil
}

func (h *rawAggregating[IN, ACC, OUT]) Add(v IN) error {
	acc, ok, err := rawGetLive(&h.rawBase, h.raw, h.c)
	if err != nil {
		return err
	}
	if !ok {
		acc = h.agg.CreateAccumulator()
	}
	return rawPutValue(&h.rawBase, h.raw, h.c, h.agg.Add(v, acc))
}

func (h *rawAggregating[IN, ACC, OUT]) Clear() error { return h.raw.Delete(h.ns) }

func (h *rawAggregating[IN, ACC, OUT]) MergeNamespaces(target []byte, sources [][]byte) error {
	return rawMergeValues(&h.rawBase, h.raw, h.c, target, sources, h.agg.Merge)
}

// rawList is the byte-level ListState.
type rawList[T any] struct {
	rawBase
	raw RawListState
	c   codec.Codec[T]
}

// elements reads the list as decoded values and as stored bytes (copies),
// dropping expired elements; it rewrites the stored list when elements
// expired or (OnReadAndWrite, refresh) timestamps were refreshed.
func (h *rawList[T]) elements(ns []byte, decode, refresh bool) ([]T, [][]byte, error) {
	now := h.now()
	var vals []T
	var kept [][]byte
	dropped := false
	err := h.raw.Get(ns, func(e []byte) error {
		vb, _, live, err := h.unwrap(e, now)
		if err != nil {
			return err
		}
		if !live {
			dropped = true
			if !h.ttl.retExp || !decode {
				return nil
			}
		}
		if decode {
			v, err := h.c.Decode(vb)
			if err != nil {
				return h.errf("decode element: %w", err)
			}
			vals = append(vals, v)
		}
		if live {
			cp := slices.Clone(e)
			if refresh && h.ttl.on {
				AppendTTLTimestamp(cp[:0], now)
			}
			kept = append(kept, cp)
		}
		return nil
	})
	if err != nil {
		return nil, nil, h.errf("get list: %w", err)
	}
	if dropped || (refresh && h.ttl.on && len(kept) > 0) {
		if err := h.raw.Put(ns, kept); err != nil {
			return nil, nil, h.errf("rewrite list: %w", err)
		}
	}
	return vals, kept, nil
}

func (h *rawList[T]) Get() ([]T, error) {
	vals, _, err := h.elements(h.ns, true, h.ttl.onRead)
	return vals, err
}

func (h *rawList[T]) encodeAll(vs []T) ([][]byte, error) {
	now := h.now()
	out := make([][]byte, len(vs))
	for i, v := range vs {
		b, err := wrapEncode(&h.rawBase, h.c, v, now)
		if err != nil {
			return nil, err
		}
		out[i] = slices.Clone(b)
	}
	return out, nil
}

func (h *rawList[T]) Add(v T) error { return h.AddAll([]T{v}) }

func (h *rawList[T]) AddAll(vs []T) error {
	if len(vs) == 0 {
		return nil
	}
	enc, err := h.encodeAll(vs)
	if err != nil {
		return err
	}
	if err := h.raw.Append(h.ns, enc); err != nil {
		return h.errf("append: %w", err)
	}
	return nil
}

func (h *rawList[T]) Update(vs []T) error {
	enc, err := h.encodeAll(vs)
	if err != nil {
		return err
	}
	if err := h.raw.Put(h.ns, enc); err != nil {
		return h.errf("update: %w", err)
	}
	return nil
}

func (h *rawList[T]) Clear() error { return h.raw.Delete(h.ns) }

func (h *rawList[T]) MergeNamespaces(target []byte, sources [][]byte) error {
	var all [][]byte
	for _, src := range sources {
		_, kept, err := h.elements(src, false, false)
		if err != nil {
			return err
		}
		all = append(all, kept...)
		if err := h.raw.Delete(src); err != nil {
			return h.errf("merge: delete source: %w", err)
		}
	}
	if len(all) == 0 {
		return nil
	}
	if err := h.raw.Append(target, all); err != nil {
		return h.errf("merge: append: %w", err)
	}
	return nil
}

// rawMap is the byte-level MapState.
type rawMap[K comparable, V any] struct {
	rawBase
	raw  RawMapState
	kc   codec.Codec[K]
	vc   codec.Codec[V]
	kbuf []byte
}

func (h *rawMap[K, V]) key(k K) ([]byte, error) {
	var err error
	h.kbuf, err = h.kc.Append(h.kbuf[:0], k)
	if err != nil {
		return nil, h.errf("encode map key: %w", err)
	}
	return h.kbuf, nil
}

func (h *rawMap[K, V]) Get(k K) (V, bool, error) {
	var zero V
	kb, err := h.key(k)
	if err != nil {
		return zero, false, err
	}
	b, ok, err := h.raw.Get(h.ns, kb)
	if err != nil || !ok {
		if err != nil {
			err = h.errf("get: %w", err)
		}
		return zero, false, err
	}
	now := h.now()
	vb, _, live, err := h.unwrap(b, now)
	if err != nil {
		return zero, false, err
	}
	v, err := h.vc.Decode(vb)
	if err != nil {
		return zero, false, h.errf("decode map value: %w", err)
	}
	switch {
	case !live:
		if err := h.raw.Delete(h.ns, kb); err != nil {
			return zero, false, h.errf("delete expired: %w", err)
		}
		if !h.ttl.retExp {
			return zero, false, nil
		}
	case h.ttl.on && h.ttl.onRead:
		if err := h.Put(k, v); err != nil {
			return zero, false, err
		}
	}
	return v, true, nil
}

func (h *rawMap[K, V]) Put(k K, v V) error {
	kb, err := h.key(k)
	if err != nil {
		return err
	}
	b, err := wrapEncode(&h.rawBase, h.vc, v, h.now())
	if err != nil {
		return err
	}
	if err := h.raw.Put(h.ns, kb, b); err != nil {
		return h.errf("put: %w", err)
	}
	return nil
}

func (h *rawMap[K, V]) Contains(k K) (bool, error) {
	kb, err := h.key(k)
	if err != nil {
		return false, err
	}
	b, ok, err := h.raw.Get(h.ns, kb)
	if err != nil || !ok {
		if err != nil {
			err = h.errf("get: %w", err)
		}
		return false, err
	}
	_, _, live, err := h.unwrap(b, h.now())
	return live, err
}

func (h *rawMap[K, V]) Remove(k K) error {
	kb, err := h.key(k)
	if err != nil {
		return err
	}
	if err := h.raw.Delete(h.ns, kb); err != nil {
		return h.errf("remove: %w", err)
	}
	return nil
}

func (h *rawMap[K, V]) Clear() error { return h.raw.DeleteAll(h.ns) }

func (h *rawMap[K, V]) IsEmpty() (bool, error) {
	empty := true
	err := h.each(false, func(K, V) bool { empty = false; return false })
	return empty, err
}

func (h *rawMap[K, V]) Iterate(fn func(k K, v V) bool) error { return h.each(true, fn) }

func (h *rawMap[K, V]) IterateKeys(fn func(k K) bool) error {
	return h.each(false, func(k K, _ V) bool { return fn(k) })
}

// each iterates the live entries; expired ones are deleted after the
// iteration, and OnReadAndWrite refreshes the visited ones.
func (h *rawMap[K, V]) each(values bool, fn func(K, V) bool) error {
	now := h.now()
	var expired, refresh [][]byte
	ns := slices.Clone(h.ns)
	err := h.raw.Iterate(ns, func(kb, b []byte) (bool, error) {
		vb, _, live, err := h.unwrap(b, now)
		if err != nil {
			return false, err
		}
		if !live {
			expired = append(expired, slices.Clone(kb))
			if !h.ttl.retExp {
				return true, nil
			}
		} else if h.ttl.on && h.ttl.onRead {
			refresh = append(refresh, slices.Clone(kb), append(AppendTTLTimestamp(nil, now), vb...))
		}
		k, err := h.kc.Decode(kb)
		if err != nil {
			return false, h.errf("decode map key: %w", err)
		}
		var v V
		if values || h.ttl.retExp {
			if v, err = h.vc.Decode(vb); err != nil {
				return false, h.errf("decode map value: %w", err)
			}
		}
		return fn(k, v), nil
	})
	if err != nil {
		return h.errf("iterate: %w", err)
	}
	for _, kb := range expired {
		if err := h.raw.Delete(ns, kb); err != nil {
			return h.errf("delete expired: %w", err)
		}
	}
	for i := 0; i+1 < len(refresh); i += 2 {
		if err := h.raw.Put(ns, refresh[i], refresh[i+1]); err != nil {
			return h.errf("refresh: %w", err)
		}
	}
	return nil
}

// Bind implements Descriptor.
func (d ValueStateDescriptor[T]) Bind(raw any, clock Clock) (any, error) {
	r, ok := raw.(RawValueState)
	if !ok {
		return nil, bindErr(d.Name, raw, "RawValueState")
	}
	return &rawValue[T]{rawBase: rawBase{name: d.Name, ttl: newTTL(d.TTL, clock)}, raw: r, c: orDefault(d.Codec)}, nil
}

// Bind implements Descriptor.
func (d ReducingStateDescriptor[T]) Bind(raw any, clock Clock) (any, error) {
	r, ok := raw.(RawValueState)
	if !ok {
		return nil, bindErr(d.Name, raw, "RawValueState")
	}
	return &rawReducing[T]{rawBase: rawBase{name: d.Name, ttl: newTTL(d.TTL, clock)}, raw: r, c: orDefault(d.Codec), reduce: d.Reduce}, nil
}

// Bind implements Descriptor.
func (d AggregatingStateDescriptor[IN, ACC, OUT]) Bind(raw any, clock Clock) (any, error) {
	r, ok := raw.(RawValueState)
	if !ok {
		return nil, bindErr(d.Name, raw, "RawValueState")
	}
	return &rawAggregating[IN, ACC, OUT]{rawBase: rawBase{name: d.Name, ttl: newTTL(d.TTL, clock)}, raw: r, c: orDefault(d.AccCodec), agg: d.Aggregate}, nil
}

// Bind implements Descriptor.
func (d ListStateDescriptor[T]) Bind(raw any, clock Clock) (any, error) {
	r, ok := raw.(RawListState)
	if !ok {
		return nil, bindErr(d.Name, raw, "RawListState")
	}
	return &rawList[T]{rawBase: rawBase{name: d.Name, ttl: newTTL(d.TTL, clock)}, raw: r, c: orDefault(d.Codec)}, nil
}

// Bind implements Descriptor.
func (d MapStateDescriptor[K, V]) Bind(raw any, clock Clock) (any, error) {
	r, ok := raw.(RawMapState)
	if !ok {
		return nil, bindErr(d.Name, raw, "RawMapState")
	}
	return &rawMap[K, V]{rawBase: rawBase{name: d.Name, ttl: newTTL(d.TTL, clock)}, raw: r, kc: orDefaultKey(d.KeyCodec), vc: orDefault(d.ValueCodec)}, nil
}

func bindErr(name string, raw any, want string) error {
	return fmt.Errorf("state %q: backend store %T is not a %s: %w", name, raw, want, ErrIncompatibleState)
}
