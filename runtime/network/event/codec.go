package event

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
)

// Version is the version of the wire format that Append writes; Decode
// accepts it and refuses any other.
const Version = 2

// The wire format of one event:
//
//	version  1 byte   (Version)
//	kind     1 byte   (Kind)
//	fields   by kind:
//	  record buffer         uvarint length, then the bytes
//	  watermark             timestamp: 8 bytes, big-endian two's complement
//	  watermark status      1 byte: 0 active, 1 idle
//	  barrier, announcement uvarint checkpoint id, 8-byte big-endian
//	                        trigger timestamp (unix ms), 1 byte
//	                        checkpoint.Kind, 1 byte checkpoint.Alignment,
//	                        varint (zig-zag) aligned timeout in nanoseconds,
//	                        uvarint rest of the trigger time in nanoseconds
//	                        (below 1e6)
//	  cancel marker         uvarint checkpoint id
//	  end of data,
//	  end of partition      nothing
//
// Varints must be minimal, so that every event has exactly one encoding.
// Ids are written as the uint64 of their bits, so any int64 round-trips.

// Sentinel errors, wrapped in a *DecodeError (or returned wrapped by
// Append).
var (
	// ErrTruncated: the input ends before the event does.
	ErrTruncated = errors.New("truncated")
	// ErrUnknownVersion: the version byte is not Version.
	ErrUnknownVersion = errors.New("unknown wire format version")
	// ErrUnknownKind: the kind byte names no event.
	ErrUnknownKind = errors.New("unknown event kind")
	// ErrInvalidField: a field holds a value the event cannot have (a
	// non-minimal varint, an unknown enum value, an impossible length).
	ErrInvalidField = errors.New("invalid field")
)

// DecodeError is the error Decode returns: which event it was reading (0
// when the kind byte itself was missing or unknown), at which byte offset of
// the input the problem is, and what it is (one of the sentinels above,
// possibly with detail).
type DecodeError struct {
	Kind   Kind
	Offset int
	Err    error
}

