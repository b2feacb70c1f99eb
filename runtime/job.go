package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime/lifecycle"
	"github.com/sluicehq/sluice/runtime/network"
)

// ErrJobCanceled is returned by Wait when the job was cancelled.
var ErrJobCanceled = errors.New("job canceled")

// JobStatus is the lifecycle state of a job, with Flink's names.
type JobStatus int32

const (
	JobCreated JobStatus = iota
	JobRunning
	JobFinished
	JobFailed
	JobCanceled
	JobRestarting
	// JobSuspended: the process running the job shut down (its context
	// was cancelled); the job is not over and resumes from its latest
	// checkpoint in the next run.
	JobSuspended
)

func (s JobStatus) String() string {
	return [...]string{"CREATED", "RUNNING", "FINISHED", "FAILED", "CANCELED", "RESTARTING", "SUSPENDED"}[s]
}

// Job is a running job: the handle that Execute returns. It outlives the
// attempts a restart strategy makes after failures.
type Job struct {
	// base is the graph compiled from the plan; graph the one the
	// current attempt runs (or the next one will): base at another
	// parallelism after a rescale.
	base   *JobGraph
	graph  atomic.Pointer[JobGraph]
	cfg    Config
	logger *slog.Logger
	store  *storage.Storage // nil without a checkpoint directory
	unlock func() error     // releases the job directory's lock
	// suspendCause is why the context given to Execute ended (its
	// context.Cause); under mu.
	suspendCause error
	id           string // the job id: its directory under the checkpoint directory
	run          string // this execution's run id, recorded in every _metadata
	origin       string // the run's lineage (lifecycle.Run.Origin), likewise; set by planStart

	// life is the job's life as a deterministic state machine: what the
	// run starts from, what a failover restores, how the end is recorded.
	life *lifecycle.Machine
	// adopt is a claimed snapshot outside the job's directory, deleted once
	// the run completes a checkpoint (CLAIM).
	adopt string
	// fallbacks counts restores that skipped a corrupt checkpoint whose
	// transactions may have been committed (AllowFallbackPastCommitted).
	fallbacks atomic.Int64
	// result is the recorded end of an earlier run that made this one do
	// nothing (a finished job resumed).
	result *storage.JobResult
	// ended is the result this run recorded when it ended.
	ended atomic.Pointer[storage.JobResult]

	ctx    context.Context // the job's lifetime: cancelled by Cancel
	cancel context.CancelFunc

	status   atomic.Int32
	att      atomic.Pointer[attempt]
	restarts atomic.Int64
	// regionRestarts counts the restarts of failover regions (a part of
	// restarts).
	regionRestarts atomic.Int64
	// strategy is the restart strategy: the supervisor's, and a region
	// failover's (failover_region.go), under strategyMu.
	strategy   *checkpoint.RestartStrategy
	strategyMu sync.Mutex

	// scaling decides the job's parallelism while it runs (rescale.go).
	scaling jobScaling
	// outages are the downtimes after failures (downtime.go).
	outages downtimes

	lastRestore atomic.Pointer[RestoreInfo]
	exceptions  exceptionHistory

	mu        sync.Mutex
	err       error
	canceled  bool
	suspended bool
	done      chan struct{}
}

