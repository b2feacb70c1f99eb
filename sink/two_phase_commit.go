package sink

import (
	"context"
	"fmt"
	"math"
	"time"
)

// StatefulWriter is a Writer with state of its own in every checkpoint,
// restored through WriterContext.RestoredState.
type StatefulWriter[T any] interface {
	Writer[T]
	// SnapshotState runs in the synchronous part of checkpoint id.
	SnapshotState(checkpointID int64) ([][]byte, error)
}

// PrecommittingWriter is the writer half of a two-phase-commit sink: at
// the barrier of checkpoint n it makes everything written since the
// previous barrier durable but invisible (a Kafka transaction: flushed,
// every record acknowledged, not committed) and hands over committables
// that describe it; it then writes the next interval into a new
// transaction.
type PrecommittingWriter[T any] interface {
	Writer[T]
	// PrepareCommit runs in the synchronous part of checkpoint n and
	// returns the committables of the interval that n closes. They are
	// stored in checkpoint n.
	PrepareCommit(checkpointID int64) ([][]byte, error)
}

// Committer is the committer half of a two-phase-commit sink. Commit runs
// on notify-complete of a checkpoint, and on restore for the committables
// the restored checkpoint holds, before any writer starts.
type Committer interface {
	// Commit makes the committables of checkpoint id (and any earlier ones
	// handed in with them) visible. It must be idempotent: committing one
	// that is already committed succeeds. An error that retrying cannot
	// mend fails the job and must name the committable and the checkpoint.
	Commit(ctx context.Context, checkpointID int64, committables [][]byte) error
	// Close releases the committer.
	Close() error
}

// TwoPhaseCommitSink is a sink whose output becomes visible only when the
// checkpoint that covers it completes: exactly-once end to end.
type TwoPhaseCommitSink[T any] interface {
	Sink[T]
	// NewCommitter makes the committer of one subtask.
	NewCommitter(ctx WriterContext) (Committer, error)
}

// KindedCommittables is a two-phase-commit sink that names the kind of
// its committables: the kind its connector registers their decoder under
// with package inspect/decode ("kafka-transaction" for sink/kafka). The
// runtime records it beside them in every checkpoint, so that inspect
// (and `sluice inspect`) decodes them by kind instead of trying every
// decoder in turn.
type KindedCommittables interface {
	CommittableKind() string
}

// CheckpointTiming is what a two-phase-commit sink must outlast: the
// checkpoint and restart settings that bound how long a transaction opened
// at one checkpoint barrier may wait for its commit (a Kafka transaction
// past its timeout is aborted by the broker, and its records are lost).
// The runtime fills it from the job's configuration, with Flink's keys.
type CheckpointTiming struct {
	// Interval is execution.checkpointing.interval (0: checkpointing off).
	Interval time.Duration
	// Timeout is execution.checkpointing.timeout.
	Timeout time.Duration
	// MinPause is execution.checkpointing.min-pause.
	MinPause time.Duration
	// TolerableFailures is
	// execution.checkpointing.tolerable-failed-checkpoints: the checkpoints
	// that may fail in a row before the job fails, each of which leaves
	// the transaction waiting for the next one.
	TolerableFailures int
	// RestartDelay is the longest the restart strategy may wait before a
	// restart (0 for no restart): a transaction whose checkpoint
	// completed just before a failure is committed by the restarted job.
	RestartDelay time.Duration
	// RestartDelayOption names the option RestartDelay comes from, with
	// its value, for error messages (e.g.
	// "restart-strategy.fixed-delay.delay 10s").
	RestartDelayOption string
}

// MaxCommitWait returns the longest a transaction opened at a barrier may
// wait for its commit: interval + timeout + tolerable failures × (timeout
// + min pause) + restart delay. It saturates at math.MaxInt64 instead of
// overflowing.
func (t CheckpointTiming) MaxCommitWait() time.Duration {
	sum := func(a, b time.Duration) time.Duration {
		if a > math.MaxInt64-b {
			return math.MaxInt64
		}
		return a + b
	}
	perFailure := sum(max(t.Timeout, 0), max(t.MinPause, 0))
	failures := time.Duration(0)
	if n := t.TolerableFailures; n > 0 && perFailure > 0 {
		if time.Duration(n) > math.MaxInt64/perFailure {
			failures = math.MaxInt64
		} else {
			failures = time.Duration(n) * perFailure
		}
	}
	return sum(sum(sum(max(t.Interval, 0), max(t.Timeout, 0)), failures), max(t.RestartDelay, 0))
}

// String lists the terms of MaxCommitWait under their Flink keys.
func (t CheckpointTiming) String() string {
	restart := t.RestartDelayOption
	if restart == "" {
		restart = fmt.Sprintf("restart delay %v", t.RestartDelay)
	}
	return fmt.Sprintf("execution.checkpointing.interval %v + execution.checkpointing.timeout %v + "+
		"execution.checkpointing.tolerable-failed-checkpoints %d × (execution.checkpointing.timeout %v + "+
		"execution.checkpointing.min-pause %v) + %s",
		t.Interval, t.Timeout, t.TolerableFailures, t.Timeout, t.MinPause, restart)
}
