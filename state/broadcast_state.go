package state

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/sluicehq/sluice/codec"
)

// ReadOnlyBroadcastState is the view of a broadcast state that the
// non-broadcast side of a broadcast process function gets, as Flink's
// ReadOnlyBroadcastState.
type ReadOnlyBroadcastState[K comparable, V any] interface {
	// Get returns the value of k and whether there is one.
	Get(k K) (V, bool, error)
	Contains(k K) (bool, error)
	// Iterate calls fn for each entry, in no defined order, until fn
	// returns false.
	Iterate(fn func(k K, v V) bool) error
	// Len is the number of entries.
	Len() int
}

// BroadcastState is a map that every subtask of an operator holds a copy
// of, written from the broadcast input only, so that the copies stay
// equal (as Flink's BroadcastState). Every subtask checkpoints its copy;
// a restore with another parallelism gives new subtask i the copy of old
// subtask i mod the old parallelism.
//
// A value handed to Put must not be changed afterwards (a snapshot may
// still be writing it): put a new value instead.
type BroadcastState[K comparable, V any] interface {
	ReadOnlyBroadcastState[K, V]
	Put(k K, v V) error
	Remove(k K) error
	Clear() error
}

// GetBroadcastState returns the broadcast state d describes (d.TTL must
// be off) from the operator state backend b, restored if b was.
func GetBroadcastState[K comparable, V any](b *OperatorStateBackend, d MapStateDescriptor[K, V]) (BroadcastState[K, V], error) {
	if err := checkName(d.Name); err != nil {
		return nil, err
	}
	if d.TTL.Enabled() {
		return nil, fmt.Errorf("state %q: broadcast state has no TTL: %w", d.Name, ErrInvalidDescriptor)
	}
	kc, vc := orDefault(d.KeyCodec), orDefault(d.ValueCodec)
	// The operator snapshot records one codec per state: a broadcast
	// state's names both, key first.
	m := StateMeta{Name: d.Name, Kind: KindBroadcast, ValueCodec: CodecID(kc) + " -> " + CodecID(vc)}
	if s, ok := b.states[m.Name]; ok {
		if err := s.meta().Compatible(m); err != nil {
			return nil, err
		}
		bs, ok := s.(*broadcastMap[K, V])
		if !ok {
			return nil, fmt.Errorf("state %q: registered with other types than %T -> %T: %w", m.Name, *new(K), *new(V), ErrIncompatibleState)
		}
		return bs, nil
	}
	bs := &broadcastMap[K, V]{m: m, kc: kc, vc: vc, entries: map[K]V{}}
	if p := b.pending[m.Name]; p != nil {
		if err := p.meta.Compatible(m); err != nil {
			return nil, fmt.Errorf("restored %w", err)
		}
		for i, e := range p.elems {
			k, v, err := bs.decode(e)
			if err != nil {
				return nil, fmt.Errorf("state %q: restore entry %d: %w", m.Name, i, err)
			}
			bs.entries[k] = v
		}
		delete(b.pending, m.Name)
		b.pendOrd = slices.DeleteFunc(b.pendOrd, func(n string) bool { return n == m.Name })
	}
	b.states[m.Name] = bs
	b.order = append(b.order, bs)
	return bs, nil
}

// broadcastMap is the broadcast state: a map, each entry an element of
// the operator snapshot (key and value, length-prefixed).
type broadcastMap[K comparable, V any] struct {
	m       StateMeta
	kc      codec.Codec[K]
	vc      codec.Codec[V]
	entries map[K]V
}

func (s *broadcastMap[K, V]) meta() StateMeta { return s.m }

func (s *broadcastMap[K, V]) Get(k K) (V, bool, error) {
	v, ok := s.entries[k]
	return v, ok, nil
}

func (s *broadcastMap[K, V]) Contains(k K) (bool, error) {
	_, ok := s.entries[k]
	return ok, nil
}

func (s *broadcastMap[K, V]) Iterate(fn func(k K, v V) bool) error {
	for k, v := range s.entries {
		if !fn(k, v) {
			break
		}
	}
	return nil
}

func (s *broadcastMap[K, V]) Len() int           { return len(s.entries) }
func (s *broadcastMap[K, V]) Put(k K, v V) error { s.entries[k] = v; return nil }
func (s *broadcastMap[K, V]) Remove(k K) error   { delete(s.entries, k); return nil }
func (s *broadcastMap[K, V]) Clear() error       { clear(s.entries); return nil }
func (s *broadcastMap[K, V]) decode(e []byte) (K, V, error) {
	var k K
	var v V
	n, w := binary.Uvarint(e)
	if w <= 0 || n > uint64(len(e)-w) {
		return k, v, fmt.Errorf("broadcast entry key length: %w", ErrCorruptSnapshot)
	}
	k, err := s.kc.Decode(e[w : w+int(n)])
	if err != nil {
		return k, v, fmt.Errorf("broadcast entry key: %w", err)
	}
	if v, err = s.vc.Decode(e[w+int(n):]); err != nil {
		return k, v, fmt.Errorf("broadcast entry value: %w", err)
	}
	return k, v, nil
}

// capture copies the map (the synchronous part; broadcast states are
// small) and encodes the copy in the asynchronous part.
func (s *broadcastMap[K, V]) capture() opCapture {
	entries := maps.Clone(s.entries)
	return func(dst []byte) ([]byte, error) {
		dst = binary.AppendUvarint(dst, uint64(len(entries)))
		var kb, e []byte
		for k, v := range entries {
			var err error
			if kb, err = s.kc.Append(kb[:0], k); err != nil {
				return dst, fmt.Errorf("state %q: encode key %v: %w", s.m.Name, k, err)
			}
			e = appendBytes(e[:0], kb)
			if e, err = s.vc.Append(e, v); err != nil {
				return dst, fmt.Errorf("state %q: encode value of key %v: %w", s.m.Name, k, err)
			}
			dst = appendBytes(dst, e)
		}
		return dst, nil
	}
}
