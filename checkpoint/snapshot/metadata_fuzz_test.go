package snapshot

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// fuzzMetadata are real metadata values, one per kind of handle, whose
// encodings seed FuzzDecodeMetadata.
func fuzzMetadata() []*Metadata {
	inline := []byte("inline state")
	return []*Metadata{
		{Version: 1, Job: "j", CheckpointID: 1, Kind: KindCheckpoint, Subtasks: []SubtaskState{}},
		{
			Version: MetadataVersion, Job: "wordcount", RunID: "run-1", CheckpointID: 42, Kind: KindCheckpoint,
			TriggerTimestamp: 1700000000000, CompletionTimestamp: 1700000000123,
			Subtasks: []SubtaskState{
				{
					OperatorUID: "source", Subtask: 0, Parallelism: 2, MaxParallelism: 128,
					OperatorState: []OperatorStateHandle{{
						Name: "splits", Distribution: DistributeSplit,
						Handle:  StateHandle{Size: int64(len(inline)), CRC32C: Checksum(inline), Inline: inline},
						Offsets: []int64{0, 6},
					}},
					OutputChannelState: []ChannelStateHandle{{Channel: 1, Handle: StateHandle{Path: "out-0", Size: 100}, Offset: 10, Length: 90}},
					Figures:            &Figures{StartDelayMillis: 1, AlignmentMillis: 2, SyncMillis: 3, AsyncMillis: 4, PersistedData: 90, Unaligned: true},
				},
				{
					OperatorUID: "count", Subtask: 1, Parallelism: 2, MaxParallelism: 128,
					KeyedState: []KeyedStateHandle{
						{KeyGroups: KeyGroupRange{Start: 64, End: 66}, Backend: "heap", Handle: &StateHandle{Path: "kg-64", Size: 300, CRC32C: 7}, KeyGroupOffsets: []int64{0, 100, 200}},
						{KeyGroups: KeyGroupRange{Start: 67, End: 127}, Backend: "rocksdb", Files: []NamedHandle{
							{Name: "000012.sst", Handle: StateHandle{Path: "a1b2.sst", Shared: true, Size: 4096, CRC32C: 9}},
							{Name: "CURRENT", Handle: StateHandle{Size: 1, Inline: []byte{'\n'}}},
						}},
					},
					InputChannelState: []ChannelStateHandle{{Gate: 1, Channel: 3, Handle: StateHandle{Path: "in-1", Size: 50}, Offset: 0, Length: 50}},
				},
				{OperatorUID: "sink", Parallelism: 1, Finished: true, Committables: [][]byte{{2, 1, 'p'}, {}}},
			},
		},
		{
			Version: 1, Job: "j", CheckpointID: 7, Kind: KindSavepoint,
			Subtasks: []SubtaskState{{OperatorUID: "op", Parallelism: 1, KeyedState: []KeyedStateHandle{{KeyGroups: KeyGroupRange{Start: 0, End: -1}}}}},
		},
	}
}

// FuzzDecodeMetadata: DecodeMetadata never panics and allocates in
// proportion to its input, whatever the bytes; what it accepts keeps the
// promises of Validate and encodes back to itself. Every input is also
// decoded with a valid trailer added, so that the fuzzer reaches the JSON
// and Validate behind the checksum.
func FuzzDecodeMetadata(f *testing.F) {
	for _, md := range fuzzMetadata() {
		b, err := EncodeMetadata(md)
		if err != nil {
			f.Fatalf("seed %+v: %v", md, err)
		}
		f.Add(b)
		f.Add(b[:len(b)-trailerLen])
		f.Add(b[:len(b)/2])
		got, err := DecodeMetadata(b)
		if err != nil {
			f.Fatalf("seed %+v: %v", md, err)
		}
		if again, err := EncodeMetadata(got); err != nil || !bytes.Equal(again, b) {
			f.Fatalf("seed %+v does not round trip: %v\n%s\n%s", md, err, b, again)
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, Frame(data, metadataMagic)} {
			var md *Metadata
			var err error
			checkAllocs(t, in, func() { md, err = DecodeMetadata(in) })
			if err != nil {
				if md != nil {
					t.Fatalf("both a result and an error: %v", err)
				}
				continue
			}
			checkAccepted(t, md)
			enc, err := EncodeMetadata(md)
			if err != nil {
				t.Fatalf("decoded metadata does not encode: %v\n%+v", err, md)
			}
			md2, err := DecodeMetadata(enc)
			if err != nil {
				t.Fatalf("re-encoded metadata does not decode: %v\n%s", err, enc)
			}
			if enc2, _ := EncodeMetadata(md2); !bytes.Equal(enc, enc2) {
				t.Fatalf("round trip changed the metadata:\n%s\n%s", enc, enc2)
			}
		}
	})
}

// checkAccepted fails t unless md keeps what Validate documents: a known
// version and kind, plain file names, consistent inline handles, no
// negative sizes, one offset per key group and channel ranges inside their
// streams.
func checkAccepted(t *testing.T, md *Metadata) {
	t.Helper()
	if md.Version < 1 || md.Version > MetadataVersion {
		t.Fatalf("accepted version %d", md.Version)
	}
	switch md.Kind {
	case KindCheckpoint, KindSavepoint, KindFullCheckpoint:
	default:
		t.Fatalf("accepted kind %q", md.Kind)
	}
	for _, r := range md.Handles() {
		h := r.Handle
		if h.Size < 0 || (h.IsInline() && int64(len(h.Inline)) != h.Size) || (!h.IsInline() && !IsPlainName(h.Path)) {
			t.Fatalf("accepted %s: %+v", r.Where, h)
		}
		if h.Shared && (h.IsInline() || md.Kind == KindSavepoint) {
			t.Fatalf("accepted shared %s in a %s: %+v", r.Where, md.Kind, h)
		}
	}
	for _, st := range md.Subtasks {
		for _, k := range st.KeyedState {
			if k.Handle != nil && len(k.KeyGroupOffsets) > 0 && int64(len(k.KeyGroupOffsets)) != int64(k.KeyGroups.End)-int64(k.KeyGroups.Start)+1 {
				t.Fatalf("accepted %d key-group offsets for key groups %+v", len(k.KeyGroupOffsets), k.KeyGroups)
			}
		}
		for _, c := range append(append([]ChannelStateHandle(nil), st.InputChannelState...), st.OutputChannelState...) {
			// Without overflow: 0 <= Offset, 0 <= Length, Offset+Length <= Size.
			if c.Offset < 0 || c.Length < 0 || c.Offset > c.Handle.Size || c.Length > c.Handle.Size-c.Offset {
				t.Fatalf("accepted channel range [%d,+%d) of a stream of %d bytes", c.Offset, c.Length, c.Handle.Size)
			}
		}
	}
}

// checkAllocs fails t if decode allocates more than a decoder of len(in)
// bytes may: a fixed 1 MiB plus 1 KiB per input byte (JSON
// makes a struct of a few hundred bytes out of "{},"). Only decode's own allocations count
// (testutil.CheckAllocated).
func checkAllocs(t *testing.T, in []byte, decode func()) {
	t.Helper()
	testutil.CheckAllocated(t, "decoding", in, 1<<20, 1024, decode)
}
