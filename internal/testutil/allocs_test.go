package testutil

import "testing"

var sink []byte

// A function that allocates past the limit on every call measures past
// it: the retries never hide an allocation of the code under test.
func TestAllocatedBytesCountsTheFunction(t *testing.T) {
	const size = 4 << 20
	if n := AllocatedBytes(1<<20, func() { sink = make([]byte, size) }); n < size {
		t.Fatalf("a call that allocates %d bytes measured %d", size, n)
	}
}

// What another goroutine allocates during one call (here, the first call
// stands for it) is not the function's: a later call measures without it.
func TestAllocatedBytesDropsAMeasureOthersInflated(t *testing.T) {
	calls := 0
	n := AllocatedBytes(1<<20, func() {
		if calls++; calls == 1 {
			sink = make([]byte, 8<<20)
		}
	})
	if n > 1<<20 || calls < 2 {
		t.Fatalf("measured %d bytes after %d calls; want the second call's, under 1 MiB", n, calls)
	}
}
