package rocksdb

import (
	"encoding/binary"
	"errors"
)

// The key of an entry in a state's column family:
//
//	key group (2 bytes, big endian) | uvarint len(key) | key | uvarint len(ns) | ns | suffix
//
// The suffix is empty for value-like states, the 8-byte big-endian sequence
// number of an append for list states, and the map key for map states.
// Length prefixes make "key group | key | ns" prefix-free: every entry that
// starts with the prefix of (key, ns) belongs to (key, ns). The key group
// first makes a key-group range one contiguous byte range:
// [kgBound(start), kgBound(end+1)).
//
// A list is stored as one entry per append (Add, AddAll, Update), whose
// value is its elements, each as uvarint length + bytes; the sequence
// numbers order the appends. Appending writes one entry and reads nothing.

const kgLen = 2

// appendKeyPrefix appends key group and key: the part of an entry's key
// that SetCurrentKey fixes.
func appendKeyPrefix(dst []byte, kg int, key []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(kg))
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// appendNamespace appends the namespace part.
func appendNamespace(dst, ns []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	return append(dst, ns...)
}

// kgBound is the first possible key of key group kg (and the exclusive end
// of kg-1).
func kgBound(kg int) []byte {
	return binary.BigEndian.AppendUint16(nil, uint16(kg))
}

// prefixEnd returns the smallest key greater than every key that starts
// with p, or nil if there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

var errBadKey = errors.New("malformed state entry key")

// entryKey is a parsed entry key; its slices alias the parsed bytes.
type entryKey struct {
	kg     int
	key    []byte
	ns     []byte
	prefix []byte // key group | key | ns: everything but the suffix
	suffix []byte
}

func parseEntryKey(b []byte) (entryKey, error) {
	var e entryKey
	if len(b) < kgLen {
		return e, errBadKey
	}
	e.kg = int(binary.BigEndian.Uint16(b))
	rest := b[kgLen:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)-w) {
		return e, errBadKey
	}
	e.key = rest[w : w+int(n) : w+int(n)]
	rest = rest[w+int(n):]
	n, w = binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)-w) {
		return e, errBadKey
	}
	e.ns = rest[w : w+int(n) : w+int(n)]
	e.suffix = rest[w+int(n):]
	e.prefix = b[:len(b)-len(e.suffix)]
	return e, nil
}

// appendListElements appends elements as a list entry's value.
func appendListElements(dst []byte, elems [][]byte) []byte {
	for _, e := range elems {
		dst = binary.AppendUvarint(dst, uint64(len(e)))
		dst = append(dst, e...)
	}
	return dst
}

// eachListElement calls fn with each element of a list entry's value.
func eachListElement(v []byte, fn func(elem []byte) error) error {
	for len(v) > 0 {
		n, w := binary.Uvarint(v)
		if w <= 0 || n > uint64(len(v)-w) {
			return errors.New("malformed list entry")
		}
		if err := fn(v[w : w+int(n) : w+int(n)]); err != nil {
			return err
		}
		v = v[w+int(n):]
	}
	return nil
}

// appendSeq appends a list entry's sequence number.
func appendSeq(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, seq)
}
