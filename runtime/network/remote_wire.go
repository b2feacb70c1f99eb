package network

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/runtime/network/event"
)

// The frames of a remote exchange (the package comment describes them):
//
//	length   4 bytes, big-endian: the bytes that follow it
//	version  1 byte (wireVersion)
//	type     1 byte (frameType)
//	body     by type, unsigned varints (uv) minimal:
//	  hello    "SLUICE"                                   dialler, first frame
//	  request  uv channel, uv subpartition, uv credit,    consumer to producer
//	           uv buffer size, uv id length, id bytes
//	  credit   uv channel, uv credit (>= 1)               consumer to producer
//	  cancel   uv channel                                 consumer to producer
//	  buffer   uv channel, uv seq, uv backlog, the bytes  producer to consumer
//	  event    uv channel, uv seq, uv backlog, 1 byte     producer to consumer
//	           flags (bit 0: priority), the event in
//	           package event's codec
//	  backlog  uv channel, uv seq, uv backlog             producer to consumer
//	  error    uv channel (0: the connection), 1 byte     either way
//	           code, uv message length, message
//
// Every frame is read whole against a limit that depends on its type
// before anything is allocated or decoded, and must be used up exactly by
// its fields, so that every message has one encoding.

// wireVersion is the version byte of every frame; a frame of another
// version is refused.
const wireVersion = 1

// frameType is the type byte of a frame. Values are part of the wire
// format: never renumber them, only add.
type frameType uint8

const (
	frameHello frameType = iota + 1
	frameRequest
	frameCredit
	frameCancel
	frameBuffer
	frameEvent
	frameBacklog
	frameError

	numFrameTypes = iota + 1
)

func (t frameType) String() string {
	switch t {
	case frameHello:
		return "hello"
	case frameRequest:
		return "partition request"
	case frameCredit:
		return "add credit"
	case frameCancel:
		return "cancel"
	case frameBuffer:
		return "buffer"
	case frameEvent:
		return "event"
	case frameBacklog:
		return "backlog"
	case frameError:
		return "error"
	}
	return fmt.Sprintf("frame type %d", uint8(t))
}

// errCode says what a producer-side error frame reports.
type errCode uint8

const (
	codeNotFound errCode = iota + 1 // no partition published under the id in time
	codeReleased                    // the partition was released (its task failed or stopped)
	codeInvalid                     // the request cannot be served (wiring)
	codeProtocol                    // the peer broke the protocol; the connection closes
	codeFailed                      // the producer failed the channel

	numErrCodes = iota + 1
)

// sentinel maps an error frame's code to the error the consumer sees.
func (c errCode) sentinel() error {
	switch c {
	case codeNotFound:
		return ErrPartitionNotFound
	case codeReleased:
		return ErrReleased
	case codeInvalid:
		return ErrWiring
	case codeFailed:
		return ErrProducerFailed
	}
	return ErrProtocol
}

// Limits of the wire format.
const (
	// MaxPartitionIDLen is the longest PartitionID a request carries.
	MaxPartitionIDLen = 4096
	// maxErrorMessage bounds an error frame's message; longer ones are cut.
	maxErrorMessage = 1024
	// maxWireBufferSize bounds the buffer size a request announces.
	maxWireBufferSize = 1 << 30
	// maxWireInt bounds counts that become an int (backlog, credit,
	// subpartition).
	maxWireInt = 1<<31 - 1
	// maxControlFrame bounds every frame but a buffer (bytes after the
	// length field): a request with the longest id fits.
	maxControlFrame = 2 + 5*binary.MaxVarintLen64 + MaxPartitionIDLen
	// bufferFrameOverhead is what a buffer frame adds to its bytes, at
	// most (the length field included).
	bufferFrameOverhead = 4 + 2 + 3*binary.MaxVarintLen64
	// wireEventFlagPriority marks a priority event.
	wireEventFlagPriority = 1
)

