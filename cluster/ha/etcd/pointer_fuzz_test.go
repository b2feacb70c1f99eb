package etcd

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cluster/ha"
)

// FuzzDecodePointer: the checkpoint pointer's decoder never panics; what
// it refuses wraps ErrBadPointer and names the key; what it accepts is a
// pointer to a checkpoint (an id, a plain path) that encodes back to a
// value that decodes the same.
func FuzzDecodePointer(f *testing.F) {
	for _, p := range []storedPointer{
		{ID: 1, Path: "s3://bucket/job/chk-1", RunID: "0123456789abcdef", Epoch: 7},
		{ID: 1 << 40, Path: "/var/lib/sluice/job/chk-9", Epoch: 1},
	} {
		b, _ := json.Marshal(p)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(`{"id":0,"path":"x"}`))
	f.Add([]byte(`{"id":3,"path":""}`))
	f.Add([]byte(`null`))
	const key = "/sluice/jobs/j/checkpoint"
	f.Fuzz(func(t *testing.T, value []byte) {
		p, err := decodePointer(key, value)
		if err != nil {
			if !errors.Is(err, ha.ErrBadPointer) || !strings.Contains(err.Error(), key) {
				t.Fatalf("error %v does not wrap ha.ErrBadPointer naming the key", err)
			}
			return
		}
		if p.ID < 1 || p.Path == "" {
			t.Fatalf("accepted %+v", p)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := decodePointer(key, b); err != nil || again != p {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, p)
		}
	})
}
