package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	// RegionFailover: the job restarts a failed task's failover region
	// alone (jobmanager.execution.failover-strategy region and several
	// regions), so a worker whose task fails stops none of its other
	// tasks itself: the coordinator says what stops (RegionRestarter).
	RegionFailover bool
}

// RegionRestarter is implemented by executors that restart one failover
// region's tasks on the workers running them while the attempt's other
// tasks run on (Flink's RestartPipelinedRegionFailoverStrategy across
// TaskManagers). Without it, a task failure on several hosts restarts the
// whole job. The coordinator calls StopTasks, DeployTasks and StartTasks
// in this order for one region at a time (TaskRunner's methods of the
// same names on the other side); any error restarts the whole job.
type RegionRestarter interface {
	// CanRestartRegions reports whether the attempt's regions can restart
	// alone: it is the deployed one and every worker running its tasks
	// restarts regions.
	CanRestartRegions(attempt int) bool
	// StopTasks cancels the tasks, in the executions tasks name, and waits
	// until they exited, or ctx ends.
	StopTasks(ctx context.Context, attempt int, tasks []TaskRef) error
	// DeployTasks makes new executions of the tasks (d.Tasks name them in
	// their new executions), wired to their peers and restored from
	// d.Restore, without running them.
	DeployTasks(ctx context.Context, d RegionDeployment) error
	// StartTasks runs the executions DeployTasks made.
	StartTasks(attempt int, tasks []TaskRef) error
}

// RegionDeployment is the new executions of a failover region's tasks, as
// the coordinator deploys them.
type RegionDeployment struct {
	JobID   string
	RunID   string
	Attempt int
	// Tasks name the region's tasks in their new executions; the
	// executor gives each worker its own.
	Tasks []TaskRef
	// OperatorAttempt is the operators' Attempt (operators.Context): the
	// attempt's number and the region restarts of the run.
	OperatorAttempt int
	// Restore and RestoreOwned: as in AttemptDeployment.
	Restore      string
	RestoreOwned bool
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
	// Parallelism, RegionFailover: as in AttemptDeployment.
	Parallelism    []int
	RegionFailover bool
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
	// prepared are the new executions DeployTasks made, until StartTasks
	// runs them (or the runner is cancelled).
	prepared []*Task
	// deploying counts the DeployTasks calls under way, which the runner
	// waits for before it is done; ended: it no longer takes one.
	deploying sync.WaitGroup
	ended     bool
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
	restore, err := loadRestore(cfg, d.Restore, d.RestoreOwned)
	if err != nil {
		j.cancel()
		return nil, err
	}
	local := make(map[checkpoint.TaskID]bool, len(d.Tasks))
	for _, id := range d.Tasks {
		local[id] = true
	}
	r := &TaskRunner{job: j, done: make(chan struct{}), savepoints: map[int64]string{}, spWait: map[int64]chan struct{}{}}
	a := &attempt{job: j, number: d.Attempt, graph: g, restore: restore, stopping: make(chan struct{}),
		local: func(id checkpoint.TaskID) bool { return local[id] }, exchange: ex, locations: r.location,
		remoteRegions: d.RegionFailover}
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
		a.tasksMu.RLock()
		for _, id := range a.published {
			ex.Unpublish(id)
		}
		a.tasksMu.RUnlock()
		a.cancel()
		r.mu.Lock()
		r.ended = true
		r.mu.Unlock()
		r.deploying.Wait()
		j.cancel()
		close(r.done)
	}()
	return r, nil
}

// loadRestore loads the snapshot in dir to restore ("" for none).
func loadRestore(cfg Config, dir string, owned bool) (*restoreSnapshot, error) {
	if dir == "" {
		return nil, nil
	}
	snap, err := storage.LoadSnapshotMetadata(cfg.CheckpointFS, dir, cfg.CheckpointSchemes)
	if err != nil {
		return nil, fmt.Errorf("%w from %s: %w", ErrRestore, dir, err)
	}
	return newRestoreSnapshot(snap, owned), nil
}

// regionTasks checks that tasks are local tasks of the runner's attempt,
// for a region's restart, and returns their ids and executions.
func (r *TaskRunner) regionTasks(step string, attempt int, tasks []TaskRef) ([]checkpoint.TaskID, map[checkpoint.TaskID]int, error) {
	a := r.a
	ids := make([]checkpoint.TaskID, 0, len(tasks))
	executions := make(map[checkpoint.TaskID]int, len(tasks))
	for _, t := range tasks {
		switch {
		case t.JobID != a.job.id || t.Attempt != attempt || attempt != a.number:
			return nil, nil, fmt.Errorf("%s of %s: the worker runs job %s attempt %d: %w", step, t, a.job.id, a.number, ErrStaleMessage)
		case int(t.Task) < 0 || int(t.Task) >= len(a.specs) || !a.isLocal(t.Task):
			return nil, nil, fmt.Errorf("%s of %s: not a task of this worker", step, t)
		}
		ids = append(ids, t.Task)
		executions[t.Task] = t.Execution
	}
	return ids, executions, nil
}

// StopTasks cancels the runner's tasks of a failover region that restarts
// (RegionRestarter.StopTasks), in the executions tasks name or earlier,
// and waits until they exited: at most the cancellation timeout, or until
// ctx ends. The runner's other tasks run on, and the runner lasts until
// StartTasks ran the region's new executions.
func (r *TaskRunner) StopTasks(ctx context.Context, attempt int, tasks []TaskRef) error {
	ids, executions, err := r.regionTasks("stop", attempt, tasks)
	if err != nil {
		return err
	}
	a := r.a
	if err := a.holdForRegion(); err != nil {
		return err
	}
	old := a.cancelTasks(ids, func(id checkpoint.TaskID) int { return executions[id] })
	wctx, cancel := a.cancellation()
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	if err := a.waitCancelled(wctx, old); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("stop %d tasks of attempt %d: %w", len(old), attempt, ctx.Err())
		}
		return err
	}
	a.job.logger.Info("failover region's tasks stopped", "tasks", len(old))
	return nil
}

