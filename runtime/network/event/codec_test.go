package event_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime/network/event"
)

// samples holds events of every kind, with edge values of their fields.
func samples() []event.Event {
	unaligned := checkpoint.Barrier{ID: 7, Timestamp: 1_700_000_000_123, Options: checkpoint.Options{Alignment: checkpoint.Unaligned}}
	timeout := checkpoint.Barrier{ID: 1 << 40, Timestamp: -1, Options: checkpoint.Options{
		Kind: checkpoint.KindFullCheckpoint, Alignment: checkpoint.AlignedWithTimeout, AlignedTimeout: 30 * time.Second}}
	return []event.Event{
		event.RecordBuffer{Data: []byte{3, 'a', 'b', 'c', 0}},
		event.RecordBuffer{},
		event.RecordBuffer{Data: bytes.Repeat([]byte{0xff}, 300)},
		event.Watermark{Timestamp: 0},
		event.Watermark{Timestamp: math.MinInt64},
		event.Watermark{Timestamp: math.MaxInt64},
		event.WatermarkStatus{Idle: true},
		event.WatermarkStatus{Idle: false},
		event.Barrier{checkpoint.Barrier{ID: 1, Timestamp: 1000}},
		event.Barrier{unaligned},
		event.Barrier{timeout},
		event.Barrier{checkpoint.Barrier{ID: -1, Timestamp: math.MaxInt64, Options: checkpoint.SavepointOptions()}},
		event.Barrier{checkpoint.Barrier{Options: checkpoint.Options{Alignment: checkpoint.AlignedWithTimeout, AlignedTimeout: -5}}},
		event.BarrierAnnouncement{Barrier: timeout},
		event.CancelCheckpointMarker{ID: 42},
		event.CancelCheckpointMarker{ID: math.MaxInt64},
		event.CancelCheckpointMarker{ID: math.MinInt64},
		event.EndOfData{},
		event.EndOfPartition{},
	}
}

func equal(a, b event.Event) bool {
	if ra, ok := a.(event.RecordBuffer); ok {
		rb, ok := b.(event.RecordBuffer)
		return ok && bytes.Equal(ra.Data, rb.Data)
	}
	return reflect.DeepEqual(a, b)
}

// TestRoundTripEveryKind: every event of the closed set encodes and decodes
// back to itself, alone and in a stream of events, and the samples cover
// every kind (a kind added without a sample fails here).
func TestRoundTripEveryKind(t *testing.T) {
	seen := map[event.Kind]bool{}
	var stream []byte
	for _, ev := range samples() {
		seen[ev.Kind()] = true
		enc, err := event.Append(nil, ev)
		if err != nil {
			t.Fatalf("%v: %v", ev, err)
		}
		if enc[0] != event.Version || event.Kind(enc[1]) != ev.Kind() {
			t.Fatalf("%v: header % x", ev, enc[:2])
		}
		got, n, err := event.Decode(enc)
		if err != nil {
			t.Fatalf("%v: decode: %v", ev, err)
		}
		if n != len(enc) || !equal(ev, got) {
			t.Fatalf("%v: decoded %v (%d of %d bytes)", ev, got, n, len(enc))
		}
		stream = append(stream, enc...)
	}
	for _, k := range event.Kinds() {
		if !seen[k] {
			t.Errorf("no sample of %s", k)
		}
	}
	for i, want := range samples() {
		got, n, err := event.Decode(stream)
		if err != nil || !equal(want, got) {
			t.Fatalf("stream event %d: got %v, %v; want %v", i, got, err, want)
		}
		stream = stream[n:]
	}
	if len(stream) != 0 {
		t.Fatalf("%d bytes left after the stream", len(stream))
	}
}

// TestWireFormatIsStable pins the bytes of a few events: changing them
// breaks every peer running the previous build, so it needs a new Version.
func TestWireFormatIsStable(t *testing.T) {
	for _, c := range []struct {
		ev   event.Event
		want []byte
	}{
		{event.Watermark{Timestamp: 258}, []byte{2, 2, 0, 0, 0, 0, 0, 0, 1, 2}},
		{event.WatermarkStatus{Idle: true}, []byte{2, 3, 1}},
		{event.Barrier{checkpoint.Barrier{ID: 300, Timestamp: 5, SubMillis: 300, Options: checkpoint.Options{Alignment: checkpoint.AlignedWithTimeout, AlignedTimeout: 1}}},
			[]byte{2, 4, 0xac, 0x02, 0, 0, 0, 0, 0, 0, 0, 5, 0, 2, 2, 0xac, 0x02}},
		{event.CancelCheckpointMarker{ID: 1}, []byte{2, 6, 1}},
		{event.EndOfData{}, []byte{2, 7}},
		{event.EndOfPartition{}, []byte{2, 8}},
		{event.RecordBuffer{Data: []byte("hi")}, []byte{2, 1, 2, 'h', 'i'}},
	} {
		got, err := event.Append(nil, c.ev)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%v: % x, %v; want % x", c.ev, got, err, c.want)
		}
	}
}

