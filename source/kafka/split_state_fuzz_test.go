package kafka

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// FuzzDecodeSplitState: DecodeSplitState never panics and allocates in
// proportion to its input, whatever the bytes; what it refuses wraps
// ErrBadState; what it accepts (every split state has an encoding it
// accepts) encodes and decodes back to itself.
func FuzzDecodeSplitState(f *testing.F) {
	for _, s := range []SplitState{
		{},
		{Topic: "in", Partition: 3, Offset: 42, StoppingOffset: NoStoppingOffset},
		{Topic: "tópico", Partition: 7, Offset: 1 << 40, StoppingOffset: 1<<40 + 10},
		{Topic: strings.Repeat("t", 200), Partition: math.MaxInt32, Offset: math.MaxInt64, StoppingOffset: math.MinInt64},
		{Topic: "x", Partition: math.MinInt32, Offset: -2},
	} {
		b := s.Encode()
		f.Add(b)
		f.Add(b[:len(b)-1])
		if got, err := DecodeSplitState(b); err != nil || got != s {
			f.Fatalf("seed %+v: decoded %+v, %v", s, got, err)
		}
	}
	f.Add([]byte{})
	f.Add([]byte{splitStateVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s SplitState
		var err error
		checkAllocs(t, b, func() { s, err = DecodeSplitState(b) })
		if err != nil {
			if !errors.Is(err, ErrBadState) {
				t.Fatalf("error %v does not wrap ErrBadState", err)
			}
			if s != (SplitState{}) {
				t.Fatalf("both a split state and an error: %+v, %v", s, err)
			}
			return
		}
		enc := s.Encode()
		again, err := DecodeSplitState(enc)
		if err != nil || again != s {
			t.Fatalf("round trip of %+v: %+v, %v", s, again, err)
		}
		if enc2 := again.Encode(); string(enc2) != string(enc) {
			t.Fatalf("re-encoding differs:\n%x\n%x", enc, enc2)
		}
	})
}

// checkAllocs fails t if decode allocates more than a decoder of len(in)
// bytes may: a fixed 1 MiB plus 256 bytes per input byte (the
// error quotes the input in hex). Only decode's own allocations count
// (testutil.CheckAllocated).
func checkAllocs(t *testing.T, in []byte, decode func()) {
	t.Helper()
	testutil.CheckAllocated(t, "decoding", in, 1<<20, 256, decode)
}
