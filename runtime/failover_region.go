package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
)

// FailoverStrategy says what restarts when a task fails (Flink's
// jobmanager.execution.failover-strategy).
type FailoverStrategy uint8

const (
	// FailoverRegion (the default, as Flink's): only the failed task's
	// failover region restarts, from the latest completed checkpoint,
	// while the other regions run on. A region is a connected component
	// of the tasks over their channels: an all-to-all exchange (keyBy,
	// rebalance, broadcast) joins all it connects, so only a pipeline of
	// forward edges has several. On several hosts the region restarts on
	// the workers running it (RegionRestarter). With one region, when a
	// worker is lost (or one restarts no regions), or when the region
	// cannot restart alone (a stop, a rescale or a savepoint in flight,
	// another region restarting, a task that reached its end, a step on a
	// worker that failed), the whole job restarts.
	FailoverRegion FailoverStrategy = iota
	// FailoverFull: every failure restarts the whole job.
	FailoverFull
)

func (s FailoverStrategy) String() string {
	if s == FailoverFull {
		return "full"
	}
	return "region"
}

// ParseFailoverStrategy parses jobmanager.execution.failover-strategy:
// region or full (any case).
func ParseFailoverStrategy(s string) (FailoverStrategy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "region":
		return FailoverRegion, nil
	case "full":
		return FailoverFull, nil
	}
	return 0, fmt.Errorf("%w: jobmanager.execution.failover-strategy %q: want region or full", checkpoint.ErrInvalidConfig, s)
}

// region is one failover region of an attempt: its tasks, in id order.
type region struct {
	index int
	tasks []checkpoint.TaskID
}

// regions are an attempt's failover regions, and each task's.
type regions struct {
	list []*region
	of   []*region // by task id
}

// regionsOf computes the failover regions of a job's tasks: the connected
// components of the graph whose edges join each task to the tasks it
// reads (TaskSpec.Upstream), numbered by their lowest task id.
func regionsOf(specs []TaskSpec) regions {
	parent := make([]int, len(specs))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	for _, s := range specs {
		for _, up := range s.Upstream {
			a, b := find(int(s.ID)), find(int(up))
			parent[max(a, b)] = min(a, b)
		}
	}
	rs := regions{of: make([]*region, len(specs))}
	byRoot := map[int]*region{}
	for _, s := range specs {
		root := find(int(s.ID))
		r := byRoot[root]
		if r == nil {
			r = &region{index: len(rs.list)}
			byRoot[root] = r
			rs.list = append(rs.list, r)
		}
		r.tasks = append(r.tasks, s.ID)
		rs.of[s.ID] = r
	}
	return rs
}

// FailoverRegions returns the job graph's failover regions: the task ids
// of each (tasks numbered as Tasks numbers them).
func (g *JobGraph) FailoverRegions() [][]checkpoint.TaskID {
	var out [][]checkpoint.TaskID
	for _, r := range regionsOf(g.Tasks()).list {
		out = append(out, slices.Clone(r.tasks))
	}
	return out
}

// task returns the local task id of the attempt's current execution (nil:
// it runs elsewhere, or no such task).
func (a *attempt) task(id checkpoint.TaskID) *Task {
	a.tasksMu.RLock()
	defer a.tasksMu.RUnlock()
	if int(id) < 0 || int(id) >= len(a.byID) {
		return nil
	}
	return a.byID[id]
}

// localTasks returns the attempt's local tasks, current executions.
func (a *attempt) localTasks() []*Task {
	a.tasksMu.RLock()
	defer a.tasksMu.RUnlock()
	return slices.Clone(a.tasks)
}

// execution returns task id's current execution: how many times its
// failover region restarted (or is restarting) in the attempt.
func (a *attempt) execution(id checkpoint.TaskID) int {
	a.tasksMu.RLock()
	defer a.tasksMu.RUnlock()
	if int(id) < 0 || int(id) >= len(a.executions) {
		return 0
	}
	return a.executions[id]
}

// nextRestartDelay asks the restart strategy about a failure at now: a
// region's restart counts as the job's does (Flink's).
func (j *Job) nextRestartDelay(now time.Time) (time.Duration, bool) {
	j.strategyMu.Lock()
	defer j.strategyMu.Unlock()
	return j.strategy.NextDelay(now)
}

