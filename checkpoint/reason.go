package checkpoint

import "fmt"

// Reason says why a checkpoint was aborted or declined. Only some reasons
// count toward execution.checkpointing.tolerable-failed-checkpoints, as in
// Flink's CheckpointFailureManager.
type Reason uint8

const (
	// ReasonUnknown: no reason given. Counted.
	ReasonUnknown Reason = iota
	// ReasonExpired: the checkpoint outlived execution.checkpointing.timeout.
	// Counted.
	ReasonExpired
	// ReasonDeclined: a task declined it. Counted.
	ReasonDeclined
	// ReasonAsyncFailure: a task's asynchronous part (writing its state
	// files) failed, for example with a full disk. Counted.
	ReasonAsyncFailure
	// ReasonIOFailure: writing the checkpoint's _metadata failed. Counted.
	ReasonIOFailure
	// ReasonSubsumed: a newer checkpoint completed or overtook it. Not
	// counted.
	ReasonSubsumed
	// ReasonCancelMarker: a task received a cancel marker for it. Not
	// counted (the task that aborted first reports the cause).
	ReasonCancelMarker
	// ReasonTaskNotReady: a task could not take part (not running yet, or
	// the trigger could not be delivered). Not counted.
	ReasonTaskNotReady
	// ReasonTaskFinished: a task finished before acknowledging it. Not
	// counted.
	ReasonTaskFinished
	// ReasonJobFailover: the job is restarting. Not counted.
	ReasonJobFailover
	// ReasonShutdown: the coordinator shut down with the job. Not counted.
	ReasonShutdown
	// ReasonInvalidSnapshot: an acknowledgement could not be used (for
	// example a savepoint that references shared files). Not counted: it is
	// a bug, reported with the error.
	ReasonInvalidSnapshot
)

var reasonNames = [...]string{
	ReasonUnknown:         "unknown",
	ReasonExpired:         "expired",
	ReasonDeclined:        "declined",
	ReasonAsyncFailure:    "async-failure",
	ReasonIOFailure:       "io-failure",
	ReasonSubsumed:        "subsumed",
	ReasonCancelMarker:    "cancel-marker",
	ReasonTaskNotReady:    "task-not-ready",
	ReasonTaskFinished:    "task-finished",
	ReasonJobFailover:     "job-failover",
	ReasonShutdown:        "shutdown",
	ReasonInvalidSnapshot: "invalid-snapshot",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// ParseReason is the inverse of Reason.String.
func ParseReason(s string) (Reason, error) {
	for i, n := range reasonNames {
		if n == s {
			return Reason(i), nil
		}
	}
	return 0, fmt.Errorf("unknown checkpoint failure reason %q", s)
}

// Counted reports whether a failure for this reason counts toward the
// tolerable failed checkpoints.
func (r Reason) Counted() bool {
	switch r {
	case ReasonUnknown, ReasonExpired, ReasonDeclined, ReasonAsyncFailure, ReasonIOFailure:
		return true
	}
	return false
}
