package sluicetest

import (
	"container/heap"
	"sync"
)

// manualClock is the harness's processing-time service: its time moves
// only when the test moves it, and the callbacks the operator scheduled
// (processing-time timers, async timeouts, periodic work) run then, on
// the test's goroutine, in time order, as the task runs them as mails.
type manualClock struct {
	mu      sync.Mutex
	now     int64
	pending callbackHeap
	seq     int64
}

type scheduled struct {
	at, seq  int64
	fn       func() error
	canceled bool
}

type callbackHeap []*scheduled

func (h callbackHeap) Len() int { return len(h) }
func (h callbackHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h callbackHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *callbackHeap) Push(x any)   { *h = append(*h, x.(*scheduled)) }
func (h *callbackHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// Now implements operators.ProcessingTimeService.
func (c *manualClock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// At implements operators.ProcessingTimeService: fn runs once the test
// has moved the time to ts or beyond.
func (c *manualClock) At(ts int64, fn func() error) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	s := &scheduled{at: ts, seq: c.seq, fn: fn}
	heap.Push(&c.pending, s)
	return func() {
		c.mu.Lock()
		s.canceled = true
		c.mu.Unlock()
	}
}

// due takes the earliest callback at or before the current time, if any.
func (c *manualClock) due() (func() error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pending.Len() > 0 {
		s := c.pending[0]
		if s.at > c.now {
			return nil, false
		}
		heap.Pop(&c.pending)
		if !s.canceled {
			return s.fn, true
		}
	}
	return nil, false
}

// set moves the time to ms (never backwards).
func (c *manualClock) set(ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = max(c.now, ms)
}
