package network

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network/event"
)

// sampleFrames holds a frame of every type, with edge values.
func sampleFrames() []frame {
	barrier := event.Barrier{Barrier: checkpoint.Barrier{ID: 7, Timestamp: 1_700_000_000_000,
		Options: checkpoint.Options{Alignment: checkpoint.Unaligned}}}
	return []frame{
		{typ: frameHello},
		{typ: frameRequest, ch: 1, sub: 0, credit: 2, bufSize: 32 << 10, id: "job/1/2/0"},
		{typ: frameRequest, ch: math.MaxUint64, sub: maxWireInt, credit: 0, bufSize: maxWireBufferSize, id: PartitionID(strings.Repeat("p", MaxPartitionIDLen))},
		{typ: frameCredit, ch: 3, credit: 1},
		{typ: frameCredit, ch: 1 << 40, credit: maxWireInt},
		{typ: frameCancel, ch: 9},
		{typ: frameBuffer, ch: 1, seq: 0, backlog: 0, data: []byte{3, 'a', 'b', 'c'}},
		{typ: frameBuffer, ch: 2, seq: math.MaxUint64, backlog: maxWireInt, data: bytes.Repeat([]byte{0xff}, 64)},
		{typ: frameBuffer, ch: 2, seq: 5},
		{typ: frameEvent, ch: 1, seq: 4, backlog: 2, prio: true, ev: barrier},
		{typ: frameEvent, ch: 1, seq: 5, backlog: 0, ev: event.EndOfPartition{}},
		{typ: frameEvent, ch: 1, seq: 6, ev: event.Watermark{Timestamp: math.MinInt64}},
		{typ: frameBacklog, ch: 4, seq: 10, backlog: 3},
		{typ: frameError, ch: 0, code: codeProtocol, data: []byte("bad frame")},
		{typ: frameError, ch: 5, code: codeNotFound},
		{typ: frameError, ch: 5, code: codeReleased, data: bytes.Repeat([]byte{'m'}, maxErrorMessage)},
	}
}

