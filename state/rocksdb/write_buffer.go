package rocksdb

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"slices"
)

// writeBuffer is the memtable of a value-like state (value, reducing,
// aggregating), kept in Go memory in front of its column family: the
// latest value or deletion of each entry written since the buffer was last
// written to RocksDB. Reads look here first; a checkpoint, or a buffer
// grown past its size, writes the entries to an SST file in key order and
// ingests it (spill.go).
//
// It is an open-addressing hash table over an append-only arena, neither
// holding Go pointers, so the garbage collector never scans them. A slot
// holds a tag of the key's hash (top 24 bits) and the offset of the entry
// in the arena plus one (low 40 bits; 0 is an empty slot). An entry is
//
//	klen uint32 (staleBit: superseded) | vcap uint32 | vlen uint32 (deadBit: a deletion) | key | value (vcap bytes)
//
// A value no longer than vcap is overwritten in place; a longer one gets a
// new entry, the slot moves to it and the old one is marked stale, so
// that sorted can walk the arena in order rather than follow the slots. Nothing is ever removed: a
// deletion is an entry too, as it must shadow the value in RocksDB.
//
// A buffer that tracks its changes (a changelog backend's, changelog.go)
// also lists the entries written since the last appendDirty: the top bit
// of vcap (dirtyBit) marks an entry listed in dirty, so that an entry
// written many times between two barriers is listed once.
type writeBuffer struct {
	arena []byte
	slots []uint64
	mask  uint64
	n     int // entries
	seed  maphash.Seed
	track bool
	dirty []uint64 // offsets of the entries written since appendDirty, if track
}

const (
	entryHeader = 12
	deadBit     = 1 << 31
	staleBit    = 1 << 31
	dirtyBit    = 1 << 31 // in vcap
	offBits     = 40
	offMask     = 1<<offBits - 1
	minSlots    = 1 << 10
)

func newWriteBuffer() *writeBuffer {
	return &writeBuffer{seed: maphash.MakeSeed()}
}

// size is the memory the buffer holds, which Options.WriteBufferSize
// bounds.
func (w *writeBuffer) size() int64 { return int64(len(w.arena) + 8*len(w.slots)) }

func (w *writeBuffer) empty() bool { return w.n == 0 }

// reset empties the buffer, keeping the arena's memory. The table starts
// small again: left at its size it could alone reach the buffer's limit.
func (w *writeBuffer) reset() {
	w.arena = w.arena[:0]
	w.slots, w.mask = nil, 0
	w.n = 0
	w.dirty = w.dirty[:0]
}

func (w *writeBuffer) entryKey(off uint64) []byte {
	klen := binary.LittleEndian.Uint32(w.arena[off:])
	return w.arena[off+entryHeader : off+entryHeader+uint64(klen)]
}

// entry returns the entry at off: its key, its value (nil for a deletion)
// and whether it is a deletion.
func (w *writeBuffer) entry(off uint64) (key, value []byte, dead bool) {
	h := w.arena[off : off+entryHeader]
	klen := uint64(binary.LittleEndian.Uint32(h))
	vlen := binary.LittleEndian.Uint32(h[8:])
	key = w.arena[off+entryHeader : off+entryHeader+klen]
	if vlen&deadBit != 0 {
		return key, nil, true
	}
	start := off + entryHeader + klen
	return key, w.arena[start : start+uint64(vlen)], false
}

// find returns the slot index of key, or of the empty slot where it would
// go, and whether key is there.
func (w *writeBuffer) find(key []byte, h uint64) (uint64, bool) {
	tag := h >> offBits
	i := h & w.mask
	for {
		s := w.slots[i]
		if s == 0 {
			return i, false
		}
		if s>>offBits == tag && bytes.Equal(w.entryKey(s&offMask-1), key) {
			return i, true
		}
		i = (i + 1) & w.mask
	}
}

// get returns the buffered value of key: found reports an entry, dead
// that it is a deletion. The value aliases the buffer: valid until the
// next put or delete.
func (w *writeBuffer) get(key []byte) (value []byte, dead, found bool) {
	if w.n == 0 {
		return nil, false, false
	}
	i, ok := w.find(key, maphash.Bytes(w.seed, key))
	if !ok {
		return nil, false, false
	}
	_, value, dead = w.entry(w.slots[i]&offMask - 1)
	return value, dead, true
}

// put buffers value as key's latest value.
func (w *writeBuffer) put(key, value []byte) { w.set(key, value, false) }

// del buffers a deletion of key.
func (w *writeBuffer) del(key []byte) { w.set(key, nil, true) }

