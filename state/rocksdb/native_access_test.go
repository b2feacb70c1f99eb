package rocksdb

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// TestNativeAccess: the direct C calls read what grocksdb wrote and write
// what grocksdb reads, for absent keys, empty values and values larger
// than the read buffer; so the C handles they take from grocksdb's structs
// are the right ones.
func TestNativeAccess(t *testing.T) {
	b := newTestBackend(t, Options{})
	if _, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"}); err != nil {
		t.Fatal(err)
	}
	db, cf, ro, wo := b.db, b.states["v"].cf, b.nopts.ro, b.nopts.wo
	var buf []byte
	for i, size := range []int{0, 1, 8, 100, 5000, 1 << 20} {
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
		if err := nativePut(db, wo, cf, k2, val); err != nil {
			t.Fatal(err)
		}
		sl, err := db.GetCF(ro, cf, k2)
		if err != nil || !sl.Exists() || !bytes.Equal(sl.Data(), val) {
			t.Fatalf("grocksdb GetCF of a %d-byte value nativePut wrote: %d bytes, %v, %v", size, len(sl.Data()), sl.Exists(), err)
		}
		sl.Free()
	}
	if got, ok, err := nativeGet(db, ro, cf, []byte("absent"), buf); err != nil || ok || len(got) != 0 {
		t.Fatalf("nativeGet of an absent key: %q, %v, %v", got, ok, err)
	}
}