// attempt is one run of the job's tasks; a restart makes a new one.
type attempt struct {
	job    *Job
	number int
	// graph is the job graph the attempt runs.
	graph  *JobGraph
	ctx    context.Context
	cancel context.CancelFunc
	// specs are every task of the job; tasks the ones running in this
	// process (all of them but on a worker of a job on several hosts),
	// byID those by task id (nil for a remote task).
	specs []TaskSpec
	// tasks and byID change when a failover region restarts: read them
	// under tasksMu (localTasks, task) once the attempt runs.
	tasks   []*Task
	byID    []*Task
	tasksMu sync.RWMutex
	// executions are each task's execution number (Task.execution),
	// under tasksMu.
	executions []int
	restore    *restoreSnapshot
	// regions are the attempt's failover regions (failover_region.go).
	regions regions
	// local says which tasks run here (nil: all); exchange reaches the
	// others' partitions, published the partitions this process serves
	// (under tasksMu).
	local     func(checkpoint.TaskID) bool
	exchange  Exchange
	published []string
	// locations gives a worker's tasks their state locations (no driver
	// runs on a worker).
	locations func(checkpoint.Barrier) (*storage.Location, error)
	// remoteDone is closed, on the coordinator of a job on several hosts,
	// once every task reported that it finished (remoteFinished).
	remoteDone     chan struct{}
	remoteFinished map[checkpoint.TaskID]bool
	driver         *checkpointDriver
	// gateway is the tasks' way to the coordinator (nil without
	// checkpointing).
	gateway CoordinatorGateway

	partitions []*network.ResultPartition
	gates      []*network.InputGate
	// buffers is what the attempt reserved of the process's network
	// buffers (Config.Network.Pool) for its local partitions and gates,
	// given back by releaseBuffers once its tasks ended.
	buffers atomic.Int64

	mu      sync.Mutex
	err     error
	stopped bool // stop-with-savepoint: tasks exit without finishing
	// failedTask is the task whose failure stopped the attempt, at
	// failedAt.
	failedTask string
	failedAt   time.Time
	// rescale is the rescale the attempt stops for (rescale.go).
	rescale *rescalePlan
	// regionRestart is the failover region restarting (nil: none), and
	// restartsExhausted says a region's failure used up the restart
	// strategy: the attempt's failure ends the job.
	regionRestart     *region
	restartsExhausted bool
	// remoteRegions: on a worker, the coordinator restarts failover
	// regions alone (WorkerDeployment.RegionFailover); regionHeld: the
	// runner is held for one (holdForRegion), one count of wg.
	remoteRegions bool
	regionHeld    bool
	// running: its tasks were deployed and started.
	running atomic.Bool
	// rescaled: the first attempt after a rescale; checkpointed: it
	// completed a checkpoint (until then a failure reverts the rescale).
	rescaled     bool
	checkpointed atomic.Bool
	savepoint    string // the stop-with-savepoint's path
	wg           sync.WaitGroup
	// stopping is closed once the attempt is told to stop (failure,
	// cancel, suspend): the cancellation timeout runs from then.
	stopping     chan struct{}
	stoppingOnce sync.Once

	restoreCounters restoreCounters
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// storageName turns the job name into a directory name.
func storageName(job string) string {
	n := unsafeName.ReplaceAllString(job, "-")
	if n == "" || n == "." || n == ".." {
		n = "job"
	}
	return n
}

// Execute compiles the plan and starts the job. It returns at once; use
// Wait for the outcome. Cancelling ctx suspends the job (its checkpoints
// are kept for the next run); Job.Cancel cancels it. With checkpointing
// on, a failure restarts the job from its latest completed checkpoint as
// the restart strategy allows.
//
// With a checkpoint directory the job's checkpoints and its result live
// in <dir>/<job id>/ (see JobIDOf), locked while the job runs. A run
// resumes from the latest usable completed checkpoint there unless told
// otherwise (RestoreFrom, FreshStart); a job whose result says it
// finished does nothing: Wait returns nil at once. Package lifecycle
// decides.
func Execute(ctx context.Context, plan *Plan, cfg Config) (*Job, error) {
	g, err := Compile(plan, cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("job", cfg.JobName)
	cfg.Logger = logger
	if err := cfg.Checkpoint.WithDefaults().Validate(); err != nil {
		return nil, err
	}
	if cfg.Executor != nil && !cfg.Checkpoint.Enabled() {
		return nil, fmt.Errorf("%w: a job on several hosts needs checkpointing (execution.checkpointing.interval)", checkpoint.ErrInvalidConfig)
	}
	if err := checkScaling(cfg); err != nil {
		return nil, err
	}
	if cfg.CancellationTimeout < 0 {
		return nil, fmt.Errorf("%w: task.cancellation.timeout %v must not be negative (0 waits for ever)", checkpoint.ErrInvalidConfig, cfg.CancellationTimeout)
	}
	if !cfg.RestartSet {
		cfg.Restart = checkpoint.DefaultRestartConfig(cfg.Checkpoint.Enabled())
	}
	strategy, err := checkpoint.NewRestartStrategy(cfg.Restart, nil)
	if err != nil {
		return nil, err
	}
	j := &Job{base: g, cfg: cfg, logger: logger, done: make(chan struct{}), id: JobIDOf(cfg, g), run: newRunID(), strategy: strategy}
	j.graph.Store(g)
	j.unlock = func() error { return nil }
	if cfg.Checkpoint.Directory != "" {
		st, err := openStorage(cfg, j.id, logger)
		if err != nil {
			return nil, err
		}
		j.store = st
		if !cfg.SkipLock {
			unlock, err := st.Lock(j.lockHolder())
			if err != nil {
				return nil, fmt.Errorf("job %s: %w", j.id, err)
			}
			j.unlock = unlock
		}
	} else if cfg.Checkpoint.Enabled() {
		return nil, fmt.Errorf("%w: checkpointing is on (interval %v) but no checkpoint directory is set (execution.checkpointing.dir)",
			checkpoint.ErrInvalidConfig, cfg.Checkpoint.Interval)
	}
	if cfg.SkipLock && cfg.Unlock != nil {
		j.unlock = cfg.Unlock
	}
	j.life = j.newMachine()
	start, err := j.planStart()
	if err != nil {
		_ = j.unlock()
		return nil, err
	}
	if start.finished != nil {
		j.result = start.finished
		j.status.Store(int32(JobFinished))
		j.ctx, j.cancel = context.WithCancel(context.Background())
		j.cancel()
		_ = j.unlock()
		close(j.done)
		return j, nil
	}
	if j.store != nil {
		j.collectGarbage()
	}
	j.adopt = start.adopt
	j.ctx, j.cancel = context.WithCancel(context.Background())
	req, auto := j.resumeScaling(start)
	j.newScaling()
	if req != nil || auto != nil {
		s := &j.scaling
		s.mu.Lock() // watchSlots runs already
		acts := s.m.Resume(time.Now(), req, auto)
		s.mu.Unlock()
		j.carryOutScaling(acts)
	}
	a, err := j.newAttempt(0, start.restore, start.owned)
	if err != nil {
		j.cancel()
		_ = j.unlock()
		return nil, err
	}
	j.status.Store(int32(JobRunning))
	stop := context.AfterFunc(ctx, func() {
		j.mu.Lock()
		j.suspendCause = context.Cause(ctx)
		j.mu.Unlock()
		j.suspend()
	})
	go func() {
		defer stop()
		j.supervise(a, start.restore)
	}()
	return j, nil
}

// ID returns the job id: the name of its directory under the checkpoint
// directory, stable across runs of one deployment.
func (j *Job) ID() string { return j.id }

// RunID returns the id of this execution of the job, recorded in the
// metadata of its checkpoints.
func (j *Job) RunID() string { return j.run }

// PreviousResult returns the recorded end of an earlier run when this run
// did nothing because of it (a finished job started again).
func (j *Job) PreviousResult() (*storage.JobResult, bool) { return j.result, j.result != nil }

// Result returns the job's recorded result once it has ended (finished,
// cancelled or failed; not while running or suspended), or, for a
// finished job that was started again, the earlier run's result. ok is
// false when there is none (also without a checkpoint directory).
func (j *Job) Result() (res storage.JobResult, ok bool) {
	if r := j.ended.Load(); r != nil {
		return *r, true
	}
	if j.result != nil {
		return *j.result, true
	}
	return storage.JobResult{}, false
}

// FallbacksPastCommitted is how many restores skipped a corrupt checkpoint
// whose transactions may have been committed (only with
// AllowFallbackPastCommitted).
func (j *Job) FallbacksPastCommitted() int64 { return j.fallbacks.Load() }

// supervise runs attempts until the job finishes, is cancelled or
// suspended, or fails beyond what the restart strategy allows (or with an
// error that suppresses restarts).
func (j *Job) supervise(a *attempt, restore *restoreSnapshot) {
	var err error
	var savepoint string
	// failedAt is when the latest attempt's first task failed, or when
	// the attempt ended without one: a failure's outage and the restart
	// delay start there, so the delay runs while the other tasks are
	// cancelled (as Flink's scheduler starts it at the failure).
	var failedAt time.Time
	number := a.number
	for {
		if a != nil {
			err = a.run()
			failedAt = time.Now()
			a.mu.Lock()
			failed := a.failedTask
			if !a.failedAt.IsZero() {
				failedAt = a.failedAt
			}
			exhausted := a.restartsExhausted
			savepoint = a.savepoint
			rescale := a.rescale
			a.mu.Unlock()
			if err == nil && rescale != nil && rescale.stopped > 0 && !j.isStopping() {
				// The attempt stopped at a checkpoint to be rescaled: the
				// next one restores it at the new parallelism, at once (no
				// failure, no restart counted).
				number++
				if a, err = j.rescaledAttempt(number, rescale, restore); err == nil {
					j.status.Store(int32(JobRunning))
					continue
				}
				j.noteFailure(number, "", err)
				j.revertRescale(err)
			} else if err != nil && !j.isStopping() {
				j.noteFailure(a.number, failed, err)
				if a.rescaled && !a.checkpointed.Load() {
					j.revertRescale(err)
				}
			}
			if err != nil && exhausted {
				j.logger.Error("job failed: the restart strategy allows no more restarts", "err", err)
				break
			}
		} else {
			// The restart's restore or deployment failed just now.
			failedAt = time.Now()
		}
		if err == nil || j.isStopping() {
			break
		}
		if suppressesRestarts(err) {
			j.logger.Error("job failed with an error that suppresses restarts", "err", err)
			break
		}
		delay, ok := j.nextRestartDelay(failedAt)
		if !ok {
			break
		}
		j.logger.Log(context.Background(), failureLevel(err, slog.LevelWarn), "job failed; restarting", "attempt", j.restarts.Load()+1, "delay", delay, "err", err)
		j.outages.failed(failedAt, err)
		j.status.Store(int32(JobRestarting))
		if wait := delay - time.Since(failedAt); wait > 0 {
			select {
			case <-time.After(wait):
			case <-j.ctx.Done():
			}
		}
		if j.isStopping() {
			break
		}
		j.restarts.Add(1)
		number++
		owned := j.ownedCheckpoints()
		var r *restoreSnapshot
		if r, err = j.failoverRestore(owned, restore); err != nil {
			j.noteFailure(number, "", err)
			a = nil
			if suppressesRestarts(err) {
				break
			}
			continue
		}
		j.failoverGraph(r)
		if a, err = j.newAttempt(number, r, owned); err != nil {
			j.noteFailure(number, "", err)
			a = nil
			continue
		}
		j.status.Store(int32(JobRunning))
	}
	j.mu.Lock()
	var status JobStatus
	switch {
	case j.canceled:
		status = JobCanceled
	case j.suspended:
		status = JobSuspended
	case err != nil:
		j.err = err
		status = JobFailed
	default:
		status = JobFinished
	}
	j.mu.Unlock()
	if status == JobSuspended {
		j.logger.Info("job suspended; its checkpoints are kept for the next run", "job_id", j.id)
	} else {
		j.recordResult(status, err, savepoint)
	}
	j.status.Store(int32(status))
	j.cancel()
	if uerr := j.unlock(); uerr != nil {
		j.logger.Warn("release the job directory's lock", "err", uerr)
	}
	j.logger.Info("job ended", "status", j.Status())
	close(j.done)
	j.endScaling()
}

// ownedCheckpoints are the completed checkpoints the run owns: those the
// latest attempt's coordinator retains.
func (j *Job) ownedCheckpoints() []int64 {
	if a := j.att.Load(); a != nil && a.driver != nil {
		return a.driver.coord.Retained()
	}
	return nil
}

// isStopping reports whether the job was cancelled or suspended: task
// errors from then on are the stop, not failures.
func (j *Job) isStopping() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.canceled || j.suspended
}

// newAttempt makes the tasks of one attempt, restoring their state.
func (j *Job) newAttempt(number int, restore *restoreSnapshot, owned []int64) (*attempt, error) {
	a := &attempt{job: j, number: number, graph: j.graph.Load(), restore: restore, stopping: make(chan struct{})}
	if j.cfg.Executor != nil {
		// The coordinator of a job on several hosts: no task runs here.
		a.local = func(checkpoint.TaskID) bool { return false }
		a.remoteDone = make(chan struct{})
		a.remoteFinished = map[checkpoint.TaskID]bool{}
	}
	a.restoreCounters.start = time.Now()
	a.ctx, a.cancel = context.WithCancel(j.ctx)
	if err := a.deploy(); err != nil {
		a.cancel()
		return nil, err
	}
	if j.cfg.Checkpoint.Enabled() {
		d, err := newCheckpointDriver(a, owned)
		if err != nil {
			a.closeTasks()
			a.releaseBuffers()
			a.cancel()
			return nil, err
		}
		a.driver = d
		a.gateway = localCoordinatorGateway{d: d}
	}
	j.att.Store(a)
	return a, nil
}

// run starts the attempt's tasks and waits for all of them. It returns
// nil when the job finished (or stopped with a savepoint), and the first
// failure otherwise.
func (a *attempt) run() error {
	j := a.job
	j.logger.Info("job started", "attempt", a.number, "vertices", len(a.graph.Vertices), "tasks", len(a.specs),
		"restored_from", a.restoreID())
	if ex := j.cfg.Executor; ex != nil {
		d := AttemptDeployment{JobID: j.id, RunID: j.run, Attempt: a.number, Tasks: a.specs}
		if par := a.graph.Parallelism(); !slices.Equal(par, j.base.Parallelism()) {
			d.Parallelism = par
		}
		d.RegionFailover = j.cfg.Failover == FailoverRegion && len(a.regions.list) > 1
		if a.restore != nil {
			d.Restore, d.RestoreOwned = a.restore.snap.Dir, a.restore.owned
		}
		tg, err := ex.Deploy(a.ctx, d, a.gateway)
		if err != nil {
			// The workers that took their share stop it; the driver never
			// started (nothing to shut down).
			ctx, cancel := context.WithTimeout(context.Background(), max(j.cfg.CancellationTimeout, time.Second))
			if cerr := ex.Cancel(ctx, a.number); cerr != nil {
				j.logger.Warn("cancel a failed deployment", "attempt", a.number, "err", cerr)
			}
			cancel()
			a.cancel()
			return fmt.Errorf("deploy attempt %d: %w", a.number, err)
		}
		a.driver.tasks = tg
		// The workers restored their tasks' state before answering the
		// deployment: the restore is reported from here (channel-state
		// replay is not measured across hosts).
		a.restoreCounters.stateDone = time.Now()
		a.reportRestore(&a.restoreCounters)
	}
	if a.driver != nil {
		a.driver.start()
	}
	a.startTasks()
	j.attemptRunning(a)
	a.waitTasks()
	a.releaseBuffers()
	a.mu.Lock()
	err, stopped := a.err, a.stopped
	a.mu.Unlock()
	if a.driver != nil {
		// Completed checkpoints stay: the job's end (recordResult) applies
		// the retention policy once its result is durable.
		a.driver.shutdown()
	}
	a.cancel()
	if stopped {
		return nil
	}
	return err
}

// startTasks runs every local task on a goroutine of its own; each reports
// its end to the coordinator.
func (a *attempt) startTasks() {
	a.start(a.localTasks())
}

// start runs tasks, each on a goroutine of its own.
func (a *attempt) start(tasks []*Task) {
	for _, t := range tasks {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer close(t.exitCh)
			defer t.exited.Store(true)
			err := t.run()
			switch {
			case err != nil && a.gateway != nil:
				// A stale report is a task of a failover region that
				// restarts: its end is the restart's.
				if gerr := a.gateway.Report(TaskEvent{From: t.ref(), Kind: ReportFailed, Err: err}); gerr != nil && !errors.Is(gerr, ErrStaleMessage) {
					a.fail(t.name, err)
				}
			case err != nil:
				a.fail(t.name, err)
			case a.gateway != nil:
				t.toCoordinator(a.gateway.Report(TaskEvent{From: t.ref(), Kind: ReportFinished}))
			}
		}()
	}
}

