package state

import (
	"encoding/binary"
	"fmt"
)

// The heap backend stores an entry under the composite of its key and
// namespace: key ++ ns ++ len(ns) as a uvarint written backwards, so it can
// be split from the end. Composites of up to inlineMax bytes (an int64 key
// in the default namespace takes 9) live inline in two words of a hash
// table slot; longer ones as bytes.

const (
	inlineMax = 15
	// deadBit marks a tombstone in the hi word of an inline key.
	deadBit = uint64(1) << 63
)

// ckey is a composite key: inline when hi != 0 (byte 15 of the 16 bytes
// lo|hi holds the composite's length), else long.
type ckey struct {
	lo, hi uint64
	long   []byte
}

// set makes k the composite of key and ns; scratch is reused for long
// composites.
func (k *ckey) set(key, ns []byte, scratch *[]byte) {
	n := len(key) + len(ns) + 1
	if len(ns) == 0 && n <= inlineMax {
		// The common case, without a copy through a buffer: the key, a
		// zero (the namespace's length), zeros, the length in byte 15.
		k.long = nil
		if len(key) <= 8 {
			k.lo, k.hi = loadShort(key), uint64(n)<<56
			return
		}
		k.lo, k.hi = binary.LittleEndian.Uint64(key), loadShort(key[8:])|uint64(n)<<56
		return
	}
	if n <= inlineMax && len(ns) < 0x80 {
		var a [16]byte
		copy(a[:], key)
		copy(a[len(key):], ns)
		a[len(key)+len(ns)] = byte(len(ns))
		a[15] = byte(n)
		k.lo = binary.LittleEndian.Uint64(a[:8])
		k.hi = binary.LittleEndian.Uint64(a[8:])
		k.long = nil
		return
	}
	*scratch = appendComposite((*scratch)[:0], key, ns)
	k.lo, k.hi, k.long = 0, 0, *scratch
}

// loadShort reads up to 8 bytes as a little-endian word.
func loadShort(b []byte) uint64 {
	if len(b) == 8 {
		return binary.LittleEndian.Uint64(b)
	}
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// inlineBytes returns the composite stored inline in lo, hi (tombstone bit
// ignored), using buf.
func inlineBytes(lo, hi uint64, buf *[16]byte) []byte {
	binary.LittleEndian.PutUint64(buf[:8], lo)
	binary.LittleEndian.PutUint64(buf[8:], hi&^deadBit)
	return buf[:buf[15]]
}

func appendComposite(dst, key, ns []byte) []byte {
	dst = append(dst, key...)
	dst = append(dst, ns...)
	var tmp [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(tmp[:], uint64(len(ns)))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, tmp[i])
	}
	return dst
}

// splitComposite splits a composite into key and namespace.
func splitComposite(c []byte) (key, ns []byte, err error) {
	var v uint64
	var shift uint
	i := len(c) - 1
	for ; i >= 0; i-- {
		b := c[i]
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			break
		}
		shift += 7
		if shift > 63 {
			i = -1
			break
		}
	}
	if i < 0 || v > uint64(i) {
		return nil, nil, fmt.Errorf("internal: malformed composite key %x", c)
	}
	body := c[:i]
	cut := len(body) - int(v)
	return body[:cut], body[cut:], nil
}
