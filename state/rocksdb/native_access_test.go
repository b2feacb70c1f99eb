package rocksdb

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// TestNativeAccess: the direct C calls read what grocksdb wrote and write
// what grocksdb reads, for absent keys, empty values, values larger than
// the read buffer and than the point writer keeps its batch for (and a
// small one after it), and deletions; so the C handles they take from
// grocksdb's structs are the right ones, and a reused batch writes each
// put and deletion alone.
func TestNativeAccess(t *testing.T) {
	b := newTestBackend(t, Options{})
	if _, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"}); err != nil {
		t.Fatal(err)
	}
	db, cf, ro, wo := b.db, b.states["v"].cf, b.nopts.ro, b.nopts.wo
	var buf []byte
	var w pointWriter
	defer w.destroy()
	sizes := []int{0, 1, 8, 100, 5000, maxKeptWrite + 1, 1 << 20, 3}
	for i, size := range sizes {
		val := bytes.Repeat([]byte{byte('a' + i)}, size)
		k1, k2 := []byte(fmt.Sprint("grocksdb-", i)), []byte(fmt.Sprint("native-", i))
		if err := db.PutCF(wo, cf, k1, val); err != nil {
			t.Fatal(err)
		}
		got, ok, err := nativeGet(db, ro, cf, k1, buf)
		if err != nil || !ok || !bytes.Equal(got, val) {
			t.Fatalf("nativeGet of a %d-byte value grocksdb wrote: %d bytes, %v, %v", size, len(got), ok, err)
		}
		buf = got
		if err := w.put(db, wo, cf, k2, val); err != nil {
			t.Fatal(err)
		}
		sl, err := db.GetCF(ro, cf, k2)
		if err != nil || !sl.Exists() || !bytes.Equal(sl.Data(), val) {
			t.Fatalf("grocksdb GetCF of a %d-byte value the point writer wrote: %d bytes, %v, %v", size, len(sl.Data()), sl.Exists(), err)
		}
		sl.Free()
	}
	if got, ok, err := nativeGet(db, ro, cf, []byte("absent"), buf); err != nil || ok || len(got) != 0 {
		t.Fatalf("nativeGet of an absent key: %q, %v, %v", got, ok, err)
	}
	// Delete every other key: the rest stay as they were.
	for i := 0; i < len(sizes); i += 2 {
		if err := w.del(db, wo, cf, []byte(fmt.Sprint("native-", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i, size := range sizes {
		sl, err := db.GetCF(ro, cf, []byte(fmt.Sprint("native-", i)))
		if err != nil {
			t.Fatal(err)
		}
		if want := i%2 == 1; sl.Exists() != want || want && len(sl.Data()) != size {
			t.Fatalf("key %d after deleting the even ones: exists %v, %d bytes, want exists %v, %d bytes", i, sl.Exists(), len(sl.Data()), want, size)
		}
		sl.Free()
	}
	// A batched write after one too large for the batch writes its own
	// entry alone: the large value stays.
	k, big := []byte("rewritten"), bytes.Repeat([]byte("b"), maxKeptWrite+1)
	for _, v := range [][]byte{[]byte("small"), big} {
		if err := w.put(db, wo, cf, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.put(db, wo, cf, []byte("other"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := nativeGet(db, ro, cf, k, buf); err != nil || !ok || !bytes.Equal(got, big) {
		t.Fatalf("key written small through the batch, then large without it, after another batched write: %d bytes, %v, %v; want %d bytes", len(got), ok, err, len(big))
	}
}
