package sink

import "log/slog"

// Checkpointing is the job's checkpointing as a sink sees it: off, or on
// in one of the two modes (execution.checkpointing.interval and .mode).
type Checkpointing uint8

const (
	// NoCheckpoints: checkpointing is off.
	NoCheckpoints Checkpointing = iota
	// AtLeastOnceCheckpoints: checkpoints in at-least-once mode; after a
	// restore some records are processed again.
	AtLeastOnceCheckpoints
	// ExactlyOnceCheckpoints: checkpoints in exactly-once mode (aligned
	// or unaligned).
	ExactlyOnceCheckpoints
)

func (c Checkpointing) String() string {
	switch c {
	case AtLeastOnceCheckpoints:
		return "at-least-once checkpoints"
	case ExactlyOnceCheckpoints:
		return "exactly-once checkpoints"
	}
	return "no checkpoints"
}

// JobInfo is what a job tells each of its sinks before it starts.
type JobInfo struct {
	// JobID is the job's id, the same in every run of one deployment and
	// in every process of a cluster.
	JobID string
	// UID and Name are the sink operator's: the uid is stable across
	// runs (it maps the sink's state).
	UID, Name string
	// Checkpointing is the job's checkpointing.
	Checkpointing Checkpointing
	// Logger is the job's logger.
	Logger *slog.Logger
}

// Exclusive is something a sink must own alone within a job, such as the
// prefix of its Kafka transactional ids.
type Exclusive struct {
	// What names it; two sinks of one job with the same What are refused
	// before the job starts.
	What string
	// Why says what sharing it would break and what to do instead.
	Why string
}

// JobAware is implemented by sinks whose defaults follow the job they
// are part of (a Kafka sink's delivery guarantee follows the job's
// checkpointing, its transactional id prefix derives from the job id and
// its uid). The job calls BindJob once for each sink operator before it
// starts, in every process that runs the job (each worker of a cluster
// too), before it checks the sink against its checkpoint settings: the
// sink settles its options, refuses those that contradict the job, and
// returns what it must own alone within the job.
type JobAware interface {
	BindJob(job JobInfo) ([]Exclusive, error)
}
