package checkpoint

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint/snapshot"
)

// TaskID identifies one task (one subtask of a chain) to the coordinator.
// The runtime assigns them.
type TaskID int

// TaskInfo describes a task of the job to the coordinator.
type TaskInfo struct {
	ID TaskID
	// Vertex names the chain the task runs, for statistics.
	Vertex      string
	Subtask     int
	Parallelism int
	// Operators are the uids of the chained operators, head first: a task
	// that finished is recorded as finished for each of them.
	Operators []string
	// Upstream are the tasks that feed this one; none for a source. The
	// coordinator triggers the running tasks whose upstream tasks have all
	// finished: the sources, as long as they run.
	Upstream []TaskID
}

// TaskFigures are what a task reports about its part of a checkpoint.
type TaskFigures struct {
	// StartDelay: from the trigger to the first barrier (or trigger mail).
	StartDelay time.Duration
	// Alignment: from the first barrier to the snapshot.
	Alignment time.Duration
	// Sync and Async: the two parts of the snapshot. Async runs from the
	// end of Sync to the acknowledgement, as Flink's async_duration: the
	// wait for the channel state to be complete (the barriers of the other
	// channels, for an unaligned checkpoint), then the writes.
	Sync, Async time.Duration
	// ChannelStateWait is the wait part of Async (a Sluice addition).
	ChannelStateWait time.Duration
	// ProcessedData: bytes processed during the alignment.
	ProcessedData int64
	// PersistedData: bytes of in-flight data persisted as channel state.
	PersistedData int64
	// CheckpointedSize: bytes written for this checkpoint (incremental).
	CheckpointedSize int64
	// StateSize: bytes of the full state the checkpoint references.
	StateSize int64
	// Unaligned: the task took the checkpoint unaligned.
	Unaligned bool
	// EarlyInput: the input channel state of an unaligned checkpoint was
	// complete when the last barrier arrived, while the task was still in
	// a record, and the asynchronous part started then rather than when
	// the task polled that barrier (a Sluice addition).
	EarlyInput bool
}

func (f TaskFigures) storage() *snapshot.Figures {
	return &snapshot.Figures{
		StartDelayMillis: f.StartDelay.Milliseconds(),
		AlignmentMillis:  f.Alignment.Milliseconds(),
		SyncMillis:       f.Sync.Milliseconds(),
		AsyncMillis:      f.Async.Milliseconds(),
		ProcessedData:    f.ProcessedData,
		PersistedData:    f.PersistedData,
		CheckpointedSize: f.CheckpointedSize,
		StateSize:        f.StateSize,
		Unaligned:        f.Unaligned,
	}
}

// SavepointRequest asks for a savepoint.
type SavepointRequest struct {
	// Dir is the savepoint's own directory, from storage.NewSavepointDir.
	Dir string
	// Stop: stop the job once the savepoint completes (stop-with-savepoint);
	// periodic checkpoints are suspended meanwhile, and the tasks are
	// notified of its completion so that sinks commit.
	Stop bool
	// Drain: with Stop, the sources emit the end of event time first.
	Drain bool
}

// CoordinatorAction is something the coordinator asks the runtime to do.
type CoordinatorAction interface {
	isCoordinatorAction()
	String() string
}

// Trigger: send each of Tasks an urgent (when Urgent) or normal mail to
// take checkpoint Barrier.ID and emit the barrier.
type Trigger struct {
	Barrier Barrier
	Tasks   []TaskID
	// Urgent is set when the checkpoint may go unaligned: the trigger mail
	// jumps the mailbox queue.
	Urgent bool
	// SavepointDir is where a savepoint is written (empty for checkpoints,
	// which go to the storage's chk-<id>).
	SavepointDir string
	// Stop is set for a stop-with-savepoint and a stop checkpoint: after
	// its barrier the sources emit nothing more, until the job stops or
	// the snapshot is aborted, so it is the last state of the job (as
	// Flink's sources stop before a stop-with-savepoint's barrier).
	Stop bool
}

// WriteMetadata: every task acknowledged; write Metadata as the _metadata
// of the checkpoint (or of the savepoint in SavepointDir), then report the
// outcome with Coordinator.MetadataWritten.
type WriteMetadata struct {
	Metadata     *snapshot.Metadata
	SavepointDir string
}

// NotifyComplete: tell Tasks that checkpoint ID is complete
// (notifyCheckpointComplete: two-phase-commit sinks commit).
type NotifyComplete struct {
	ID    int64
	Tasks []TaskID
}

