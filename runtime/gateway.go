package runtime

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
)

// The boundary between the checkpoint coordinator and the tasks, as
// messages (Flink's CheckpointCoordinatorGateway and the checkpoint calls
// of its TaskExecutorGateway). In one process both sides are in-memory
// implementations that put the message on the receiver's goroutine (a
// task's mailbox, the checkpoint driver's event loop); across hosts they
// become RPCs. Every message names the job, the attempt and the task it is
// for, so a message of an attempt that has ended is told apart and
// dropped.

// ErrStaleMessage is returned (wrapped) by a gateway for a message of
// another job or of an attempt that is no longer current.
var ErrStaleMessage = errors.New("message of another job or attempt")

// TaskRef names a task of one attempt of a job, and its execution: the
// restarts of its failover region within the attempt (0 for a task never
// restarted).
type TaskRef struct {
	JobID     string
	Attempt   int
	Task      checkpoint.TaskID
	Execution int
}

func (r TaskRef) String() string {
	if r.Execution > 0 {
		return fmt.Sprintf("job %s attempt %d task %d execution %d", r.JobID, r.Attempt, r.Task, r.Execution)
	}
	return fmt.Sprintf("job %s attempt %d task %d", r.JobID, r.Attempt, r.Task)
}

// TriggerCheckpoint asks a source task to take checkpoint Barrier.ID and
// emit the barrier; Urgent puts it ahead of the task's other mail. Stop
// (a stop-with-savepoint): the source emits nothing after the barrier
// until the task is stopped or the savepoint aborted.
type TriggerCheckpoint struct {
	To      TaskRef
	Barrier checkpoint.Barrier
	Urgent  bool
	Stop    bool
}

// CheckpointNotification tells a task that a checkpoint completed or was
// aborted.
type CheckpointNotification struct {
	To           TaskRef
	CheckpointID int64
	Complete     bool // false: aborted
}

// AcknowledgeCheckpoint is a task's snapshot of a checkpoint: its state
// handles and figures.
type AcknowledgeCheckpoint struct {
	From         TaskRef
	CheckpointID int64
	States       []storage.SubtaskState
	Figures      checkpoint.TaskFigures
}

// DeclineCheckpoint is a task that cannot take a checkpoint.
type DeclineCheckpoint struct {
	From         TaskRef
	CheckpointID int64
	Reason       checkpoint.Reason
	Err          error
}

// TaskEvent reports a task's life to the coordinator.
type TaskEvent struct {
	From TaskRef
	Kind TaskEventKind
	// Err is the failure of ReportFailed.
	Err error
}

// TaskEventKind is what a TaskEvent reports.
type TaskEventKind uint8

const (
	// ReportEndOfInput: a source task read all its input (a final checkpoint
	// is due before the job may finish).
	ReportEndOfInput TaskEventKind = iota
	// ReportFinished: the task ended normally.
	ReportFinished
	// ReportFailed: the task failed (Err); the attempt stops.
	ReportFailed
)

// TaskGateway is the coordinator's way to a task.
type TaskGateway interface {
	TriggerCheckpoint(m TriggerCheckpoint) error
	NotifyCheckpoint(m CheckpointNotification) error
	// AllowFinish lets a task that reached its end finish (after the
	// final checkpoint completed).
	AllowFinish(to TaskRef) error
}

// CoordinatorGateway is a task's way to the coordinator.
type CoordinatorGateway interface {
	Acknowledge(m AcknowledgeCheckpoint) error
	Decline(m DeclineCheckpoint) error
	Report(m TaskEvent) error
}

// localTaskGateway reaches the tasks of one attempt through their
// mailboxes.
type localTaskGateway struct{ a *attempt }

func (g localTaskGateway) task(to TaskRef) (*Task, error) {
	a := g.a
	var t *Task
	if to.JobID == a.job.id && to.Attempt == a.number {
		t = a.task(to.Task)
	}
	if t == nil || t.execution != to.Execution {
		return nil, fmt.Errorf("task gateway of job %s attempt %d: %s: %w", a.job.id, a.number, to, ErrStaleMessage)
	}
	return t, nil
}

