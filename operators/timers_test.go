package operators

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// fakeClock is a ProcessingTimeService driven by the test.
type fakeClock struct {
	now   int64
	calls []*fakeCall
}

type fakeCall struct {
	ts       int64
	fn       func() error
	canceled bool
}

func (c *fakeClock) Now() int64 { return c.now }

func (c *fakeClock) At(ts int64, fn func() error) func() {
	call := &fakeCall{ts: ts, fn: fn}
	c.calls = append(c.calls, call)
	return func() { call.canceled = true }
}

// scheduled returns the timestamps of the callbacks not cancelled or run.
func (c *fakeClock) scheduled() []int64 {
	var out []int64
	for _, call := range c.calls {
		if !call.canceled {
			out = append(out, call.ts)
		}
	}
	return out
}

// advance moves the clock to now and runs the due callbacks, earliest
// first, as the task's mails would.
func (c *fakeClock) advance(t *testing.T, now int64) {
	t.Helper()
	c.now = now
	for {
		var due *fakeCall
		for _, call := range c.calls {
			if !call.canceled && call.ts <= now && (due == nil || call.ts < due.ts) {
				due = call
			}
		}
		if due == nil {
			return
		}
		due.canceled = true // run once
		if err := due.fn(); err != nil {
			t.Fatal(err)
		}
	}
}

type firing struct {
	key    string
	ts     int64
	domain TimeDomain
}

func newTestService() (*TimerService[string], *fakeClock, *[]firing) {
	clock := &fakeClock{now: 1000}
	var log []firing
	s := newTimerService[string](clock, func(k string, ts int64, d TimeDomain) error {
		log = append(log, firing{k, ts, d})
		return nil
	})
	return s, clock, &log
}

// on sets the service's current key, as the operator does per record.
func on(s *TimerService[string], key string) *TimerService[string] {
	s.current = key
	return s
}

