package kafka

import (
	"testing"
)

// FuzzDecodeWriterState: the exactly-once writer's state decoder never
// panics, allocates in proportion to its input, and what it accepts
// encodes back to a state that decodes the same.
func FuzzDecodeWriterState(f *testing.F) {
	f.Add(encodeWriterState(0, 5))
	f.Add(encodeWriterState(1<<20, 1<<30))
	f.Add([]byte{1})
	f.Add([]byte{2, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var subtask, ids int
		var err error
		checkAllocs(t, b, func() { subtask, ids, err = decodeWriterState(b) })
		if err != nil {
			return
		}
		s2, ids2, err := decodeWriterState(encodeWriterState(subtask, ids))
		if err != nil || s2 != subtask || ids2 != ids {
			t.Fatalf("round trip: %d %d %v; want %d %d", s2, ids2, err, subtask, ids)
		}
	})
}
