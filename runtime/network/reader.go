package network

import (
	"encoding/binary"
	"fmt"
)

// RecordReader turns the buffers of one input channel back into records.
// Each record is framed as a uvarint length followed by its bytes and may
// span buffers; the reader keeps the part of a spanning record it has seen
// until the rest arrives. It recycles each buffer once fully consumed. A
// RecordReader is used by one goroutine.
type RecordReader struct {
	buf *Buffer // the buffer being read, nil for raw bytes or nothing
	src []byte  // the bytes being read
	pos int     // read position in src

	// A record that did not fit in the rest of a buffer: span holds its
	// framed bytes seen so far (length prefix included). spanHdr is the
	// length of the prefix and spanTotal the framed length, both 0 while
	// the prefix itself is incomplete. spanDone marks that span was
	// returned as a record and is reset on the next call.
	span      []byte
	spanHdr   int
	spanTotal int
	spanDone  bool

	err error
}

// NewRecordReader returns an empty reader.
func NewRecordReader() *RecordReader { return &RecordReader{} }

// Feed gives the reader the next buffer of its channel. The previous one
// must have been used up (Next returned ok=false); feeding earlier panics,
// as it would lose records.
func (r *RecordReader) Feed(b *Buffer) {
	r.setSource(b, b.Bytes())
}

// FeedRaw gives the reader framed bytes restored from channel state, in
// place of a buffer. data is read in place: it must not change until Next
// has used it up.
func (r *RecordReader) FeedRaw(data []byte) {
	r.setSource(nil, data)
}

func (r *RecordReader) setSource(b *Buffer, data []byte) {
	if r.pos < len(r.src) {
		panic(fmt.Sprintf("network: RecordReader fed while %d bytes of the previous buffer are unread", len(r.src)-r.pos))
	}
	r.releaseSource()
	r.buf, r.src, r.pos = b, data, 0
}

// releaseSource recycles the current buffer, if any.
func (r *RecordReader) releaseSource() {
	if r.buf != nil {
		r.buf.Recycle()
	}
	r.buf, r.src, r.pos = nil, nil, 0
}

// Next returns the next whole record. rec is valid until the next call to
// any method of the reader. ok=false means the current buffer is used up
// (it has been recycled) and the next must be fed, or that the input is
// corrupt (then Err says so and the reader stays stopped).
func (r *RecordReader) Next() (rec []byte, ok bool) {
	if r.err != nil {
		return nil, false
	}
	if r.spanDone {
		r.span, r.spanHdr, r.spanTotal, r.spanDone = r.span[:0], 0, 0, false
	}
	if len(r.span) > 0 {
		return r.continueSpan()
	}
	rest := r.src[r.pos:]
	if len(rest) == 0 {
		r.releaseSource()
		return nil, false
	}
	l, n := binary.Uvarint(rest)
	if n > 0 && l <= MaxRecordSize && uint64(len(rest)-n) >= l {
		end := n + int(l)
		r.pos += end
		return rest[n:end:end], true
	}
	if n < 0 || l > MaxRecordSize {
		r.fail(fmt.Errorf("record length prefix at offset %d: %w", r.pos, ErrCorruptFrame))
		return nil, false
	}
	// The record (or its length prefix) continues in the next buffer.
	r.span = append(r.span[:0], rest...)
	if n > 0 {
		r.spanHdr, r.spanTotal = n, n+int(l)
	}
	r.releaseSource()
	return nil, false
}

// continueSpan adds bytes of the current source to the spanning record.
func (r *RecordReader) continueSpan() ([]byte, bool) {
	for r.spanTotal == 0 { // the length prefix is still incomplete
		if r.pos == len(r.src) {
			r.releaseSource()
			return nil, false
		}
		r.span = append(r.span, r.src[r.pos])
		r.pos++
		l, n := binary.Uvarint(r.span)
		switch {
		case n < 0 || l > MaxRecordSize:
			r.fail(fmt.Errorf("spanning record length prefix: %w", ErrCorruptFrame))
			return nil, false
		case n > 0:
			r.spanHdr, r.spanTotal = n, n+int(l)
		}
	}
	take := min(r.spanTotal-len(r.span), len(r.src)-r.pos)
	r.span = append(r.span, r.src[r.pos:r.pos+take]...)
	r.pos += take
	if len(r.span) < r.spanTotal {
		r.releaseSource()
		return nil, false
	}
	r.spanDone = true
	return r.span[r.spanHdr:r.spanTotal:r.spanTotal], true
}

func (r *RecordReader) fail(err error) {
	r.err = err
	r.releaseSource()
	r.span, r.spanHdr, r.spanTotal, r.spanDone = r.span[:0], 0, 0, false
}

// Err returns the reason the reader stopped, wrapping ErrCorruptFrame, or
// nil.
func (r *RecordReader) Err() error { return r.err }

// Pending returns a copy of the framed bytes not yet returned as whole
// records: the start of a spanning record followed by the unread rest of
// the current buffer. Fed to a fresh reader with FeedRaw, followed by the
// channel's later buffers, they give the same records this reader would
// have. This is the reader's part of an input channel's state.
func (r *RecordReader) Pending() []byte {
	var out []byte
	if !r.spanDone && len(r.span) > 0 {
		out = append(out, r.span...)
	}
	if r.pos < len(r.src) {
		out = append(out, r.src[r.pos:]...)
	}
	return out
}

// Buffered reports whether the reader holds bytes not yet returned as
// records (a spanning record or an unread buffer rest).
func (r *RecordReader) Buffered() bool {
	return (!r.spanDone && len(r.span) > 0) || r.pos < len(r.src)
}

// Reset drops everything the reader holds (recycling its buffer) and
// clears its error, making it like new.
func (r *RecordReader) Reset() {
	r.releaseSource()
	r.span, r.spanHdr, r.spanTotal, r.spanDone = r.span[:0], 0, 0, false
	r.err = nil
}
