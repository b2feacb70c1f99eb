// Package sluice is the user API of Sluice: an Environment holds the job's
// settings, typed streams describe the dataflow (FromSource, Map, FlatMap,
// Filter, KeyBy, Process, Reduce, Union, Connect, SinkTo, the partitioning
// methods, windows on keyed streams and side outputs), and Execute runs it
// with parallel subtasks, checkpointed as Flink's options say.
//
//	env := sluice.NewEnvironment(sluice.WithParallelism(2))
//	lines := sluice.FromSource(env, src, sluice.NoWatermarks[string](), "lines")
//	words := sluice.FlatMap(lines, splitWords, sluice.Name("split"))
//	counts := sluice.Reduce(sluice.KeyBy(words, wordOf), add)
//	sluice.SinkTo(counts, sink.NewPrint[WordCount](), sluice.Name("print"))
//	err := env.Execute(ctx)
//
// Functions handed to an operator run on its subtask's goroutine; a struct
// pointer is copied per subtask (as Flink deserialises a copy of the
// function per subtask), so its fields need no locks.
package sluice
