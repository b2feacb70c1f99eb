package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
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
)

func (s JobStatus) String() string {
	return [...]string{"CREATED", "RUNNING", "FINISHED", "FAILED", "CANCELED", "RESTARTING"}[s]
}

// Job is a running job: the handle that Execute returns. It outlives the
// attempts a restart strategy makes after failures.
type Job struct {
	graph  *JobGraph
	cfg    Config
	logger *slog.Logger
	store  *storage.Storage // nil without a checkpoint directory

	ctx    context.Context // the job's lifetime: cancelled by Cancel
	cancel context.CancelFunc

	status   atomic.Int32
	att      atomic.Pointer[attempt]
	restarts atomic.Int64

	lastRestore atomic.Pointer[RestoreInfo]

	mu       sync.Mutex
	err      error
	canceled bool
	done     chan struct{}
}

// attempt is one run of the job's tasks; a restart makes a new one.
type attempt struct {
	job     *Job
	number  int
	ctx     context.Context
	cancel  context.CancelFunc
	tasks   []*Task
	restore *restoreSnapshot
	driver  *checkpointDriver

	partitions []*network.ResultPartition
	gates      []*network.InputGate

	mu      sync.Mutex
	err     error
	stopped bool // stop-with-savepoint: tasks exit without finishing
	wg      sync.WaitGroup

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
// Wait for the outcome. Cancelling ctx cancels the job. With checkpointing
// on, a failure restarts the job from its latest completed checkpoint as
// the restart strategy allows.
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
	if !cfg.RestartSet {
		cfg.Restart = checkpoint.DefaultRestartConfig(cfg.Checkpoint.Enabled())
	}
	strategy, err := checkpoint.NewRestartStrategy(cfg.Restart, nil)
	if err != nil {
		return nil, err
	}
	j := &Job{graph: g, cfg: cfg, logger: logger, done: make(chan struct{})}
	if cfg.Checkpoint.Directory != "" {
		fsys := cfg.CheckpointFS
		if fsys == nil {
			fsys = storage.OSFS{}
		}
		st, err := storage.New(fsys, cfg.Checkpoint.Directory, storageName(cfg.JobName),
			storage.Options{InlineThreshold: storage.DefaultInlineThreshold, Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("checkpoint storage: %w", err)
		}
		j.store = st
	} else if cfg.Checkpoint.Enabled() {
		return nil, fmt.Errorf("%w: checkpointing is on (interval %v) but no checkpoint directory is set (execution.checkpointing.dir)",
			checkpoint.ErrInvalidConfig, cfg.Checkpoint.Interval)
	}
	restore, err := j.initialRestore()
	if err != nil {
		return nil, err
	}
	j.ctx, j.cancel = context.WithCancel(context.Background())
	a, err := j.newAttempt(0, restore)
	if err != nil {
		j.cancel()
		return nil, err
	}
	j.status.Store(int32(JobRunning))
	stop := context.AfterFunc(ctx, j.Cancel)
	go func() {
		defer stop()
		j.supervise(a, restore, strategy)
	}()
	return j, nil
}

// initialRestore finds what the first attempt restores from: the given
// checkpoint or savepoint, or the latest checkpoint of the job when asked.
func (j *Job) initialRestore() (*restoreSnapshot, error) {
	if p := j.cfg.RestoreFrom; p != "" {
		snap, err := storage.LoadSnapshot(storage.OSFS{}, p)
		if err != nil {
			return nil, fmt.Errorf("%w from %s: %w", ErrRestore, p, err)
		}
		if err := snap.Verify(); err != nil {
			return nil, fmt.Errorf("%w from %s: %w", ErrRestore, p, err)
		}
		return newRestoreSnapshot(snap), nil
	}
	if j.cfg.ResumeLatest && j.store != nil {
		return j.latestCheckpoint(nil)
	}
	return nil, nil
}

// latestCheckpoint returns the newest usable completed checkpoint of the
// job's storage, or fallback when there is none.
func (j *Job) latestCheckpoint(fallback *restoreSnapshot) (*restoreSnapshot, error) {
	if j.store == nil {
		return fallback, nil
	}
	rec, err := j.store.Recover()
	if latest := rec.Latest(); latest != nil {
		j.logger.Info("restoring from checkpoint", "checkpoint", latest.Metadata.CheckpointID, "dir", latest.Dir)
		return newRestoreSnapshot(latest), nil
	}
	if errors.Is(err, storage.ErrNoCheckpoint) {
		return fallback, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrRestore, err)
}

// supervise runs attempts until the job finishes, is cancelled, or fails
// beyond what the restart strategy allows.
func (j *Job) supervise(a *attempt, restore *restoreSnapshot, strategy *checkpoint.RestartStrategy) {
	var err error
	for {
		if a != nil {
			err = a.run()
		}
		if err == nil || j.isCanceled() {
			break
		}
		delay, ok := strategy.NextDelay(time.Now())
		if !ok {
			break
		}
		j.logger.Warn("job failed; restarting", "attempt", j.restarts.Load()+1, "delay", delay, "err", err)
		j.status.Store(int32(JobRestarting))
		select {
		case <-time.After(delay):
		case <-j.ctx.Done():
		}
		if j.isCanceled() {
			break
		}
		j.restarts.Add(1)
		var r *restoreSnapshot
		if r, err = j.latestCheckpoint(restore); err != nil {
			a = nil
			continue
		}
		if a, err = j.newAttempt(int(j.restarts.Load()), r); err != nil {
			a = nil
			continue
		}
		j.status.Store(int32(JobRunning))
	}
	j.mu.Lock()
	switch {
	case j.canceled:
		j.status.Store(int32(JobCanceled))
	case err != nil:
		j.err = err
		j.status.Store(int32(JobFailed))
	default:
		j.status.Store(int32(JobFinished))
	}
	j.mu.Unlock()
	j.cancel()
	j.logger.Info("job ended", "status", j.Status())
	close(j.done)
}

func (j *Job) isCanceled() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.canceled
}

