package kafkatest_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/kafkatest"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

// ReadCommitted sees what a read_committed consumer sees: records written
// outside transactions and those of committed ones, not those of an
// aborted or open transaction, even when a partition ends with a marker.
func TestReadCommitted(t *testing.T) {
	k := kafkatest.Start(t)
	if k.Kind() != kafkatest.Embedded {
		t.Fatalf("default kind %s, want embedded", k.Kind())
	}
	topic := k.Topic(t, "out", 2)
	k.ProduceValues(t, topic, "plain")
	txn := func(id string, commit bool, values ...string) *kgo.Client {
		cl := k.Client(t, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic))
		ctx := context.Background()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
		return cl
	}
	txn("committed", true, "c1", "c2")
	aborted := txn("aborted", false, "a1")
	if err := aborted.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	txn("open", false, "o1")
	got := k.ReadCommittedValues(t, topic)
	slices.Sort(got)
	if !slices.Equal(got, []string{"c1", "c2", "plain"}) {
		t.Fatalf("committed: %v", got)
	}
}

// Kinds that are not available here are named with their reasons: the
// test is skipped, or failed with Required.
func TestUnavailableKindsSkipWithTheirReasons(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "")
	t.Setenv("JAVA_HOME", "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv(kafkatest.EnvKind, "")
	o := testutil.OutcomeOf(t, func(tb testing.TB) { kafkatest.Start(tb, kafkatest.Real()) })
	if !o.Skipped || o.Failed {
		t.Fatalf("Real() with nothing there: skipped %t, failed %t: %s", o.Skipped, o.Failed, o.Message)
	}
	for _, want := range []string{
		"external: KAFKA_BROKERS is unset",
		"local: java not found",
		`container: no starter registered (import "github.com/sluicehq/sluice/sluicetest/kafkatest/kafkacontainer")`,
	} {
		if !strings.Contains(o.Message, want) {
			t.Errorf("skip message %q does not say %q", o.Message, want)
		}
	}
	o = testutil.OutcomeOf(t, func(tb testing.TB) { kafkatest.Start(tb, kafkatest.Use(kafkatest.External), kafkatest.Required()) })
	if !o.Failed || !strings.Contains(o.Message, "KAFKA_BROKERS is unset") {
		t.Fatalf("Required: %+v", o)
	}
	t.Setenv(kafkatest.EnvKind, "embedded,bogus")
	o = testutil.OutcomeOf(t, func(tb testing.TB) { kafkatest.Start(tb) })
	if !o.Failed || !strings.Contains(o.Message, `unknown kind "bogus"`) {
		t.Fatalf("a bad %s: %+v", kafkatest.EnvKind, o)
	}
}

// wordCount is the output of the job under test.
type wordCount struct {
	Word  string
	Count int64
}

type countWords struct{ n state.ValueState[int64] }

func (c *countWords) Open(ctx *sluice.OperatorContext) (err error) {
	c.n, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "n"})
	return err
}

func (c *countWords) ProcessElement(ctx *sluice.KeyedContext[string], _ string, out sluice.Collector[wordCount]) error {
	n, _, err := c.n.Value()
	if err == nil {
		err = c.n.Update(n + 1)
	}
	out.Collect(wordCount{ctx.Key(), n + 1})
	return err
}

// wordCountJob reads words from in (to its end offsets at the start),
// counts them per word, and writes "word count" records to out with the
// exactly-once Kafka sink.
func wordCountJob(k *kafkatest.Cluster, in, out, txnPrefix string) sluicetest.Pipeline {
	return func(env *sluice.Environment) error {
		src, err := kafkasource.NewSource(k.Seeds(), kafkasource.Topics(in),
			func(r *kgo.Record) (string, error) { return string(r.Value), nil }, kafkasource.Bounded())
		if err != nil {
			return err
		}
		words := sluice.FromSource(env, src, sluice.NoWatermarks[string](), "words", sluice.UID("words"))
		counts := sluice.Process(sluice.KeyBy(words, func(w string) string { return w }), &countWords{},
			sluice.Name("count"), sluice.UID("count"))
		snk, err := kafkasink.NewSink(k.Seeds(), func(c wordCount) (*kgo.Record, error) {
			return &kgo.Record{Topic: out, Key: []byte(c.Word), Value: []byte(fmt.Sprintf("%s %d", c.Word, c.Count))}, nil
		}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(txnPrefix))
		if err != nil {
			return err
		}
		sluice.SinkTo(counts, snk, sluice.Name("output"), sluice.UID("output"))
		return nil
	}
}

// runJobOnKafka runs a Kafka-to-Kafka job with the exactly-once sink
// through crashes (before a checkpoint's commit, and mid-run) on the
// cluster and checks the committed output: the kit's own job runner
// against the broker Start gives (the embedded one here; a real one in
// package integration).
func runJobOnKafka(t *testing.T, k *kafkatest.Cluster) {
	t.Helper()
	in, out := k.Topic(t, "words", 2), k.Topic(t, "counts", 2)
	var words []string
	var want []string
	seen := map[string]int{}
	for i := range 600 {
		w := "w" + strconv.Itoa(i%13)
		words = append(words, w)
		seen[w]++
		want = append(want, fmt.Sprintf("%s %d", w, seen[w]))
	}
	k.ProduceValues(t, in, words...)
	run := sluicetest.RunJob(t, wordCountJob(k, in, out, out),
		sluicetest.Checkpointing(30*time.Millisecond),
		sluicetest.JobOptions(sluice.WithParallelism(2)),
		sluicetest.CrashAt(sluicetest.AfterRecords("count", 200), sluicetest.AtCheckpoint(1)))
	t.Logf("%d runs: %v; %d checkpoints", run.Runs, run.Crashes, run.Checkpoints)
	got := k.ReadCommittedValues(t, out)
	sluicetest.AssertExactlyOnce(t, got, want)
	if err := sluicetest.CheckOrderPerKey(got, want, func(s string) string { w, _, _ := strings.Cut(s, " "); return w }); err != nil {
		t.Fatal(err)
	}
}

func TestRunJobOnEmbeddedKafka(t *testing.T) {
	runJobOnKafka(t, kafkatest.Start(t, kafkatest.Use(kafkatest.Embedded)))
}

// javaMajor reads both version styles of `java -version`.
func TestJavaVersion(t *testing.T) {
	for out, want := range map[string]int{
		`openjdk version "17.0.15" 2025-04-15`: 17,
		`openjdk version "21" 2023-09-19`:      21,
		`java version "1.8.0_392"`:             8,
	} {
		if got, ok := kafkatest.JavaMajor(out); !ok || got != want {
			t.Errorf("%q: %d, %t; want %d", out, got, ok, want)
		}
	}
	if _, ok := kafkatest.JavaMajor("nonsense"); ok {
		t.Error("read a version from nonsense")
	}
}
