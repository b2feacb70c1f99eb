package table

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/binread"
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

// fieldReader reads what a fieldWriter wrote: binread's reader for the
// framing, with the record's name and state.ErrCorruptSnapshot on every
// error so that a bad record names itself.
type fieldReader struct {
	in   binread.Reader
	what string
	err  error // a codec's error, which binread does not record
}

func newFieldReader(src []byte, what string) fieldReader {
	return fieldReader{in: binread.New(src), what: what}
}

func (r *fieldReader) fail(field string) { r.in.Fail(field) }
func (r *fieldReader) uvarint() uint64   { return r.in.Uvarint() }
func (r *fieldReader) varint() int64     { return r.in.Varint() }
func (r *fieldReader) byte() byte        { return r.in.Byte() }
func (r *fieldReader) ok() bool          { return r.err == nil && r.in.Err() == nil }

func readField[T any](r *fieldReader, c codec.Codec[T]) T {
	var zero T
	b := r.in.Bytes()
	if !r.ok() {
		return zero
	}
	v, err := c.Decode(b)
	if err != nil {
		r.err = fmt.Errorf("%s: %w", r.what, err)
		r.in.Fail("field") // stop reading: the rest is not trusted
		return zero
	}
	return v
}

// done returns the first error, or one for bytes left over.
func (r *fieldReader) done() error {
	switch {
	case r.err != nil:
		return r.err
	case r.in.Err() != nil:
		return fmt.Errorf("%s: %w: %w", r.what, r.in.Err(), state.ErrCorruptSnapshot)
	case r.in.Len() != 0:
		return fmt.Errorf("%s: %d trailing bytes: %w", r.what, r.in.Len(), state.ErrCorruptSnapshot)
	}
	return nil
}