// newAttempt makes the tasks of one attempt, restoring their state.
func (j *Job) newAttempt(number int, restore *restoreSnapshot) (*attempt, error) {
	a := &attempt{job: j, number: number, restore: restore}
	a.restoreCounters.start = time.Now()
	a.ctx, a.cancel = context.WithCancel(j.ctx)
	if err := a.deploy(); err != nil {
		a.cancel()
		return nil, err
	}
	if j.cfg.Checkpoint.Enabled() {
		d, err := newCheckpointDriver(a)
		if err != nil {
			a.closeTasks()
			a.cancel()
			return nil, err
		}
		a.driver = d
	}
	j.att.Store(a)
	return a, nil
}

// run starts the attempt's tasks and waits for all of them. It returns
// nil when the job finished (or stopped with a savepoint), and the first
// failure otherwise.
func (a *attempt) run() error {
	j := a.job
	j.logger.Info("job started", "attempt", a.number, "vertices", len(j.graph.Vertices), "tasks", len(a.tasks),
		"restored_from", a.restoreID())
	if a.driver != nil {
		a.driver.start()
	}
	for _, t := range a.tasks {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			err := t.run()
			if err != nil {
				a.fail(t.name, err)
			} else if a.driver != nil {
				a.driver.taskFinished(t)
			}
		}()
	}
	a.wg.Wait()
	a.mu.Lock()
	err, stopped := a.err, a.stopped
	a.mu.Unlock()
	if a.driver != nil {
		term := checkpoint.JobFinished
		switch {
		case j.isCanceled():
			term = checkpoint.JobCanceled
		case err != nil && !stopped:
			term = checkpoint.JobFailed
		}
		a.driver.shutdown(term)
	}
	a.cancel()
	if stopped {
		return nil
	}
	return err
}

func (a *attempt) restoreID() int64 {
	if a.restore == nil {
		return 0
	}
	return a.restore.id()
}

// fail records the first failure of the attempt and stops every task.
func (a *attempt) fail(task string, err error) {
	a.mu.Lock()
	first := a.err == nil && !a.stopped && !a.job.isCanceled()
	if first {
		a.err = err
	}
	a.mu.Unlock()
	if first {
		a.job.logger.Error("task failed; stopping the attempt", "task", task, "attempt", a.number, "err", err)
	}
	a.stopAll()
}

