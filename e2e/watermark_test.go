package e2e

import (
	"fmt"
	"math"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

const maxWatermark = math.MaxInt64

// fired is what the timer probes emit from OnTimer.
type fired struct {
	Key    int64
	TS     int64 // the timer's timestamp
	WM     int64 // the operator's watermark when it fired
	Domain operators.TimeDomain
}

// eventTimerProbe registers an event-time timer at every record's
// timestamp (twice: one per (key, ts) must fire), plus one at ts+1e6 that
// it deletes again, and emits a fired record per timer. onFire, if set, is
// called on the task goroutine for every firing.
type eventTimerProbe struct {
	key    func(v int64) int64
	onFire func(f fired)
}

func (p *eventTimerProbe) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, out sluice.Collector[fired]) error {
	if ctx.Key() != p.key(v) {
		return fmt.Errorf("record %d: context key %d", v, ctx.Key())
	}
	ts := ctx.Timestamp()
	if ts == operators.NoTimestamp {
		return fmt.Errorf("record %d has no timestamp", v)
	}
	tm := ctx.Timers()
	tm.RegisterEventTimeTimer(ts)
	tm.RegisterEventTimeTimer(ts)
	tm.RegisterEventTimeTimer(ts + 1_000_000)
	tm.DeleteEventTimeTimer(ts + 1_000_000)
	return nil
}

func (p *eventTimerProbe) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, out sluice.Collector[fired]) error {
	f := fired{Key: ctx.Key(), TS: ts, WM: ctx.Timers().CurrentWatermark(), Domain: ctx.TimeDomain()}
	if ctx.Timestamp() != ts {
		return fmt.Errorf("OnTimer(%d): context timestamp %d", ts, ctx.Timestamp())
	}
	if p.onFire != nil {
		p.onFire(f)
	}
	out.Collect(f)
	return nil
}

// checkFirings checks that each wanted (key, ts) fired exactly once, as
// an event-time timer, after the watermark passed it, with the timer's
// timestamp on the emitted record, in timestamp order per subtask.
func checkFirings(t *testing.T, recs []sink.Collected[fired], want map[[2]int64]bool) {
	t.Helper()
	seen := map[[2]int64]bool{}
	last := map[int]int64{}
	for _, r := range recs {
		f := r.Value
		k := [2]int64{f.Key, f.TS}
		if !want[k] {
			t.Errorf("unexpected timer fired: key %d ts %d", f.Key, f.TS)
		}
		if seen[k] {
			t.Errorf("timer key %d ts %d fired twice", f.Key, f.TS)
		}
		seen[k] = true
		if f.Domain != operators.EventTime {
			t.Errorf("timer %v fired in domain %v", k, f.Domain)
		}
		if f.WM < f.TS {
			t.Errorf("timer ts %d fired at watermark %d", f.TS, f.WM)
		}
		if r.Timestamp != f.TS {
			t.Errorf("record emitted by timer %d has timestamp %d", f.TS, r.Timestamp)
		}
		if prev, ok := last[r.Subtask]; ok && f.TS < prev {
			t.Errorf("subtask %d fired timer %d after timer %d", r.Subtask, f.TS, prev)
		}
		last[r.Subtask] = f.TS
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("timer key %d ts %d never fired", k[0], k[1])
		}
	}
}

