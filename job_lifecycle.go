package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/runtime"
)

// Errors of a job's life (see runtime for each one's meaning).
var (
	// ErrJobSuspended is returned by Execute and Job.Wait when the context
	// given to Execute was cancelled (a process shutting down, SIGTERM):
	// the job is suspended, not over; its latest checkpoint is kept and
	// the next start resumes from it. It also matches context.Canceled.
	ErrJobSuspended = runtime.ErrJobSuspended
	// ErrJobTerminated is returned (wrapped) by Execute when the job's
	// directory records that an earlier run was cancelled or failed and
	// none of its checkpoints is left to resume from: starting from no
	// state would write its committed output again. Choose with
	// WithFreshStart or WithRestoreFrom.
	ErrJobTerminated = runtime.ErrJobTerminated
	// ErrFreshStartRefused is returned (wrapped) by Execute when the job
	// has completed checkpoints (in its directory, or the HA store's
	// latest) that cannot be restored, and the run would start from no
	// state: the error names the checkpoint and its path. WithFreshStart
	// starts from no state all the same.
	ErrFreshStartRefused = runtime.ErrFreshStartRefused
	// ErrJobLocked is returned (wrapped) by Execute when another process
	// runs the job: the error names it.
	ErrJobLocked = runtime.ErrJobLocked
	// ErrFallbackPastCommitted is returned (wrapped) when the latest
	// checkpoint is corrupt and restoring an older one would repeat output
	// that was committed (see WithAllowFallbackPastCommitted).
	ErrFallbackPastCommitted = runtime.ErrFallbackPastCommitted
	// ErrTaskCancellationTimeout: tasks did not exit within
	// task.cancellation.timeout after they were cancelled.
	ErrTaskCancellationTimeout = runtime.ErrTaskCancellationTimeout
)

// ClaimMode says who owns the snapshot WithRestoreFrom restores
// (execution.state-recovery.claim-mode).
type ClaimMode = runtime.ClaimMode

const (
	// NoClaim (default): the snapshot stays yours; the job never deletes
	// it and none of its checkpoints depends on its files.
	NoClaim = runtime.NoClaim
	// Claim: the job owns the snapshot and deletes it once subsumed.
	Claim = runtime.Claim
)

// WithJobID sets the job id: the name of the job's directory under the
// checkpoint directory, where its checkpoints, its result and its lock
// live. Keep it stable across restarts of one deployment. By default it is
// the job name (WithJobName) made a file name; a job with neither gets
// "sluice-job-" and a hash of its operators, so unrelated unnamed jobs
// never share a directory — name the job to keep its id across changes
// of its shape.
func WithJobID(id string) Option {
	return func(e *Environment) {
		if id == "" || id == "." || id == ".." || runtime.JobIDOf(runtime.Config{JobName: id}, nil) != id {
			e.addErr(fmt.Errorf("%w: job id %q: use letters, digits, '.', '_' and '-' only", ErrInvalidOption, id))
			return
		}
		e.cfg.JobID = id
	}
}

// WithFreshStart starts the job from no state whatever its checkpoint
// directory holds. By default a job resumes from its latest usable
// completed checkpoint, a finished job does nothing, and a start from no
// state that would write committed output again is refused
// (ErrJobTerminated after a cancelled or failed run whose checkpoints are
// gone, ErrFreshStartRefused when the job's checkpoints cannot be
// restored). With WithFreshStart the job's checkpoints and recorded
// result stay on disk, are never restored by this run, and a log line
// says what was left alone. The job's sources start where they are told
// to (a Kafka source from its starting offsets): output that earlier runs
// committed may be written again.
func WithFreshStart() Option { return func(e *Environment) { e.cfg.FreshStart = true } }

// WithClaimMode sets who owns the snapshot given to WithRestoreFrom
// (execution.state-recovery.claim-mode): NoClaim (default) or Claim.
func WithClaimMode(m ClaimMode) Option {
	return func(e *Environment) {
		if m != NoClaim && m != Claim {
			e.addErr(fmt.Errorf("%w: execution.state-recovery.claim-mode %d: want NoClaim or Claim", ErrInvalidOption, m))
			return
		}
		e.cfg.ClaimMode = m
	}
}

// WithAllowFallbackPastCommitted lets a restore skip a corrupt latest
// checkpoint whose transactions may have been committed, restoring the one
// before it: the output committed between the two is written again. Each
// such restore is logged at error level and counted
// (Job.FallbacksPastCommitted). Without it the restore fails with
// ErrFallbackPastCommitted naming the checkpoint and the file.
func WithAllowFallbackPastCommitted() Option {
	return func(e *Environment) { e.cfg.AllowFallbackPastCommitted = true }
}

// FailoverStrategy says what restarts when a task fails (Flink's
// jobmanager.execution.failover-strategy): FailoverRegion (the default)
// or FailoverFull.
type FailoverStrategy = runtime.FailoverStrategy

const (
	// FailoverRegion restarts only the failed task's failover region, from
	// the latest completed checkpoint, while the other regions run on. A
	// region is the tasks joined by forward edges: a pipeline without an
	// all-to-all exchange (keyBy, rebalance, broadcast) has one per
	// subtask, any other job one, which restarts whole. On several hosts
	// the region restarts on the workers running it. With one region, when
	// a worker is lost (or one restarts no regions: older code), or when
	// the region cannot restart alone (a stop, a rescale or a savepoint in
	// flight, another region restarting, a task that reached its end), the
	// whole job restarts. Region restarts count against the restart
	// strategy as the job's do.
	FailoverRegion = runtime.FailoverRegion
	// FailoverFull restarts the whole job on every failure.
	FailoverFull = runtime.FailoverFull
)

// WithFailoverStrategy sets what restarts when a task fails
// (jobmanager.execution.failover-strategy, default region).
func WithFailoverStrategy(s FailoverStrategy) Option {
	return func(e *Environment) { e.cfg.Failover = s }
}

// WithTaskCancellationTimeout bounds how long a cancelled, suspended or
// failing job waits for its tasks to exit (task.cancellation.timeout,
// default 180 s; 0 waits for ever). Past it the job ends without them,
// failing with ErrTaskCancellationTimeout when it was failing over.
func WithTaskCancellationTimeout(d time.Duration) Option {
	return func(e *Environment) {
		if d < 0 {
			e.addErr(fmt.Errorf("%w: task.cancellation.timeout %v must not be negative", ErrInvalidOption, d))
			return
		}
		e.cfg.CancellationTimeout = d
	}
}