// taskFailed is the failure of task id: its failover region restarts when
// it can, the attempt stops otherwise.
func (a *attempt) taskFailed(id checkpoint.TaskID, err error) {
	name := a.specs[id].Name
	r, ok := a.beginRegionFailover(id, err)
	switch {
	case !ok:
		a.fail(name, err)
	case r != nil:
		go a.failoverRegion(r, name, err)
	}
}

// beginRegionFailover decides whether the failure of task id restarts its
// region only (ok), and when it does marks the region restarting: from
// now on the messages of its tasks' execution are stale. r is nil when
// the region restarts already (another of its tasks failed first).
func (a *attempt) beginRegionFailover(id checkpoint.TaskID, err error) (r *region, ok bool) {
	j := a.job
	if j.cfg.Failover != FailoverRegion || a.driver == nil || !a.canRestartRegions() ||
		len(a.regions.list) < 2 || !a.running.Load() || suppressesRestarts(err) || j.isStopping() {
		return nil, false
	}
	r = a.regions.of[id]
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.regionRestart == r:
		// A task of the region's stopped execution, whose report passed
		// the gateway before the region's restart began.
		return nil, true
	case a.err != nil || a.stopped || a.rescale != nil || a.regionRestart != nil:
		return nil, false
	}
	a.regionRestart = r
	a.wg.Add(1) // the attempt does not end while its region restarts
	a.tasksMu.Lock()
	for _, t := range r.tasks {
		a.executions[t]++
	}
	a.tasksMu.Unlock()
	return r, true
}

// canRestartRegions reports whether the attempt's regions can restart
// alone where its tasks run: in one process always, on several hosts when
// the executor restarts regions on the workers of the attempt.
func (a *attempt) canRestartRegions() bool {
	if a.local == nil {
		return true
	}
	rr, ok := a.job.cfg.Executor.(RegionRestarter)
	return ok && rr.CanRestartRegions(a.number)
}

// unpublish withdraws the partitions task t offered remote consumers.
func (a *attempt) unpublish(t *Task) {
	for _, id := range t.published {
		a.exchange.Unpublish(id)
	}
}

// failoverRegion restarts region r after task failed with cause: the
// checkpoint coordinator aborts the pending checkpoints, the region's
// tasks stop, and after the restart strategy's delay new executions of
// them restore the latest completed checkpoint, while the other regions
// run on. Where the region cannot restart alone, the whole attempt fails
// over. The sequence is the same wherever the tasks run; steps carries
// out what differs (localRegion in one process, remoteRegion on workers).
func (a *attempt) failoverRegion(r *region, task string, cause error) {
	defer a.wg.Done()
	j := a.job
	failedAt := time.Now()
	escalate := func(why error) {
		j.logger.Warn("the failed task's region cannot restart alone; restarting the whole job", "task", task, "why", why)
		a.fail(task, cause)
	}
	var cerr error
	if !a.driver.call(func() {
		var acts []checkpoint.CoordinatorAction
		acts, cerr = a.driver.coord.RegionFailed(time.Now(), r.tasks)
		a.driver.exec(acts)
	}) {
		cerr = checkpoint.ErrCoordinatorStopped
	}
	if cerr != nil {
		escalate(cerr)
		return
	}
	delay, ok := j.nextRestartDelay(failedAt)
	if !ok {
		a.mu.Lock()
		a.restartsExhausted = true
		a.mu.Unlock()
		a.fail(task, cause)
		return
	}
	j.noteFailure(a.number, task, cause)
	j.outages.failed(failedAt, cause)
	j.restarts.Add(1)
	j.regionRestarts.Add(1)
	j.logger.Log(context.Background(), failureLevel(cause, slog.LevelWarn), "task failed; restarting its failover region",
		"task", task, "attempt", a.number, "region", r.index, "tasks", len(r.tasks), "regions", len(a.regions.list), "delay", delay, "err", cause)

	steps := a.regionSteps(r)
	// Stop the region's tasks and wait for them, as a stopping attempt
	// waits for its own.
	if err := steps.stop(); err != nil {
		if !errors.Is(err, errAttemptStopping) {
			escalate(err)
		}
		return
	}
	if wait := delay - time.Since(failedAt); wait > 0 {
		select {
		case <-time.After(wait):
		case <-a.stopping:
			return
		}
	}

	// The new executions restore what a failover of the whole job would.
	var owned []int64
	a.driver.call(func() { owned = a.driver.coord.Retained() })
	restore, err := j.failoverRestore(owned, a.restore)
	if err == nil {
		err = steps.deploy(restore, a.number+int(j.regionRestarts.Load()))
	}
	if err != nil {
		if !errors.Is(err, errAttemptStopping) {
			escalate(err)
		}
		return
	}
	// The coordinator and the attempt take the region back before its
	// tasks run: a failure of theirs is a failure of the region again.
	a.driver.call(func() { a.driver.exec(a.driver.coord.RegionRestored(time.Now())) })
	a.mu.Lock()
	a.regionRestart = nil
	a.mu.Unlock()
	if err := steps.start(); err != nil {
		escalate(err)
		return
	}
	j.outages.running(time.Now())
	var from int64
	if restore != nil {
		from = restore.id()
	}
	j.logger.Info("failover region restarted", "attempt", a.number, "region", r.index, "tasks", len(r.tasks),
		"execution", a.execution(r.tasks[0]), "restored_from", from, "downtime", time.Since(failedAt))
}

