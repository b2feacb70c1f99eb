package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
)

// A job on several hosts splits the runtime in two, as Flink's JobMaster
// and TaskManagers: the coordinator process runs the Job (its life,
// restarts, the checkpoint coordinator) with an Executor that deploys each
// attempt's tasks on workers; each worker process runs the tasks the
// coordinator placed on it with a TaskRunner. Both compile the same plan
// (JobGraph.Fingerprint checks it), so task ids and partitions agree.

// Executor runs the tasks of a job's attempts in other processes.
type Executor interface {
	// Deploy starts the attempt's tasks, restoring the snapshot d names,
	// and returns the gateway that reaches them. The tasks report to
	// coord; so does the executor when it loses a worker (a ReportFailed
	// of one of the worker's tasks), which fails the attempt.
	Deploy(ctx context.Context, d AttemptDeployment, coord CoordinatorGateway) (TaskGateway, error)
	// Cancel stops the attempt's tasks everywhere, waiting until they
	// stopped or ctx ends.
	Cancel(ctx context.Context, attempt int) error
}

// AttemptDeployment is one attempt of a job, as the coordinator deploys it.
type AttemptDeployment struct {
	JobID   string
	RunID   string
	Attempt int
	// Restore is the directory of the checkpoint or savepoint the tasks
	// restore ("" for none); RestoreOwned says whether the run owns it
	// (incremental checkpoints may then reference its shared files).
	Restore      string
	RestoreOwned bool
	Tasks        []TaskSpec
	// Parallelism is every vertex's parallelism (by index) when it is not
	// the plan's (the job was rescaled); nil otherwise. The workers
	// compile the plan and run it at this parallelism.
	Parallelism []int
}

// MetricsSource is implemented by executors that know their tasks'
// figures (the workers report them): Job.Metrics returns them on the
// coordinator, which runs no task itself.
type MetricsSource interface {
	TaskMetrics() []TaskMetrics
}

// TaskStopper is implemented by task gateways that can also stop a task
// after a stop-with-savepoint and make a source end event time (a
// draining stop). The in-process gateway does.
type TaskStopper interface {
	StopTask(to TaskRef) error
	DrainEventTime(to TaskRef) error
}

// SavepointDirSetter is implemented by task gateways whose tasks write
// their state in other processes: they are told where a savepoint goes
// before its trigger reaches any task (TaskRunner.SetSavepointDir on the
// other side).
type SavepointDirSetter interface {
	SetSavepointDir(id int64, dir string) error
}

// StopTask puts the stop behind the task's queued mail (its notify of the
// savepoint's completion), so that sinks commit first.
func (g localTaskGateway) StopTask(to TaskRef) error {
	t, err := g.task(to)
	if err != nil {
		return err
	}
	return t.mailbox.Put(func() error { return errStopTask })
}

// DrainEventTime makes a source task emit the end of event time.
func (g localTaskGateway) DrainEventTime(to TaskRef) error {
	t, err := g.task(to)
	if err != nil {
		return err
	}
	if t.src == nil {
		return nil
	}
	return t.mailbox.Put(func() error { return t.drainEventTime() })
}

// WorkerDeployment is what a worker runs of one attempt.
type WorkerDeployment struct {
	JobID   string
	RunID   string
	Attempt int
	// Tasks are the ids of the tasks that run on this worker.
	Tasks []checkpoint.TaskID
	// Restore and RestoreOwned: as in AttemptDeployment.
	Restore      string
	RestoreOwned bool
	// Parallelism: as in AttemptDeployment.
	Parallelism []int
}

// TaskRunner runs, in a worker process, the tasks of one attempt that the
// coordinator placed there.
type TaskRunner struct {
	job  *Job
	a    *attempt
	done chan struct{}

	mu         sync.Mutex
	savepoints map[int64]string
	spWait     map[int64]chan struct{}
}

// ErrSavepointLocation: a worker's task wrote a savepoint's state before
// the coordinator said where the savepoint goes.
var ErrSavepointLocation = errors.New("savepoint location unknown")