func (a *attempt) restoreID() int64 {
	if a.restore == nil {
		return 0
	}
	return a.restore.id()
}

// waitTasks waits for every task goroutine to exit; once the attempt was
// told to stop, for at most the cancellation timeout. Past it the attempt
// fails with ErrTaskCancellationTimeout naming the tasks still running,
// and their goroutines are left behind.
func (a *attempt) waitTasks() {
	if a.remoteDone != nil {
		a.waitRemote()
		return
	}
	exited := make(chan struct{})
	go func() {
		a.wg.Wait()
		close(exited)
	}()
	select {
	case <-exited:
		return
	case <-a.stopping:
	}
	timeout := a.job.cfg.CancellationTimeout
	if timeout <= 0 {
		<-exited
		return
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-exited:
		return
	case <-timer.C:
	}
	var stuck []string
	for _, t := range a.localTasks() {
		if !t.exited.Load() {
			stuck = append(stuck, t.name)
		}
	}
	err := &fatalError{Err: fmt.Errorf("%w: %d tasks still running %v after they were cancelled (task.cancellation.timeout): %v",
		ErrTaskCancellationTimeout, len(stuck), timeout, stuck)}
	a.job.logger.Error("tasks did not exit after cancellation; leaving them behind", "tasks", stuck, "timeout", timeout)
	a.mu.Lock()
	if a.err != nil {
		err = &fatalError{Err: fmt.Errorf("%w (stopping after: %w)", err.Err, a.err)}
	}
	a.err, a.stopped = err, false
	a.mu.Unlock()
}

