// Package runtime owns the execution of a job: compiling a Plan into a job
// graph of operator chains, one Task per subtask wired by runtime/network,
// each Task's mailbox loop (input, timers and control on one goroutine),
// watermark propagation, backpressure measurement, and the job's
// lifecycle.
//
// The life of a job (job.go, job_lifecycle.go): Execute opens the job's
// directory under the checkpoint directory (<dir>/<job id>/, JobIDOf),
// takes its lock, reads its recorded result and decides what the run
// starts from (planStart: a given snapshot by its claim mode, the latest
// checkpoint when resuming, or nothing), then runs attempts under the
// restart strategy (supervise). The checkpoints a run owns are those its
// coordinator retains; every other completed checkpoint on disk is pinned
// (checkpoint_driver.go). A failover restores the newest usable owned
// checkpoint or what the run started from (failoverRestore). Context
// cancellation suspends (nothing recorded, nothing deleted); Cancel,
// finishing, and failing for good record the result before the retention
// policy deletes anything (recordResult).
package runtime
