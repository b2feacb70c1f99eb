package sluicetest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/state"
)

// sumClicks sums a window's clicks.
type sumClicks struct{}

func (sumClicks) CreateAccumulator() int64     { return 0 }
func (sumClicks) Add(v click, acc int64) int64 { return acc + int64(v.N) }
func (sumClicks) GetResult(acc int64) int64    { return acc }
func (sumClicks) Merge(a, b int64) int64       { return a + b }

var lateTag = sluice.NewOutputTag[click]("late")

// A build function that adds more than one operator is refused, naming
// them: a harness runs one.
func TestOneOperatorPerHarness(t *testing.T) {
	msg := failureOf(t, func(tb testing.TB) {
		sluicetest.New(tb, func(in *sluice.Stream[click]) *sluice.Stream[int64] {
			sums := sluice.AggregateWindow(sluice.Window(sluice.KeyBy(in, func(c click) string { return c.User }),
				sluice.TumblingEventTimeWindows(time.Second)), sumClicks{})
			return sluice.Map(sums, func(n int64) (int64, error) { return n, nil })
		})
	})
	if !strings.Contains(msg, `added 2 operators ("Window(Aggregate)", "Map")`) {
		t.Fatalf("failure: %s", msg)
	}
}

// Windows through a harness: an aggregate with lateness and a late side
// output, and a count window whose trigger and evictor decide.
func TestWindowHarnesses(t *testing.T) {
	t.Run("event time, lateness, late data", func(t *testing.T) {
		h := sluicetest.New(t, func(in *sluice.Stream[click]) *sluice.Stream[int64] {
			ws := sluice.Window(sluice.KeyBy(in, func(c click) string { return c.User }), sluice.TumblingEventTimeWindows(10*time.Millisecond)).
				AllowedLateness(5 * time.Millisecond).SideOutputLateData(lateTag)
			out := sluice.AggregateWindow(ws, sumClicks{}, sluice.UID("sum"))
			sluice.SideOutput(out, lateTag)
			return out
		})
		h.ProcessElement(click{"ann", 1}, 1)
		h.ProcessElement(click{"ann", 2}, 9)
		h.ProcessElement(click{"ann", 4}, 12)
		want := []sluicetest.Timer[string]{
			{Key: "ann", Timestamp: 9, Domain: sluicetest.EventTime},  // fire [0,10)
			{Key: "ann", Timestamp: 14, Domain: sluicetest.EventTime}, // clean up [0,10); then fire [10,20)
			{Key: "ann", Timestamp: 19, Domain: sluicetest.EventTime},
			{Key: "ann", Timestamp: 24, Domain: sluicetest.EventTime},
		}
		if got := dedupe(sluicetest.Timers[string](h)); !slices.Equal(got, want) {
			t.Fatalf("timers:\n got %v\nwant %v", got, want)
		}
		h.ProcessWatermark(10)
		h.ProcessElement(click{"ann", 8}, 5) // late, within the lateness: fires again
		h.ProcessWatermark(15)
		h.ProcessElement(click{"ann", 16}, 6) // after the cleanup: late data
		h.ProcessWatermark(sluicetest.MaxWatermark)
		if got := h.Output(); !slices.Equal(got, []sluicetest.Record[int64]{{Value: 3, Timestamp: 9}, {Value: 11, Timestamp: 9}, {Value: 4, Timestamp: 19}}) {
			t.Fatalf("window results: %v", got)
		}
		if got := sluicetest.SideOutput(h, lateTag); len(got) != 1 || got[0].Value != (click{"ann", 16}) || got[0].Timestamp != 6 {
			t.Fatalf("late data: %v", got)
		}
		if got := sluicetest.Timers[string](h); len(got) != 0 {
			t.Fatalf("timers after the end of event time: %v", got)
		}
	})
	t.Run("count trigger and evictor", func(t *testing.T) {
		h := sluicetest.New(t, func(in *sluice.Stream[click]) *sluice.Stream[click] {
			return sluice.ReduceWindow(sluice.CountWindowSliding(sluice.KeyBy(in, func(c click) string { return c.User }), 3, 2),
				func(a, b click) (click, error) { return click{a.User, a.N + b.N}, nil })
		})
		for i := 1; i <= 6; i++ {
			h.ProcessElement(click{"bob", i}, sluicetest.NoTimestamp)
		}
		// Every 2 records, the sum of the last 3: 1+2, 1+2+3+4 -> 2+3+4, 4+5+6.
		if got := h.Values(); !slices.Equal(got, []click{{"bob", 3}, {"bob", 9}, {"bob", 15}}) {
			t.Fatalf("count window results: %v", got)
		}
	})
	t.Run("processing time", func(t *testing.T) {
		h := sluicetest.New(t, func(in *sluice.Stream[click]) *sluice.Stream[int64] {
			return sluice.AggregateWindow(sluice.Window(sluice.KeyBy(in, func(c click) string { return c.User }),
				sluice.TumblingProcessingTimeWindows(time.Second)), sumClicks{})
		}, sluicetest.WithProcessingTime(10_500))
		h.ProcessElement(click{"cy", 5}, sluicetest.NoTimestamp)
		h.ProcessElement(click{"cy", 7}, sluicetest.NoTimestamp)
		h.SetProcessingTime(10_998)
		if got := h.Values(); len(got) != 0 {
			t.Fatalf("fired before the end of the window: %v", got)
		}
		h.SetProcessingTime(11_000)
		if got := h.Values(); !slices.Equal(got, []int64{12}) {
			t.Fatalf("fired at the end of the window: %v", got)
		}
	})
}

