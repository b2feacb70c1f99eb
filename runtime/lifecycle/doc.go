// Package lifecycle owns the life of a job as a deterministic state
// machine, beside the checkpoint coordinator: what a run starts from, what
// a restarted attempt restores, and how the job's end is recorded and the
// retention policy applied. It does no I/O and starts no goroutine: the
// runtime (runtime/job.go, runtime/job_lifecycle.go) reads the job's
// result, lists its checkpoints and reads the HA store's pointer, feeds
// these facts and the clock to a Machine, and carries out the actions it
// returns, in order. Scenario files in testdata/ pin every decision.
//
// # Starting a run
//
// The rule is the design's: what a user does not say must never cost a
// duplicate. Start decides, in this order:
//
//  1. A result left unclean by a run that stopped while applying the
//     retention policy: its cleanup is finished first (that run's
//     checkpoints discarded unless the result says they were retained).
//  2. A coordinator taking over a job under HA (no result recorded, the HA
//     store holds a pointer): the pointer's checkpoint, verified against
//     storage, whatever the options say but WithFreshStart. Checkpoints
//     above the pointer were never published (no sink committed them) and
//     are neither restored nor owned. A pointer whose checkpoint is
//     missing or corrupt is a refusal (its transactions may have been
//     committed), unless a fallback past committed output is allowed.
//  3. A result FINISHED: nothing runs, unless a fresh start is asked for
//     or a snapshot is given that the finished run did not descend from.
//  4. A snapshot given (RestoreFrom): when the job's own checkpoints
//     descend from it (Metadata.Origin; a process restarted after a
//     crash, a suspension or a failure with the arguments it first ran
//     with), the newest usable of them, not the snapshot a second time;
//     otherwise the snapshot, by its claim mode. With FreshStart, the
//     snapshot whatever the directory holds.
//  5. FreshStart: from no state, said in a log line; the job's
//     checkpoints stay where they are, pinned.
//  6. The newest usable completed checkpoint of the job's directory, the
//     default: after a crash or a suspension (no result), after FAILED
//     (a failed job keeps its latest checkpoint by default) and after
//     CANCELED with RETAIN_ON_CANCELLATION. The run owns every completed
//     checkpoint of the directory.
//  7. Completed checkpoints that are all unusable: refused
//     (ErrFreshStartRefused), naming the newest and the options that work.
//  8. A result CANCELED or FAILED with nothing retained: refused
//     (ErrJobTerminated), as a Flink user's new submission would start
//     from nothing and write the committed output again.
//  9. Nothing at all: from no state.
//
// # Failover, and the end
//
// Failover picks the newest usable checkpoint the run owns, else what the
// run started from; skipping a corrupt checkpoint whose transactions may
// have been committed is refused unless allowed. End records the result:
// published to the HA store first (fenced; a refusal records nothing),
// written (not yet clean), then the retention applied, then marked clean.
// A failed write keeps every checkpoint.
package lifecycle
