package state

import (
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// ktab is the hash table of one layer of one key group of one heap state:
// open addressing with linear probing over slots that hold the composite
// key inline and the value in place, so reading and updating an entry
// touches one cache line; long composites go to a Go map. Values may be
// tombstones (in layers above the bottom one).
type ktab[V any] struct {
	slots []kslot[V]
	mask  uint64
	used  int
	seed1 uint64
	seed2 uint64
	big   map[string]*bigEntry[V]
}

type kslot[V any] struct {
	lo, hi uint64 // hi == 0: empty; hi&deadBit: tombstone
	v      V
}

type bigEntry[V any] struct {
	v    V
	dead bool
}

func (t *ktab[V]) hash(lo, hi uint64) uint64 {
	h, l := bits.Mul64(lo^t.seed1, hi^t.seed2)
	return h ^ l
}

// find returns the entry of k: a pointer to its value, whether it is a
// tombstone, and whether it is there at all.
func (t *ktab[V]) find(k *ckey) (v *V, dead, ok bool) {
	if k.hi == 0 {
		e := t.big[string(k.long)]
		if e == nil {
			return nil, false, false
		}
		return &e.v, e.dead, true
	}
	return t.findInline(k.lo, k.hi)
}

// findInline is find for an inline key lo, hi.
func (t *ktab[V]) findInline(lo, hi uint64) (v *V, dead, ok bool) {
	if t.slots == nil {
		return nil, false, false
	}
	for i := t.hash(lo, hi) & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.lo == lo && s.hi&^deadBit == hi {
			return &s.v, s.hi&deadBit != 0, true
		}
		if s.hi == 0 {
			return nil, false, false
		}
	}
}

// upsert returns the value of k, inserting a zero entry if it is absent
// and reviving (zeroed) a tombstone; live reports an entry that was live.
func (t *ktab[V]) upsert(k *ckey) (v *V, live bool) {
	if k.hi == 0 {
		e := t.bigEntry(k)
		if e.dead {
			*e = bigEntry[V]{}
			return &e.v, false
		}
		return &e.v, true
	}
	s, found := t.claim(k)
	if !found {
		return &s.v, false
	}
	if s.hi&deadBit != 0 {
		var zero V
		s.hi, s.v = k.hi, zero
		return &s.v, false
	}
	return &s.v, true
}

// bigEntry returns k's long entry, inserting a zero one (reported dead)
// if there is none.
func (t *ktab[V]) bigEntry(k *ckey) *bigEntry[V] {
	e := t.big[string(k.long)]
	if e == nil {
		if t.big == nil {
			t.big = make(map[string]*bigEntry[V])
		}
		e = &bigEntry[V]{dead: true}
		t.big[string(k.long)] = e
	}
	return e
}

