package rocksdb

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// FuzzDecodeIncrementalHandle: the incremental handle's decoder never
// panics; what it refuses wraps state.ErrCorruptSnapshot; what it accepts
// names plain files only (a restore never writes outside its directory)
// and encodes back to a handle that decodes the same.
func FuzzDecodeIncrementalHandle(f *testing.F) {
	seed := &IncrementalHandle{Format: handleFormat, CheckpointID: 3, LocalName: "chk-3", MaxParallelism: 128,
		KeyGroups: state.KeyGroupRange{Start: 0, End: 63}, BaseCheckpointID: -1, Files: []HandleFile{
			{Name: "CURRENT", Ref: []byte{1}, Size: 16, CRC32C: 1},
			{Name: "000012.sst", Ref: []byte{2}, Size: 1024, CRC32C: 2, Shared: true, Reused: true},
		}}
	b, err := seed.Encode()
	if err != nil {
		f.Fatal(err)
	}
	if _, err := DecodeIncrementalHandle(b); err != nil {
		f.Fatalf("seed: %v", err)
	}
	f.Add(b)
	f.Add([]byte(`{"format":1,"files":[{"name":"../CURRENT","ref":"AQ=="}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeIncrementalHandle(data)
		if err != nil {
			if !errors.Is(err, state.ErrCorruptSnapshot) {
				t.Fatalf("error %v does not wrap state.ErrCorruptSnapshot", err)
			}
			return
		}
		for _, name := range append([]string{h.LocalName}, fileNames(h)...) {
			if filepath.Base(name) != name || name == ".." || name == "." {
				t.Fatalf("accepted a name that is not plain: %q", name)
			}
		}
		enc, err := h.Encode()
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeIncrementalHandle(enc)
		if err != nil || !reflect.DeepEqual(again, h) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, h)
		}
	})
}

func fileNames(h *IncrementalHandle) []string {
	var out []string
	for _, f := range h.Files {
		out = append(out, f.Name)
	}
	return out
}
