// Package runtime owns the execution of a job: compiling a Plan into a job
// graph of operator chains, one Task per subtask wired by runtime/network,
// each Task's mailbox loop (input, timers and control on one goroutine),
// watermark propagation, backpressure measurement, and the job's
// lifecycle (finish, failure, cancel).
package runtime
