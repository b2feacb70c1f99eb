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

// benchSink keeps the work of BenchmarkIndependentRandomRead alive.
var benchSink uint64

// work is a dependent chain of n multiply-adds (about five instructions
// each): code between two memory accesses.
//
//go:noinline
func work(x uint64, n int) uint64 {
	for range n {
		x = x*2862933555777941757 + 3037000493
	}
	return x
}

// BenchmarkIndependentRandomRead asks whether consecutive cache misses of
// the heap RMW could overlap: updates of 32-byte slots at independent
// random places of a 64 MiB table (huge pages), with a chain of 0, 20 or
// 40 multiply-adds between them. With none the CPU keeps many misses in
// flight; once the code between two accesses is a few hundred
// instructions (an RMW's key encoding, key-group hash and probe are more)
// each miss costs its full latency, as in BenchmarkDependentRandomRead.
func BenchmarkIndependentRandomRead(b *testing.B) {
	type slot struct{ lo, hi, v, ts uint64 }
	n := 64 << 20 / 32
	s := make([]slot, n)
	preferHugePages(unsafe.Pointer(&s[0]), uintptr(n)*unsafe.Sizeof(s[0]))
	rng := rand.New(rand.NewPCG(5, 6))
	idx := make([]uint32, 1<<20)
	for i := range idx {
		idx[i] = uint32(rng.IntN(n))
	}
	for _, w := range []int{0, 20, 40} {
		b.Run("work="+strconv.Itoa(w), func(b *testing.B) {
			var acc uint64
			j := 0
			for range b.N {
				acc += work(uint64(j), w)
				s[idx[j]].v++
				if j++; j == len(idx) {
					j = 0
				}
			}
			benchSink = acc
		})
	}
}