// TestEventTimersFireInOrder: event-time timers from a slice source with
// out-of-order timestamps (ForBoundedOutOfOrderness, SliceTimestamps) fire
// once per (key, ts), in timestamp order, never before the watermark
// passes them; a deleted timer never fires; at the end of the bounded
// input every remaining timer fires.
func TestEventTimersFireInOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	vals := make([]int64, 600)
	ts := map[int64]int64{}
	want := map[[2]int64]bool{}
	for i := range vals {
		v := int64(i)
		vals[i] = v
		ts[v] = v*10 + rng.Int63n(40) // out of order by less than 50 ms
		want[[2]int64{v % 7, ts[v]}] = true
	}
	env := newEnv(sluice.WithParallelism(2), sluice.WithAutoWatermarkInterval(time.Millisecond))
	s := sluice.FromSource(env, source.FromSlice(vals, source.SliceTimestamps(func(v int64) int64 { return ts[v] })),
		sluice.ForBoundedOutOfOrderness[int64](50*time.Millisecond), "events")
	key := func(v int64) int64 { return v % 7 }
	p := sluice.Process[int64, int64, fired](sluice.KeyBy(s, key), &eventTimerProbe{key: key}, sluice.Name("timers"), sluice.Parallelism(3))
	out := sink.NewCollect[fired]()
	sluice.SinkTo(p, out, sluice.Parallelism(3))
	mustExecute(t, env)
	checkFirings(t, out.Records(), want)
}

// TestPeriodicWatermarksFireTimers: with ForBoundedOutOfOrderness(100ms)
// the source's periodic watermark is maxTimestamp-100-1; it fires the
// timers up to it while the source is still running, and the rest fire
// with the maximum watermark when the source ends.
func TestPeriodicWatermarksFireTimers(t *testing.T) {
	release := newOnce()
	var script []step
	want := map[[2]int64]bool{}
	add := func(v int64) {
		script = append(script, rec(v, v))
		want[[2]int64{v % 3, v}] = true
	}
	for v := int64(0); v <= 1000; v += 10 {
		add(v)
		if v == 890 {
			add(899) // the first watermark that fires it is 1000-100-1
		}
	}
	script = append(script, waitFor(release.C()))
	var afterRelease atomic.Bool
	probe := &eventTimerProbe{key: func(v int64) int64 { return v % 3 }, onFire: func(f fired) {
		if f.TS == 899 {
			release.close()
			afterRelease.Store(true)
		}
	}}
	env := newEnv(sluice.WithAutoWatermarkInterval(time.Millisecond))
	s := sluice.FromSource[int64](env, newScriptSource(script), sluice.ForBoundedOutOfOrderness[int64](100*time.Millisecond), "events")
	p := sluice.Process[int64, int64, fired](sluice.KeyBy(s, probe.key), probe, sluice.Name("timers"))
	out := sink.NewCollect[fired]()
	sluice.SinkTo(p, out)
	mustExecute(t, env)
	recs := out.Records()
	checkFirings(t, recs, want)
	for _, r := range recs {
		f := r.Value
		switch {
		case f.TS <= 899 && f.WM > 899:
			t.Errorf("timer %d fired at watermark %d: the periodic watermark never passed 899", f.TS, f.WM)
		case f.TS == 899 && f.WM != 899:
			t.Errorf("timer 899 fired at watermark %d, want 1000-100-1 = 899", f.WM)
		case f.TS > 899 && f.WM != maxWatermark:
			t.Errorf("timer %d fired at watermark %d before the end of input", f.TS, f.WM)
		}
	}
}

