package main

import (
	"encoding/json"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/kafkatest"
	"github.com/sluicehq/sluice/state"
)

// The example runs to its end on the embedded broker and its own check of
// the output passes: every user-minute once with its distinct clicks, the
// late clicks in their topic, the resent click dropped.
func TestClickstreamOnEmbeddedBroker(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "")
	os.Unsetenv("KAFKA_BROKERS")
	if err := run(io.Discard); err != nil {
		t.Fatal(err)
	}
}

// manualClock is a TTL clock the test moves.
type manualClock struct{ now atomic.Int64 }

func (c *manualClock) Now() time.Time { return time.UnixMilli(c.now.Load()) }

// The dedup function in a harness: a click id passes once, its flag is in
// keyed state, and the flag expires an hour (state TTL, on the backend's
// clock) after it was written.
func TestDedup(t *testing.T) {
	// [start dedup-test]
	clock := &manualClock{}
	heapWithClock := func(o state.BackendOptions) (state.KeyedBackend, error) {
		return state.NewHeapKeyedBackend(state.HeapOptions{MaxParallelism: o.MaxParallelism, KeyGroups: &o.KeyGroups, Clock: clock})
	}
	h := sluicetest.KeyedProcess(t, func(c Click) string { return c.ID }, sluice.KeyedProcessFunction[string, Click, Click](&dedup{}),
		sluicetest.WithStateBackend(heapWithClock), sluicetest.WithOperatorOptions(sluice.UID("dedup")))
	a, b := Click{ID: "a", User: "ann"}, Click{ID: "b", User: "bob"}
	for _, c := range []Click{a, b, a, a} {
		h.ProcessElement(c, sluicetest.NoTimestamp)
	}
	if got := h.Values(); !slices.Equal(got, []Click{a, b}) {
		t.Fatalf("passed %v, want a and b once", got)
	}
	seen := state.ValueStateDescriptor[bool]{Name: "seen", TTL: state.TTLConfig{TTL: time.Hour}}
	if v, ok := sluicetest.Value(h, "a", seen); !v || !ok {
		t.Fatalf("flag of a: %v, %v", v, ok)
	}
	clock.now.Add(time.Hour.Milliseconds() - 1)
	h.ProcessElement(a, sluicetest.NoTimestamp)
	clock.now.Add(1)
	h.ProcessElement(a, sluicetest.NoTimestamp) // an hour after its flag: a new click
	if got := h.Values(); !slices.Equal(got, []Click{a, b, a}) {
		t.Fatalf("passed %v, want a again once its flag expired", got)
	}
	// [end dedup-test]
}

// The window in a harness: the minute fires when the watermark passes
// its end, and a click for it after that goes to the late output.
func TestCountClicksWithLateData(t *testing.T) {
	// [start late-data]
	late := sluice.NewOutputTag[Click]("late-clicks")
	h := sluicetest.New(t, func(in *sluice.Stream[Click]) *sluice.Stream[UserMinute] {
		perMinute := sluice.ProcessWindow(
			sluice.Window(sluice.KeyBy(in, func(c Click) string { return c.User }), sluice.TumblingEventTimeWindows(time.Minute)).SideOutputLateData(late),
			sluice.ProcessWindowFunc[string, Click, UserMinute](countClicks), sluice.UID("per-minute"))
		sluice.SideOutput(perMinute, late) // the harness records the side outputs the build takes
		return perMinute
	})
	for i, ts := range []int64{1_000, 59_999, 30_000, 60_000} {
		h.ProcessElement(Click{ID: string(rune('a' + i)), User: "ann", TS: ts}, ts)
	}
	h.ProcessWatermark(59_999)
	if got := h.Values(); !slices.Equal(got, []UserMinute{{User: "ann", Start: 0, End: 60_000, Clicks: 3}}) {
		t.Fatalf("fired %v", got)
	}
	h.ProcessElement(Click{ID: "late", User: "ann", TS: 59_000}, 59_000)
	if got := sluicetest.SideOutput(h, late); len(got) != 1 || got[0].Value.ID != "late" {
		t.Fatalf("late output %v", got)
	}
	// [end late-data]
}

// The whole job on a Kafka cluster (embedded; a real one with
// SLUICE_TEST_KAFKA=real), crashed as a killed process is: after 300
// clicks passed the dedup, after 10 user-minutes were written (in a
// transaction not committed yet), and at the 20th checkpoint of the next
// run (1 s in: its user-minutes are committed), before the checkpoint's
// transactions commit. Each time it starts again and resumes; the
// committed output is the plain computation's, each user-minute once.
func TestClickstreamExactlyOnce(t *testing.T) {
	k := kafkatest.Start(t)
	tp := topics{brokers: k.Seeds(), clicks: k.Topic(t, "clicks", partitions), perMinute: k.Topic(t, "per-minute", 2), late: k.Topic(t, "late", 1)}
	input := generateClicks(7)
	if err := produce(t.Context(), k.Seeds(), tp.clicks, input); err != nil {
		t.Fatal(err)
	}
	want := expectedMinutes(input)
	reader := k.CommittedReader(t, tp.perMinute)
	var got []UserMinute
	committed := func() []UserMinute {
		for _, r := range reader.Read()[len(got):] {
			var m UserMinute
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Fatalf("%s at %d: %v", r.Topic, r.Offset, err)
			}
			got = append(got, m)
		}
		return got
	}
	// A live topic keeps receiving clicks; without new ones, a restarted
	// run whose checkpoint had read every partition to its end would see
	// no watermark (Flink does not checkpoint watermarks either). One
	// click per partition every 100 ms, at the input's last moment: in a
	// minute the output never closes.
	keepAlive := k.Client(t, kgo.DefaultProduceTopic(tp.clicks), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for p := range int32(partitions) {
				v, _ := json.Marshal(Click{ID: "keep-alive", User: users[p], TS: start + minutes*60_000})
				keepAlive.Produce(t.Context(), &kgo.Record{Value: v, Partition: p}, nil)
			}
		}
	}()
	defer func() { close(done); <-stopped }()
	settled := 0
	// [start run-job]
	run := sluicetest.RunJob(t, func(env *sluice.Environment) error { return clickstream(env, tp) },
		sluicetest.JobOptions(sluice.WithParallelism(2)),
		sluicetest.CrashAt(sluicetest.AfterRecords("dedup", 300), sluicetest.AfterRecords("per-minute", 10), sluicetest.AtCheckpoint(20)),
		// Every user-minute is committed, and half a second more passed,
		// long enough for the last run to write a user-minute again.
		sluicetest.Until(func() bool {
			if len(committed()) < len(want) {
				return false
			}
			settled++
			return settled > 50
		}))
	t.Logf("%d runs: %v", run.Runs, run.Crashes)
	sluicetest.AssertExactlyOnce(t, committed(), want)
	// [end run-job]
}