func (e *DecodeError) Error() string {
	if e.Kind == 0 {
		return fmt.Sprintf("event: decode at offset %d: %v", e.Offset, e.Err)
	}
	return fmt.Sprintf("event: decode %s at offset %d: %v", e.Kind, e.Offset, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Append appends the encoding of ev to dst. It fails only for a nil event or
// a barrier whose options hold values the checkpoint package does not
// define.
func Append(dst []byte, ev Event) ([]byte, error) {
	if ev == nil {
		return dst, errors.New("event: encode: nil event")
	}
	dst = append(dst, Version, byte(ev.Kind()))
	switch e := ev.(type) {
	case RecordBuffer:
		dst = binary.AppendUvarint(dst, uint64(len(e.Data)))
		dst = append(dst, e.Data...)
	case Watermark:
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
	case WatermarkStatus:
		dst = append(dst, boolByte(e.Idle))
	case Barrier:
		return appendBarrier(dst, KindBarrier, e.Barrier)
	case BarrierAnnouncement:
		return appendBarrier(dst, KindBarrierAnnouncement, e.Barrier)
	case CancelCheckpointMarker:
		dst = binary.AppendUvarint(dst, uint64(e.ID))
	case EndOfData, EndOfPartition:
	}
	return dst, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func appendBarrier(dst []byte, k Kind, b checkpoint.Barrier) ([]byte, error) {
	if err := checkOptions(b.Options); err != nil {
		return dst, fmt.Errorf("event: encode %s %d: %w", k, b.ID, err)
	}
	dst = binary.AppendUvarint(dst, uint64(b.ID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.Timestamp))
	dst = append(dst, byte(b.Options.Kind), byte(b.Options.Alignment))
	dst = binary.AppendVarint(dst, int64(b.Options.AlignedTimeout))
	dst = binary.AppendUvarint(dst, uint64(b.SubMillis))
	return dst, nil
}

// checkOptions refuses enum values the checkpoint package does not define.
func checkOptions(o checkpoint.Options) error {
	switch o.Kind {
	case checkpoint.KindCheckpoint, checkpoint.KindSavepoint, checkpoint.KindFullCheckpoint:
	default:
		return fmt.Errorf("checkpoint kind %d: %w", uint8(o.Kind), ErrInvalidField)
	}
	switch o.Alignment {
	case checkpoint.Aligned, checkpoint.Unaligned, checkpoint.AlignedWithTimeout:
	default:
		return fmt.Errorf("alignment %d: %w", uint8(o.Alignment), ErrInvalidField)
	}
	return nil
}

// Decode reads one event from the start of src and returns it with the
// number of bytes it took; src may hold more after it. A RecordBuffer's Data
// points into src (nil when empty). Errors are *DecodeError.
func Decode(src []byte) (Event, int, error) {
	d := decoder{src: src}
	if len(src) < 2 {
		d.pos = len(src)
		return nil, 0, d.fail(fmt.Errorf("%w: %d of the 2 header bytes", ErrTruncated, len(src)))
	}
	if src[0] != Version {
		return nil, 0, d.fail(fmt.Errorf("%w %d (this build reads %d)", ErrUnknownVersion, src[0], Version))
	}
	d.pos = 1
	k := Kind(src[1])
	if k == 0 || k >= numKinds {
		return nil, 0, d.fail(fmt.Errorf("%w %d", ErrUnknownKind, src[1]))
	}
	d.kind, d.pos = k, 2
	var ev Event
	switch k {
	case KindRecordBuffer:
		n := d.uvarint("length")
		if d.err == nil && n > uint64(len(src)-d.pos) {
			d.err = d.fail(fmt.Errorf("%w: %d bytes of data announced, %d left", ErrTruncated, n, len(src)-d.pos))
		}
		if d.err != nil {
			return nil, 0, d.err
		}
		var data []byte
		if n > 0 {
			data = src[d.pos : d.pos+int(n) : d.pos+int(n)]
		}
		d.pos += int(n)
		ev = RecordBuffer{Data: data}
	case KindWatermark:
		ev = Watermark{Timestamp: int64(d.uint64("timestamp"))}
	case KindWatermarkStatus:
		switch b := d.byte("idle flag"); {
		case d.err != nil:
		case b > 1:
			d.pos--
			d.err = d.fail(fmt.Errorf("%w: idle flag %d", ErrInvalidField, b))
		default:
			ev = WatermarkStatus{Idle: b == 1}
		}
	case KindBarrier:
		ev = Barrier{d.barrier()}
	case KindBarrierAnnouncement:
		ev = BarrierAnnouncement{Barrier: d.barrier()}
	case KindCancelCheckpointMarker:
		ev = CancelCheckpointMarker{ID: int64(d.uvarint("checkpoint id"))}
	case KindEndOfData:
		ev = EndOfData{}
	case KindEndOfPartition:
		ev = EndOfPartition{}
	}
	if d.err != nil {
		return nil, 0, d.err
	}
	return ev, d.pos, nil
}

// decoder reads fields; the first error sticks and later reads return 0.
type decoder struct {
	src  []byte
	pos  int
	kind Kind
	err  error
}

func (d *decoder) fail(err error) error {
	return &DecodeError{Kind: d.kind, Offset: d.pos, Err: err}
}

func (d *decoder) truncated(field string, need int) {
	d.err = d.fail(fmt.Errorf("%w: %s needs %d bytes, %d left", ErrTruncated, field, need, len(d.src)-d.pos))
}

func (d *decoder) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if d.pos >= len(d.src) {
		d.truncated(field, 1)
		return 0
	}
	b := d.src[d.pos]
	d.pos++
	return b
}

func (d *decoder) uint64(field string) uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.src)-d.pos < 8 {
		d.truncated(field, 8)
		return 0
	}
	v := binary.BigEndian.Uint64(d.src[d.pos:])
	d.pos += 8
	return v
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.src[d.pos:])
	if !d.varintRead(field, n, uvarintLen(v)) {
		return 0
	}
	return v
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.src[d.pos:])
	if !d.varintRead(field, n, varintLen(v)) {
		return 0
	}
	return v
}

// varintRead checks a varint of n bytes (encoding/binary's n: 0 past the
// end, < 0 overflow) whose minimal encoding takes minimal bytes, and
// consumes it.
func (d *decoder) varintRead(field string, n, minimal int) bool {
	switch {
	case n == 0:
		d.err = d.fail(fmt.Errorf("%w: %s (a varint) runs past the end", ErrTruncated, field))
	case n < 0:
		d.err = d.fail(fmt.Errorf("%w: %s overflows 64 bits", ErrInvalidField, field))
	case n != minimal:
		d.err = d.fail(fmt.Errorf("%w: %s is a non-minimal varint", ErrInvalidField, field))
	default:
		d.pos += n
		return true
	}
	return false
}

func (d *decoder) barrier() checkpoint.Barrier {
	var b checkpoint.Barrier
	b.ID = int64(d.uvarint("checkpoint id"))
	b.Timestamp = int64(d.uint64("timestamp"))
	start := d.pos
	b.Options.Kind = checkpoint.Kind(d.byte("checkpoint kind"))
	b.Options.Alignment = checkpoint.Alignment(d.byte("alignment"))
	if d.err == nil {
		if err := checkOptions(b.Options); err != nil {
			d.pos = start
			d.err = d.fail(err)
		}
	}
	b.Options.AlignedTimeout = time.Duration(d.varint("aligned timeout"))
	start = d.pos
	if ns := d.uvarint("sub-millisecond trigger time"); d.err == nil {
		if ns >= 1e6 {
			d.pos = start
			d.err = d.fail(fmt.Errorf("%w: sub-millisecond trigger time %d ns", ErrInvalidField, ns))
		}
		b.SubMillis = int32(ns)
	}
	return b
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}
