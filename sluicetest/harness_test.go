package sluicetest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/state"
)

type click struct {
	User string
	N    int
}

type count struct {
	User  string
	Count int64
}

var (
	countDesc = state.ValueStateDescriptor[int64]{Name: "count"}
	idleTag   = sluice.NewOutputTag[string]("idle")
	errBad    = errors.New("bad click")
)

// counter counts clicks per user: it emits the count when event time
// passes the click's timestamp + 10, and the user on the idle side output
// when no click came for 100 ms of processing time.
type counter struct {
	count state.ValueState[int64]
}

func (c *counter) Open(ctx *sluice.OperatorContext) (err error) {
	c.count, err = state.GetValueState(ctx.KeyedState, countDesc)
	return err
}

func (c *counter) ProcessElement(ctx *sluice.KeyedContext[string], v click, _ sluice.Collector[count]) error {
	if v.N < 0 {
		return errBad
	}
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	if err := c.count.Update(n + int64(v.N)); err != nil {
		return err
	}
	ctx.Timers().RegisterEventTimeTimer(ctx.Timestamp() + 10)
	ctx.Timers().RegisterProcessingTimeTimer(ctx.Timers().CurrentProcessingTime() + 100)
	return nil
}

func (c *counter) OnTimer(ctx *sluice.KeyedContext[string], ts int64, out sluice.Collector[count]) error {
	if ctx.TimeDomain() == sluicetest.ProcessingTime {
		sluice.EmitSide(ctx, idleTag, ctx.Key())
		return nil
	}
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	out.Collect(count{User: ctx.Key(), Count: n})
	return nil
}

func buildCounter(in *sluice.Stream[click]) *sluice.Stream[count] {
	out := sluice.Process(sluice.KeyBy(in, func(c click) string { return c.User }), &counter{}, sluice.UID("count"))
	sluice.SideOutput(out, idleTag)
	return out
}

// A keyed process function driven by hand: its output, state and timers
// read back; event time and processing time fire its timers only when
// moved; its error comes back from ProcessElementErr.
func TestKeyedProcessHarness(t *testing.T) {
	h := sluicetest.New(t, buildCounter, sluicetest.WithProcessingTime(1_000))
	h.ProcessElement(click{"ann", 1}, 100)
	h.ProcessElement(click{"bob", 2}, 105)
	h.ProcessElement(click{"ann", 3}, 107)

	if n, ok := sluicetest.Value(h, "ann", countDesc); !ok || n != 4 {
		t.Fatalf("ann's count: %d, %t; want 4", n, ok)
	}
	if got := sluicetest.Keys[string](h, "count"); !slices.Equal(got, []string{"ann", "bob"}) {
		t.Fatalf("keys with a count: %v", got)
	}
	want := []sluicetest.Timer[string]{
		{Key: "ann", Timestamp: 110, Domain: sluicetest.EventTime},
		{Key: "bob", Timestamp: 115, Domain: sluicetest.EventTime},
		{Key: "ann", Timestamp: 117, Domain: sluicetest.EventTime},
		{Key: "ann", Timestamp: 1_100, Domain: sluicetest.ProcessingTime},
		{Key: "bob", Timestamp: 1_100, Domain: sluicetest.ProcessingTime},
	}
	if got := sluicetest.Timers[string](h); !slices.Equal(got, want) {
		t.Fatalf("timers:\n got %v\nwant %v", got, want)
	}

	h.ProcessWatermark(114)
	if got := h.Output(); !slices.Equal(got, []sluicetest.Record[count]{{Value: count{"ann", 4}, Timestamp: 110}}) {
		t.Fatalf("output at watermark 114: %v", got)
	}
	if got := h.Watermarks(); !slices.Equal(got, []int64{114}) {
		t.Fatalf("watermarks: %v", got)
	}
	h.SetProcessingTime(1_099)
	if got := sluicetest.SideOutput(h, idleTag); len(got) != 0 {
		t.Fatalf("idle before 1100: %v", got)
	}
	h.AdvanceProcessingTime(time.Millisecond)
	if got := sluicetest.SideOutput(h, idleTag); len(got) != 2 || got[0].Value != "ann" || got[1].Value != "bob" {
		t.Fatalf("idle at 1100: %v", got)
	}
	if len(sluicetest.Timers[string](h)) != 2 {
		t.Fatalf("timers after firing: %v", sluicetest.Timers[string](h))
	}
	if err := h.ProcessElementErr(click{"cy", -1}, 120); !errors.Is(err, errBad) {
		t.Fatalf("a bad click: %v, want %v", err, errBad)
	}
}