// TestWatermarkIsMinimumOfInputs: a task reading two sources (a union) has
// the minimum of their watermarks: the source with the lower watermark
// holds back the timers of the other.
//
// Phase 1: a emits records at 1000..1009 and watermark 2000, b records at
// 10..19 and watermark 50: only b's timers fire, at watermark 50. Phase 2:
// b's watermark goes to 1005: a's timers up to 1005 fire at 1005. Phase 3:
// b ends, which takes it out of the minimum: the rest fire at a's 2000.
// Then a ends too.
func TestWatermarkIsMinimumOfInputs(t *testing.T) {
	phase2, phase3, phase4 := newOnce(), newOnce(), newOnce()
	var a, b []step
	want := map[[2]int64]bool{}
	for v := int64(1000); v < 1010; v++ {
		a = append(a, rec(v, v))
		want[[2]int64{v, v}] = true
	}
	a = append(a, wmark(2000), waitFor(phase4.C()))
	for v := int64(10); v < 20; v++ {
		b = append(b, rec(v, v))
		want[[2]int64{v, v}] = true
	}
	b = append(b, wmark(50), waitFor(phase2.C()), wmark(1005), waitFor(phase3.C()))

	var firings atomic.Int64
	probe := &eventTimerProbe{key: func(v int64) int64 { return v }, onFire: func(f fired) {
		switch firings.Add(1) {
		case 10:
			phase2.close()
		case 16:
			phase3.close()
		case 20:
			phase4.close()
		}
	}}
	env := newEnv()
	sa := sluice.FromSource[int64](env, newScriptSource(a), sluice.NoWatermarks[int64](), "a")
	sb := sluice.FromSource[int64](env, newScriptSource(b), sluice.NoWatermarks[int64](), "b")
	p := sluice.Process[int64, int64, fired](sluice.KeyBy(sluice.Union(sa, sb), probe.key), probe, sluice.Name("timers"))
	out := sink.NewCollect[fired]()
	sluice.SinkTo(p, out)
	mustExecute(t, env)
	recs := out.Records()
	checkFirings(t, recs, want)
	if len(recs) != 20 {
		t.Fatalf("%d timers fired, want 20", len(recs))
	}
	for i, r := range recs {
		f := r.Value
		var wantWM int64
		switch {
		case i < 10:
			wantWM = 50
		case i < 16:
			wantWM = 1005
		default:
			wantWM = 2000
		}
		if f.WM != wantWM {
			t.Errorf("firing #%d (timer %d) at watermark %d, want %d", i+1, f.TS, f.WM, wantWM)
		}
	}
}

// TestIdleInputDoesNotHoldWatermark: a source that emits nothing and is
// marked idle (WithIdleness) does not hold back the watermark of a task
// that reads it and an active source: the active source's periodic
// watermark (ForMonotonousTimestamps: max timestamp - 1) fires its timers
// while both sources still run.
func TestIdleInputDoesNotHoldWatermark(t *testing.T) {
	release := newOnce()
	want := map[[2]int64]bool{}
	var script []step
	for v := int64(0); v <= 4900; v += 100 {
		script = append(script, rec(v, v))
		want[[2]int64{v % 5, v}] = true
	}
	script = append(script, waitFor(release.C()))
	probe := &eventTimerProbe{key: func(v int64) int64 { return v % 5 }, onFire: func(f fired) {
		if f.TS == 4800 { // the last timer below the watermark 4899
			release.close()
		}
	}}
	env := newEnv(sluice.WithAutoWatermarkInterval(2 * time.Millisecond))
	active := sluice.FromSource[int64](env, newScriptSource(script), sluice.ForMonotonousTimestamps[int64](), "active")
	idle := sluice.FromSource[int64](env, newScriptSource([]step{waitFor(release.C())}),
		sluice.NoWatermarks[int64]().WithIdleness(10*time.Millisecond), "idle")
	p := sluice.Process[int64, int64, fired](sluice.KeyBy(sluice.Union(active, idle), probe.key), probe, sluice.Name("timers"))
	out := sink.NewCollect[fired]()
	sluice.SinkTo(p, out)
	mustExecute(t, env)
	checkFirings(t, out.Records(), want)
	for _, r := range out.Records() {
		if f := r.Value; (f.TS < 4900) != (f.WM <= 4899) {
			t.Errorf("timer %d fired at watermark %d: want the active source's watermark 4899 for timers below it, the maximum for 4900", f.TS, f.WM)
		}
	}
}

