package state

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"unsafe"
)

// BenchmarkDependentRandomRead is the floor under the uniform RMW figures:
// a chain of dependent reads of 32-byte slots (the heap table's slot for
// an int64 key and a ValueState[int64]: key, value and TTL timestamp) in
// random order over a working set the size of a 1M-key table (at half
// load: 64 MiB), over one that fits in cache (4 MiB) and one in between
// (16 MiB: more than this machine kind's cache gives one VM). Each heap
// RMW of a uniformly chosen key costs one such read. The slots ask for
// huge pages as the heap's tables do (huge_pages_linux.go).
func BenchmarkDependentRandomRead(b *testing.B) {
	for _, mib := range []int{4, 16, 64} {
		b.Run(strconv.Itoa(mib)+"MiB", func(b *testing.B) {
			type slot struct{ next, key, v, ts uint64 }
			n := mib << 20 / 32
			s := make([]slot, n)
			preferHugePages(unsafe.Pointer(&s[0]), uintptr(n)*unsafe.Sizeof(s[0]))
			perm := rand.New(rand.NewPCG(3, 4)).Perm(n)
			for i := range n {
				s[perm[i]].next = uint64(perm[(i+1)%n])
			}
			cur := uint64(perm[0])
			b.ResetTimer()
			for range b.N {
				sl := &s[cur]
				cur = sl.next
				sl.v++
			}
			b.StopTimer()
			if cur >= uint64(n) {
				b.Fatal("chain left the slots")
			}
		})
	}
}