var helloMagic = []byte("SLUICE")

// frame is one decoded frame. Which fields are set depends on typ.
type frame struct {
	typ     frameType
	ch      uint64 // channel id, 0 for a connection-level error
	seq     uint64 // the message's index among its channel's downstream messages
	backlog int
	sub     int
	credit  int
	bufSize int
	prio    bool
	id      PartitionID
	data    []byte // a buffer's bytes or an error's message; points into the input
	ev      event.Event
	code    errCode
}

// beginFrame appends a frame header with a placeholder length and returns
// where the frame starts; endFrame fills the length in.
func beginFrame(b []byte, t frameType) ([]byte, int) {
	start := len(b)
	return append(b, 0, 0, 0, 0, wireVersion, byte(t)), start
}

func endFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

func appendHello(b []byte) []byte {
	b, s := beginFrame(b, frameHello)
	return endFrame(append(b, helloMagic...), s)
}

func appendRequest(b []byte, ch uint64, sub, credit, bufSize int, id PartitionID) []byte {
	b, s := beginFrame(b, frameRequest)
	b = binary.AppendUvarint(b, ch)
	b = binary.AppendUvarint(b, uint64(sub))
	b = binary.AppendUvarint(b, uint64(credit))
	b = binary.AppendUvarint(b, uint64(bufSize))
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	return endFrame(b, s)
}

func appendCredit(b []byte, ch uint64, n int) []byte {
	b, s := beginFrame(b, frameCredit)
	b = binary.AppendUvarint(b, ch)
	b = binary.AppendUvarint(b, uint64(n))
	return endFrame(b, s)
}

func appendCancel(b []byte, ch uint64) []byte {
	b, s := beginFrame(b, frameCancel)
	b = binary.AppendUvarint(b, ch)
	return endFrame(b, s)
}

func appendBuffer(b []byte, ch, seq uint64, backlog int, data []byte) []byte {
	b, s := beginFrame(b, frameBuffer)
	b = binary.AppendUvarint(b, ch)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(backlog))
	b = append(b, data...)
	return endFrame(b, s)
}

// appendEvent fails, leaving b as it was, for an event the event codec
// cannot encode.
func appendEvent(b []byte, ch, seq uint64, backlog int, prio bool, ev event.Event) ([]byte, error) {
	orig := len(b)
	b, s := beginFrame(b, frameEvent)
	b = binary.AppendUvarint(b, ch)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(backlog))
	var flags byte
	if prio {
		flags = wireEventFlagPriority
	}
	b = append(b, flags)
	b, err := event.Append(b, ev)
	if err != nil {
		return b[:orig], err
	}
	return endFrame(b, s), nil
}

func appendBacklog(b []byte, ch, seq uint64, backlog int) []byte {
	b, s := beginFrame(b, frameBacklog)
	b = binary.AppendUvarint(b, ch)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(backlog))
	return endFrame(b, s)
}

func appendError(b []byte, ch uint64, code errCode, msg string) []byte {
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage]
	}
	b, s := beginFrame(b, frameError)
	b = binary.AppendUvarint(b, ch)
	b = append(b, byte(code))
	b = binary.AppendUvarint(b, uint64(len(msg)))
	b = append(b, msg...)
	return endFrame(b, s)
}

// appendFrame encodes f, as the functions above do; for tests and fuzzing.
func appendFrame(b []byte, f frame) ([]byte, error) {
	switch f.typ {
	case frameHello:
		return appendHello(b), nil
	case frameRequest:
		return appendRequest(b, f.ch, f.sub, f.credit, f.bufSize, f.id), nil
	case frameCredit:
		return appendCredit(b, f.ch, f.credit), nil
	case frameCancel:
		return appendCancel(b, f.ch), nil
	case frameBuffer:
		return appendBuffer(b, f.ch, f.seq, f.backlog, f.data), nil
	case frameEvent:
		return appendEvent(b, f.ch, f.seq, f.backlog, f.prio, f.ev)
	case frameBacklog:
		return appendBacklog(b, f.ch, f.seq, f.backlog), nil
	case frameError:
		return appendError(b, f.ch, f.code, string(f.data)), nil
	}
	return b, fmt.Errorf("%w: cannot encode %s", ErrProtocol, f.typ)
}