func (w *writeBuffer) set(key, value []byte, dead bool) {
	if (w.n+1)*4 > len(w.slots)*3 {
		w.grow()
	}
	h := maphash.Bytes(w.seed, key)
	i, ok := w.find(key, h)
	vlen := uint32(len(value))
	if dead {
		vlen = deadBit
	}
	if ok {
		off := w.slots[i]&offMask - 1
		e := w.arena[off:]
		klen := uint64(binary.LittleEndian.Uint32(e))
		if vcap := binary.LittleEndian.Uint32(e[4:]); uint32(len(value)) <= vcap&^dirtyBit {
			binary.LittleEndian.PutUint32(e[8:], vlen)
			copy(e[entryHeader+klen:], value)
			if w.track && vcap&dirtyBit == 0 {
				binary.LittleEndian.PutUint32(e[4:], vcap|dirtyBit)
				w.dirty = append(w.dirty, off)
			}
			return
		}
		binary.LittleEndian.PutUint32(e, uint32(klen)|staleBit)
	} else {
		w.n++
	}
	off := uint64(len(w.arena))
	vcap := uint32(len(value))
	if w.track {
		vcap |= dirtyBit
		w.dirty = append(w.dirty, off)
	}
	w.arena = binary.LittleEndian.AppendUint32(w.arena, uint32(len(key)))
	w.arena = binary.LittleEndian.AppendUint32(w.arena, vcap)
	w.arena = binary.LittleEndian.AppendUint32(w.arena, vlen)
	w.arena = append(append(w.arena, key...), value...)
	w.slots[i] = h>>offBits<<offBits | (off + 1)
}

func (w *writeBuffer) grow() {
	old := w.slots
	n := max(2*len(old), minSlots)
	w.slots = make([]uint64, n)
	w.mask = uint64(n - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		h := maphash.Bytes(w.seed, w.entryKey(s&offMask-1))
		i := h & w.mask
		for w.slots[i] != 0 {
			i = (i + 1) & w.mask
		}
		w.slots[i] = s
	}
}

// each calls fn with every entry (not the stale ones), in the order they
// were first written.
func (w *writeBuffer) each(fn func(key, value []byte, dead bool)) {
	for off := uint64(0); off < uint64(len(w.arena)); {
		h := w.arena[off : off+entryHeader]
		klen := binary.LittleEndian.Uint32(h)
		next := off + entryHeader + uint64(klen&^staleBit) + uint64(binary.LittleEndian.Uint32(h[4:])&^dirtyBit)
		if klen&staleBit == 0 {
			fn(w.entry(off))
		}
		off = next
	}
}

// appendDirty appends to out, in a changelog segment's encoding
// (changelog.go), a section of state name holding the entries written
// since the last call (none if there are none), and unmarks them: the
// next call holds only what is written after this one. A tracking
// buffer's only.
func (w *writeBuffer) appendDirty(out []byte, name string) []byte {
	n := 0
	for _, off := range w.dirty {
		if binary.LittleEndian.Uint32(w.arena[off:])&staleBit == 0 {
			n++
		}
	}
	if n > 0 {
		out = binary.AppendUvarint(out, uint64(len(name)))
		out = append(out, name...)
		out = binary.AppendUvarint(out, uint64(n))
		for _, off := range w.dirty {
			h := w.arena[off:]
			if binary.LittleEndian.Uint32(h)&staleBit != 0 {
				continue // superseded: its key's newer entry is listed too
			}
			binary.LittleEndian.PutUint32(h[4:], binary.LittleEndian.Uint32(h[4:])&^dirtyBit)
			k, v, dead := w.entry(off)
			out = appendSegmentEntry(out, k, v, dead)
		}
	}
	w.dirty = w.dirty[:0]
	return out
}

// sortKey is an entry to sort: the first 16 bytes of its key (big
// endian, zero-padded), which settle most comparisons without reading the
// arena (a key group, a length and an 8-byte key take 11), and its offset.
type sortKey struct {
	p0, p1 uint64
	off    uint64
}

// sorted returns the offsets of the entries in key order. It reads the
// arena front to back (the slots point into it at random), skipping stale
// entries.
func (w *writeBuffer) sorted() []uint64 {
	ks := make([]sortKey, 0, w.n)
	var p [16]byte
	for off := uint64(0); off < uint64(len(w.arena)); {
		h := w.arena[off : off+entryHeader]
		klen := binary.LittleEndian.Uint32(h)
		next := off + entryHeader + uint64(klen&^staleBit) + uint64(binary.LittleEndian.Uint32(h[4:])&^dirtyBit)
		if klen&staleBit == 0 {
			clear(p[:])
			copy(p[:], w.arena[off+entryHeader:off+entryHeader+uint64(klen)])
			ks = append(ks, sortKey{binary.BigEndian.Uint64(p[:8]), binary.BigEndian.Uint64(p[8:]), off})
		}
		off = next
	}
	slices.SortFunc(ks, func(a, b sortKey) int {
		if c := cmp.Compare(a.p0, b.p0); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p1, b.p1); c != 0 {
			return c
		}
		return bytes.Compare(w.entryKey(a.off), w.entryKey(b.off))
	})
	offs := make([]uint64, len(ks))
	for i, k := range ks {
		offs[i] = k.off
	}
	return offs
}
