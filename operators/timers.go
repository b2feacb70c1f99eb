package operators

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

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

// timer is one registered timer: a timestamp for a key, in a namespace
// (the encoded window of a window operator; "" for a keyed process
// function).
type timer[K comparable] struct {
	ts  int64
	key K
	ns  string
}

// queued is a timer in the heap, with its key's encoded bytes: timers of
// one timestamp fire in the order of their encoded keys, then of their
// namespaces, an order that depends on nothing but the timers, so a job
// restored from a checkpoint (whose timers come back in no particular
// order) fires them as the job that took it would have.
type queued[K comparable] struct {
	timer[K]
	kb string
}

type timerHeap[K comparable] []queued[K]

func (h timerHeap[K]) less(i, j int) bool {
	a, b := &h[i], &h[j]
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if a.kb != b.kb {
		return a.kb < b.kb
	}
	return a.ns < b.ns
}

func (h *timerHeap[K]) push(q queued[K]) {
	*h = append(*h, q)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *timerHeap[K]) pop() queued[K] {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = queued[K]{}
	s = s[:n]
	*h = s
	for i := 0; ; {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && s.less(r, m) {
			m = r
		}
		if !s.less(m, i) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	return top
}

// The flags of a timer in a timerQueue.
const (
	timerLive   uint8 = 1 << iota // registered, not deleted nor fired
	timerQueued                   // a copy is in the heap
	timerStored                   // the timer state holds it (as of the last flush)
	timerDirty                    // in the dirty list
)

// timerQueue is a min-heap of timers with at most one timer per (key,
// namespace, ts); deleted timers are dropped lazily when they reach the
// top. When it tracks (its timers are kept in keyed state), it also
// knows which timers the timer state holds, and lists the timers whose
// liveness changed since the last flush (live and not stored, or stored
// and no longer live): a flush writes those only.
type timerQueue[K comparable] struct {
	h timerHeap[K]
	// set holds the flags of every timer queued or stored; absent is 0.
	set   map[timer[K]]uint8
	track bool
	dirty []timer[K]
	// compactAt is the length of dirty at which mark drops the timers
	// whose liveness went back to what the state holds (without
	// checkpoints nothing flushes, and a timer registered and fired
	// would stay listed for good).
	compactAt int
}

// mark lists t as dirty if the queue tracks and t's liveness is not what
// the timer state holds; it returns t's flags f with timerDirty if so.
func (q *timerQueue[K]) mark(t timer[K], f uint8) uint8 {
	if q.track && f&timerDirty == 0 && (f&timerLive != 0) != (f&timerStored != 0) {
		if len(q.dirty) >= q.compactAt {
			q.compact() // t is not listed: its flags in set may be stale
		}
		f |= timerDirty
		q.dirty = append(q.dirty, t)
	}
	return f
}

// compact drops from the dirty list the timers that need no write, and
// forgets those neither queued nor stored; the next compaction waits for
// the list to double.
func (q *timerQueue[K]) compact() {
	kept := q.dirty[:0]
	for _, t := range q.dirty {
		f := q.set[t]
		if (f&timerLive != 0) != (f&timerStored != 0) {
			kept = append(kept, t)
			continue
		}
		q.settle(t, f&^timerDirty)
	}
	clear(q.dirty[len(kept):])
	q.dirty = kept
	q.compactAt = max(2*len(kept), minTimerCompaction)
}

// minTimerCompaction is the shortest dirty list that mark compacts.
const minTimerCompaction = 1 << 12

// settle stores t's flags f, forgetting t when none is left.
func (q *timerQueue[K]) settle(t timer[K], f uint8) {
	if f == 0 {
		delete(q.set, t)
		return
	}
	q.set[t] = f
}

// add makes t live; it reports whether t was not live before. keyBytes
// gives the encoded key of a timer that is queued anew.
func (q *timerQueue[K]) add(t timer[K], keyBytes func() string) bool {
	if q.set == nil {
		q.set = make(map[timer[K]]uint8)
	}
	f := q.set[t]
	if f&timerLive != 0 {
		return false
	}
	f |= timerLive
	if f&timerQueued == 0 { // not re-registered while a stale copy is still queued
		q.h.push(queued[K]{timer: t, kb: keyBytes()})
		f |= timerQueued
	}
	q.set[t] = q.mark(t, f)
	return true
}

// remove deletes t; it reports whether t was live.
func (q *timerQueue[K]) remove(t timer[K]) bool {
	f := q.set[t]
	if f&timerLive == 0 {
		return false
	}
	q.set[t] = q.mark(t, f&^timerLive)
	return true
}

// peek returns the earliest live timer.
func (q *timerQueue[K]) peek() (timer[K], bool) {
	for len(q.h) > 0 {
		t := q.h[0].timer
		f := q.set[t]
		if f&timerLive != 0 {
			return t, true
		}
		q.h.pop()
		q.settle(t, f&^timerQueued)
	}
	return timer[K]{}, false
}

// pop takes the earliest timer out of the queue (peek said it is live).
func (q *timerQueue[K]) pop() timer[K] {
	t := q.h.pop().timer
	q.settle(t, q.mark(t, q.set[t]&^(timerQueued|timerLive)))
	return t
}

// flush calls write for every dirty timer whose liveness is not what the
// timer state holds (put: it is live), and empties the dirty list.
func (q *timerQueue[K]) flush(write func(t timer[K], put bool) error) error {
	for i, t := range q.dirty {
		f := q.set[t]
		live, stored := f&timerLive != 0, f&timerStored != 0
		if live != stored {
			if err := write(t, live); err != nil {
				q.dirty = q.dirty[i:] // the rest is still to write
				return err
			}
			f ^= timerStored
		}
		q.settle(t, f&^timerDirty)
	}
	clear(q.dirty)
	q.dirty = q.dirty[:0]
	q.compactAt = minTimerCompaction
	return nil
}

// Len is the number of live timers.
func (q *timerQueue[K]) Len() int {
	n := 0
	for _, f := range q.set {
		if f&timerLive != 0 {
			n++
		}
	}
	return n
}

// TimerService holds the event-time and processing-time timers of a keyed
// operator, one per (key, timestamp), and fires them on the task goroutine.
//
// In a keyed operator with a keyed state backend the timers are part of
// the keyed state (see persistIn): at every checkpoint each live timer is
// also an entry of a hidden map state of its key, so a checkpoint holds
// the timers, and a restore (with any parallelism: timers move with their
// key groups) brings back every timer that was live at the checkpoint.
// The heap is the timers' only home between checkpoints: registers,
// deletes and fires are staged in memory and written to the state by
// Context.FlushKeyedState before the backend's snapshot, so a timer
// registered and fired between two checkpoints (a window's, most often)
// never reaches the state. This is Flink's HEAP timer service
// (state.backend.rocksdb.timer-service.factory: HEAP) with the timers'
// snapshot kept in the keyed state's format.
type TimerService[K comparable] struct {
	event, proc timerQueue[K]
	watermark   int64
	current     K
	pts         ProcessingTimeService
	cancelProc  func()
	quiesced    bool
	procAt      int64
	fire        func(key K, ns string, ts int64, domain TimeDomain) error
	store       *timerStore[K]
	// keyBytes is the encoded current key (the keyed backend's), which
	// orders timers of one timestamp; without a backend, "".
	keyBytes func() string
	// err is the first error of writing the timer state from a Register
	// or Delete method, returned by the operator after the user function.
	err error
}

func newTimerService[K comparable](pts ProcessingTimeService, fire func(K, int64, TimeDomain) error) *TimerService[K] {
	return newNamespacedTimerService(pts, func(k K, _ string, ts int64, d TimeDomain) error { return fire(k, ts, d) })
}

// newNamespacedTimerService is a timer service whose timers also carry a
// namespace, handed back when they fire (window operators).
func newNamespacedTimerService[K comparable](pts ProcessingTimeService, fire func(K, string, int64, TimeDomain) error) *TimerService[K] {
	return &TimerService[K]{watermark: MinWatermark, pts: pts, fire: fire, keyBytes: func() string { return "" }}
}

// CurrentWatermark returns the operator's current event time.
func (s *TimerService[K]) CurrentWatermark() int64 { return s.watermark }

// CurrentProcessingTime returns the wall clock in Unix milliseconds.
func (s *TimerService[K]) CurrentProcessingTime() int64 { return s.pts.Now() }

// RegisterEventTimeTimer asks for OnTimer with the current key once the
// watermark reaches ts.
func (s *TimerService[K]) RegisterEventTimeTimer(ts int64) {
	s.keep(s.register(EventTime, "", ts))
}

// DeleteEventTimeTimer removes the current key's event-time timer at ts.
func (s *TimerService[K]) DeleteEventTimeTimer(ts int64) {
	s.keep(s.delete(EventTime, "", ts))
}

// RegisterProcessingTimeTimer asks for OnTimer with the current key once the
// wall clock reaches ts (Unix milliseconds).
func (s *TimerService[K]) RegisterProcessingTimeTimer(ts int64) {
	s.keep(s.register(ProcessingTime, "", ts))
}

// DeleteProcessingTimeTimer removes the current key's processing-time timer
// at ts.
func (s *TimerService[K]) DeleteProcessingTimeTimer(ts int64) {
	s.keep(s.delete(ProcessingTime, "", ts))
}

// NumEventTimeTimers and NumProcessingTimeTimers count the live timers.
func (s *TimerService[K]) NumEventTimeTimers() int      { return s.event.Len() }
func (s *TimerService[K]) NumProcessingTimeTimers() int { return s.proc.Len() }

func (s *TimerService[K]) keep(err error) {
	if err != nil && s.err == nil {
		s.err = err
	}
}

// takeErr returns the kept error of a Register or Delete method and
// resets it; nil-safe.
func (s *TimerService[K]) takeErr() error {
	if s == nil || s.err == nil {
		return nil
	}
	err := s.err
	s.err = nil
	return err
}

func (s *TimerService[K]) queue(d TimeDomain) *timerQueue[K] {
	if d == EventTime {
		return &s.event
	}
	return &s.proc
}

// register adds the timer (current key, ns, ts) in domain d and writes it
// to the timer state if it is new. The keyed state backend's current key
// must be the service's current key.
func (s *TimerService[K]) register(d TimeDomain, ns string, ts int64) error {
	t := timer[K]{ts: ts, key: s.current, ns: ns}
	if !s.queue(d).add(t, s.keyBytes) {
		return nil
	}
	if d == ProcessingTime {
		s.scheduleProc()
	}
	return nil
}

// delete removes the timer (current key, ns, ts) in domain d.
func (s *TimerService[K]) delete(d TimeDomain, ns string, ts int64) error {
	t := timer[K]{ts: ts, key: s.current, ns: ns}
	s.queue(d).remove(t)
	return nil
}

// scheduleProc makes sure a callback is scheduled for the earliest
// processing-time timer.
func (s *TimerService[K]) scheduleProc() {
	if s.quiesced {
		return
	}
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
		if err := s.popAndFire(ProcessingTime); err != nil {
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
		if err := s.popAndFire(EventTime); err != nil {
			return err
		}
	}
}

// popAndFire takes the earliest timer of domain d out of the queue (its
// removal from the timer state waits for the next flush), and fires it.
func (s *TimerService[K]) popAndFire(d TimeDomain) error {
	t := s.queue(d).pop()
	return s.fire(t.key, t.ns, t.ts, d)
}

// quiesce stops processing-time timers for good: at the end of input, as
// Flink does, the ones not yet due never fire.
func (s *TimerService[K]) quiesce() {
	s.quiesced = true
	s.close()
}

func (s *TimerService[K]) close() {
	if s.cancelProc != nil {
		s.cancelProc()
		s.cancelProc = nil
	}
}

// timerStateName is the hidden map state that holds the timers of a keyed
// operator; its namespaces separate the two time domains. Each key's map
// has one entry per live timer (see timerEntryCodec).
const timerStateName = "_timer_state"

var (
	eventTimersNS = []byte("timers-event")
	procTimersNS  = []byte("timers-proc")
)

// timerEntry is a timer in the timer state of its key.
type timerEntry struct {
	ts int64
	ns string
}

// timerEntryCodec encodes a timerEntry as its 8-byte big-endian timestamp
// followed by its namespace.
type timerEntryCodec struct{}

func (timerEntryCodec) Append(dst []byte, e timerEntry) ([]byte, error) {
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ts))
	return append(dst, e.ns...), nil
}

