package rocksdb

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// TestNativeSpill: a spill in one call into RocksDB (nativeSpill) writes
// every put of the buffer, empty and large values too, and every
// deletion, which shadows what RocksDB held; the keys it does not hold
// keep their values. So the C handles it takes from grocksdb's structs
// are the right ones and the arena is read as write_buffer.go lays it out.
func TestNativeSpill(t *testing.T) {
	b := newTestBackend(t, Options{})
	if _, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"}); err != nil {
		t.Fatal(err)
	}
	s := b.states["v"]
	db, cf, ro, wo := b.db, s.cf, b.nopts.ro, b.nopts.wo
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%04d", i)) }
	const n = 300
	for i := range n {
		if err := db.PutCF(wo, cf, key(i), []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	w := newWriteBuffer()
	want := map[int][]byte{}
	for i := 0; i < n; i += 3 {
		switch i % 4 {
		case 0:
			w.del(key(i))
			want[i] = nil
		case 1:
			w.put(key(i), nil)
			want[i] = []byte{}
		default:
			v := bytes.Repeat([]byte{byte(i)}, 1+i*37%5000)
			w.put(key(i), v)
			want[i] = v
		}
	}
	// A value rewritten longer moves to a new entry: the stale one is
	// skipped.
	w.put(key(1), []byte("short"))
	w.put(key(1), bytes.Repeat([]byte("long"), 100))
	want[1] = bytes.Repeat([]byte("long"), 100)
	if err := b.spill(s, w, filepath.Join(t.TempDir(), "1.sst")); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		sl, err := db.GetCF(ro, cf, key(i))
		if err != nil {
			t.Fatal(err)
		}
		v, written := want[i]
		switch {
		case !written:
			if !sl.Exists() || string(sl.Data()) != "old" {
				t.Fatalf("key %d, not in the buffer: %q (exists %v), want the old value", i, sl.Data(), sl.Exists())
			}
		case v == nil:
			if sl.Exists() {
				t.Fatalf("key %d, deleted in the buffer: %q, want none", i, sl.Data())
			}
		default:
			if !sl.Exists() || !bytes.Equal(sl.Data(), v) {
				t.Fatalf("key %d: %d bytes (exists %v), want %d", i, len(sl.Data()), sl.Exists(), len(v))
			}
		}
		sl.Free()
	}
}
