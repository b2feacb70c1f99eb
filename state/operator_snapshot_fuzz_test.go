package state

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
)

// encodeOperatorSnapshot writes an operator snapshot as Snapshot does,
// from its decoded parts.
func encodeOperatorSnapshot(subtask, parallelism int, states []OperatorSnapshotState) []byte {
	var p []byte
	p = binary.AppendUvarint(p, uint64(subtask))
	p = binary.AppendUvarint(p, uint64(parallelism))
	p = binary.AppendUvarint(p, uint64(len(states)))
	for _, s := range states {
		p = appendBytes(p, []byte(s.Meta.Name))
		p = append(p, byte(s.Meta.Kind))
		p = appendBytes(p, []byte(s.Meta.ValueCodec))
		p = binary.AppendUvarint(p, uint64(len(s.Elements)))
		for _, e := range s.Elements {
			p = appendBytes(p, e)
		}
	}
	out := append([]byte(operatorMagic), formatVersion)
	out = binary.AppendUvarint(out, uint64(len(p)))
	out = append(out, p...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(p, crcTable))
}

// FuzzReadOperatorSnapshot: ReadOperatorSnapshot never panics and
// allocates in proportion to its input, whatever the bytes (a length that
// claims more than is there allocates nothing); what it refuses wraps
// ErrCorruptSnapshot; what it accepts encodes back to a snapshot that
// reads the same. Every input is also read with its checksum made right.
func FuzzReadOperatorSnapshot(f *testing.F) {
	seeds := [][]byte{
		encodeOperatorSnapshot(0, 1, nil),
		encodeOperatorSnapshot(2, 4, []OperatorSnapshotState{
			{Meta: StateMeta{Name: "offsets", Kind: KindList, ValueCodec: "bytes"}, Elements: [][]byte{{1, 2}, {}, []byte("x")}},
			{Meta: StateMeta{Name: "u", Kind: KindUnionList, ValueCodec: "json"}, Elements: [][]byte{[]byte(`{"a":1}`)}},
		}),
		binary.AppendUvarint([]byte("SLOS\x01"), 1<<34), // 10 bytes claiming 16 GiB
	}
	for _, b := range seeds {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withOperatorCRC(data)} {
			var subtask, parallelism int
			var states []OperatorSnapshotState
			var err error
			checkAllocs(t, in, func() {
				subtask, parallelism, states, err = ReadOperatorSnapshot(bufio.NewReaderSize(bytes.NewReader(in), 16))
			})
			if err != nil {
				if !errors.Is(err, ErrCorruptSnapshot) {
					t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
				}
				continue
			}
			again := encodeOperatorSnapshot(subtask, parallelism, states)
			s2, p2, states2, err := ReadOperatorSnapshot(bytes.NewReader(again))
			if err != nil || s2 != subtask || p2 != parallelism || !reflect.DeepEqual(states2, states) {
				t.Fatalf("round trip: %d/%d %+v %v; want %d/%d %+v", s2, p2, states2, err, subtask, parallelism, states)
			}
		}
	})
}

// withOperatorCRC returns b with the checksum of its payload made right,
// when its header reads: the decoder's checks past the checksum are
// reached too.
func withOperatorCRC(b []byte) []byte {
	if len(b) < 5 {
		return b
	}
	n, k := binary.Uvarint(b[5:])
	if k <= 0 || uint64(len(b)-5-k) < n+4 {
		return b
	}
	out := bytes.Clone(b[:5+k+int(n)])
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(b[5+k:5+k+int(n)], crcTable))
}