// claim returns the slot of inline key k, claiming an empty one (zero
// value, live) if k is absent; found reports that k was there.
func (t *ktab[V]) claim(k *ckey) (s *kslot[V], found bool) {
	if (t.used+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	i := t.hash(k.lo, k.hi) & t.mask
	for {
		s := &t.slots[i]
		if s.hi == 0 {
			s.lo, s.hi = k.lo, k.hi
			t.used++
			return s, false
		}
		if s.lo == k.lo && s.hi&^deadBit == k.hi {
			return s, true
		}
		i = (i + 1) & t.mask
	}
}

// setDead makes k a tombstone.
func (t *ktab[V]) setDead(k *ckey) {
	if k.hi == 0 {
		e := t.bigEntry(k)
		*e = bigEntry[V]{dead: true}
		return
	}
	s, _ := t.claim(k)
	var zero V
	s.hi, s.v = k.hi|deadBit, zero
}

// remove deletes k's entry (live or tombstone); it reports whether there
// was one. Linear probing deletes by shifting later entries back.
func (t *ktab[V]) remove(k *ckey) bool {
	if k.hi == 0 {
		if _, ok := t.big[string(k.long)]; !ok {
			return false
		}
		delete(t.big, string(k.long))
		return true
	}
	if t.slots == nil {
		return false
	}
	i := t.hash(k.lo, k.hi) & t.mask
	for {
		s := &t.slots[i]
		if s.hi == 0 {
			return false
		}
		if s.lo == k.lo && s.hi&^deadBit == k.hi {
			break
		}
		i = (i + 1) & t.mask
	}
	t.used--
	for {
		t.slots[i] = kslot[V]{}
		j := i
		for {
			j = (j + 1) & t.mask
			s := &t.slots[j]
			if s.hi == 0 {
				return true
			}
			home := t.hash(s.lo, s.hi&^deadBit) & t.mask
			// s may stay at j if its home lies cyclically in (i, j].
			if (i < j && i < home && home <= j) || (i > j && (home > i || home <= j)) {
				continue
			}
			t.slots[i] = *s
			i = j
			break
		}
	}
}

// hugeTableBytes is the size from which a table asks for huge pages: an
// eighth of one, so that the tables of neighbouring key groups share them.
const hugeTableBytes = 256 << 10

func (t *ktab[V]) grow() {
	old := t.slots
	n := 16
	if len(old) > 0 {
		n = len(old) * 2
	}
	if t.seed1 == 0 {
		t.seed1, t.seed2 = rand.Uint64()|1, rand.Uint64()|1
	}
	t.slots = make([]kslot[V], n)
	t.mask = uint64(n - 1)
	for i := range old {
		s := &old[i]
		if s.hi == 0 {
			continue
		}
		j := t.hash(s.lo, s.hi&^deadBit) & t.mask
		for t.slots[j].hi != 0 {
			j = (j + 1) & t.mask
		}
		t.slots[j] = *s
	}
	if sz := uintptr(n) * unsafe.Sizeof(t.slots[0]); sz >= hugeTableBytes {
		preferHugePages(unsafe.Pointer(&t.slots[0]), sz)
	}
}

// each calls fn with every entry (composite bytes valid during the call
// only) until fn returns false.
func (t *ktab[V]) each(fn func(k *ckey, comp []byte, v *V, dead bool) bool) bool {
	var buf [16]byte
	var k ckey // one for the whole loop: fn's arguments escape
	for i := range t.slots {
		s := &t.slots[i]
		if s.hi == 0 {
			continue
		}
		k = ckey{lo: s.lo, hi: s.hi &^ deadBit}
		if !fn(&k, inlineBytes(s.lo, s.hi, &buf), &s.v, s.hi&deadBit != 0) {
			return false
		}
	}
	for c, e := range t.big {
		k = ckey{long: []byte(c)}
		if !fn(&k, k.long, &e.v, e.dead) {
			return false
		}
	}
	return true
}

func (t *ktab[V]) len() int { return t.used + len(t.big) }

// layer is one copy-on-write layer of a key group's table. The bottom
// layer holds everything; a snapshot pins the layers it captured (refs >
// 0), after which they are read-only and writes go to a new layer on top.
// Once no snapshot pins them any more, the task goroutine merges the upper
// layers back down, in time proportional to what was written meanwhile.
//
// Every snapshot pins the whole chain below the top it captures, so a
// layer is pinned at least as often as the one above it.
type layer[V any] struct {
	tab   ktab[V]
	below *layer[V]
	refs  atomic.Int32
}

func (l *layer[V]) pin() {
	for ; l != nil; l = l.below {
		l.refs.Add(1)
	}
}

func (l *layer[V]) unpin() {
	for ; l != nil; l = l.below {
		l.refs.Add(-1)
	}
}

// lookup finds k in the chain from l down: its value (nil if absent or
// deleted) and the layer holding it.
func lookup[V any](l *layer[V], k *ckey) (*V, *layer[V]) {
	for ; l != nil; l = l.below {
		v, dead, ok := l.tab.find(k)
		if ok {
			if dead {
				return nil, nil
			}
			return v, l
		}
	}
	return nil, nil
}

// visible calls fn with every entry visible from top (the newest version
// of each key, tombstones left out) until fn returns false.
func visible[V any](top *layer[V], fn func(comp []byte, v *V) bool) {
	for l := top; l != nil; l = l.below {
		cont := l.tab.each(func(k *ckey, comp []byte, v *V, dead bool) bool {
			if dead {
				return true
			}
			for u := top; u != l; u = u.below {
				if _, _, ok := u.tab.find(k); ok {
					return true // shadowed by a newer version
				}
			}
			return fn(comp, v)
		})
		if !cont {
			return
		}
	}
}