// NotifyAborted: tell Tasks that checkpoint ID was aborted.
type NotifyAborted struct {
	ID     int64
	Reason Reason
	Tasks  []TaskID
}

// Discard: delete the files of checkpoint ID — storage.DiscardCheckpoint
// with Shared (the shared files no retained checkpoint references any
// more), or storage.DiscardSavepoint(SavepointDir) for a savepoint.
type Discard struct {
	ID           int64
	SavepointDir string
	Shared       []string
	Reason       Reason
}

// SavepointCompleted: savepoint ID is complete at Path. With Stop, stop the
// job now.
type SavepointCompleted struct {
	ID          int64
	Path        string
	Stop, Drain bool
}

// SavepointFailed: savepoint ID failed.
type SavepointFailed struct {
	ID     int64
	Reason Reason
	Err    error
}

// StopCompleted: checkpoint ID, a stop checkpoint (TriggerStop), is
// complete at Path and the tasks were told (NotifyComplete comes first):
// stop the tasks now.
type StopCompleted struct {
	ID   int64
	Path string
}

// StopFailed: the stop checkpoint ID failed; the sources carry on
// (NotifyAborted told them) and periodic checkpoints resume.
type StopFailed struct {
	ID     int64
	Reason Reason
	Err    error
}

// FailJob: fail the job (and let the restart strategy decide), because
// more consecutive checkpoints failed than tolerated.
type FailJob struct{ Err error }

// AllowFinish: every source reached the end of its input and a checkpoint
// taken after that completed (CheckpointID; 0 when checkpointing is off):
// the tasks may finish now — their two-phase-commit sinks have committed
// their tail.
type AllowFinish struct{ CheckpointID int64 }

func (Trigger) isCoordinatorAction()            {}
func (WriteMetadata) isCoordinatorAction()      {}
func (NotifyComplete) isCoordinatorAction()     {}
func (NotifyAborted) isCoordinatorAction()      {}
func (Discard) isCoordinatorAction()            {}
func (SavepointCompleted) isCoordinatorAction() {}
func (SavepointFailed) isCoordinatorAction()    {}
func (StopCompleted) isCoordinatorAction()      {}
func (StopFailed) isCoordinatorAction()         {}
func (FailJob) isCoordinatorAction()            {}
func (AllowFinish) isCoordinatorAction()        {}

func (a Trigger) String() string {
	s := fmt.Sprintf("trigger id=%d ts=%d %s tasks=%v urgent=%t", a.Barrier.ID, a.Barrier.Timestamp, a.Barrier.Options, a.Tasks, a.Urgent)
	if a.SavepointDir != "" {
		s += " dir=" + a.SavepointDir
	}
	if a.Stop {
		s += " stop"
	}
	return s
}
func (a WriteMetadata) String() string {
	s := fmt.Sprintf("write-metadata id=%d %s subtasks=%d shared=%v", a.Metadata.CheckpointID, a.Metadata.Kind, len(a.Metadata.Subtasks), a.Metadata.SharedFiles())
	if a.SavepointDir != "" {
		s += " dir=" + a.SavepointDir
	}
	return s
}
func (a NotifyComplete) String() string {
	return fmt.Sprintf("notify-complete id=%d tasks=%v", a.ID, a.Tasks)
}
func (a NotifyAborted) String() string {
	return fmt.Sprintf("notify-aborted id=%d reason=%s tasks=%v", a.ID, a.Reason, a.Tasks)
}
func (a Discard) String() string {
	if a.SavepointDir != "" {
		return fmt.Sprintf("discard-savepoint id=%d dir=%s reason=%s", a.ID, a.SavepointDir, a.Reason)
	}
	return fmt.Sprintf("discard id=%d shared=%v reason=%s", a.ID, a.Shared, a.Reason)
}
func (a SavepointCompleted) String() string {
	return fmt.Sprintf("savepoint-completed id=%d path=%s stop=%t drain=%t", a.ID, a.Path, a.Stop, a.Drain)
}
func (a SavepointFailed) String() string {
	return fmt.Sprintf("savepoint-failed id=%d reason=%s: %v", a.ID, a.Reason, a.Err)
}
func (a StopCompleted) String() string {
	return fmt.Sprintf("stop-completed id=%d path=%s", a.ID, a.Path)
}
func (a StopFailed) String() string {
	return fmt.Sprintf("stop-failed id=%d reason=%s: %v", a.ID, a.Reason, a.Err)
}
func (a FailJob) String() string { return fmt.Sprintf("fail-job: %v", a.Err) }
func (a AllowFinish) String() string {
	return fmt.Sprintf("allow-finish checkpoint=%d", a.CheckpointID)
}