// A snapshot restores into harnesses of another parallelism: each key's
// state and timers land on the subtask that owns its key group, and the
// restored operators carry on as the first would have.
func TestSnapshotRestoreRescales(t *testing.T) {
	users := make([]string, 40)
	for i := range users {
		users[i] = fmt.Sprintf("user-%02d", i)
	}
	feed := func(h *sluicetest.Harness[click, count], from int) {
		for i, u := range users {
			h.ProcessElement(click{u, i + 1}, int64(from+i))
		}
	}
	ref := sluicetest.New(t, buildCounter, sluicetest.WithParallelism(2))
	feed(ref, 0)
	snap := ref.Snapshot()
	feed(ref, 100)
	ref.ProcessWatermark(sluicetest.MaxWatermark)

	for _, p := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("parallelism %d", p), func(t *testing.T) {
			h := sluicetest.New(t, buildCounter, sluicetest.RestoreFrom(snap.Path), sluicetest.WithParallelism(p))
			perSubtask := map[int]int{}
			for i, u := range users {
				if n, ok := sluicetest.Value(h, u, countDesc); !ok || n != int64(i+1) {
					t.Fatalf("%s after the restore: %d, %t; want %d", u, n, ok, i+1)
				}
			}
			for _, tm := range sluicetest.Timers[string](h) {
				if tm.Domain == sluicetest.EventTime {
					perSubtask[0]++
				}
			}
			if perSubtask[0] != len(users) {
				t.Fatalf("%d event-time timers restored, want %d", perSubtask[0], len(users))
			}
			feed(h, 100)
			h.ProcessWatermark(sluicetest.MaxWatermark)
			if got, want := sorted(h.Values()), sorted(ref.Values()); !slices.Equal(got, want) {
				t.Fatalf("restored at %d:\n got %v\nwant %v", p, got, want)
			}
			subtasks := map[int]bool{}
			for _, r := range h.Output() {
				subtasks[r.Subtask] = true
			}
			if len(subtasks) != p {
				t.Fatalf("output from %d subtasks, want %d", len(subtasks), p)
			}
		})
	}
}

func sorted(cs []count) []count {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b count) int {
		if a.User != b.User {
			if a.User < b.User {
				return -1
			}
			return 1
		}
		return int(a.Count - b.Count)
	})
	return cs
}

// Reading state the operator never registered, or with the wrong key
// type, fails the test with a message naming what there is.
func TestStateReadsNameTheMistake(t *testing.T) {
	for want, read := range map[string]func(h sluicetest.OperatorHarness){
		`no keyed state "other" (the operator has "count")`: func(h sluicetest.OperatorHarness) {
			sluicetest.Value(h, "ann", state.ValueStateDescriptor[int64]{Name: "other"})
		},
		"not by a codec of int": func(h sluicetest.OperatorHarness) { sluicetest.Timers[int](h) },
		`no side output "late" (taken: "idle")`: func(h sluicetest.OperatorHarness) {
			sluicetest.SideOutput(h, sluice.NewOutputTag[click]("late"))
		},
	} {
		msg := failureOf(t, func(tb testing.TB) {
			h := sluicetest.New(tb, buildCounter)
			h.ProcessElement(click{"ann", 1}, 1)
			read(h)
		})
		if !strings.Contains(msg, want) {
			t.Errorf("failure %q does not say %q", msg, want)
		}
	}
}