func (g localTaskGateway) TriggerCheckpoint(m TriggerCheckpoint) error {
	t, err := g.task(m.To)
	if err != nil {
		return err
	}
	b, stop := m.Barrier, m.Stop
	mail := func() error { return t.triggerCheckpoint(b, stop) }
	if m.Urgent {
		return t.mailbox.PutUrgent(mail)
	}
	return t.mailbox.Put(mail)
}

func (g localTaskGateway) NotifyCheckpoint(m CheckpointNotification) error {
	t, err := g.task(m.To)
	if err != nil {
		return err
	}
	id := m.CheckpointID
	if m.Complete {
		return t.mailbox.Put(func() error { return t.notifyComplete(id) })
	}
	return t.mailbox.Put(func() error { return t.notifyAborted(id) })
}

func (g localTaskGateway) AllowFinish(to TaskRef) error {
	t, err := g.task(to)
	if err != nil {
		return err
	}
	return t.mailbox.Put(func() error { return t.allowFinish() })
}

// localCoordinatorGateway hands the tasks' messages to the checkpoint
// driver's goroutine.
type localCoordinatorGateway struct{ d *checkpointDriver }

func (g localCoordinatorGateway) check(from TaskRef) error {
	a := g.d.a
	if from.JobID != a.job.id || from.Attempt != a.number || int(from.Task) < 0 || int(from.Task) >= len(a.specs) ||
		from.Execution != a.execution(from.Task) {
		return fmt.Errorf("coordinator gateway of job %s attempt %d: %s: %w", a.job.id, a.number, from, ErrStaleMessage)
	}
	return nil
}

func (g localCoordinatorGateway) Acknowledge(m AcknowledgeCheckpoint) error {
	if err := g.check(m.From); err != nil {
		return err
	}
	d := g.d
	d.submit(func() { d.exec(d.coord.Ack(time.Now(), m.From.Task, m.CheckpointID, m.States, m.Figures)) })
	return nil
}

func (g localCoordinatorGateway) Decline(m DeclineCheckpoint) error {
	if err := g.check(m.From); err != nil {
		return err
	}
	d := g.d
	d.submit(func() { d.exec(d.coord.Decline(time.Now(), m.From.Task, m.CheckpointID, m.Reason, m.Err)) })
	return nil
}

func (g localCoordinatorGateway) Report(m TaskEvent) error {
	if err := g.check(m.From); err != nil {
		return err
	}
	d := g.d
	switch m.Kind {
	case ReportEndOfInput:
		d.submit(func() { d.exec(d.coord.TaskEndOfInput(time.Now(), m.From.Task)) })
	case ReportFinished:
		d.submit(func() { d.exec(d.coord.TaskFinished(time.Now(), m.From.Task)) })
		if d.a.remoteDone != nil {
			d.a.remoteTaskFinished(m.From.Task)
		}
	case ReportFailed:
		// At once, on the reporting goroutine: the attempt (or the task's
		// failover region) must stop even when the driver's loop has
		// already quit.
		d.a.taskFailed(m.From.Task, m.Err)
	default:
		return fmt.Errorf("coordinator gateway: %s: unknown task event %d", m.From, m.Kind)
	}
	return nil
}

// ref names task t of its attempt.
func (t *Task) ref() TaskRef {
	return TaskRef{JobID: t.job.id, Attempt: t.att.number, Task: t.id, Execution: t.execution}
}

// toCoordinator logs a message the coordinator gateway did not take (a
// stale attempt's): the coordinator of the current attempt never sees it.
func (t *Task) toCoordinator(err error) {
	if err != nil {
		t.logger.Debug("message to the checkpoint coordinator not delivered", "err", err)
	}
}
