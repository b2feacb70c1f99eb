// Package runtime owns the execution of a job: compiling a Plan into a job
// graph of operator chains, one Task per subtask wired by runtime/network,
// each Task's mailbox loop (input, timers and control on one goroutine),
// watermark propagation, backpressure measurement, and the job's
// lifecycle; and the seams that split one job over a coordinator and
// workers (package cluster joins them).
//
// The life of a job (job.go, job_lifecycle.go; its decisions are the
// deterministic machine of runtime/lifecycle): Execute opens the job's
// directory under the checkpoint directory (<dir>/<job id>/, JobIDOf),
// takes its lock, reads its recorded result, lists its checkpoints and
// (under HA) the etcd pointer, and lets the machine decide what the run
// starts from (planStart: by default the latest usable checkpoint; a given
// snapshot by its claim mode; nothing on a fresh start), then runs
// attempts under the restart strategy (supervise). The checkpoints a run
// owns are those its coordinator retains; every other completed
// checkpoint on disk is pinned (checkpoint_driver.go). A failover restores
// the newest usable owned checkpoint or what the run started from
// (failoverRestore); with several failover regions, a task's failure
// restarts only its region, in the same attempt (failover_region.go).
// Context cancellation suspends (nothing recorded,
// nothing deleted); Cancel, finishing, and failing for good record the
// result before the retention policy deletes anything (recordResult).
//
// The files, by concept:
//
//	plan.go, jobgraph.go, typeinfo.go   the plan, its compilation into chains, edge types
//	job.go, job_lifecycle.go            a run and its attempts; identity, lock; carrying out
//	                                    the lifecycle machine's start, failover and end
//	task.go                             a task: building its chain, its state, closing
//	task_loop.go                        the task goroutine: mailbox, source polling, input
//	output_flusher.go                   the buffer timeout: partly filled output buffers sent
//	task_events.go                      events from the network: watermarks, end of data
//	processing_time.go                  processing-time timers on the task goroutine
//	task_checkpoint.go                  a task's barrier handling, triggers, notifications
//	task_snapshot.go                    the synchronous and asynchronous snapshot parts
//	channel_state.go                    unaligned checkpoints' channel state: write, replay
//	checkpoint_driver.go, gateway.go    the coordinator's goroutine; the messages between
//	                                    coordinator and tasks
//	state_restore.go, restore_info.go   restoring operator and keyed state (InitOperatorState,
//	                                    with SnapshotOperator and NotifyOperator the seams
//	                                    package sluicetest runs one operator through)
//	task_layout.go                      task ids, slots, the plan's fingerprint, partition
//	                                    ids: what every process of a job agrees on
//	cluster.go                          a job on several hosts: the coordinator's Executor,
//	                                    a worker's TaskRunner, the Exchange between them
//	checkpoint_trigger.go               a checkpoint taken now, on request (TriggerCheckpoint)
//	rescale.go, scaling_state.go        rescaling in place; the scaling state a coordinator
//	                                    taking over under HA resumes (ScalingState)
//	exception_history.go                the failures that ended attempts (Exceptions)
//	failover_region.go                  failover regions: a failed task's region restarts in
//	                                    place while the others run on (FailoverStrategy)
//	mailbox.go, metrics.go, watermarks.go  (metrics carry each task's input and
//	                                    output watermark)
package runtime
