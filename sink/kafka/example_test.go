package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/kafka"
	"github.com/sluicehq/sluice/source"
)

// The Kafka sink writes a job's output to Kafka. With ExactlyOnce each
// subtask writes the records of a checkpoint interval in one transaction,
// committed once the checkpoint completes, so a read_committed consumer
// sees every record once whatever failures the job recovers from. Given
// no Guarantee, the sink follows the job's checkpointing: exactly-once
// checkpoints make it exactly-once, with a transactional id prefix derived
// from the job id and the sink's uid. Here on an embedded broker
// (franz-go's kfake).
func ExampleNewSink() {
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "greetings"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Close()
	seeds := broker.ListenAddrs()
	dir, err := os.MkdirTemp("", "kafka-sink-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	snk, err := kafka.NewSink(seeds, kafka.ValueSerializer[string]("greetings", codec.String{}),
		kafka.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}
	env := sluice.NewEnvironment(sluice.WithParallelism(2), sluice.WithLogger(slog.New(slog.DiscardHandler)),
		sluice.WithCheckpointing(100*time.Millisecond, dir))
	names := sluice.FromSource(env, source.FromSlice([]string{"ann", "bob", "cy"}), sluice.NoWatermarks[string](), "names")
	greetings := sluice.Map(names, func(n string) (string, error) { return "hello " + n, nil })
	sluice.SinkTo(greetings, snk, sluice.UID("greetings-out"))
	// A bounded job ends with a final checkpoint: its transactions commit.
	if err := env.Execute(context.Background()); err != nil {
		fmt.Println(err)
		return
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("greetings"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer consumer.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < 3 && ctx.Err() == nil {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	fmt.Println(got)
	// Output: [hello ann hello bob hello cy]
}
