package runtime

import (
	"context"
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
	// forward edges has several. With one region, on several hosts, or
	// when the region cannot restart alone (a stop, a rescale or a
	// savepoint in flight, another region restarting, a task that reached
	// its end), the whole job restarts.
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
	if j.cfg.Failover != FailoverRegion || a.driver == nil || j.cfg.Executor != nil || a.local != nil ||
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

// failoverRegion restarts region r after task failed with cause: the
// checkpoint coordinator aborts the pending checkpoints, the region's
// tasks stop, and after the restart strategy's delay new executions of
// them restore the latest completed checkpoint, while the other regions
// run on. Where the region cannot restart alone, the whole attempt fails
// over.
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

	// Stop the region's tasks and wait for them, as a stopping attempt
	// waits for its own.
	var old []*Task
	for _, id := range r.tasks {
		if t := a.task(id); t != nil {
			old = append(old, t)
			t.cancel()
			for _, p := range t.partitions {
				p.Release()
			}
			for _, g := range t.gates {
				g.gate.Release()
			}
		}
	}
	var expired <-chan time.Time
	if timeout := j.cfg.CancellationTimeout; timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	for _, t := range old {
		select {
		case <-t.exitCh:
		case <-a.stopping:
			return
		case <-expired:
			escalate(fmt.Errorf("%w: task %s still runs %v after it was cancelled", ErrTaskCancellationTimeout, t.name, j.cfg.CancellationTimeout))
			return
		}
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
	if err != nil {
		escalate(err)
		return
	}
	a.tasksMu.RLock()
	byID := slices.Clone(a.byID)
	a.tasksMu.RUnlock()
	var tasks []*Task
	for _, id := range r.tasks {
		t := a.newTask(a.specs[id], a.execution(id), restore)
		byID[id] = t
		tasks = append(tasks, t)
	}
	err = a.wire(tasks, byID)
	if err == nil {
		err = a.buildTasks(tasks)
	}
	if err != nil {
		for _, t := range tasks {
			t.closeState()
		}
		escalate(err)
		return
	}
	a.tasksMu.Lock()
	a.byID = byID
	a.tasks = slices.DeleteFunc(a.tasks, func(t *Task) bool { return a.regions.of[t.id] == r })
	a.tasks = append(a.tasks, tasks...)
	slices.SortFunc(a.tasks, func(x, y *Task) int { return int(x.id) - int(y.id) })
	a.tasksMu.Unlock()
	// The coordinator and the attempt take the region back before its
	// tasks run: a failure of theirs is a failure of the region again.
	a.driver.call(func() { a.driver.exec(a.driver.coord.RegionRestored(time.Now())) })
	a.mu.Lock()
	a.regionRestart = nil
	a.mu.Unlock()
	a.start(tasks)
	j.outages.running(time.Now())
	var from int64
	if restore != nil {
		from = restore.id()
	}
	j.logger.Info("failover region restarted", "attempt", a.number, "region", r.index, "tasks", len(tasks),
		"execution", tasks[0].execution, "restored_from", from, "downtime", time.Since(failedAt))
}
