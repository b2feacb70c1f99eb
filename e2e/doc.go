// Package e2e holds the tests of the whole: each runs real jobs built
// with the user API, in this process, through the runtime, the state
// backends, checkpoint storage and the file sink, and checks what they
// committed. Exactly-once under injected crashes, restores at another
// parallelism, savepoints, the job's life from start to its recorded
// result, event time, windows, joins, async I/O, the "Flink habits"
// suite and random pipelines against a plain evaluation.
//
// The tests that crash a job or restore it at another parallelism run it
// through one harness (harness_test.go: job, crashes, datagen and
// maybeCrash; running_count_test.go: the running count that the
// exactly-once, savepoint and job-life tests run); the helpers every job test shares (an environment with
// quiet logs, running under the safety net, stop-with-savepoint) are
// internal/testjob's. Tests against a real Kafka broker, and of jobs run
// as separate processes, are in package integration; the API's own
// tests (option validation, the examples of go doc) stay beside it.
//
// The package has no code: it may import any package of the module.
package e2e