// TestFrameRoundTrip: every frame encodes, reads back whole from a stream
// of frames and decodes to itself; the samples cover every type.
func TestFrameRoundTrip(t *testing.T) {
	var stream []byte
	seen := map[frameType]bool{}
	for _, f := range sampleFrames() {
		seen[f.typ] = true
		var err error
		if stream, err = appendFrame(stream, f); err != nil {
			t.Fatalf("%s: %v", f.typ, err)
		}
	}
	for typ := frameHello; typ < numFrameTypes; typ++ {
		if !seen[typ] {
			t.Errorf("no sample of %s", typ)
		}
	}
	br := bufio.NewReaderSize(bytes.NewReader(stream), 16) // the long frames go through scratch
	var scratch []byte
	for _, want := range sampleFrames() {
		body, n, err := readFrame(br, &scratch, 64)
		if err != nil {
			t.Fatalf("%s: read: %v", want.typ, err)
		}
		if n != len(body)+4 {
			t.Fatalf("%s: %d bytes on the wire for a body of %d", want.typ, n, len(body))
		}
		got, err := decodeFrame(body, 64)
		if err != nil {
			t.Fatalf("%s: decode: %v", want.typ, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded %+v, want %+v", want.typ, got, want)
		}
	}
	if _, _, err := readFrame(br, &scratch, 64); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// TestCorruptFrames: frames that break the format fail to read or decode
// with ErrProtocol, naming what is wrong; none allocates past the limit.
func TestCorruptFrames(t *testing.T) {
	frameOf := func(version, typ byte, body ...byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(2+len(body)))
		return append(append(b, version, typ), body...)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff, wireVersion, byte(frameBuffer)}, "exceeds the limit"},
		{"huge control frame", []byte{0, 1, 0, 0, wireVersion, byte(frameCredit)}, "exceeds the limit"},
		{"length shorter than the header", []byte{0, 0, 0, 1, wireVersion, 0}, "shorter than its header"},
		{"version", frameOf(2, byte(frameCredit), 1, 1), "frame version 2"},
		{"unknown type", frameOf(wireVersion, 99), "unknown frame type 99"},
		{"type zero", frameOf(wireVersion, 0), "unknown frame type 0"},
		{"bad magic", frameOf(wireVersion, byte(frameHello), 'H', 'T', 'T', 'P', '/', '1'), "bad magic"},
		{"channel zero", frameOf(wireVersion, byte(frameCredit), 0, 1), "channel id 0"},
		{"credit zero", frameOf(wireVersion, byte(frameCredit), 1, 0), "credit of 0"},
		{"non-minimal varint", frameOf(wireVersion, byte(frameCancel), 0x81, 0x00), "non-minimal"},
		{"truncated varint", frameOf(wireVersion, byte(frameCancel), 0x81), "truncated varint"},
		{"trailing bytes", frameOf(wireVersion, byte(frameCancel), 1, 0), "after the last field"},
		{"buffer past the limit", frameOf(wireVersion, byte(frameBuffer), append([]byte{1, 0, 0}, make([]byte, 65)...)...), "the limit is 64"},
		{"backlog too big", frameOf(wireVersion, byte(frameBacklog), 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f), "exceeds"},
		{"event flags", frameOf(wireVersion, byte(frameEvent), 1, 0, 0, 2, event.Version, byte(event.KindEndOfData)), "unknown flags"},
		{"event corrupt", frameOf(wireVersion, byte(frameEvent), 1, 0, 0, 0, event.Version, 42), "unknown event kind"},
		{"event with trailing bytes", frameOf(wireVersion, byte(frameEvent), 1, 0, 0, 0, event.Version, byte(event.KindEndOfData), 0), "after the last field"},
		{"record buffer as an event", frameOf(wireVersion, byte(frameEvent), 1, 0, 0, 0, event.Version, byte(event.KindRecordBuffer), 0), "record buffer"},
		{"error code", frameOf(wireVersion, byte(frameError), 1, 77, 0), "unknown error code"},
		{"error message past its length", frameOf(wireVersion, byte(frameError), 1, byte(codeFailed), 9, 'x'), "9 bytes announced"},
		{"request without id", frameOf(wireVersion, byte(frameRequest), 1, 0, 1, 64, 0), "empty partition id"},
		{"request with a tiny buffer size", frameOf(wireVersion, byte(frameRequest), 1, 0, 1, 8, 1, 'p'), "buffer size 8"},
		{"request id past the limit", frameOf(wireVersion, byte(frameRequest), 1, 0, 1, 64, 0x81, 0x40, 'p'), "exceeds 4096"},
	} {
		br := bufio.NewReaderSize(bytes.NewReader(tc.in), 16)
		var scratch []byte
		body, _, err := readFrame(br, &scratch, 64)
		if err == nil {
			_, err = decodeFrame(body, 64)
		}
		if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrProtocol saying %q", tc.name, err, tc.want)
		}
		if cap(scratch) > max(maxControlFrame, frameLimit(frameBuffer, 64)) {
			t.Errorf("%s: read into %d bytes", tc.name, cap(scratch))
		}
	}
	// A frame cut short is an unexpected EOF, not a clean end.
	whole, _ := appendFrame(nil, sampleFrames()[1])
	for _, n := range []int{3, 7, len(whole) - 1} {
		br := bufio.NewReaderSize(bytes.NewReader(whole[:n]), 16)
		var scratch []byte
		if _, _, err := readFrame(br, &scratch, 64); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("frame cut at %d of %d bytes: %v", n, len(whole), err)
		}
	}
}

