package storage_test

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// BenchmarkStateStream writes 4 MiB state files in 32 KiB writes (fsync
// included) and reports the throughput.
func BenchmarkStateStream(b *testing.B) {
	st, err := storage.New(storage.OSFS{}, b.TempDir(), "job", storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	loc, err := st.Checkpoint(1)
	if err != nil {
		b.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	b.SetBytes(4 << 20)
	for b.Loop() {
		w := loc.CreateStateStream("op")
		for i := 0; i < 128; i++ {
			if _, err := w.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMetadataEncodeDecode round-trips the metadata of 256 subtasks.
func BenchmarkMetadataEncodeDecode(b *testing.B) {
	md := &storage.Metadata{Version: 1, CheckpointID: 1, Kind: storage.KindCheckpoint}
	for i := 0; i < 256; i++ {
		md.Subtasks = append(md.Subtasks, storage.SubtaskState{OperatorUID: "op", Subtask: i,
			OperatorState: []storage.OperatorStateHandle{{Name: "offsets", Handle: storage.StateHandle{Path: "f", Size: 100}, Offsets: []int64{0, 50}}},
			KeyedState:    []storage.KeyedStateHandle{{KeyGroups: storage.KeyGroupRange{Start: i, End: i}, Handle: &storage.StateHandle{Path: "g", Size: 10}, KeyGroupOffsets: []int64{0}}},
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		data, err := storage.EncodeMetadata(md)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := storage.DecodeMetadata(data); err != nil {
			b.Fatal(err)
		}
	}
}
