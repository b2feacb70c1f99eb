package registry

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Header and message indexes round-trip and match the Confluent layout
// byte for byte; malformed input is refused with ErrBadWireFormat.
func TestWireFormat(t *testing.T) {
	b := AppendHeader([]byte("x"), 0x01020304)
	if string(b) != "x\x00\x01\x02\x03\x04" {
		t.Fatalf("header %q", b)
	}
	id, body, err := ReadHeader(append(b[1:], 'z'))
	if err != nil || id != 0x01020304 || string(body) != "z" {
		t.Fatalf("ReadHeader: %d %q %v", id, body, err)
	}
	for _, bad := range [][]byte{nil, {0, 1, 2}, {1, 0, 0, 0, 1}} {
		if _, _, err := ReadHeader(bad); !errors.Is(err, ErrBadWireFormat) {
			t.Fatalf("ReadHeader(%x): %v, want ErrBadWireFormat", bad, err)
		}
	}
	for _, idx := range [][]int{{0}, {1}, {0, 2}, {3, 0, 70}} {
		enc := AppendIndexes(nil, idx)
		got, rest, err := ReadIndexes(append(enc, 9))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(idx) || len(rest) != 1 {
			t.Fatalf("indexes %v: got %v rest %x err %v", idx, got, rest, err)
		}
	}
	// [0] is the single byte 0; [1] is count 1 then 1, zig-zag: 02 02.
	if e := AppendIndexes(nil, []int{0}); string(e) != "\x00" {
		t.Fatalf("[0] encodes as %x", e)
	}
	if e := AppendIndexes(nil, []int{1}); string(e) != "\x02\x02" {
		t.Fatalf("[1] encodes as %x", e)
	}
	for _, bad := range [][]byte{nil, {0x80}, {0x01}, {0xfe, 0x01}, {0x02, 0x01}} {
		if _, _, err := ReadIndexes(bad); !errors.Is(err, ErrBadWireFormat) {
			t.Fatalf("ReadIndexes(%x): %v, want ErrBadWireFormat", bad, err)
		}
	}
}

func TestSubjectStrategiesNeedTheirInputs(t *testing.T) {
	if s, err := TopicNameStrategy("t", "", true); err != nil || s != "t-key" {
		t.Fatalf("%q %v", s, err)
	}
	for _, err := range []error{
		func() error { _, err := TopicNameStrategy("", "r", false); return err }(),
		func() error { _, err := RecordNameStrategy("t", "", false); return err }(),
		func() error { _, err := TopicRecordNameStrategy("t", "", false); return err }(),
	} {
		if !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("err %v, want ErrInvalidConfig", err)
		}
	}
	e := &SchemaError{Op: "decode", Subject: "s", Version: 2, ID: 5, Err: ErrUnknownSchema}
	if !strings.Contains(e.Error(), `subject "s", version 2, schema id 5`) || !errors.Is(e, ErrUnknownSchema) {
		t.Fatalf("%v", e)
	}
}