func TestEventTimersDedupPerKeyAndTimestamp(t *testing.T) {
	s, _, log := newTestService()
	on(s, "a").RegisterEventTimeTimer(10)
	on(s, "a").RegisterEventTimeTimer(10) // duplicate
	on(s, "b").RegisterEventTimeTimer(10) // same ts, other key
	on(s, "a").RegisterEventTimeTimer(5)
	on(s, "a").RegisterEventTimeTimer(20)
	if n := s.NumEventTimeTimers(); n != 4 {
		t.Fatalf("%d timers registered, want 4", n)
	}
	if err := s.advanceWatermark(15); err != nil {
		t.Fatal(err)
	}
	got := *log
	if len(got) != 3 || got[0] != (firing{"a", 5, EventTime}) {
		t.Fatalf("fired %v, want a@5 then a@10 and b@10", got)
	}
	rest := []firing{got[1], got[2]}
	slices.SortFunc(rest, func(x, y firing) int { return cmpStr(x.key, y.key) })
	if rest[0] != (firing{"a", 10, EventTime}) || rest[1] != (firing{"b", 10, EventTime}) {
		t.Fatalf("fired %v", got)
	}
	if s.CurrentWatermark() != 15 || s.NumEventTimeTimers() != 1 {
		t.Fatalf("watermark %d, %d timers left", s.CurrentWatermark(), s.NumEventTimeTimers())
	}
	if err := s.advanceWatermark(15); err != nil || len(*log) != 3 {
		t.Fatalf("same watermark again fired more: %v", *log)
	}
	if err := s.advanceWatermark(20); err != nil {
		t.Fatal(err)
	}
	if len(*log) != 4 || (*log)[3] != (firing{"a", 20, EventTime}) {
		t.Fatalf("fired %v", *log)
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestEventTimerDelete(t *testing.T) {
	s, _, log := newTestService()
	on(s, "a").RegisterEventTimeTimer(10)
	on(s, "b").RegisterEventTimeTimer(10)
	on(s, "a").DeleteEventTimeTimer(10) // only a's
	on(s, "a").DeleteEventTimeTimer(99) // not registered: no effect
	on(s, "c").RegisterEventTimeTimer(30)
	on(s, "c").DeleteEventTimeTimer(30)
	on(s, "c").RegisterEventTimeTimer(30) // registered again after delete
	if n := s.NumEventTimeTimers(); n != 2 {
		t.Fatalf("%d live timers, want 2", n)
	}
	if err := s.advanceWatermark(100); err != nil {
		t.Fatal(err)
	}
	want := []firing{{"b", 10, EventTime}, {"c", 30, EventTime}}
	if !slices.Equal(*log, want) {
		t.Fatalf("fired %v, want %v", *log, want)
	}
	if s.NumEventTimeTimers() != 0 {
		t.Fatalf("%d timers left", s.NumEventTimeTimers())
	}
}

// TestEventTimersFireInOrder: timers registered in random order fire in
// timestamp order, each once, as the watermark advances in random steps.
func TestEventTimersFireInOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	s, _, log := newTestService()
	want := map[firing]bool{}
	for range 2000 {
		k := fmt.Sprint(rng.Intn(20))
		ts := rng.Int63n(1000)
		on(s, k).RegisterEventTimeTimer(ts)
		want[firing{k, ts, EventTime}] = true
	}
	for wm := int64(0); wm < 1100; wm += rng.Int63n(50) {
		if err := s.advanceWatermark(wm); err != nil {
			t.Fatal(err)
		}
		for _, f := range *log {
			if f.ts > wm {
				t.Fatalf("timer %d fired at watermark %d", f.ts, wm)
			}
		}
	}
	if err := s.advanceWatermark(MaxWatermark); err != nil {
		t.Fatal(err)
	}
	if len(*log) != len(want) {
		t.Fatalf("%d firings, want %d", len(*log), len(want))
	}
	for i, f := range *log {
		if !want[f] {
			t.Fatalf("unexpected or repeated firing %v", f)
		}
		delete(want, f)
		if i > 0 && f.ts < (*log)[i-1].ts {
			t.Fatalf("timer %d fired after %d", f.ts, (*log)[i-1].ts)
		}
	}
}

// TestTimerRegisteredWhileFiring: a timer registered from OnTimer at or
// before the watermark fires in the same advance; a later one waits.
func TestTimerRegisteredWhileFiring(t *testing.T) {
	var s *TimerService[string]
	var log []firing
	s = newTimerService[string](&fakeClock{}, func(k string, ts int64, d TimeDomain) error {
		log = append(log, firing{k, ts, d})
		if ts == 10 {
			on(s, k).RegisterEventTimeTimer(12)
			on(s, k).RegisterEventTimeTimer(50)
		}
		return nil
	})
	on(s, "a").RegisterEventTimeTimer(10)
	if err := s.advanceWatermark(20); err != nil {
		t.Fatal(err)
	}
	if want := []firing{{"a", 10, EventTime}, {"a", 12, EventTime}}; !slices.Equal(log, want) {
		t.Fatalf("fired %v, want %v", log, want)
	}
	if s.NumEventTimeTimers() != 1 {
		t.Fatalf("%d timers left, want the one at 50", s.NumEventTimeTimers())
	}
}

func TestProcessingTimers(t *testing.T) {
	s, clock, log := newTestService()
	on(s, "a").RegisterProcessingTimeTimer(1100)
	if got := clock.scheduled(); !slices.Equal(got, []int64{1100}) {
		t.Fatalf("scheduled %v, want [1100]", got)
	}
	on(s, "b").RegisterProcessingTimeTimer(1050) // earlier: reschedules
	on(s, "b").RegisterProcessingTimeTimer(1050) // duplicate
	on(s, "a").RegisterProcessingTimeTimer(1200) // later: no new callback
	if got := clock.scheduled(); !slices.Equal(got, []int64{1050}) {
		t.Fatalf("scheduled %v, want only [1050]", got)
	}
	on(s, "c").RegisterProcessingTimeTimer(1060)
	on(s, "c").DeleteProcessingTimeTimer(1060)
	if s.NumProcessingTimeTimers() != 3 {
		t.Fatalf("%d live processing-time timers, want 3", s.NumProcessingTimeTimers())
	}
	clock.advance(t, 1070)
	if want := []firing{{"b", 1050, ProcessingTime}}; !slices.Equal(*log, want) {
		t.Fatalf("fired %v, want %v", *log, want)
	}
	clock.advance(t, 1150)
	clock.advance(t, 5000)
	want := []firing{{"b", 1050, ProcessingTime}, {"a", 1100, ProcessingTime}, {"a", 1200, ProcessingTime}}
	if !slices.Equal(*log, want) {
		t.Fatalf("fired %v, want %v", *log, want)
	}
	if s.NumProcessingTimeTimers() != 0 || len(clock.scheduled()) != 0 {
		t.Fatalf("left: %d timers, callbacks at %v", s.NumProcessingTimeTimers(), clock.scheduled())
	}
	// Event time and processing time are separate: the watermark fires
	// none of them.
	on(s, "x").RegisterProcessingTimeTimer(9000)
	if err := s.advanceWatermark(MaxWatermark); err != nil {
		t.Fatal(err)
	}
	if len(*log) != 3 {
		t.Fatalf("watermark fired a processing-time timer: %v", *log)
	}
	s.close()
	if len(clock.scheduled()) != 0 {
		t.Fatalf("close left callbacks at %v", clock.scheduled())
	}
}

func TestTimerErrorStopsFiring(t *testing.T) {
	boom := fmt.Errorf("boom")
	calls := 0
	s := newTimerService[string](&fakeClock{}, func(string, int64, TimeDomain) error {
		calls++
		return boom
	})
	on(s, "a").RegisterEventTimeTimer(1)
	on(s, "a").RegisterEventTimeTimer(2)
	if err := s.advanceWatermark(10); err != boom {
		t.Fatalf("advanceWatermark: %v", err)
	}
	if calls != 1 {
		t.Fatalf("%d timers fired after an error", calls)
	}
}

// Timers of one timestamp fire in the order of their encoded keys
// (then namespaces), whatever order they were registered in, and so
// again after a restore, whose timers come back in no particular order:
// a restored job fires them as the job that took the checkpoint would
// have (and a test harness as the job does).
// timerBackend is a heap backend of every key group, restored from snap
// if not nil.
func timerBackend(t *testing.T, snap []byte) state.KeyedBackend {
	t.Helper()
	b, err := state.HeapBackendFactory(state.BackendOptions{MaxParallelism: 128, Parallelism: 1, KeyGroups: state.RangeFor(128, 1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if snap != nil {
		if err := b.Restore(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// persistedTimers is a string-keyed timer service whose timers live in
// b's keyed state, as a keyed operator's do; its store's setKey sets the
// current key of both. fire is called with each timer that fires.
func persistedTimers(t *testing.T, b state.KeyedBackend, fire func(k string, ts int64)) (*TimerService[string], *Context) {
	t.Helper()
	kc := codec.DefaultKey[string]()
	s := newTimerService[string](&fakeClock{}, func(k string, ts int64, _ TimeDomain) error {
		fire(k, ts)
		return nil
	})
	setKey := func(k string) error {
		kb, err := kc.Append(nil, k)
		if err != nil {
			return err
		}
		b.SetCurrentKey(kb, state.KeyGroupFor(kb, b.MaxParallelism()))
		s.current = k
		return nil
	}
	ctx := &Context{KeyedState: b}
	if err := s.persistIn(ctx, setKey, kc); err != nil {
		t.Fatal(err)
	}
	return s, ctx
}

func TestTimersOfOneTimestampFireInKeyOrder(t *testing.T) {
	kc := codec.DefaultKey[string]()
	newService := func(b state.KeyedBackend) (*TimerService[string], *[]string, *Context) {
		var fired []string
		s, ctx := persistedTimers(t, b, func(k string, ts int64) { fired = append(fired, fmt.Sprintf("%s@%d", k, ts)) })
		return s, &fired, ctx
	}
	keys := []string{"k7", "k2", "k9", "k1", "k5", "k3", "k8", "k4", "k6"}
	s, fired, ctx := newService(timerBackend(t, nil))
	for _, k := range keys {
		if err := s.store.setKey(k); err != nil {
			t.Fatal(err)
		}
		s.RegisterEventTimeTimer(10)
		s.RegisterEventTimeTimer(20)
	}
	snap := snapshot(t, ctx)
	if err := s.advanceWatermark(30); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ts := range []int{10, 20} {
		sorted := slices.Clone(keys)
		slices.SortFunc(sorted, func(a, b string) int {
			ka, _ := kc.Append(nil, a)
			kb, _ := kc.Append(nil, b)
			return bytes.Compare(ka, kb)
		})
		for _, k := range sorted {
			want = append(want, fmt.Sprintf("%s@%d", k, ts))
		}
	}
	if !slices.Equal(*fired, want) {
		t.Fatalf("fired\n%v\nwant\n%v", *fired, want)
	}
	for range 5 {
		rs, rfired, _ := newService(timerBackend(t, snap))
		if err := rs.advanceWatermark(30); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(*rfired, want) {
			t.Fatalf("restored, fired\n%v\nwant\n%v", *rfired, want)
		}
	}
}

// The timer state equals the live timers after every flush, whatever
// registers, deletes, re-registers and fires came between two flushes,
// and a service restored from a snapshot taken after a flush fires
// exactly the timers live at it.
func TestTimerStateAfterFlushIsTheLiveTimers(t *testing.T) {
	kc := codec.DefaultKey[string]()
	type live struct {
		key string
		ts  int64
	}
	open := func(b state.KeyedBackend, fired map[live]bool) (*TimerService[string], *Context) {
		return persistedTimers(t, b, func(k string, ts int64) { fired[live{k, ts}] = true })
	}
	stored := func(b state.KeyedBackend) map[live]bool {
		got := map[live]bool{}
		err := RegisteredTimers(b, func(key []byte, _ TimeDomain, ts int64, _ []byte) error {
			k, err := kc.Decode(key)
			got[live{k, ts}] = true
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	rng := rand.New(rand.NewSource(7))
	b := timerBackend(t, nil)
	fired := map[live]bool{}
	s, ctx := open(b, fired)
	want := map[live]bool{}
	wm := int64(0)
	for round := range 40 {
		for range rng.Intn(60) {
			l := live{fmt.Sprintf("k%d", rng.Intn(8)), wm + 1 + int64(rng.Intn(20))}
			if err := s.store.setKey(l.key); err != nil {
				t.Fatal(err)
			}
			if rng.Intn(3) == 0 {
				s.DeleteEventTimeTimer(l.ts)
				delete(want, l)
			} else {
				s.RegisterEventTimeTimer(l.ts)
				want[l] = true
			}
		}
		if rng.Intn(2) == 0 {
			wm += int64(rng.Intn(6))
			if err := s.advanceWatermark(wm); err != nil {
				t.Fatal(err)
			}
			for l := range want {
				if l.ts <= wm {
					delete(want, l)
				}
			}
		}
		if err := s.takeErr(); err != nil {
			t.Fatal(err)
		}
		if err := ctx.FlushKeyedState(); err != nil {
			t.Fatal(err)
		}
		if got := stored(b); !maps.Equal(got, want) {
			t.Fatalf("round %d: timer state %v, want the live timers %v", round, got, want)
		}
		if s.NumEventTimeTimers() != len(want) {
			t.Fatalf("round %d: %d live timers, want %d", round, s.NumEventTimeTimers(), len(want))
		}
	}
	rfired := map[live]bool{}
	rs, _ := open(timerBackend(t, snapshot(t, ctx)), rfired)
	if err := rs.advanceWatermark(MaxWatermark); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(rfired, want) {
		t.Fatalf("restored, fired %v, want %v", rfired, want)
	}
}

// Without checkpoints nothing flushes: the timers registered and fired
// meanwhile are forgotten, not kept for a flush that never comes, and the
// flush that finally comes still writes exactly the live timers.
func TestTimersWithoutFlushesStayBounded(t *testing.T) {
	b := timerBackend(t, nil)
	fired := 0
	s, ctx := persistedTimers(t, b, func(string, int64) { fired++ })
	const n = 50_000
	for i := range n {
		if err := s.store.setKey(fmt.Sprintf("k%d", i%100)); err != nil {
			t.Fatal(err)
		}
		s.RegisterEventTimeTimer(int64(i + 1))
		if i%10 == 9 {
			if err := s.advanceWatermark(int64(i - 5)); err != nil {
				t.Fatal(err)
			}
		}
		if size := len(s.event.set) + len(s.event.dirty); size > 4*minTimerCompaction {
			t.Fatalf("after %d timers the queue holds %d entries", i+1, size)
		}
	}
	if err := ctx.FlushKeyedState(); err != nil {
		t.Fatal(err)
	}
	stored := 0
	if err := RegisteredTimers(b, func([]byte, TimeDomain, int64, []byte) error { stored++; return nil }); err != nil {
		t.Fatal(err)
	}
	if live := s.NumEventTimeTimers(); stored != live || live+fired != n {
		t.Fatalf("%d timers stored, %d live, %d fired of %d", stored, live, fired, n)
	}
}