// TestDecodeErrors: truncated, unknown and invalid input gives a
// *DecodeError naming the event and the offset, wrapping the cause.
func TestDecodeErrors(t *testing.T) {
	barrier, _ := event.Append(nil, event.Barrier{checkpoint.Barrier{ID: 9, Timestamp: 9}})
	for _, c := range []struct {
		name   string
		in     []byte
		kind   event.Kind
		offset int
		err    error
		msg    string
	}{
		{"empty", nil, 0, 0, event.ErrTruncated, "event: decode at offset 0: truncated"},
		{"version only", []byte{1}, 0, 1, event.ErrTruncated, "header"},
		{"version", []byte{1, 2}, 0, 0, event.ErrUnknownVersion, "version 1"},
		{"kind zero", []byte{2, 0}, 0, 1, event.ErrUnknownKind, "kind 0"},
		{"kind unknown", []byte{2, 99}, 0, 1, event.ErrUnknownKind, "kind 99"},
		{"watermark short", []byte{2, 2, 0, 0, 0}, event.KindWatermark, 2, event.ErrTruncated, "decode watermark at offset 2: truncated: timestamp needs 8 bytes, 3 left"},
		{"status missing", []byte{2, 3}, event.KindWatermarkStatus, 2, event.ErrTruncated, "watermark status"},
		{"status flag", []byte{2, 3, 2}, event.KindWatermarkStatus, 2, event.ErrInvalidField, "idle flag 2"},
		{"barrier cut", barrier[:len(barrier)-1], event.KindBarrier, len(barrier) - 1, event.ErrTruncated, "sub-millisecond trigger time"},
		{"barrier sub-millisecond", []byte{2, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0x84, 0x3d}, event.KindBarrier, 14, event.ErrInvalidField, "sub-millisecond trigger time 1000000 ns"},
		{"barrier id cut", []byte{2, 4, 0x80}, event.KindBarrier, 2, event.ErrTruncated, "checkpoint id"},
		{"barrier kind", []byte{2, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0}, event.KindBarrier, 11, event.ErrInvalidField, "checkpoint kind 9"},
		{"barrier alignment", []byte{2, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0}, event.KindBarrierAnnouncement, 11, event.ErrInvalidField, "alignment 7"},
		{"marker non-minimal", []byte{2, 6, 0x81, 0x00}, event.KindCancelCheckpointMarker, 2, event.ErrInvalidField, "non-minimal"},
		{"marker overflow", []byte{2, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, event.KindCancelCheckpointMarker, 2, event.ErrInvalidField, "overflows"},
		{"buffer short", []byte{2, 1, 5, 'a'}, event.KindRecordBuffer, 3, event.ErrTruncated, "5 bytes of data announced, 1 left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev, n, err := event.Decode(c.in)
			var de *event.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("got %v, %d, %v; want a *DecodeError", ev, n, err)
			}
			if ev != nil || n != 0 || de.Kind != c.kind || de.Offset != c.offset || !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v (kind %s, offset %d); want kind %s, offset %d, %v, %q", err, de.Kind, de.Offset, c.kind, c.offset, c.err, c.msg)
			}
		})
	}
}

func TestAppendRefusesInvalidBarriers(t *testing.T) {
	if _, err := event.Append(nil, nil); err == nil {
		t.Fatal("nil event encoded")
	}
	bad := event.Barrier{checkpoint.Barrier{ID: 3, Options: checkpoint.Options{Alignment: 9}}}
	if _, err := event.Append(nil, bad); !errors.Is(err, event.ErrInvalidField) || !strings.Contains(err.Error(), "barrier 3") {
		t.Fatalf("invalid alignment: %v", err)
	}
}

// FuzzDecode: Decode never panics, never reads past its input, and every
// input it accepts is the one encoding of what it decodes to. The seeds are
// the encodings of every sample and their truncations; go test runs them as
// a normal test, go test -fuzz=FuzzDecode explores from them (more seeds
// live in testdata/fuzz/FuzzDecode).
func FuzzDecode(f *testing.F) {
	for _, ev := range samples() {
		enc, err := event.Append(nil, ev)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
		f.Add(enc[:len(enc)/2])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ev, n, err := event.Decode(in)
		if err != nil {
			var de *event.DecodeError
			if !errors.As(err, &de) || de.Offset < 0 || de.Offset > len(in) || ev != nil || n != 0 {
				t.Fatalf("bad error result: %v, %d, %#v", ev, n, err)
			}
			return
		}
		if n < 2 || n > len(in) {
			t.Fatalf("decoded %v from %d of %d bytes", ev, n, len(in))
		}
		enc, err := event.Append(nil, ev)
		if err != nil {
			t.Fatalf("decoded %v does not encode: %v", ev, err)
		}
		if !bytes.Equal(enc, in[:n]) {
			t.Fatalf("decoded %v from % x, which encodes as % x", ev, in[:n], enc)
		}
	})
}