// waitRemote is waitTasks on the coordinator of a job on several hosts:
// it waits until every task finished or the attempt is told to stop, then
// has the executor cancel the tasks, for at most the cancellation timeout.
func (a *attempt) waitRemote() {
	select {
	case <-a.remoteDone:
		return
	case <-a.stopping:
	}
	ctx := context.Background()
	if timeout := a.job.cfg.CancellationTimeout; timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := a.job.cfg.Executor.Cancel(ctx, a.number); err != nil {
		a.job.logger.Error("cancel the attempt's tasks on the workers", "attempt", a.number, "err", err)
	}
}

// remoteTaskFinished counts a remote task's end; the last one ends the
// attempt.
func (a *attempt) remoteTaskFinished(id checkpoint.TaskID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.remoteFinished[id] {
		return
	}
	a.remoteFinished[id] = true
	if len(a.remoteFinished) == len(a.specs) {
		close(a.remoteDone)
	}
}

// fail records the first failure of the attempt and stops every task.
func (a *attempt) fail(task string, err error) {
	a.mu.Lock()
	first := a.err == nil && !a.stopped && !a.job.isStopping()

	if first {
		a.err, a.failedTask, a.failedAt = err, task, time.Now()
	}
	a.mu.Unlock()
	if first {
		a.job.logger.Log(context.Background(), failureLevel(err, slog.LevelError), "task failed; stopping the attempt", "task", task, "attempt", a.number, "err", err)
	}
	a.stopAll()
}