func (timerEntryCodec) Decode(src []byte) (timerEntry, error) {
	if len(src) < 8 {
		return timerEntry{}, fmt.Errorf("timer entry of %d bytes: %w", len(src), state.ErrCorruptSnapshot)
	}
	return timerEntry{ts: int64(binary.BigEndian.Uint64(src)), ns: string(src[8:])}, nil
}

// timerStore writes timers into the keyed state backend.
type timerStore[K comparable] struct {
	event, proc state.MapState[timerEntry, struct{}]
	setKey      func(K) error
}

// flush writes the timers whose liveness changed since the last flush
// into the timer state, one key at a time through setKey: the timer state
// holds the live timers again.
func (s *TimerService[K]) flush() error {
	st := s.store
	for _, d := range []TimeDomain{EventTime, ProcessingTime} {
		h := st.handle(d)
		err := s.queue(d).flush(func(t timer[K], put bool) error {
			if err := st.setKey(t.key); err != nil {
				return err
			}
			if put {
				return h.Put(timerEntry{t.ts, t.ns}, struct{}{})
			}
			return h.Remove(timerEntry{t.ts, t.ns})
		})
		if err != nil {
			return fmt.Errorf("write the %s timers to keyed state: %w", d, err)
		}
	}
	return nil
}

// persistIn keeps the service's timers in the keyed state of ctx (flushed
// by ctx.FlushKeyedState) from now on and, when the backend was restored,
// loads the restored timers into the queues. setKey sets the backend's
// current key (as the operator does per record); kc decodes the keys that
// the backend holds.
func (s *TimerService[K]) persistIn(ctx *Context, setKey func(K) error, kc codec.Codec[K]) error {
	b := ctx.KeyedState
	st := &timerStore[K]{setKey: setKey}
	s.keyBytes = func() string {
		kb, _ := b.CurrentKey()
		return string(kb)
	}
	for _, h := range []*state.MapState[timerEntry, struct{}]{&st.event, &st.proc} {
		m, err := state.GetMapState(b, state.MapStateDescriptor[timerEntry, struct{}]{
			Name: timerStateName, KeyCodec: timerEntryCodec{}, ValueCodec: emptyCodec{}})
		if err != nil {
			return fmt.Errorf("timer state: %w", err)
		}
		*h = m
	}
	st.event.SetNamespace(eventTimersNS)
	st.proc.SetNamespace(procTimersNS)
	for _, d := range []TimeDomain{EventTime, ProcessingTime} {
		h, ns := st.handle(d), st.namespace(d)
		q := s.queue(d)
		err := b.Keys(timerStateName, ns, func(kb []byte, kg int) error {
			k, err := kc.Decode(kb)
			if err != nil {
				return fmt.Errorf("decode key of a restored %s timer: %w", d, err)
			}
			b.SetCurrentKey(kb, kg)
			return h.IterateKeys(func(e timerEntry) bool {
				t := timer[K]{ts: e.ts, key: k, ns: e.ns}
				q.add(t, s.keyBytes)
				q.set[t] |= timerStored
				return true
			})
		})
		if err != nil {
			return fmt.Errorf("restore %s timers: %w", d, err)
		}
	}
	s.store = st
	for _, q := range []*timerQueue[K]{&s.event, &s.proc} {
		q.track, q.compactAt = true, minTimerCompaction
	}
	ctx.flushers = append(ctx.flushers, s.flush)
	s.scheduleProc()
	return nil
}

