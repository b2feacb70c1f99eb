package table

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// fieldWriter and fieldReader encode the package's own records (join
// messages, versions) as fields: uvarints, varints, bytes and values of
// the tables' codecs, length-prefixed. The first error sticks.
type fieldWriter struct {
	dst []byte
	buf []byte
	err error
}

func (w *fieldWriter) uvarint(v uint64) { w.dst = binary.AppendUvarint(w.dst, v) }
func (w *fieldWriter) varint(v int64)   { w.dst = binary.AppendVarint(w.dst, v) }
func (w *fieldWriter) byte(b byte)      { w.dst = append(w.dst, b) }

func appendField[T any](w *fieldWriter, c codec.Codec[T], v T) {
	if w.err != nil {
		return
	}
	w.buf, w.err = c.Append(w.buf[:0], v)
	w.uvarint(uint64(len(w.buf)))
	w.dst = append(w.dst, w.buf...)
}

type fieldReader struct {
	src  []byte
	what string
	err  error
}

func (r *fieldReader) fail(field string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %s: %w", r.what, field, state.ErrCorruptSnapshot)
	}
}

func (r *fieldReader) uvarint() uint64 {
	v, k := binary.Uvarint(r.src)
	if k <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.src = r.src[k:]
	return v
}

func (r *fieldReader) varint() int64 {
	v, k := binary.Varint(r.src)
	if k <= 0 {
		r.fail("varint")
		return 0
	}
	r.src = r.src[k:]
	return v
}

func (r *fieldReader) byte() byte {
	if len(r.src) == 0 {
		r.fail("byte")
		return 0
	}
	b := r.src[0]
	r.src = r.src[1:]
	return b
}

func readField[T any](r *fieldReader, c codec.Codec[T]) T {
	var zero T
	n := r.uvarint()
	if r.err != nil {
		return zero
	}
	if n > uint64(len(r.src)) {
		r.fail("field length")
		return zero
	}
	v, err := c.Decode(r.src[:n])
	if err != nil {
		r.err = fmt.Errorf("%s: %w", r.what, err)
		return zero
	}
	r.src = r.src[n:]
	return v
}

// done returns the first error, or one for bytes left over.
func (r *fieldReader) done() error {
	if r.err == nil && len(r.src) != 0 {
		r.err = fmt.Errorf("%s: %d trailing bytes: %w", r.what, len(r.src), state.ErrCorruptSnapshot)
	}
	return r.err
}