// errAttemptStopping: the attempt was told to stop while one of its
// regions restarted; the restart gives up without a word.
var errAttemptStopping = errors.New("the attempt is stopping")

// regionSteps are the steps of a region's restart that depend on where
// its tasks run.
type regionSteps interface {
	// stop cancels the region's tasks (their executions before the
	// restart) and waits until they exited, at most the cancellation
	// timeout.
	stop() error
	// deploy makes new executions of the region's tasks, wired to their
	// peers and restored from restore, the attempt's tasks of their ids
	// (the coordinator's messages reach them) but not running yet;
	// operators see attempt as their Attempt.
	deploy(restore *restoreSnapshot, attempt int) error
	// start runs the new executions.
	start() error
}

// regionSteps returns the steps of restarting region r: in this process,
// or through the executor on the workers running its tasks.
func (a *attempt) regionSteps(r *region) regionSteps {
	if rr, ok := a.job.cfg.Executor.(RegionRestarter); ok && a.local != nil {
		return &remoteRegion{a: a, r: r, ex: rr}
	}
	return &localRegion{a: a, r: r}
}

// cancellation bounds a wait for cancelled tasks by the cancellation
// timeout (0: none) and ends it once the attempt stops (its context).
func (a *attempt) cancellation() (context.Context, context.CancelFunc) {
	if timeout := a.job.cfg.CancellationTimeout; timeout > 0 {
		return context.WithTimeout(a.ctx, timeout)
	}
	return context.WithCancel(a.ctx)
}

// waitCancelled waits for the cancelled tasks to exit: an error naming
// the first one still running when ctx ended, errAttemptStopping when the
// attempt stopped meanwhile.
func (a *attempt) waitCancelled(ctx context.Context, tasks []*Task) error {
	for _, t := range tasks {
		select {
		case <-t.exitCh:
		case <-ctx.Done():
			if a.ctx.Err() != nil {
				return errAttemptStopping
			}
			return fmt.Errorf("%w: task %s still runs %v after it was cancelled", ErrTaskCancellationTimeout, t.name, a.job.cfg.CancellationTimeout)
		}
	}
	return nil
}

// cancelTasks cancels the local tasks of ids whose execution is at most
// execution (-1: any): their contexts, partitions and gates. It returns
// them.
func (a *attempt) cancelTasks(ids []checkpoint.TaskID, execution func(checkpoint.TaskID) int) []*Task {
	var old []*Task
	for _, id := range ids {
		t := a.task(id)
		if t == nil || t.execution > execution(id) {
			continue
		}
		old = append(old, t)
		t.cancel()
		for _, p := range t.partitions {
			p.Release()
		}
		for _, g := range t.gates {
			g.gate.Release()
		}
		a.unpublish(t)
	}
	return old
}