func (a *attempt) stopAll() {
	a.cancel()
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

// deploy makes the tasks, their partitions and gates, wires them, and
// builds every operator chain.
func (a *attempt) deploy() error {
	j := a.job
	byVertex := map[*JobVertex][]*Task{}
	for _, v := range j.graph.Vertices {
		for i := 0; i < v.Parallelism; i++ {
			wake := make(chan struct{}, 1)
			mb := newMailbox(wake)
			name := fmt.Sprintf("%s (%d/%d)", v.Name, i+1, v.Parallelism)
			t := &Task{
				job: j, att: a, id: checkpoint.TaskID(len(a.tasks)), vertex: v, subtask: i, name: name, ctx: a.ctx,
				wake: wake, mailbox: mb,
				timers: &processingTime{mailbox: mb, timers: map[*time.Timer]struct{}{}},
				logger: j.logger.With("vertex", v.Name, "subtask", i),
			}
			byVertex[v] = append(byVertex[v], t)
			a.tasks = append(a.tasks, t)
		}
	}
	// One partition per producing task and network edge.
	for _, v := range j.graph.Vertices {
		for _, e := range v.Out {
			cons := j.graph.vertexOf[e.To]
			n := cons.Parallelism
			if e.Partitioner == PartitionForward {
				n = 1
			}
			for _, t := range byVertex[v] {
				name := fmt.Sprintf("%s -> %s [%d]", e.From.Name, e.To.Name, t.subtask)
				p := network.NewResultPartition(name, n, j.cfg.Network, t.wake)
				a.partitions = append(a.partitions, p)
				t.partitions = append(t.partitions, p)
				t.writers = append(t.writers, &netWriter{
					edge: e, name: fmt.Sprintf("edge %q -> %q", e.From.Name, e.To.Name),
					part: p, kind: e.Partitioner, n: n, maxPar: cons.MaxParallelism,
					ctx: a.ctx, flushEach: j.cfg.BufferTimeout == 0,
				})
			}
		}
	}
	// One gate per consuming task and network edge, then connect.
	for _, v := range j.graph.Vertices {
		for _, t := range byVertex[v] {
			channels := 0
			for _, e := range v.In {
				prod := j.graph.vertexOf[e.From]
				n := prod.Parallelism
				if e.Partitioner == PartitionForward {
					n = 1
				}
				name := fmt.Sprintf("%s -> %s [%d]", e.From.Name, e.To.Name, t.subtask)
				gate := network.NewInputGate(name, n, j.cfg.Network, t.wake)
				a.gates = append(a.gates, gate)
				gi := &gateInput{edge: e, gate: gate, offset: channels}
				for c := 0; c < n; c++ {
					gi.channels = append(gi.channels, &channelInput{gate: gi, index: c, reader: network.NewRecordReader()})
				}
				channels += n
				t.gates = append(t.gates, gi)
				for pi, pt := range byVertex[prod] {
					w := pt.writerFor(e)
					switch {
					case e.Partitioner == PartitionForward && pi == t.subtask:
						network.Connect(w.part, 0, gate, 0)
						t.upstream = append(t.upstream, pt.id)
					case e.Partitioner != PartitionForward:
						network.Connect(w.part, t.subtask, gate, pi)
						t.upstream = append(t.upstream, pt.id)
					}
				}
			}
			t.valve = newWatermarkValve(channels)
			t.numChannels = channels
		}
	}
	for _, t := range a.tasks {
		if err := t.build(j.graph); err != nil {
			a.closeTasks()
			return err
		}
	}
	a.restoreCounters.stateDone = time.Now()
	a.restoreCounters.replayLeft.Store(int32(len(a.tasks)))
	return nil
}

// Cancel stops the job; Wait then returns ErrJobCanceled.
func (j *Job) Cancel() {
	j.mu.Lock()
	if j.err == nil && (j.Status() == JobRunning || j.Status() == JobRestarting) {
		j.canceled = true
	}
	j.mu.Unlock()
	j.cancel()
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
	a := j.att.Load()
	if a == nil {
		return nil
	}
	out := make([]TaskMetrics, len(a.tasks))
	for i, t := range a.tasks {
		out[i] = t.metrics()
	}
	return out
}

// Graph returns the compiled job graph.
func (j *Job) Graph() *JobGraph { return j.graph }

// Config returns the job's settings.
func (j *Job) Config() Config { return j.cfg }
