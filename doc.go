// Package sluice is the user API of Sluice, stream processing in Go with
// Flink's model: an Environment holds the job's settings, typed streams
// describe the dataflow (FromSource, Map, FlatMap, Filter, KeyBy, Process,
// Reduce, Union, Connect, windows on keyed streams, side outputs,
// SinkTo), and Execute runs it with parallel subtasks, checkpointed as
// Flink's options say. A Kafka-to-Kafka job with event time, exactly
// once (examples/clickstream):
//
//	env := sluice.NewEnvironment(
//		sluice.WithJobName("clickstream"),
//		sluice.WithParallelism(2),
//		sluice.WithCheckpointing(500*time.Millisecond, dir), // exactly-once; a restart resumes from the latest
//	)
//	src, _ := kafkasource.NewSource(seeds, kafkasource.Topics("clicks"), kafkasource.ValueDecoder(codec.JSON[Click]{}))
//	clicks := sluice.FromSource(env, src,
//		sluice.ForBoundedOutOfOrderness[Click](5*time.Second).
//			WithTimestampAssigner(func(c Click, _ int64) int64 { return c.TS }).
//			WithIdleness(time.Minute),
//		"clicks", sluice.UID("clicks"))
//	perMinute := sluice.ProcessWindow(
//		sluice.Window(sluice.KeyBy(clicks, func(c Click) string { return c.User }),
//			sluice.TumblingEventTimeWindows(time.Minute)),
//		sluice.ProcessWindowFunc[string, Click, UserMinute](countClicks), sluice.UID("per-minute"))
//	snk, _ := kafkasink.NewSink(seeds, kafkasink.ValueSerializer("clicks-per-minute", codec.JSON[UserMinute]{}))
//	sluice.SinkTo(perMinute, snk, sluice.UID("per-minute-out"))
//	err := env.Execute(ctx)
//
// Cancelling ctx suspends the job (its latest checkpoint kept); started
// again it resumes from it. The package's Example functions run jobs
// with their output checked by go test; docs/getting-started.md and the
// other guides in docs/ explain the model, and docs/flink.md maps Flink's
// API and configuration to this package's.
//
// Functions handed to an operator run on its subtask's goroutine; a struct
// pointer is copied per subtask (as Flink deserialises a copy of the
// function per subtask), so its fields need no locks.
package sluice
