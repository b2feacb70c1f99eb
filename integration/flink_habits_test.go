package integration

import (
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
)

// The real-broker part of the "Flink habits" suite (the rest
// is e2e's and the CLI's flink_habits_test.go): the clickstream job
// a Flink user writes, with nothing but FromSource's strategy and the
// sinks' defaults. Clicks with their event time in the payload (the
// record timestamps are the producer's) on 4 partitions read by 2
// subtasks, event-time sessions per user to one topic, late clicks to
// another, exactly-once checkpoints: both Kafka sinks are exactly-once
// with prefixes of their own, a failure after a checkpoint writes
// nothing twice, no click is late that Flink would not call late (a
// plain per-partition evaluation), and the committed sessions are a
// plain evaluation's over the clicks that were not late.
func TestFlinkHabitClickstreamSessions(t *testing.T) {
	const (
		parts, perPart = 4, 1500
		gap            = 500 * time.Millisecond
	)
	ctx := testContext(t)
	seeds := brokers(t)
	adm := kadm.NewClient(newClient(t))
	inTopic, sessionsTopic, lateTopic := createTopic(ctx, t, adm, parts), createTopic(ctx, t, adm, 2), createTopic(ctx, t, adm, 1)
	clicks := testutil.Clickstream(parts, perPart, 300, 12)
	testutil.ProduceClicks(t, seeds, inTopic, clicks)

	quiet := slog.New(slog.DiscardHandler)
	var completed atomic.Int64
	env := sluice.NewEnvironment(sluice.WithJobName(uniqueName(t, "habit-sessions")), sluice.WithParallelism(2), sluice.WithLogger(quiet),
		sluice.WithCheckpointing(100*time.Millisecond, t.TempDir()),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(1, 100*time.Millisecond)),
		sluice.WithAutoWatermarkInterval(5*time.Millisecond),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				completed.Add(1)
			}
		}))
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(inTopic), kafkasource.ValueDecoder(codec.JSON[testutil.Click]{}),
		kafkasource.Bounded(), kafkasource.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	in := sluice.FromSource(env, src, sluice.ForBoundedOutOfOrderness[testutil.Click](testutil.ClickDisorder).
		WithTimestampAssigner(func(c testutil.Click, _ int64) int64 { return c.TS }), "clicks", sluice.UID("clicks"))
	// Paced, so that watermarks and checkpoints come while the readers
	// hand out their partitions in turn; the first attempt fails once a
	// checkpoint completed and half the clicks went through.
	var seen atomic.Int64
	var failed atomic.Bool
	in = sluice.Map(in, func(c testutil.Click) (testutil.Click, error) {
		n := seen.Add(1)
		if n%20 == 0 {
			time.Sleep(time.Millisecond)
		}
		if n > parts*perPart/2 && completed.Load() > 0 && failed.CompareAndSwap(false, true) {
			return c, errors.New("injected failure")
		}
		return c, nil
	}, sluice.Name("pace"), sluice.UID("pace"))
	late := sluice.NewOutputTag[testutil.Click]("late-clicks")
	sessions := sluice.ProcessWindow(
		sluice.Window(sluice.KeyBy(in, func(c testutil.Click) string { return c.User }), sluice.EventTimeSessionWindows(gap)).
			SideOutputLateData(late),
		sluice.ProcessWindowFunc[string, testutil.Click, testutil.Window](func(ctx *sluice.WindowContext[string], cs []testutil.Click, out sluice.Collector[testutil.Window]) error {
			out.Collect(testutil.Window{User: ctx.Key(), Start: ctx.Window().Start, End: ctx.Window().End, N: len(cs)})
			return nil
		}), sluice.Name("sessions"), sluice.UID("sessions"))
	sessionsOut, err := kafkasink.NewSink(seeds, kafkasink.ValueSerializer(sessionsTopic, codec.JSON[testutil.Window]{}), kafkasink.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	lateOut, err := kafkasink.NewSink(seeds, kafkasink.ValueSerializer(lateTopic, codec.JSON[testutil.Click]{}), kafkasink.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	sluice.SinkTo(sessions, sessionsOut, sluice.Name("sessions out"), sluice.UID("sessions-out"))
	sluice.SinkTo(sluice.SideOutput(sessions, late), lateOut, sluice.Name("late out"), sluice.UID("late-out"))
	if err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if !failed.Load() {
		t.Fatal("the injected failure did not happen")
	}
	if sessionsOut.Guarantee() != kafkasink.ExactlyOnce || lateOut.Guarantee() != kafkasink.ExactlyOnce {
		t.Errorf("sinks %v and %v, want exactly-once from the job's checkpointing", sessionsOut.Guarantee(), lateOut.Guarantee())
	}

	may := testutil.MayCallLate(clicks, testutil.ClickDisorder, func(ts int64) int64 { return ts + gap.Milliseconds() - 1 })
	lateIDs := map[int]bool{}
	for v, n := range testutil.ReadCommitted(t, seeds, lateTopic) {
		var c testutil.Click
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			t.Fatalf("late click %q: %v", v, err)
		}
		if n != 1 {
			t.Errorf("late click %+v committed %d times", c, n)
		}
		if !may[c.ID] {
			t.Errorf("click %+v went to the late output; Flink would not call it late (within its partition's bound)", c)
		}
		lateIDs[c.ID] = true
	}
	var got []testutil.Window
	for v, n := range testutil.ReadCommitted(t, seeds, sessionsTopic) {
		var w testutil.Window
		if err := json.Unmarshal([]byte(v), &w); err != nil {
			t.Fatalf("session %q: %v", v, err)
		}
		for range n {
			got = append(got, w)
		}
	}
	// A click that may be late (a straggler, behind its partition's
	// bound) but was not makes its user's sessions depend on when it came:
	// it may start a session of its own beside one that already fired,
	// where the plain evaluation merges the two. Those users' sessions,
	// merged where they intersect, are the plain evaluation's; every
	// other user's are exactly.
	uncertain := map[string]bool{}
	for _, cs := range clicks {
		for _, c := range cs {
			if may[c.ID] && !lateIDs[c.ID] {
				uncertain[c.User] = true
			}
		}
	}
	var exact, merged []testutil.Window
	for _, w := range got {
		if uncertain[w.User] {
			merged = append(merged, w)
		} else {
			exact = append(exact, w)
		}
	}
	wantExact, wantMerged := map[testutil.Window]bool{}, map[testutil.Window]bool{}
	for w := range testutil.SessionCounts(clicks, gap, lateIDs) {
		if uncertain[w.User] {
			wantMerged[w] = true
		} else {
			wantExact[w] = true
		}
	}
	if diff := testutil.DiffWindows(exact, wantExact); diff != "" {
		t.Errorf("committed sessions differ from the plain evaluation: %s", diff)
	}
	if diff := testutil.DiffWindows(testutil.MergeSessions(merged), wantMerged); diff != "" {
		t.Errorf("committed sessions of the users with a straggler that was not late, merged where they intersect, differ from the plain evaluation: %s", diff)
	}
	t.Logf("%d clicks, %d sessions, %d late of %d Flink may call late; %d of the users' sessions compared merged", parts*perPart, len(got), len(lateIDs), len(may), len(uncertain))
}