// dedupe drops equal neighbours (a window's firing and cleanup timers
// coincide without lateness; with it, two windows may share a time).
func dedupe[T comparable](s []T) []T { return slices.Compact(s) }

// joinClicks pairs each user's clicks with the user's latest name.
type joinClicks struct {
	name state.ValueState[string]
}

var nameDesc = state.ValueStateDescriptor[string]{Name: "name"}

func (j *joinClicks) Open(ctx *sluice.OperatorContext) (err error) {
	j.name, err = state.GetValueState(ctx.KeyedState, nameDesc)
	return err
}

func (j *joinClicks) ProcessElement1(ctx *sluice.KeyedContext[string], c click, out sluice.Collector[string]) error {
	n, ok, err := j.name.Value()
	if err != nil || !ok {
		return err
	}
	out.Collect(fmt.Sprintf("%s:%d", n, c.N))
	return nil
}

func (j *joinClicks) ProcessElement2(ctx *sluice.KeyedContext[string], u user, _ sluice.Collector[string]) error {
	return j.name.Update(u.Name)
}

type user struct{ ID, Name string }

// A keyed two-input function: both inputs reach the key's subtask and
// state; the operator's watermark is the minimum of its inputs'.
func TestKeyedCoProcessHarness(t *testing.T) {
	h := sluicetest.KeyedCoProcess(t, func(c click) string { return c.User }, func(u user) string { return u.ID },
		&joinClicks{}, sluicetest.WithParallelism(3))
	h.ProcessElement1(click{"u1", 1}, 1) // no name yet
	h.ProcessElement2(user{"u1", "Ann"}, 2)
	h.ProcessElement2(user{"u2", "Bob"}, 2)
	h.ProcessElement1(click{"u1", 2}, 3)
	h.ProcessElement1(click{"u2", 3}, 4)
	if got := h.Values(); !slices.Equal(got, []string{"Ann:2", "Bob:3"}) {
		t.Fatalf("joined: %v", got)
	}
	if n, _ := sluicetest.Value(h, "u2", nameDesc); n != "Bob" {
		t.Fatalf("u2's name: %q", n)
	}
	h.ProcessWatermark1(10)
	if got := h.Watermarks(); len(got) != 0 {
		t.Fatalf("watermark with input 2 at its start: %v", got)
	}
	h.ProcessWatermark2(7)
	if got := h.Watermarks(); !slices.Equal(got, []int64{7}) {
		t.Fatalf("watermarks: %v", got)
	}
}

var rulesDesc = state.MapStateDescriptor[string, int]{Name: "thresholds"}

