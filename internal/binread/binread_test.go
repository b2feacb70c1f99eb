package binread

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestReadsWhatWasWritten(t *testing.T) {
	b := binary.AppendUvarint(nil, 300)
	b = binary.AppendVarint(b, -7)
	b = append(b, 9)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	b = binary.AppendUvarint(b, 2)
	b = append(b, "xy"...)
	r := New(b)
	if u, v, c, bs, s := r.Uvarint(), r.Varint(), r.Byte(), r.Bytes(), r.String(); u != 300 || v != -7 || c != 9 || string(bs) != "abc" || cap(bs) != 3 || s != "xy" {
		t.Fatalf("read %d %d %d %q (cap %d) %q", u, v, c, bs, cap(bs), s)
	}
	if r.Err() != nil || r.Len() != 0 {
		t.Fatalf("err %v, %d bytes left", r.Err(), r.Len())
	}
}

// The first error sticks and names what was cut short; every later read
// fails and returns zero.
func TestFirstErrorSticks(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		read func(*Reader)
		want string
	}{
		{nil, func(r *Reader) { r.Byte() }, "truncated byte"},
		{[]byte{0x80}, func(r *Reader) { r.Uvarint() }, "truncated uvarint"},
		{[]byte{0x80}, func(r *Reader) { r.Varint() }, "truncated varint"},
		{[]byte{5, 'a'}, func(r *Reader) { r.Bytes() }, "truncated bytes"},
		{[]byte{5, 'a'}, func(r *Reader) { _ = r.String() }, "truncated string"},
		{[]byte{1}, func(r *Reader) { r.Fail("count") }, "truncated count"},
	} {
		r := New(c.in)
		c.read(&r)
		if err := r.Err(); err == nil || err.Error() != c.want || !errors.Is(err, ErrTruncated) {
			t.Errorf("%x: err %v, want %q matching ErrTruncated", c.in, err, c.want)
		}
		if r.Uvarint() != 0 || r.String() != "" || r.Err().Error() != c.want || r.Len() != 0 {
			t.Errorf("%x: a read after the error did not fail, or replaced it: %v", c.in, r.Err())
		}
	}
}
