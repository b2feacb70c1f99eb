package memory

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// LiveHeapHeadroom is how many times the live heap the Go limit derived
// from the default budget stays at least: a process that was not given
// a size, whose live heap (heap-backend state, say) outgrows half the
// default budget's limit, collects as Go's own GOGC=100 would, never
// without end. The limit of an explicit budget stays where it is: it is
// the user's bound.
const LiveHeapHeadroom = 2

// limitFloor raises the Go runtime's memory limit after each collection
// to LiveHeapHeadroom times the live heap when that is above the base
// limit, and lowers it back when the live heap shrinks. One per process:
// a collection is the process's.
//
// The live heap it follows is the lesser of the last two collections'
// (floatingLimit): a single collection whose mark phase the machine's
// other processes stretched counts what was allocated meanwhile as live
// (29 MiB of a 16-19 MiB heap under load 16-24), and following that
// reading floated the exactly-once Kafka job's limit to twice it, its
// peak RSS to 71-76 MiB (issue 32). A live heap that has really grown
// reads high twice and raises the limit one collection later.
var limitFloor struct {
	mu       sync.Mutex
	base     int64 // the limit it keeps at least; 0: off
	armed    bool  // a cleanup waits for the next collection
	applied  int64 // the limit it set last
	prevLive int64 // the live heap the collection before left; -1: none yet
	sample   []metrics.Sample
}

// floatingLimit is the limit after a collection that left live bytes
// live, the one before prevLive (negative: none): base, or
// LiveHeapHeadroom times the lesser of the two live heaps if more.
func floatingLimit(base, live, prevLive int64) int64 {
	if prevLive >= 0 {
		live = min(live, prevLive)
	}
	return max(base, LiveHeapHeadroom*live)
}

// floatGoLimit sets the Go limit to base and keeps it at least
// LiveHeapHeadroom times the live heap from then on; base 0 stops that
// (the caller sets its own limit, or none).
func floatGoLimit(base int64) {
	limitFloor.mu.Lock()
	defer limitFloor.mu.Unlock()
	limitFloor.base = base
	if base <= 0 {
		return
	}
	if limitFloor.sample == nil {
		limitFloor.sample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	}
	limitFloor.applied, limitFloor.prevLive = -1, -1
	raiseLocked()
	if !limitFloor.armed {
		limitFloor.armed = true
		armAfterGC()
	}
}

// gcSentinel is unreachable as soon as it is made: its cleanup runs after
// the next collection. Big enough, and with a pointer, to get an
// allocation of its own (the tiny allocator would batch it).
type gcSentinel struct {
	_ *int
	_ [2]int64
}

func armAfterGC() {
	runtime.AddCleanup(&gcSentinel{}, func(struct{}) { afterGC() }, struct{}{})
}

func afterGC() {
	limitFloor.mu.Lock()
	defer limitFloor.mu.Unlock()
	if limitFloor.base <= 0 {
		limitFloor.armed = false
		return
	}
	raiseLocked()
	armAfterGC()
}

// raiseLocked sets the limit to floatingLimit of the live heap.
func raiseLocked() {
	metrics.Read(limitFloor.sample)
	var live int64
	if s := limitFloor.sample[0]; s.Value.Kind() == metrics.KindUint64 {
		live = int64(s.Value.Uint64())
	}
	want := floatingLimit(limitFloor.base, live, limitFloor.prevLive)
	limitFloor.prevLive = live
	if want != limitFloor.applied {
		debug.SetMemoryLimit(want)
		limitFloor.applied = want
	}
}