// RunTasks compiles the plan as the coordinator did, opens the job's
// checkpoint storage (shared with the coordinator: S3 or a shared file
// system), loads the snapshot to restore, and starts the local tasks of
// the deployment; channels to tasks elsewhere go through ex, messages to
// the coordinator through coord.
func RunTasks(plan *Plan, cfg Config, d WorkerDeployment, ex Exchange, coord CoordinatorGateway) (*TaskRunner, error) {
	g, err := Compile(plan, cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("job", cfg.JobName, "attempt", d.Attempt)
	cfg.Logger = logger
	// The coordinator reports restores (once the workers deployed).
	cfg.RestoreListeners = nil
	if d.Parallelism != nil {
		// The coordinator rescaled the job: the plan at its parallelism.
		if g, err = g.Rescaled(d.Parallelism); err != nil {
			return nil, fmt.Errorf("deployment of job %s attempt %d: %w", d.JobID, d.Attempt, err)
		}
	}
	j := &Job{base: g, cfg: cfg, logger: logger, done: make(chan struct{}), id: d.JobID, run: d.RunID}
	j.graph.Store(g)
	j.unlock = func() error { return nil }
	j.ctx, j.cancel = context.WithCancel(context.Background())
	if cfg.Checkpoint.Directory != "" {
		st, err := openStorage(cfg, j.id, logger)
		if err != nil {
			j.cancel()
			return nil, err
		}
		j.store = st
	}
	var restore *restoreSnapshot
	if d.Restore != "" {
		snap, err := storage.LoadSnapshotMetadata(cfg.CheckpointFS, d.Restore, cfg.CheckpointSchemes)
		if err != nil {
			j.cancel()
			return nil, fmt.Errorf("%w from %s: %w", ErrRestore, d.Restore, err)
		}
		restore = newRestoreSnapshot(snap, d.RestoreOwned)
	}
	local := make(map[checkpoint.TaskID]bool, len(d.Tasks))
	for _, id := range d.Tasks {
		local[id] = true
	}
	r := &TaskRunner{job: j, done: make(chan struct{}), savepoints: map[int64]string{}, spWait: map[int64]chan struct{}{}}
	a := &attempt{job: j, number: d.Attempt, graph: g, restore: restore, stopping: make(chan struct{}),
		local: func(id checkpoint.TaskID) bool { return local[id] }, exchange: ex, locations: r.location}
	a.gateway = workerGateway{CoordinatorGateway: coord, a: a}
	a.restoreCounters.start = time.Now()
	a.ctx, a.cancel = context.WithCancel(j.ctx)
	if err := a.deploy(); err != nil {
		a.cancel()
		j.cancel()
		return nil, err
	}
	for _, id := range d.Tasks {
		if int(id) < 0 || int(id) >= len(a.byID) || a.byID[id] == nil {
			a.closeTasks()
			a.releaseBuffers()
			a.cancel()
			j.cancel()
			return nil, fmt.Errorf("deployment of job %s attempt %d: task %d is not a task of the job (%d tasks)", d.JobID, d.Attempt, id, len(a.specs))
		}
	}
	r.a = a
	j.att.Store(a)
	j.status.Store(int32(JobRunning))
	logger.Info("tasks deployed", "tasks", len(a.tasks), "restored_from", a.restoreID())
	a.startTasks()
	go func() {
		a.waitTasks()
		a.releaseBuffers()
		for _, id := range a.published {
			ex.Unpublish(id)
		}
		a.cancel()
		j.cancel()
		close(r.done)
	}()
	return r, nil
}

// openStorage opens the job's checkpoint storage as cfg says.
func openStorage(cfg Config, jobID string, logger *slog.Logger) (*storage.Storage, error) {
	fsys := cfg.CheckpointFS
	if fsys == nil {
		fsys = storage.OSFS{}
	}
	inline := storage.DefaultInlineThreshold
	if cfg.InlineThreshold != nil {
		inline = *cfg.InlineThreshold
	}
	st, err := storage.New(fsys, cfg.Checkpoint.Directory, jobID,
		storage.Options{InlineThreshold: inline, Logger: logger, Schemes: cfg.CheckpointSchemes})
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage: %w", err)
	}
	return st, nil
}

// Gateway is the way to the runner's tasks, for the coordinator's
// messages (also a TaskStopper).
func (r *TaskRunner) Gateway() TaskGateway { return localTaskGateway{a: r.a} }

// SetSavepointDir tells the runner where savepoint id goes, before or
// while its barrier reaches the tasks.
func (r *TaskRunner) SetSavepointDir(id int64, dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.savepoints[id] = dir
	if ch := r.spWait[id]; ch != nil {
		close(ch)
		delete(r.spWait, id)
	}
}

// location is where the runner's tasks write the state of checkpoint b:
// the job's chk-<id>, or the savepoint's directory once the coordinator
// said it (waiting for it a bounded time).
func (r *TaskRunner) location(b checkpoint.Barrier) (*storage.Location, error) {
	st := r.job.store
	if st == nil {
		return nil, fmt.Errorf("checkpoint %d: %w", b.ID, ErrNoCheckpointing)
	}
	if !b.Options.Kind.IsSavepoint() {
		return st.Checkpoint(b.ID)
	}
	r.mu.Lock()
	dir, ok := r.savepoints[b.ID]
	var wait chan struct{}
	if !ok {
		if wait = r.spWait[b.ID]; wait == nil {
			wait = make(chan struct{})
			r.spWait[b.ID] = wait
		}
	}
	r.mu.Unlock()
	if !ok {
		select {
		case <-wait:
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("savepoint %d: %w: the coordinator did not say where it goes", b.ID, ErrSavepointLocation)
		case <-r.a.ctx.Done():
			return nil, fmt.Errorf("savepoint %d: %w", b.ID, r.a.ctx.Err())
		}
		r.mu.Lock()
		dir = r.savepoints[b.ID]
		r.mu.Unlock()
	}
	return st.SavepointAt(dir, b.ID)
}

// Cancel stops the runner's tasks (the coordinator cancelled the attempt,
// or was lost).
func (r *TaskRunner) Cancel() {
	// The tasks' errors from here on are the stop, not failures.
	r.job.mu.Lock()
	r.job.canceled = true
	r.job.mu.Unlock()
	r.a.stopAll()
}

// Done is closed once every task of the runner has exited (or the
// cancellation timeout left some behind).
func (r *TaskRunner) Done() <-chan struct{} { return r.done }

// Err is the first failure of the runner's tasks, once Done.
func (r *TaskRunner) Err() error {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	return r.a.err
}

// Attempt is the attempt the runner runs.
func (r *TaskRunner) Attempt() int { return r.a.number }

// Metrics returns the runner's tasks' figures.
func (r *TaskRunner) Metrics() []TaskMetrics { return r.job.Metrics() }

// workerGateway is a worker's way to the coordinator: a task's failure
// also stops the worker's other tasks at once, without waiting for the
// coordinator's cancel.
type workerGateway struct {
	CoordinatorGateway
	a *attempt
}

func (g workerGateway) Report(m TaskEvent) error {
	err := g.CoordinatorGateway.Report(m)
	if m.Kind == ReportFailed {
		name := fmt.Sprint(m.From.Task)
		if int(m.From.Task) < len(g.a.specs) {
			name = g.a.specs[m.From.Task].Name
		}
		g.a.fail(name, m.Err)
	}
	return err
}