func (a *attempt) stopAll() {
	a.stoppingOnce.Do(func() { close(a.stopping) })
	a.cancel()
	a.releaseRegionHold()
	a.tasksMu.RLock()
	defer a.tasksMu.RUnlock()
	for _, id := range a.published {
		a.exchange.Unpublish(id)
	}
	for _, p := range a.partitions {
		p.Release()
	}
	for _, g := range a.gates {
		g.Release()
	}
}

// closeTasks releases the state of tasks that never ran.
func (a *attempt) closeTasks() {
	for _, t := range a.tasks {
		t.closeState()
	}
}

// deploy makes the attempt's local tasks, their partitions and gates,
// wires them (in memory between local tasks, through the exchange to
// tasks of other processes), and builds every operator chain. In one
// process every task is local.
func (a *attempt) deploy() error {
	a.specs = a.graph.Tasks()
	a.regions = regionsOf(a.specs)
	a.executions = make([]int, len(a.specs))
	if err := a.reserveBuffers(); err != nil {
		return err
	}
	a.byID = make([]*Task, len(a.specs))
	for _, s := range a.specs {
		if !a.isLocal(s.ID) {
			continue
		}
		t := a.newTask(s, 0, a.restore)
		a.byID[s.ID] = t
		a.tasks = append(a.tasks, t)
	}
	if err := a.wire(a.tasks, a.byID); err != nil {
		a.closeTasks()
		a.releaseBuffers()
		return err
	}
	if err := a.buildTasks(a.tasks); err != nil {
		a.closeTasks()
		a.releaseBuffers()
		return err
	}
	a.restoreCounters.stateDone = time.Now()
	a.restoreCounters.replayLeft.Store(int32(len(a.tasks)))
	return nil
}

