// Package sluicetest is the kit a user tests a Sluice pipeline with: a
// harness that runs one operator of the pipeline with control over its
// input, event time, processing time and state, and a runner that runs the
// whole pipeline, crashes it where the test says, starts it again and
// checks that its output is exactly once.
//
// # Harnesses: one operator, its time and its state
//
// A harness runs the real operator the pipeline's API builds (package
// operators, with the real state backends), not a model of it: the test
// gives the function that adds the operator to a stream, as the pipeline
// does, and drives it by hand, as Flink's operator test harnesses
// (KeyedOneInputStreamOperatorTestHarness, TwoInputStreamOperatorTestHarness,
// KeyedBroadcastOperatorTestHarness) and Kafka Streams' TopologyTestDriver
// do:
//
//	h := sluicetest.New(t, func(in *sluice.Stream[Click]) *sluice.Stream[Count] {
//		return sluice.Process(sluice.KeyBy(in, func(c Click) string { return c.UserID }), &countClicks{}, sluice.UID("count"))
//	})
//	h.ProcessElement(Click{UserID: "ann"}, 1_000)
//	h.ProcessWatermark(60_000)           // fires the event-time timers due
//	h.SetProcessingTime(5_000)           // fires the processing-time timers due
//	got := h.Values()                    // what the operator emitted
//	n, _ := sluicetest.Value(h, "ann", countDesc) // keyed state of "ann"
//	snap := h.Snapshot()                 // a savepoint, in the real encoding
//	h2 := sluicetest.New(t, build, sluicetest.RestoreFrom(snap.Path), sluicetest.WithParallelism(3))
//
// With a parallelism above 1 a harness runs that many subtasks and routes
// each record as the job would (by key group for a keyed input, to every
// subtask for a broadcast input, in turn otherwise), so a restore at
// another parallelism redistributes key groups and operator state as a
// rescale does. Snapshots are savepoints in the checkpoint format: a real
// job restores from a harness's snapshot (sluice.WithRestoreFrom) and a
// harness from a real job's checkpoint or savepoint (RestoreFrom).
//
// New and NewTwoInput take any operator the API makes from one or two
// streams: keyed and non-keyed process functions, Reduce, windows with
// their triggers and evictors, interval joins, connected and broadcast
// functions, async I/O, rich map, flat map and filter. KeyedProcess,
// KeyedCoProcess and KeyedBroadcastProcess are shortcuts for the common
// ones.
//
// # The whole pipeline: RunJob and crashes
//
// RunJob runs a Pipeline (a function that adds sources, operators and
// sinks to an Environment, as the program's main does) with checkpoints
// into a temporary directory until it finishes or a condition holds.
// CrashAt stops it the way a killed process stops (nothing recorded, the
// latest checkpoint kept) at chosen records or checkpoints and starts it
// again, so it resumes from its latest checkpoint; FailAt fails a task
// instead, so the job's restart strategy restores it in the same run.
// CheckExactlyOnce then compares the committed output with the expected
// one. Package sluicetest/kafkatest gives the Kafka cluster to run against
// (an in-process broker by default, or a real Apache Kafka) and reads the
// committed output back.
//
// The package imports no connector: it links neither franz-go nor
// RocksDB unless the test does.
package sluicetest
