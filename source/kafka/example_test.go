package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source/kafka"
)

// The Kafka source reads topics as a job's input, splitting their
// partitions among its subtasks and keeping its offsets in the job's
// checkpoints (not in Kafka). Bounded stops at the end offsets the
// partitions had when the job started, so the job ends; without it the
// source runs until the job is stopped. Here on an embedded broker
// (franz-go's kfake).
func ExampleNewSource() {
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer broker.Close()
	seeds := broker.ListenAddrs()
	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range []string{"apple", "pear", "plum"} {
		if err := producer.ProduceSync(context.Background(), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			fmt.Println(err)
		}
	}
	producer.Close()

	src, err := kafka.NewSource(seeds, kafka.Topics("orders"), kafka.ValueDecoder[string](codec.String{}),
		kafka.StartFrom(kafka.Earliest()), kafka.Bounded())
	if err != nil {
		fmt.Println(err)
		return
	}
	env := sluice.NewEnvironment(sluice.WithParallelism(2), sluice.WithLogger(slog.New(slog.DiscardHandler)))
	orders := sluice.FromSource(env, src, sluice.NoWatermarks[string](), "orders")
	out := sink.NewCollect[string]()
	sluice.SinkTo(orders, out)
	if err := env.Execute(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	got := out.Values()
	slices.Sort(got) // partitions are read concurrently
	fmt.Println(got)
	// Output: [apple pear plum]
}