// newTask makes the task of spec s, in its execution, restoring from
// restore once built.
func (a *attempt) newTask(s TaskSpec, execution int, restore *restoreSnapshot) *Task {
	j := a.job
	wake := make(chan struct{}, 1)
	mb := newMailbox(wake)
	ctx, cancel := context.WithCancel(a.ctx)
	logger := j.logger.With("vertex", s.Vertex.Name, "subtask", s.Subtask)
	if execution > 0 {
		logger = logger.With("execution", execution)
	}
	t := &Task{
		job: j, att: a, id: s.ID, vertex: s.Vertex, subtask: s.Subtask, name: s.Name, ctx: ctx, cancel: cancel,
		execution: execution, restore: restore, attemptNumber: a.number + int(j.regionRestarts.Load()),
		wake: wake, mailbox: mb, upstream: s.Upstream, exitCh: make(chan struct{}), restoreCounters: &a.restoreCounters,
		timers: &processingTime{mailbox: mb, timers: map[*time.Timer]struct{}{}},
		logger: logger,
	}
	t.counters.inputWM.Store(operators.MinWatermark)
	t.counters.outputWM.Store(operators.MinWatermark)
	return t
}

// wire makes the partitions and gates of tasks and connects them: to the
// producers byID holds (in memory), through the exchange to the others.
func (a *attempt) wire(tasks []*Task, byID []*Task) error {
	j := a.job
	first := map[*JobVertex]checkpoint.TaskID{}
	for _, s := range a.specs {
		if _, ok := first[s.Vertex]; !ok {
			first[s.Vertex] = s.ID
		}
	}
	var partitions []*network.ResultPartition
	var gates []*network.InputGate
	defer func() {
		a.tasksMu.Lock()
		a.partitions = append(a.partitions, partitions...)
		a.gates = append(a.gates, gates...)
		a.tasksMu.Unlock()
	}()
	// One partition per producing task and network edge.
	for _, t := range tasks {
		v := t.vertex
		for ei, e := range v.Out {
			cons := a.graph.vertexOf[e.To]
			n := cons.Parallelism
			if e.Partitioner == PartitionForward {
				n = 1
			}
			name := fmt.Sprintf("%s -> %s [%d]", e.From.Name, e.To.Name, t.subtask)
			p := network.NewResultPartition(name, n, j.cfg.Network, t.wake)
			partitions = append(partitions, p)
			t.partitions = append(t.partitions, p)
			t.writers = append(t.writers, &netWriter{
				edge: e, name: fmt.Sprintf("edge %q -> %q", e.From.Name, e.To.Name),
				part: p, kind: e.Partitioner, n: n, maxPar: cons.MaxParallelism,
				ctx: t.ctx, flushEach: j.cfg.BufferTimeout == 0, outputWM: &t.counters.outputWM,
			})
			remote := false
			for ci := 0; ci < cons.Parallelism; ci++ {
				if (e.Partitioner != PartitionForward || ci == t.subtask) && !a.isLocal(first[cons]+checkpoint.TaskID(ci)) {
					remote = true
				}
			}
			if remote {
				id := a.partitionID(t.id, ei)
				a.exchange.Publish(id, p)
				a.tasksMu.Lock()
				a.published = append(a.published, id)
				a.tasksMu.Unlock()
				t.published = append(t.published, id)
			}
		}
	}
	// One gate per consuming task and network edge, then connect.
	for _, t := range tasks {
		v := t.vertex
		channels := 0
		for _, e := range v.In {
			prod := a.graph.vertexOf[e.From]
			n := prod.Parallelism
			if e.Partitioner == PartitionForward {
				n = 1
			}
			name := fmt.Sprintf("%s -> %s [%d]", e.From.Name, e.To.Name, t.subtask)
			gate := network.NewInputGate(name, n, j.cfg.Network, t.wake)
			gates = append(gates, gate)
			gi := &gateInput{edge: e, gate: gate, offset: channels}
			for c := 0; c < n; c++ {
				gi.channels = append(gi.channels, &channelInput{gate: gi, index: c, reader: network.NewRecordReader()})
			}
			channels += n
			t.gates = append(t.gates, gi)
			ei := slices.Index(prod.Out, e)
			for pi := 0; pi < prod.Parallelism; pi++ {
				sub, ch := t.subtask, pi
				if e.Partitioner == PartitionForward {
					if pi != t.subtask {
						continue
					}
					sub, ch = 0, 0
				}
				pid := first[prod] + checkpoint.TaskID(pi)
				if pt := byID[pid]; pt != nil {
					network.Connect(pt.writerFor(e).part, sub, gate, ch)
					continue
				}
				if err := a.exchange.ConnectRemote(gate, ch, pid, a.partitionID(pid, ei), sub); err != nil {
					return fmt.Errorf("task %s: connect to %s: %w", t.name, a.specs[pid].Name, err)
				}
			}
		}
		t.valve = newWatermarkValve(channels)
		t.numChannels = channels
	}
	return nil
}