// FuzzFrameDecode: no input makes the reader or the decoder panic or
// allocate past its limit, and what decodes re-encodes to the same bytes
// (every message has one encoding).
func FuzzFrameDecode(f *testing.F) {
	for _, fr := range sampleFrames() {
		b, err := appendFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxData = 64
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		var scratch []byte
		for {
			body, n, err := readFrame(br, &scratch, maxData)
			if err != nil {
				break
			}
			if n-4 != len(body) || len(body) > frameLimit(frameType(body[1]), maxData) {
				t.Fatalf("frame of %d bytes read (%d on the wire)", len(body), n)
			}
			fr, err := decodeFrame(body, maxData)
			if err != nil {
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("decode error %v does not wrap ErrProtocol", err)
				}
				continue
			}
			again, err := appendFrame(nil, fr)
			if err != nil {
				t.Fatalf("decoded %+v does not encode: %v", fr, err)
			}
			if !bytes.Equal(again[4:], body) {
				t.Fatalf("decoded %+v re-encodes to %x, read %x", fr, again[4:], body)
			}
		}
		if limit := max(maxControlFrame, frameLimit(frameBuffer, maxData)); cap(scratch) > limit {
			t.Fatalf("scratch grew to %d bytes, the limit is %d", cap(scratch), limit)
		}
	})
}

// fakePeer is a raw TCP end speaking frames by hand, to send what a
// well-behaved transport never would.
type fakePeer struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func (fp *fakePeer) read() frame {
	fp.t.Helper()
	_ = fp.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	var scratch []byte
	body, _, err := readFrame(fp.br, &scratch, 1<<20)
	if err != nil {
		fp.t.Fatalf("fake peer: read: %v", err)
	}
	f, err := decodeFrame(body, 1<<20)
	if err != nil {
		fp.t.Fatalf("fake peer: decode: %v", err)
	}
	return f
}

func (fp *fakePeer) write(b []byte) {
	fp.t.Helper()
	if _, err := fp.nc.Write(b); err != nil {
		fp.t.Fatalf("fake peer: write: %v", err)
	}
}

// expectClosedWith reads until the transport closes the connection,
// expecting a connection-level error frame saying want first.
func (fp *fakePeer) expectClosedWith(want string) {
	fp.t.Helper()
	f := fp.read()
	for f.typ != frameError || f.ch != 0 { // frames sent before the error
		f = fp.read()
	}
	if f.code != codeProtocol || !strings.Contains(string(f.data), want) {
		fp.t.Fatalf("connection error frame %q (code %d), want one saying %q", f.data, f.code, want)
	}
	var scratch []byte
	if _, _, err := readFrame(fp.br, &scratch, 1<<20); err == nil {
		fp.t.Fatal("the connection is still open after the error frame")
	}
}

// TestCorruptFramesFromProducerFailTheConsumer: a producer sending a
// corrupt frame, or breaking the protocol, fails the consumer's channel
// with ErrProtocol naming the connection's address, and is told why
// before the connection closes; nothing panics.
func TestCorruptFramesFromProducerFailTheConsumer(t *testing.T) {
	buffer := func(seq uint64, n int) []byte { return appendBuffer(nil, 1, seq, 0, make([]byte, n)) }
	for _, tc := range []struct {
		name  string
		reply []byte
		want  string
	}{
		{"huge frame", []byte{0x7f, 0xff, 0xff, 0xff, wireVersion, byte(frameBuffer)}, "exceeds the limit"},
		{"buffer larger than the channel's", buffer(0, 65), "the limit is 64"},
		// Two exclusive buffers and one floating one: the fourth buffer has
		// no credit.
		{"buffer without credit", bytes.Join([][]byte{buffer(0, 8), buffer(1, 8), buffer(2, 8), buffer(3, 8)}, nil), "without credit"},
		{"message out of order", buffer(1, 8), "message 1 arrived when 0 was expected"},
		{"channel never requested", appendBuffer(nil, 2, 0, 0, []byte{1}), "never requested"},
		{"request from the producer", appendRequest(nil, 1, 0, 1, 64, "x"), "partition request frame from the producer"},
		{"too many priority events ahead", priorityEvents(maxHeldEvents + 1), fmt.Sprintf("more than %d priority events", maxHeldEvents)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			tr, err := NewTransport(TransportConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			wake := make(chan struct{}, 1)
			g := NewInputGate("g", 1, Config{BufferSize: 64, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 1}, wake)
			defer g.Release()
			if err := tr.ConnectRemote(g, 0, ln.Addr().String(), "p", 0); err != nil {
				t.Fatal(err)
			}
			nc, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			fp := &fakePeer{t: t, nc: nc, br: bufio.NewReader(nc)}
			if f := fp.read(); f.typ != frameHello {
				t.Fatalf("first frame %s", f.typ)
			}
			if f := fp.read(); f.typ != frameRequest || f.id != "p" || f.credit != 2 || f.bufSize != 64 || f.ch != 1 {
				t.Fatalf("request %+v", f)
			}
			fp.write(tc.reply)
			ctx := testutil.Context(t, 0)
			for g.Err() == nil {
				select {
				case <-wake:
				case <-ctx.Done():
					t.Fatal("no error")
				}
			}
			err = g.Err()
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ln.Addr().String()) {
				t.Fatalf("gate error %v, want ErrProtocol saying %q and naming %s", err, tc.want, ln.Addr())
			}
			fp.expectClosedWith(tc.want)
		})
	}
}

