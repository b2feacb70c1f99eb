// Package binread reads the varint-framed binary formats Sluice writes
// for its checkpoints (operator state streams, Kafka committables):
// uvarints, varints, bytes and length-prefixed byte strings, with the
// first error sticking so that a decoder reads a whole record and checks
// once.
package binread

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrTruncated is matched (errors.Is) by every error a Reader records.
var ErrTruncated = errors.New("truncated")

// Reader reads from a byte slice. The zero value reads nothing.
type Reader struct {
	b   []byte
	err error
}

// New returns a reader of b.
func New(b []byte) Reader { return Reader{b: b} }

// Err returns the first error, nil if none.
func (r *Reader) Err() error { return r.err }

// Len returns the number of bytes left.
func (r *Reader) Len() int { return len(r.b) }

// Fail records that what could not be read (unless an error is recorded
// already) and drops the rest, so every later read fails too.
func (r *Reader) Fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w %s", ErrTruncated, what)
	}
	r.b = nil
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.b) == 0 {
		r.Fail("byte")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a signed (zig-zag) varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Bytes reads a uvarint length and that many bytes. The result shares the
// reader's slice (its capacity ends with it).
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.Fail("bytes")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// String reads what Bytes reads, as a string.
func (r *Reader) String() string {
	n := r.Uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.Fail("string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