// partitionID names the partition of producer's current execution on
// the out-edge number edge of its vertex: a region's new execution
// publishes under a new id, so no consumer of the new one ever reads (or
// gives credit to) the old one's partition, nor the other way round.
func (a *attempt) partitionID(producer checkpoint.TaskID, edge int) string {
	id := PartitionID(a.job.id, a.number, producer, edge)
	if e := a.execution(producer); e > 0 {
		id += fmt.Sprintf("/e%d", e)
	}
	return id
}

// buildTasks builds the attempt's tasks, restoring their state, several at
// once (as Flink restores each task on its own thread): a restore's time
// is its slowest task's, not the sum of every task's downloads and
// database opens. The first failing task's error (in task order) is
// returned.
func (a *attempt) buildTasks(tasks []*Task) error {
	errs := make([]error, len(tasks))
	sem := make(chan struct{}, max(goruntime.GOMAXPROCS(0), minRestoreConcurrency))
	var wg sync.WaitGroup
	for i, t := range tasks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = t.build(a.graph)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// minRestoreConcurrency is the least number of tasks built (and restored)
// at once: restores mostly wait for storage and disks, not CPUs.
const minRestoreConcurrency = 8

// reserveBuffers reserves, before anything is deployed, the network
// buffers the attempt's local partitions and gates require of the
// process's pool (Flink's check of the required buffers against the
// NetworkBufferPool): a job whose exchanges need more than the process's
// network memory fails to start, naming the keys to raise, rather than
// allocating past the budget. Retrying cannot help, so the error
// suppresses restarts.
func (a *attempt) reserveBuffers() error {
	j := a.job
	pool := j.cfg.Network.Pool
	if pool == nil {
		return nil
	}
	need, partitions, gates := 0, 0, 0
	for _, s := range a.specs {
		if !a.isLocal(s.ID) {
			continue
		}
		for _, e := range s.Vertex.Out {
			n := a.graph.vertexOf[e.To].Parallelism
			if e.Partitioner == PartitionForward {
				n = 1
			}
			need += j.cfg.Network.PartitionBuffers(n)
			partitions++
		}
		for _, e := range s.Vertex.In {
			n := a.graph.vertexOf[e.From].Parallelism
			if e.Partitioner == PartitionForward {
				n = 1
			}
			need += j.cfg.Network.GateBuffers(n)
			gates++
		}
	}
	what := fmt.Sprintf("job %q attempt %d: %d result partitions and %d input gates", j.cfg.JobName, a.number, partitions, gates)
	if err := pool.Reserve(need, what); err != nil {
		return &fatalError{Err: err}
	}
	a.buffers.Store(int64(need))
	j.logger.Debug("network buffers reserved", "attempt", a.number, "required", need, "pool", pool.Stats())
	return nil
}

// releaseBuffers gives back what reserveBuffers reserved, once.
func (a *attempt) releaseBuffers() {
	a.job.cfg.Network.Pool.Unreserve(int(a.buffers.Swap(0)))
}

// location is where the attempt's tasks write their state for the
// checkpoint or savepoint of barrier b: the coordinator's location in one
// process, the worker's (Locations) on a worker.
func (a *attempt) location(b checkpoint.Barrier) (*storage.Location, error) {
	switch {
	case a.driver != nil:
		return a.driver.location(b.ID)
	case a.locations != nil:
		return a.locations(b)
	}
	return nil, fmt.Errorf("checkpoint %d: %w", b.ID, ErrNoCheckpointing)
}

// isLocal reports whether task id runs in this process.
func (a *attempt) isLocal(id checkpoint.TaskID) bool { return a.local == nil || a.local(id) }

// Cancel cancels the job (Flink's cancel): it stops, its result is
// recorded as CANCELED, and the retention policy applies to its
// checkpoints. Wait then returns ErrJobCanceled.
func (j *Job) Cancel() { j.stop(false) }

// suspend stops the job without ending it, when the context given to
// Execute is cancelled: its checkpoints stay, no result is recorded, and
// Wait returns ErrJobSuspended.
func (j *Job) suspend() { j.stop(true) }

// Suspend stops the job as cancelling the context given to Execute does
// (its checkpoints stay, no result is recorded, Wait returns
// ErrJobSuspended), but at once: a task error that follows the call is
// the stop, never a failure to restart from. It does not wait for the
// tasks to exit. Package sluicetest crashes a job with it.
func (j *Job) Suspend() { j.suspend() }

func (j *Job) stop(suspend bool) {
	j.mu.Lock()
	if j.err == nil && !j.canceled && !j.suspended && (j.Status() == JobRunning || j.Status() == JobRestarting) {
		if suspend {
			j.suspended = true
		} else {
			j.canceled = true
		}
	}
	j.mu.Unlock()
	if j.cancel != nil {
		j.cancel()
	}
	if a := j.att.Load(); a != nil {
		a.stopAll()
	}
}

// Wait blocks until the job has ended and every task goroutine has exited.
// It returns nil when the job finished, ErrJobCanceled when it was
// cancelled, and the failure otherwise.
func (j *Job) Wait() error {
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	if j.canceled {
		return fmt.Errorf("%w: %w", ErrJobCanceled, context.Canceled)
	}
	if j.suspended {
		cause := j.suspendCause
		if cause == nil {
			cause = context.Canceled
		}
		return fmt.Errorf("%w: %w", ErrJobSuspended, cause)
	}
	return nil
}

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Status returns the job's current status.
func (j *Job) Status() JobStatus { return JobStatus(j.status.Load()) }

// Restarts is how many times the job restarted after a failure.
func (j *Job) Restarts() int64 { return j.restarts.Load() }

// Metrics returns the figures of every task of the current attempt:
// throughput and the busy, idle and backpressured time that make up
// backpressure.
func (j *Job) Metrics() []TaskMetrics {
	if ms, ok := j.cfg.Executor.(MetricsSource); ok {
		return ms.TaskMetrics()
	}
	a := j.att.Load()
	if a == nil {
		return nil
	}
	tasks := a.localTasks()
	out := make([]TaskMetrics, len(tasks))
	for i, t := range tasks {
		out[i] = t.metrics()
	}
	return out
}

// Graph returns the job graph the job runs: the plan compiled, at the
// parallelism of its latest rescale.
func (j *Job) Graph() *JobGraph { return j.graph.Load() }

// Config returns the job's settings.
func (j *Job) Config() Config { return j.cfg }