func (st *timerStore[K]) handle(d TimeDomain) state.MapState[timerEntry, struct{}] {
	if d == EventTime {
		return st.event
	}
	return st.proc
}

func (st *timerStore[K]) namespace(d TimeDomain) []byte {
	if d == EventTime {
		return eventTimersNS
	}
	return procTimersNS
}

// emptyCodec encodes struct{} in no bytes: the value of a set held in a
// map state.
type emptyCodec struct{}

func (emptyCodec) Append(dst []byte, _ struct{}) ([]byte, error) { return dst, nil }
func (emptyCodec) Decode([]byte) (struct{}, error)               { return struct{}{}, nil }

// RegisteredTimers calls fn with every timer a keyed operator has
// registered in its keyed backend b (the timers of keyed operators are
// keyed state; see TimerService): the encoded key, the time domain, the
// timestamp, and the namespace (the encoded window of a window operator,
// empty for a process function). The bytes are valid during the call
// only. An operator that never used timers has none. It reads what a
// checkpoint of b would hold once the operator's Context.FlushKeyedState
// has run (call it first), for tools that inspect an operator's state
// (package sluicetest); it changes b's current key.
func RegisteredTimers(b state.KeyedBackend, fn func(key []byte, domain TimeDomain, ts int64, namespace []byte) error) error {
	found := false
	for _, m := range b.States() {
		found = found || m.Name == timerStateName
	}
	if !found {
		return nil
	}
	h, err := state.GetMapState(b, state.MapStateDescriptor[timerEntry, struct{}]{
		Name: timerStateName, KeyCodec: timerEntryCodec{}, ValueCodec: emptyCodec{}})
	if err != nil {
		return fmt.Errorf("timer state: %w", err)
	}
	for _, d := range []TimeDomain{EventTime, ProcessingTime} {
		ns := eventTimersNS
		if d == ProcessingTime {
			ns = procTimersNS
		}
		h.SetNamespace(ns)
		err := b.Keys(timerStateName, ns, func(kb []byte, kg int) error {
			b.SetCurrentKey(kb, kg)
			var ferr error
			err := h.IterateKeys(func(e timerEntry) bool {
				ferr = fn(kb, d, e.ts, []byte(e.ns))
				return ferr == nil
			})
			if ferr != nil {
				return ferr
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("read %s timers: %w", d, err)
		}
	}
	return nil
}