// priorityEvents are n priority events from message 1 on: message 0
// never comes, so each is held until it does.
func priorityEvents(n int) []byte {
	var b []byte
	for i := range n {
		b, _ = appendEvent(b, 1, uint64(i+1), 0, true, event.Watermark{Timestamp: int64(i)})
	}
	return b
}

// TestCorruptFramesFromConsumerCloseTheConnection: a consumer breaking
// the protocol is told why and disconnected; what it was being served is
// cancelled.
func TestCorruptFramesFromConsumerCloseTheConnection(t *testing.T) {
	hello := appendHello(nil)
	for _, tc := range []struct {
		name string
		send []byte
		want string
	}{
		{"no hello", appendCredit(nil, 1, 1), "not hello"},
		{"garbage", append(append([]byte(nil), hello...), "GET / HTTP/1.1\r\n\r\n"...), "frame version 47"},
		{"a buffer from the consumer", append(append([]byte(nil), hello...), appendBuffer(nil, 1, 0, 0, nil)...), "buffer frame from the consumer"},
		{"a second request for a channel", append(append(append([]byte(nil), hello...), appendRequest(nil, 1, 0, 1, 64, "p")...), appendRequest(nil, 1, 0, 1, 64, "p")...), "second request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := NewTransport(TransportConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			p := NewResultPartition("p", 1, Config{BufferSize: 64}, nil)
			defer p.Release()
			tr.Publish("p", p)
			nc, err := net.Dial("tcp", tr.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			fp := &fakePeer{t: t, nc: nc, br: bufio.NewReader(nc)}
			fp.write(tc.send)
			fp.expectClosedWith(tc.want)
			deadline := time.Now().Add(20 * time.Second)
			for tr.Stats().AcceptedConnections != 0 || tr.Stats().ServedChannels != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("connection still served: %+v", tr.Stats())
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
}

// TestPriorityFramesJumpTheSendQueue: frames queued while the writer is
// busy go out priority first, the others in the order they were queued.
func TestPriorityFramesJumpTheSendQueue(t *testing.T) {
	tr, err := NewTransport(TransportConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	local, remote := net.Pipe()
	defer remote.Close()
	c := newConn(tr, "pipe", false)
	c.nc = local
	// Queued before the writer runs, as while it is busy writing.
	c.sendBuffer(1, 0, 2, []byte("a"))
	c.sendBacklog(1, 1, 2)
	if err := c.sendEvent(1, 2, 2, true, event.Watermark{Timestamp: 9}); err != nil {
		t.Fatal(err)
	}
	c.sendBuffer(1, 3, 1, []byte("b"))
	if err := c.sendEvent(1, 4, 1, true, event.Watermark{Timestamp: 10}); err != nil {
		t.Fatal(err)
	}
	tr.wg.Add(1)
	go c.writeLoop(local)
	defer c.close(ErrTransportClosed)
	fp := &fakePeer{t: t, nc: remote, br: bufio.NewReader(remote)}
	var got []uint64
	for range 5 {
		got = append(got, fp.read().seq)
	}
	if want := []uint64{2, 4, 0, 1, 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("frames written in the order of sequence numbers %v, want %v", got, want)
	}
}
