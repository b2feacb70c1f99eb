package testutil

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

// allocRuns is how many times AllocatedBytes calls a function at the most.
const allocRuns = 5

// AllocatedBytes is how many heap bytes one call of f allocates, measured
// so that only f counts: the process's allocation counter
// (runtime/metrics, which counts small objects a span at a time) around a
// call also counts what other goroutines allocate meanwhile (a parallel
// test, the fuzzing engine, the garbage collector's workers), so a call
// that measures above limit is measured again, up to 5 calls, and the
// least is the answer. Another goroutine only ever adds to a measure, so
// the least is the closest to f's own, and f's own above limit is above
// it on every call: a check on the result never passes by chance. f must
// allocate the same on every call (a decoder over the same input).
func AllocatedBytes(limit uint64, f func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	least := ^uint64(0)
	for range allocRuns {
		metrics.Read(s)
		before := s[0].Value.Uint64()
		f()
		metrics.Read(s)
		least = min(least, s[0].Value.Uint64()-before)
		if least <= limit {
			break
		}
	}
	return least
}

// CheckAllocated fails t if reading in with read allocates more than a
// reader of len(in) bytes may: fixed plus perByte for each input byte. A
// length or count read from the input that sizes an allocation before the
// data is there goes past it. Only read's own allocations count
// (AllocatedBytes). what says what read does ("decoding").
func CheckAllocated(t testing.TB, what string, in []byte, fixed, perByte uint64, read func()) {
	t.Helper()
	limit := fixed + perByte*uint64(len(in))
	if n := AllocatedBytes(limit, read); n > limit {
		t.Fatalf("%s %d bytes allocated %d bytes (limit %d)", what, len(in), n, limit)
	}
}

// HeapInUse is the live heap after a collection: what a test of a bound
// on retained memory compares before and after its load.
func HeapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