// frameLimit returns the largest frame of type t (bytes after the length
// field) a reader accepts; maxData is the largest buffer it accepts, 0 on
// a producer's end, which receives no buffers.
func frameLimit(t frameType, maxData int) int {
	if t == frameBuffer {
		return bufferFrameOverhead - 4 + maxData
	}
	return maxControlFrame
}

// readFrame reads the next frame from br and returns its bytes after the
// length field (version, type, body), and how many bytes it took on the
// wire. The bytes stay valid until the next read from br, or sit in
// *scratch when the frame is longer than br's buffer. The length is
// checked against frameLimit before anything is read into memory.
func readFrame(br *bufio.Reader, scratch *[]byte, maxData int) ([]byte, int, error) {
	hdr, err := br.Peek(6)
	if err != nil {
		if err == io.EOF && len(hdr) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, err
	}
	n := int(binary.BigEndian.Uint32(hdr))
	if n < 2 {
		return nil, 0, fmt.Errorf("%w: frame length %d is shorter than its header", ErrProtocol, n)
	}
	if hdr[4] != wireVersion {
		return nil, 0, fmt.Errorf("%w: frame version %d (this build speaks %d)", ErrProtocol, hdr[4], wireVersion)
	}
	t := frameType(hdr[5])
	if limit := frameLimit(t, maxData); n > limit {
		return nil, 0, fmt.Errorf("%w: %s frame of %d bytes exceeds the limit of %d", ErrProtocol, t, n, limit)
	}
	if _, err := br.Discard(4); err != nil {
		return nil, 0, err
	}
	if n <= br.Size() {
		body, err := br.Peek(n)
		if err != nil {
			return nil, 0, unexpectedEOF(err)
		}
		_, _ = br.Discard(n) // the bytes stay in br's buffer until its next read
		return body, n + 4, nil
	}
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	body := (*scratch)[:n]
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, 0, unexpectedEOF(err)
	}
	return body, n + 4, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// decodeFrame decodes a frame's bytes after the length field. maxData is