// DeployTasks makes new executions of the runner's tasks of a failover
// region (RegionRestarter.DeployTasks), the runner's tasks of their ids
// from now on (the coordinator's messages queue in their mailboxes until
// StartTasks runs them): their partitions published under
// the new executions' ids, their channels to local peers in memory and to
// remote ones through the exchange, their state restored from d.Restore
// (from local files where the state backend keeps them, as a full restore
// does). StartTasks runs them.
func (r *TaskRunner) DeployTasks(ctx context.Context, d RegionDeployment) error {
	ids, executions, err := r.regionTasks("deploy", d.Attempt, d.Tasks)
	if err != nil {
		return err
	}
	a := r.a
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return fmt.Errorf("deploy %d tasks of attempt %d: %w", len(d.Tasks), d.Attempt, errAttemptStopping)
	}
	r.deploying.Add(1)
	r.mu.Unlock()
	defer r.deploying.Done()
	restore := a.restore
	if restore == nil || restore.snap.Dir != d.Restore {
		if restore, err = loadRestore(a.job.cfg, d.Restore, d.RestoreOwned); err != nil {
			return err
		}
	}
	// Every task of a region restarts with it, so a region's tasks share
	// their execution: that of remote producers (in the partition ids)
	// is that of the local tasks of their region.
	a.tasksMu.Lock()
	for id, e := range executions {
		for _, rt := range a.regions.of[id].tasks {
			a.executions[rt] = e
		}
	}
	a.tasksMu.Unlock()
	tasks, err := a.newExecutions(ids, restore, d.OperatorAttempt)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if a.ctx.Err() != nil || ctx.Err() != nil {
		r.mu.Unlock()
		for _, t := range tasks {
			t.closeState()
		}
		return fmt.Errorf("deploy %d tasks of attempt %d: %w", len(tasks), d.Attempt, errAttemptStopping)
	}
	a.install(tasks)
	r.prepared = append(r.prepared, tasks...)
	r.mu.Unlock()
	from := int64(0)
	if restore != nil {
		from = restore.id()
	}
	a.job.logger.Info("failover region's tasks deployed", "tasks", len(tasks), "restored_from", from)
	return nil
}

// StartTasks runs the executions DeployTasks made of tasks
// (RegionRestarter.StartTasks).
func (r *TaskRunner) StartTasks(attempt int, tasks []TaskRef) error {
	if _, _, err := r.regionTasks("start", attempt, tasks); err != nil {
		return err
	}
	a := r.a
	r.mu.Lock()
	var start []*Task
	r.prepared = slices.DeleteFunc(r.prepared, func(t *Task) bool {
		if slices.Contains(tasks, t.ref()) {
			start = append(start, t)
			return true
		}
		return false
	})
	r.mu.Unlock()
	if len(start) != len(tasks) {
		for _, t := range start {
			t.closeState()
		}
		return fmt.Errorf("start %d tasks of attempt %d: %d of them were not deployed", len(tasks), attempt, len(tasks)-len(start))
	}
	// Under the hold, so that the tasks join the runner's wait group
	// while it is above zero, and not once the attempt stopped.
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.regionHeld {
		for _, t := range start {
			t.closeState()
		}
		return fmt.Errorf("start %d tasks of attempt %d: %w", len(tasks), attempt, errAttemptStopping)
	}
	a.start(start)
	a.regionHeld = false
	a.wg.Done()
	return nil
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
	r.mu.Lock()
	prepared := r.prepared
	r.prepared = nil
	r.mu.Unlock()
	for _, t := range prepared {
		t.closeState()
	}
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

// holdForRegion keeps a worker's runner running while a failover region
// of its restarts, even when every task of it stopped meanwhile, until
// releaseRegionHold (StartTasks, or the attempt's stop). It fails once
// every task of the runner exited (the runner ends).
func (a *attempt) holdForRegion() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.regionHeld {
		return nil
	}
	if a.ctx.Err() != nil {
		return fmt.Errorf("job %s attempt %d: %w", a.job.id, a.number, errAttemptStopping)
	}
	// A task that has not exited holds the wait group above zero: adding
	// to it is safe while the runner's waiter waits.
	for _, t := range a.localTasks() {
		if !t.exited.Load() {
			a.wg.Add(1)
			a.regionHeld = true
			return nil
		}
	}
	return fmt.Errorf("job %s attempt %d: every task of the worker has exited", a.job.id, a.number)
}

// releaseRegionHold ends what holdForRegion held.
func (a *attempt) releaseRegionHold() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.regionHeld {
		a.regionHeld = false
		a.wg.Done()
	}
}

// workerGateway is a worker's way to the coordinator: a task's failure
// also stops the worker's other tasks at once, without waiting for the
// coordinator's cancel, unless the coordinator may restart the task's
// failover region alone: then the runner waits for its word (and lasts
// until the region runs again or the attempt is cancelled).
type workerGateway struct {
	CoordinatorGateway
	a *attempt
}

func (g workerGateway) Report(m TaskEvent) error {
	if m.Kind == ReportFailed && g.a.remoteRegions && !suppressesRestarts(m.Err) && g.a.holdForRegion() == nil {
		return g.CoordinatorGateway.Report(m)
	}
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