// TestFinishedAndIdleInputs: once the only non-idle input has finished
// (its watermark is the maximum), an idle input does not hold the task's
// watermark back either: every timer fires while the idle source runs.
func TestFinishedAndIdleInputs(t *testing.T) {
	release := newOnce()
	want := map[[2]int64]bool{}
	vals := ints(0, 50)
	for _, v := range vals {
		want[[2]int64{v % 5, v * 100}] = true
	}
	var firings atomic.Int64
	probe := &eventTimerProbe{key: func(v int64) int64 { return v % 5 }, onFire: func(fired) {
		if firings.Add(1) == int64(len(vals)) {
			release.close()
		}
	}}
	env := newEnv(sluice.WithAutoWatermarkInterval(2 * time.Millisecond))
	bounded := sluice.FromSource(env, source.FromSlice(vals, source.SliceTimestamps(func(v int64) int64 { return v * 100 })),
		sluice.ForMonotonousTimestamps[int64](), "bounded")
	idle := sluice.FromSource[int64](env, newScriptSource([]step{waitFor(release.C())}),
		sluice.NoWatermarks[int64]().WithIdleness(10*time.Millisecond), "idle")
	p := sluice.Process[int64, int64, fired](sluice.KeyBy(sluice.Union(bounded, idle), probe.key), probe, sluice.Name("timers"))
	out := sink.NewCollect[fired]()
	sluice.SinkTo(p, out)
	mustExecute(t, env)
	checkFirings(t, out.Records(), want)
}

// procTimerProbe registers a processing-time timer a few ms ahead per
// record, and one far ahead that it deletes.
type procTimerProbe struct {
	onFire func(f fired)
}

func (p *procTimerProbe) ProcessElement(ctx *sluice.KeyedContext[int64], v int64, out sluice.Collector[fired]) error {
	tm := ctx.Timers()
	now := tm.CurrentProcessingTime()
	tm.RegisterProcessingTimeTimer(now + 5)
	tm.RegisterProcessingTimeTimer(now + 5) // once per (key, ts)
	tm.RegisterProcessingTimeTimer(now + 3_600_000)
	tm.DeleteProcessingTimeTimer(now + 3_600_000)
	return nil
}

func (p *procTimerProbe) OnTimer(ctx *sluice.KeyedContext[int64], ts int64, out sluice.Collector[fired]) error {
	f := fired{Key: ctx.Key(), TS: ts, WM: ctx.Timers().CurrentWatermark(), Domain: ctx.TimeDomain()}
	if now := ctx.Timers().CurrentProcessingTime(); now < ts {
		return fmt.Errorf("processing-time timer %d fired at %d", ts, now)
	}
	p.onFire(f)
	out.Collect(f)
	return nil
}

// TestProcessingTimeTimers: processing-time timers fire on the task
// goroutine while the job runs, once per (key, ts), with no timestamp on
// what they emit.
func TestProcessingTimeTimers(t *testing.T) {
	release := newOnce()
	var script []step
	for k := range int64(5) {
		script = append(script, rec(k, operators.NoTimestamp))
	}
	script = append(script, waitFor(release.C()))
	var firings atomic.Int64
	probe := &procTimerProbe{onFire: func(fired) {
		if firings.Add(1) == 5 {
			release.close()
		}
	}}
	env := newEnv(sluice.WithParallelism(2))
	s := sluice.FromSource[int64](env, newScriptSource(script), sluice.NoWatermarks[int64](), "keys", sluice.Parallelism(1))
	p := sluice.Process[int64, int64, fired](sluice.KeyBy(s, func(v int64) int64 { return v }), probe, sluice.Name("timers"))
	out := sink.NewCollect[fired]()
	sluice.SinkTo(p, out)
	mustExecute(t, env)
	recs := out.Records()
	if len(recs) != 5 {
		t.Fatalf("%d processing-time timers fired, want 5: %v", len(recs), recs)
	}
	keys := map[int64]bool{}
	for _, r := range recs {
		if r.Value.Domain != operators.ProcessingTime {
			t.Errorf("timer fired in domain %v", r.Value.Domain)
		}
		if r.Timestamp != operators.NoTimestamp {
			t.Errorf("processing-time timer emitted a record with timestamp %d", r.Timestamp)
		}
		keys[r.Value.Key] = true
	}
	if len(keys) != 5 {
		t.Fatalf("timers fired for keys %v, want 0..4", keys)
	}
}
