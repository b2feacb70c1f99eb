package kafka

import (
	"cmp"
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// FuzzDecodeCommittable: DecodeCommittable never panics and allocates in
// proportion to its input, whatever the bytes; what it refuses wraps
// ErrBadCommittable; what it accepts (every value of the type it can
// produce) encodes back to the same committable, offsets in Encode's order.
func FuzzDecodeCommittable(f *testing.F) {
	for _, c := range []Committable{
		{},
		{TransactionalID: "sluice-out-0-3", ProducerID: 4711, ProducerEpoch: 2, TransactionVersion: 2, CheckpointID: 9, Records: 0},
		{
			TransactionalID: "p-3-1", ProducerID: 1 << 40, ProducerEpoch: 32766, TransactionVersion: 1, CheckpointID: 77,
			LastOffsets: []PartitionOffset{{"b", 2, 9}, {"a", 1, 1 << 33}, {"b", 0, 0}, {"tópico", -1, -1}},
			Records:     12345,
		},
		{TransactionalID: strings.Repeat("x", 300), ProducerID: -1, ProducerEpoch: -1, TransactionVersion: -1, CheckpointID: -1, Records: -1},
	} {
		b := c.Encode()
		f.Add(b)
		f.Add(b[:len(b)/2])
		got, err := DecodeCommittable(b)
		if err != nil {
			f.Fatalf("seed %+v: %v", c, err)
		}
		if want := sortedOffsets(c); !reflect.DeepEqual(sortedOffsets(got), want) {
			f.Fatalf("seed round trip: got %+v, want %+v", got, want)
		}
		// The same without the record count: version 1.
		f.Add(append([]byte{1}, b[1:len(b)-len(binary.AppendVarint(nil, c.Records))]...))
	}
	f.Add([]byte{})
	f.Add([]byte{committableVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Committable
		var err error
		checkAllocs(t, b, func() { c, err = DecodeCommittable(b) })
		if err != nil {
			if !errors.Is(err, ErrBadCommittable) {
				t.Fatalf("error %v does not wrap ErrBadCommittable", err)
			}
			if !reflect.DeepEqual(c, Committable{}) {
				t.Fatalf("both a committable and an error: %+v, %v", c, err)
			}
			return
		}
		enc := c.Encode()
		again, err := DecodeCommittable(enc)
		if err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", c, err)
		}
		if got, want := sortedOffsets(again), sortedOffsets(c); !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
		// Encode is a function of the value: the same bytes once more
		// (unless a partition is listed twice, which Encode's unstable sort
		// may order either way).
		if enc2 := again.Encode(); string(enc2) != string(enc) && !duplicatePartitions(c) {
			t.Fatalf("re-encoding differs:\n%x\n%x", enc, enc2)
		}
	})
}

// sortedOffsets returns c with its offsets sorted by topic, partition and
// offset (Encode sorts by topic and partition) and an empty list as nil.
func sortedOffsets(c Committable) Committable {
	c.LastOffsets = slices.Clone(c.LastOffsets)
	slices.SortFunc(c.LastOffsets, func(x, y PartitionOffset) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition), cmp.Compare(x.Offset, y.Offset))
	})
	if len(c.LastOffsets) == 0 {
		c.LastOffsets = nil
	}
	return c
}

func duplicatePartitions(c Committable) bool {
	seen := map[PartitionOffset]bool{}
	for _, o := range c.LastOffsets {
		o.Offset = 0
		if seen[o] {
			return true
		}
		seen[o] = true
	}
	return false
}

// checkAllocs fails t if decode allocates more than a decoder of len(in)
// bytes may: a fixed 1 MiB plus 256 bytes per input byte. Only decode's own allocations count
// (testutil.CheckAllocated).
func checkAllocs(t *testing.T, in []byte, decode func()) {
	t.Helper()
	testutil.CheckAllocated(t, "decoding", in, 1<<20, 256, decode)
}
