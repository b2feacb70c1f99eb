package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/kafkatest"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
)

// The test kit as a user's module runs it, against a real Apache Kafka
// that the kit starts itself, in Go, from the Maven jars with the
// installed Java (kafkatest's Local kind: no scripts/kafka, which a
// user's module does not have): topics made, input produced, a
// Kafka-to-Kafka job with the exactly-once sink crashed at a record and
// at a checkpoint before its commit and started again by RunJob, and its
// committed output read back and found exactly once. Skipped (failed
// under CI=true) when Java or the jars are missing and cannot be had.
func TestKitOnLocalKafka(t *testing.T) {
	opts := []kafkatest.Option{kafkatest.Use(kafkatest.Local)}
	if os.Getenv("CI") == "true" {
		opts = append(opts, kafkatest.Required())
	}
	k := kafkatest.Start(t, opts...)
	in, out := k.Topic(t, "kit-in", 2), k.Topic(t, "kit-out", 2)
	var input, want []string
	for i := range 400 {
		input = append(input, fmt.Sprintf("k%d:%d", i%9, i))
		want = append(want, fmt.Sprintf("k%d:%d", i%9, i*10))
	}
	recs := make([]*kgo.Record, len(input))
	for i, v := range input {
		key, _, _ := strings.Cut(v, ":")
		recs[i] = &kgo.Record{Key: []byte(key), Value: []byte(v)}
	}
	k.Produce(t, in, recs...)
	pipeline := func(env *sluice.Environment) error {
		src, err := kafkasource.NewSource(k.Seeds(), kafkasource.Topics(in),
			func(r *kgo.Record) (string, error) { return string(r.Value), nil }, kafkasource.Bounded())
		if err != nil {
			return err
		}
		lines := sluice.FromSource(env, src, sluice.NoWatermarks[string](), "in", sluice.UID("in"))
		scaled := sluice.Map(lines, func(v string) (string, error) {
			key, n, _ := strings.Cut(v, ":")
			var i int
			_, err := fmt.Sscan(n, &i)
			return fmt.Sprintf("%s:%d", key, i*10), err
		}, sluice.Name("scale"), sluice.UID("scale"))
		snk, err := kafkasink.NewSink(k.Seeds(), func(v string) (*kgo.Record, error) {
			key, _, _ := strings.Cut(v, ":")
			return &kgo.Record{Topic: out, Key: []byte(key), Value: []byte(v)}, nil
		}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(out))
		if err != nil {
			return err
		}
		sluice.SinkTo(scaled, snk, sluice.Name("out"), sluice.UID("out"))
		return nil
	}
	run := sluicetest.RunJob(t, pipeline, sluicetest.Checkpointing(100*time.Millisecond),
		sluicetest.JobOptions(sluice.WithParallelism(2)),
		sluicetest.CrashAt(sluicetest.AfterRecords("scale", 150), sluicetest.AtCheckpoint(1)))
	t.Logf("on %s: %d runs, crashes %v, %d checkpoints", k.Seeds(), run.Runs, run.Crashes, run.Checkpoints)
	got := k.ReadCommittedValues(t, out)
	sluicetest.AssertExactlyOnce(t, got, want)
	if err := sluicetest.CheckOrderPerKey(got, want, func(v string) string { key, _, _ := strings.Cut(v, ":"); return key }); err != nil {
		t.Fatal(err)
	}
}