// alertOver emits a click over its user's threshold, a broadcast rule.
type alertOver struct{}

func (alertOver) ProcessElement(ctx *sluice.KeyedReadOnlyBroadcastContext[string], c click, out sluice.Collector[string]) error {
	rules, err := sluice.GetReadOnlyBroadcastState(ctx, rulesDesc)
	if err != nil {
		return err
	}
	if limit, ok, err := rules.Get(c.User); err != nil || !ok || c.N <= limit {
		return err
	}
	out.Collect(fmt.Sprintf("%s over: %d", c.User, c.N))
	return nil
}

func (alertOver) ProcessBroadcastElement(ctx *sluice.KeyedBroadcastContext[string], r user, _ sluice.Collector[string]) error {
	rules, err := sluice.GetBroadcastState(ctx, rulesDesc)
	if err != nil {
		return err
	}
	var limit int
	if _, err := fmt.Sscan(r.Name, &limit); err != nil {
		return err
	}
	return rules.Put(r.ID, limit)
}

// A keyed broadcast function: a rule reaches every subtask; its broadcast
// state is every subtask's and survives a restore at another parallelism.
func TestKeyedBroadcastHarness(t *testing.T) {
	// [start broadcast]
	decl := []sluice.BroadcastStateDeclaration{sluice.DeclareBroadcastState(rulesDesc)}
	h := sluicetest.KeyedBroadcastProcess(t, func(c click) string { return c.User }, sluice.KeyedBroadcastProcessFunction[string, click, user, string](alertOver{}),
		decl, sluicetest.WithParallelism(2), sluicetest.WithOperatorOptions(sluice.UID("alerts")))
	h.ProcessElement2(user{"u1", "5"}, sluicetest.NoTimestamp)
	for i := range 2 {
		if got := sluicetest.BroadcastState(h, rulesDesc, i); got["u1"] != 5 {
			t.Fatalf("subtask %d's rules: %v", i, got)
		}
	}
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		h.ProcessElement1(click{u, 6}, 1)
	}
	if got := h.Values(); !slices.Equal(got, []string{"u1 over: 6"}) {
		t.Fatalf("alerts: %v", got)
	}
	// [end broadcast]
	r := sluicetest.KeyedBroadcastProcess(t, func(c click) string { return c.User }, sluice.KeyedBroadcastProcessFunction[string, click, user, string](alertOver{}),
		decl, sluicetest.WithParallelism(3), sluicetest.WithOperatorOptions(sluice.UID("alerts")), sluicetest.RestoreFrom(h.Snapshot().Path))
	for i := range 3 {
		if got := sluicetest.BroadcastState(r, rulesDesc, i); got["u1"] != 5 {
			t.Fatalf("restored subtask %d's rules: %v", i, got)
		}
	}
}

// An async function: its calls complete on other goroutines and their
// results come out in order; a call past its timeout goes to the timeout
// handler when processing time passes it.
func TestAsyncHarness(t *testing.T) {
	release := make(chan struct{})
	lookup := sluice.AsyncFunc[int, string](func(ctx context.Context, v int, rf sluice.ResultFuture[string]) {
		if v < 0 {
			return // never completes: times out
		}
		go func() {
			if v == 1 {
				<-release
			}
			rf.Complete(fmt.Sprint("r", v))
		}()
	})
	h := sluicetest.New(t, func(in *sluice.Stream[int]) *sluice.Stream[string] {
		return sluice.OrderedWait(in, withTimeout{lookup}, time.Second, 10)
	})
	h.ProcessElement(1, 1)
	h.ProcessElement(2, 2)
	h.ProcessElement(-3, 3)
	close(release)
	h.WaitForOutput(2)
	h.AdvanceProcessingTime(time.Second)
	h.WaitForOutput(3)
	if got := h.Values(); !slices.Equal(got, []string{"r1", "r2", "timeout -3"}) {
		t.Fatalf("async results: %v", got)
	}
}

type withTimeout struct {
	sluice.AsyncFunc[int, string]
}

func (withTimeout) Timeout(v int, rf sluice.ResultFuture[string]) {
	rf.Complete(fmt.Sprint("timeout ", v))
}
