package kafka

import (
	"encoding/binary"
	"fmt"
)

// splitStateVersion is the first byte of every encoded SplitState.
const splitStateVersion = 1

// NoStoppingOffset marks a split without a stopping offset (unbounded).
const NoStoppingOffset int64 = -1

// SplitState is a reader's position in one partition, the entry it stores
// in every checkpoint for that partition.
type SplitState struct {
	Topic     string
	Partition int32
	// Offset is the offset of the next record to read.
	Offset int64
	// StoppingOffset is where a bounded reader stops (exclusive), or
	// NoStoppingOffset.
	StoppingOffset int64
}

// Encode returns the entry's bytes: a version byte, the topic (length
// prefixed) and the numbers as varints.
func (s SplitState) Encode() []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64*4+len(s.Topic))
	b = append(b, splitStateVersion)
	b = binary.AppendUvarint(b, uint64(len(s.Topic)))
	b = append(b, s.Topic...)
	b = binary.AppendVarint(b, int64(s.Partition))
	b = binary.AppendVarint(b, s.Offset)
	return binary.AppendVarint(b, s.StoppingOffset)
}

// DecodeSplitState decodes what Encode wrote.
func DecodeSplitState(b []byte) (SplitState, error) {
	var s SplitState
	fail := func(what string) (SplitState, error) {
		return SplitState{}, fmt.Errorf("split state %x: %s: %w", b, what, ErrBadState)
	}
	if len(b) == 0 || b[0] != splitStateVersion {
		return fail("unknown version")
	}
	rest := b[1:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || uint64(len(rest)-k) < n {
		return fail("truncated topic")
	}
	s.Topic = string(rest[k : k+int(n)])
	rest = rest[k+int(n):]
	var vals [3]int64
	for i := range vals {
		v, k := binary.Varint(rest)
		if k <= 0 {
			return fail("truncated number")
		}
		vals[i], rest = v, rest[k:]
	}
	if len(rest) != 0 {
		return fail("trailing bytes")
	}
	s.Partition, s.Offset, s.StoppingOffset = int32(vals[0]), vals[1], vals[2]
	return s, nil
}