// the largest buffer accepted. Errors wrap ErrProtocol.
func decodeFrame(src []byte, maxData int) (frame, error) {
	var f frame
	if len(src) < 2 {
		return f, fmt.Errorf("%w: frame of %d bytes has no header", ErrProtocol, len(src))
	}
	if src[0] != wireVersion {
		return f, fmt.Errorf("%w: frame version %d (this build speaks %d)", ErrProtocol, src[0], wireVersion)
	}
	f.typ = frameType(src[1])
	if f.typ == 0 || f.typ >= numFrameTypes {
		return f, fmt.Errorf("%w: unknown frame type %d", ErrProtocol, src[1])
	}
	d := wireDecoder{src: src, pos: 2, typ: f.typ}
	switch f.typ {
	case frameHello:
		if string(d.bytes("magic", len(helloMagic))) != string(helloMagic) && d.err == nil {
			d.failf("bad magic %q", src[2:])
		}
	case frameRequest:
		f.ch = d.channel(false)
		f.sub = d.int("subpartition", maxWireInt)
		f.credit = d.int("credit", maxWireInt)
		f.bufSize = d.int("buffer size", maxWireBufferSize)
		if d.err == nil && f.bufSize < 16 {
			d.failf("buffer size %d", f.bufSize)
		}
		n := d.int("partition id length", MaxPartitionIDLen)
		if d.err == nil && n == 0 {
			d.failf("empty partition id")
		}
		f.id = PartitionID(d.bytes("partition id", n))
	case frameCredit:
		f.ch = d.channel(false)
		f.credit = d.int("credit", maxWireInt)
		if d.err == nil && f.credit == 0 {
			d.failf("credit of 0")
		}
	case frameCancel:
		f.ch = d.channel(false)
	case frameBuffer:
		f.ch = d.channel(false)
		f.seq = d.uvarint("sequence number")
		f.backlog = d.int("backlog", maxWireInt)
		if d.err == nil {
			if n := len(src) - d.pos; n > maxData {
				d.failf("buffer of %d bytes, the limit is %d", n, maxData)
			} else if n > 0 {
				f.data = src[d.pos:len(src):len(src)]
				d.pos = len(src)
			}
		}
	case frameEvent:
		f.ch = d.channel(false)
		f.seq = d.uvarint("sequence number")
		f.backlog = d.int("backlog", maxWireInt)
		flags := d.byte("flags")
		if d.err == nil && flags&^wireEventFlagPriority != 0 {
			d.pos--
			d.failf("unknown flags %#x", flags)
		}
		f.prio = flags&wireEventFlagPriority != 0
		if d.err == nil {
			ev, n, err := event.Decode(src[d.pos:])
			switch {
			case err != nil:
				d.failf("%v", err)
			case ev.Kind() == event.KindRecordBuffer:
				d.failf("a record buffer travels as a buffer frame, not as an event")
			default:
				f.ev = ev
				d.pos += n
			}
		}
	case frameBacklog:
		f.ch = d.channel(false)
		f.seq = d.uvarint("sequence number")
		f.backlog = d.int("backlog", maxWireInt)
	case frameError:
		f.ch = d.channel(true)
		code := errCode(d.byte("error code"))
		if d.err == nil && (code == 0 || code >= numErrCodes) {
			d.pos--
			d.failf("unknown error code %d", code)
		}
		f.code = code
		n := d.int("message length", maxErrorMessage)
		if msg := d.bytes("message", n); len(msg) > 0 {
			f.data = msg
		}
	}
	if d.err == nil && d.pos != len(src) {
		d.failf("%d bytes after the last field", len(src)-d.pos)
	}
	if d.err != nil {
		return frame{}, d.err
	}
	return f, nil
}

// wireDecoder reads the fields of one frame; the first error sticks and
// later reads return zero values.
type wireDecoder struct {
	src []byte
	pos int
	typ frameType
	err error
}

func (d *wireDecoder) failf(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s frame at offset %d: %s", ErrProtocol, d.typ, d.pos, fmt.Sprintf(format, args...))
	}
}

func (d *wireDecoder) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if d.pos >= len(d.src) {
		d.failf("%s: truncated", field)
		return 0
	}
	d.pos++
	return d.src[d.pos-1]
}

func (d *wireDecoder) bytes(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.src)-d.pos < n {
		d.failf("%s: %d bytes announced, %d left", field, n, len(d.src)-d.pos)
		return nil
	}
	d.pos += n
	return d.src[d.pos-n : d.pos : d.pos]
}

func (d *wireDecoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.src[d.pos:])
	switch {
	case n == 0:
		d.failf("%s: truncated varint", field)
		return 0
	case n < 0:
		d.failf("%s: varint overflows 64 bits", field)
		return 0
	case n != uvarintSize(v):
		d.failf("%s: non-minimal varint", field)
		return 0
	}
	d.pos += n
	return v
}

func (d *wireDecoder) int(field string, limit int) int {
	v := d.uvarint(field)
	if d.err == nil && v > uint64(limit) {
		d.failf("%s %d exceeds %d", field, v, limit)
		return 0
	}
	return int(v)
}

// channel reads a channel id; 0 names the connection and is allowed only
// where connection says so.
func (d *wireDecoder) channel(connection bool) uint64 {
	ch := d.uvarint("channel")
	if d.err == nil && ch == 0 && !connection {
		d.failf("channel id 0")
	}
	return ch
}

func uvarintSize(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