// newExecutions makes, wires and builds new executions of the local tasks
// of ids, restoring from restore; their state is closed again on failure.
func (a *attempt) newExecutions(ids []checkpoint.TaskID, restore *restoreSnapshot, attempt int) ([]*Task, error) {
	a.tasksMu.RLock()
	byID := slices.Clone(a.byID)
	a.tasksMu.RUnlock()
	// The restore's figures are the region's, reported once its tasks
	// replayed their in-flight data (attempt.replayed).
	rc := &restoreCounters{start: time.Now(), restore: restore}
	var tasks []*Task
	for _, id := range ids {
		if !a.isLocal(id) {
			continue
		}
		t := a.newTask(a.specs[id], a.execution(id), restore)
		t.attemptNumber = attempt
		t.restoreCounters = rc
		byID[id] = t
		tasks = append(tasks, t)
	}
	err := a.wire(tasks, byID)
	if err == nil {
		err = a.buildTasks(tasks)
	}
	if err != nil {
		for _, t := range tasks {
			t.closeState()
		}
		return nil, err
	}
	rc.stateDone = time.Now()
	rc.replayLeft.Store(int32(len(tasks)))
	return tasks, nil
}

// install makes new executions the attempt's current tasks, replacing the
// earlier executions of their ids: the messages for their ids reach them
// (their mailboxes) from now on, before they run.
func (a *attempt) install(tasks []*Task) {
	a.tasksMu.Lock()
	defer a.tasksMu.Unlock()
	for _, t := range tasks {
		a.byID[t.id] = t
		a.tasks = slices.DeleteFunc(a.tasks, func(o *Task) bool { return o.id == t.id })
	}
	a.tasks = append(a.tasks, tasks...)
	slices.SortFunc(a.tasks, func(x, y *Task) int { return int(x.id) - int(y.id) })
}

// localRegion restarts a region whose tasks run in this process.
type localRegion struct {
	a     *attempt
	r     *region
	tasks []*Task // the new executions, once deployed
}

func (l *localRegion) stop() error {
	a := l.a
	old := a.cancelTasks(l.r.tasks, func(id checkpoint.TaskID) int { return a.execution(id) - 1 })
	ctx, cancel := a.cancellation()
	defer cancel()
	return a.waitCancelled(ctx, old)
}

func (l *localRegion) deploy(restore *restoreSnapshot, attempt int) (err error) {
	if l.tasks, err = l.a.newExecutions(l.r.tasks, restore, attempt); err == nil {
		l.a.install(l.tasks)
	}
	return err
}

func (l *localRegion) start() error {
	l.a.start(l.tasks)
	return nil
}

// remoteRegion restarts a region whose tasks run on workers, through the
// executor (RegionRestarter) and its workers' TaskRunners.
type remoteRegion struct {
	a  *attempt
	r  *region
	ex RegionRestarter
}

// refs names the region's tasks in their current executions (less back:
// the earlier ones).
func (x *remoteRegion) refs(back int) []TaskRef {
	a := x.a
	out := make([]TaskRef, len(x.r.tasks))
	for i, id := range x.r.tasks {
		out[i] = TaskRef{JobID: a.job.id, Attempt: a.number, Task: id, Execution: a.execution(id) - back}
	}
	return out
}

func (x *remoteRegion) stop() error {
	ctx, cancel := x.a.cancellation()
	defer cancel()
	err := x.ex.StopTasks(ctx, x.a.number, x.refs(1))
	if err != nil && x.a.ctx.Err() != nil {
		return errAttemptStopping
	}
	return err
}

func (x *remoteRegion) deploy(restore *restoreSnapshot, attempt int) error {
	a := x.a
	d := RegionDeployment{JobID: a.job.id, RunID: a.job.run, Attempt: a.number, Tasks: x.refs(0), OperatorAttempt: attempt}
	if restore != nil {
		d.Restore, d.RestoreOwned = restore.snap.Dir, restore.owned
	}
	rc := &restoreCounters{start: time.Now(), restore: restore}
	err := x.ex.DeployTasks(a.ctx, d)
	if err != nil && a.ctx.Err() != nil {
		return errAttemptStopping
	}
	if err == nil {
		// The workers restored the tasks' state before they answered, as
		// for an attempt's deployment.
		rc.stateDone = time.Now()
		a.reportRestore(rc)
	}
	return err
}

func (x *remoteRegion) start() error {
	return x.ex.StartTasks(x.a.number, x.refs(0))
}
