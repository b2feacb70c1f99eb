package main

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/kafkatest"
	"github.com/sluicehq/sluice/state"
)

var countDesc = state.ValueStateDescriptor[int64]{Name: "count"}

// The count function alone, in a harness: one count per word and
// occurrence, the running count in keyed state, and both carried over a
// snapshot restored at another parallelism (its key groups
// redistributed).
func TestCountWords(t *testing.T) {
	build := func(in *sluice.Stream[string]) *sluice.Stream[WordCount] {
		return sluice.Process[string, string, WordCount](sluice.KeyBy(in, func(w string) string { return w }), &countWords{}, sluice.UID("count"))
	}
	h := sluicetest.New(t, build, sluicetest.WithParallelism(2))
	for _, w := range words("the river, the boat and THE river") {
		h.ProcessElement(w, sluicetest.NoTimestamp)
	}
	want := []WordCount{{"the", 1}, {"river", 1}, {"the", 2}, {"boat", 1}, {"and", 1}, {"the", 3}, {"river", 2}}
	if got := h.Values(); !slices.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	restored := sluicetest.New(t, build, sluicetest.RestoreFrom(h.Snapshot().Path), sluicetest.WithParallelism(3))
	if n, _ := sluicetest.Value(restored, "the", countDesc); n != 3 {
		t.Fatalf("the count of \"the\" after the restore: %d", n)
	}
	restored.ProcessElement("river", sluicetest.NoTimestamp)
	if got := restored.Values(); !slices.Equal(got, []WordCount{{"river", 3}}) {
		t.Fatalf("after the restore: %v", got)
	}
}

// The whole job on a Kafka cluster (the embedded broker; a real one with
// SLUICE_TEST_KAFKA=real), crashed twice, as a killed process is: at its
// word 60, and at its first checkpoint after the restart, before the
// checkpoint's transactions commit. Each time it starts again and
// resumes; its committed output is every word's counts 1..n, each once,
// in order.
func TestWordCountExactlyOnce(t *testing.T) {
	k := kafkatest.Start(t)
	in, out := k.Topic(t, "lines", 2), k.Topic(t, "counts", 2)
	k.ProduceValues(t, in, sampleText...)
	var want []string
	seen := map[string]int{}
	for _, l := range sampleText {
		for _, w := range words(l) {
			seen[w]++
			want = append(want, fmt.Sprintf("%s=%d", w, seen[w]))
		}
	}
	reader := k.CommittedReader(t, out)
	committed := func() []string {
		var got []string
		for _, r := range reader.Read() {
			got = append(got, fmt.Sprintf("%s=%s", r.Key, r.Value))
		}
		return got
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := sluicetest.RunJob(t, func(env *sluice.Environment) error {
		return addPipeline(env, k.Seeds(), in, out, out, quiet)
	},
		sluicetest.JobOptions(sluice.WithParallelism(2),
			sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Timeout = 30 * time.Second })),
		sluicetest.CrashAt(sluicetest.AfterRecords("count", 60), sluicetest.AtCheckpoint(1)),
		sluicetest.Until(func() bool { return len(committed()) >= len(want) }))
	t.Logf("%d runs: %v", run.Runs, run.Crashes)
	got := committed()
	sluicetest.AssertExactlyOnce(t, got, want)
	if err := sluicetest.CheckOrderPerKey(got, want, func(wc string) string { w, _, _ := strings.Cut(wc, "="); return w }); err != nil {
		t.Fatal(err)
	}
}
