package operators

import "container/heap"

// TimeDomain says which clock fired a timer.
type TimeDomain int

const (
	// EventTime timers fire when the watermark passes them.
	EventTime TimeDomain = iota
	// ProcessingTime timers fire when the wall clock passes them.
	ProcessingTime
)

func (d TimeDomain) String() string {
	if d == EventTime {
		return "event-time"
	}
	return "processing-time"
}

type timer[K comparable] struct {
	ts  int64
	key K
}

type timerHeap[K comparable] []timer[K]

func (h timerHeap[K]) Len() int           { return len(h) }
func (h timerHeap[K]) Less(i, j int) bool { return h[i].ts < h[j].ts }
func (h timerHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap[K]) Push(x any)        { *h = append(*h, x.(timer[K])) }
func (h *timerHeap[K]) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// timerQueue is a min-heap of timers with at most one timer per (key, ts);
// deleted timers are dropped lazily when they reach the top.
type timerQueue[K comparable] struct {
	h   timerHeap[K]
	set map[timer[K]]bool // true: live; absent or false: deleted
}

func (q *timerQueue[K]) add(t timer[K]) bool {
	if q.set == nil {
		q.set = make(map[timer[K]]bool)
	}
	if live, ok := q.set[t]; ok {
		if !live {
			q.set[t] = true // re-registered while its stale copy is still queued
		}
		return false
	}
	q.set[t] = true
	heap.Push(&q.h, t)
	return true
}

func (q *timerQueue[K]) remove(t timer[K]) {
	if q.set[t] {
		q.set[t] = false
	}
}

// peek returns the earliest live timer.
func (q *timerQueue[K]) peek() (timer[K], bool) {
	for len(q.h) > 0 {
		t := q.h[0]
		if q.set[t] {
			return t, true
		}
		heap.Pop(&q.h)
		delete(q.set, t)
	}
	return timer[K]{}, false
}

func (q *timerQueue[K]) pop() timer[K] {
	t := heap.Pop(&q.h).(timer[K])
	delete(q.set, t)
	return t
}

// Len is the number of live timers.
func (q *timerQueue[K]) Len() int {
	n := 0
	for _, live := range q.set {
		if live {
			n++
		}
	}
	return n
}

// TimerService holds the event-time and processing-time timers of a keyed
// operator, one per (key, timestamp), and fires them on the task goroutine.
type TimerService[K comparable] struct {
	event, proc timerQueue[K]
	watermark   int64
	current     K
	pts         ProcessingTimeService
	cancelProc  func()
	procAt      int64
	fire        func(key K, ts int64, domain TimeDomain) error
}

func newTimerService[K comparable](pts ProcessingTimeService, fire func(K, int64, TimeDomain) error) *TimerService[K] {
	return &TimerService[K]{watermark: MinWatermark, pts: pts, fire: fire}
}

// CurrentWatermark returns the operator's current event time.
func (s *TimerService[K]) CurrentWatermark() int64 { return s.watermark }

// CurrentProcessingTime returns the wall clock in Unix milliseconds.
func (s *TimerService[K]) CurrentProcessingTime() int64 { return s.pts.Now() }

// RegisterEventTimeTimer asks for OnTimer with the current key once the
// watermark reaches ts.
func (s *TimerService[K]) RegisterEventTimeTimer(ts int64) {
	s.event.add(timer[K]{ts: ts, key: s.current})
}

// DeleteEventTimeTimer removes the current key's event-time timer at ts.
func (s *TimerService[K]) DeleteEventTimeTimer(ts int64) {
	s.event.remove(timer[K]{ts: ts, key: s.current})
}

// RegisterProcessingTimeTimer asks for OnTimer with the current key once the
// wall clock reaches ts (Unix milliseconds).
func (s *TimerService[K]) RegisterProcessingTimeTimer(ts int64) {
	if s.proc.add(timer[K]{ts: ts, key: s.current}) {
		s.scheduleProc()
	}
}

// DeleteProcessingTimeTimer removes the current key's processing-time timer
// at ts.
func (s *TimerService[K]) DeleteProcessingTimeTimer(ts int64) {
	s.proc.remove(timer[K]{ts: ts, key: s.current})
}

// NumEventTimeTimers and NumProcessingTimeTimers count the live timers.
func (s *TimerService[K]) NumEventTimeTimers() int      { return s.event.Len() }
func (s *TimerService[K]) NumProcessingTimeTimers() int { return s.proc.Len() }

// scheduleProc makes sure a callback is scheduled for the earliest
// processing-time timer.
func (s *TimerService[K]) scheduleProc() {
	t, ok := s.proc.peek()
	if !ok {
		return
	}
	if s.cancelProc != nil && s.procAt <= t.ts {
		return
	}
	if s.cancelProc != nil {
		s.cancelProc()
	}
	s.procAt = t.ts
	s.cancelProc = s.pts.At(t.ts, s.onProcessingTime)
}

func (s *TimerService[K]) onProcessingTime() error {
	s.cancelProc = nil
	now := s.pts.Now()
	for {
		t, ok := s.proc.peek()
		if !ok || t.ts > now {
			break
		}
		s.proc.pop()
		if err := s.fire(t.key, t.ts, ProcessingTime); err != nil {
			return err
		}
	}
	s.scheduleProc()
	return nil
}

// advanceWatermark fires every event-time timer at or before wm, in
// timestamp order.
func (s *TimerService[K]) advanceWatermark(wm int64) error {
	s.watermark = wm
	for {
		t, ok := s.event.peek()
		if !ok || t.ts > wm {
			return nil
		}
		s.event.pop()
		if err := s.fire(t.key, t.ts, EventTime); err != nil {
			return err
		}
	}
}

func (s *TimerService[K]) close() {
	if s.cancelProc != nil {
		s.cancelProc()
		s.cancelProc = nil
	}
}
