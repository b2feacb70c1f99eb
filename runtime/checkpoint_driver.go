package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
)

// ErrNoCheckpointing is returned by savepoint calls on a job that runs
// without a checkpoint directory.
var ErrNoCheckpointing = errors.New("checkpointing is not configured")

// checkpointDriver runs one attempt's checkpoint.Coordinator on a
// goroutine of its own: it feeds it the tasks' reports and the clock, and
// carries out its actions (trigger mails, metadata writes, notifications,
// discards).
type checkpointDriver struct {
	a     *attempt
	coord *checkpoint.Coordinator
	store *storage.Storage
	// tasks is the way to the attempt's tasks; the tasks reach the
	// coordinator through the attempt's gateway (localCoordinatorGateway).
	tasks TaskGateway

	events chan func()
	quit   chan struct{}
	exited chan struct{}

	// io is held by each discard, which run on goroutines of their own
	// (discardLater), as Flink's coordinator discards on its I/O
	// executor, so that deleting a subsumed checkpoint's files never
	// holds up the next trigger or commit. A _metadata write does not
	// wait for a discard: storage publishes a _metadata whole (a rename or
	// link of a complete file, one PUT), and a checkpoint in progress
	// references only files of the checkpoints its tasks were notified of
	// or its own, never those of the discarded one that no later
	// checkpoint references (what a discard deletes, after reading every
	// _metadata published), as when discards ran between checkpoints with
	// more than one in progress.
	io sync.Mutex
	// discarding counts the discards not yet done; shutdown waits for
	// them.
	discarding sync.WaitGroup
	// undiscarded are discards that failed (storage unreachable): retried
	// with the next discard and at shutdown, so that a checkpoint that
	// failed during an outage leaves no files once storage is back. io is
	// held.
	undiscarded []checkpoint.Discard

	mu         sync.Mutex
	locations  map[int64]*storage.Location
	savepoints map[int64]chan savepointResult
	requests   []*checkpointRequest // TriggerCheckpoint calls waiting
	final      *checkpoint.JobStats // after shutdown
}

type savepointResult struct {
	path string
	err  error
}

// newCheckpointDriver makes the coordinator of attempt a. owned are the
// completed checkpoints the run owns (it retains and subsumes them); every
// other completed checkpoint on disk is pinned: never discarded, none of
// its files released.
func newCheckpointDriver(a *attempt, owned []int64) (*checkpointDriver, error) {
	j := a.job
	infos := make([]checkpoint.TaskInfo, len(a.specs))
	for i, t := range a.specs {
		uids := make([]string, len(t.Vertex.Nodes))
		for k, n := range t.Vertex.Nodes {
			uids[k] = n.UID
		}
		infos[i] = checkpoint.TaskInfo{
			ID: t.ID, Vertex: t.Vertex.Name, Subtask: t.Subtask, Parallelism: t.Vertex.Parallelism,
			Operators: uids, Upstream: t.Upstream,
		}
	}
	coord, err := checkpoint.NewCoordinator(j.id, j.cfg.Checkpoint, infos)
	if err != nil {
		return nil, err
	}
	coord.SetRunID(j.run)
	coord.SetOrigin(j.origin)
	if prev := j.att.Load(); prev != nil && prev.driver != nil {
		coord.InheritStats(prev.driver.coord) // the previous attempt has stopped
	}
	d := &checkpointDriver{
		a: a, coord: coord, store: j.store, tasks: localTaskGateway{a: a},
		events: make(chan func(), 1024), quit: make(chan struct{}), exited: make(chan struct{}),
		locations: map[int64]*storage.Location{}, savepoints: map[int64]chan savepointResult{},
	}
	// What the storage holds: completed checkpoints (their shared files
	// stay registered), and the highest id so new ones never collide.
	rec, rerr := j.store.Recover()
	if rerr != nil && !errors.Is(rerr, storage.ErrNoCheckpoint) {
		j.logger.Warn("checkpoint storage holds unusable checkpoints", "err", rerr)
	}
	var retained, pinned []*storage.Metadata
	for _, s := range rec.Retained {
		if slices.Contains(owned, s.Metadata.CheckpointID) {
			retained = append(retained, s.Metadata)
		} else {
			pinned = append(pinned, s.Metadata)
		}
	}
	for _, u := range rec.Unusable {
		if u.Metadata != nil {
			pinned = append(pinned, u.Metadata)
		}
	}
	for _, id := range rec.Orphans {
		if err := j.store.DiscardCheckpoint(id, nil); err != nil {
			j.logger.Warn("discard incomplete checkpoint", "checkpoint", id, "err", err)
		}
	}
	var from *storage.Metadata
	if a.restore != nil {
		from = a.restore.snap.Metadata
	}
	acts, err := coord.Restore(time.Now(), retained, from, rec.MaxID)
	if err != nil {
		return nil, err
	}
	coord.Pin(pinned)
	d.exec(acts)
	d.discarding.Wait() // what the restore subsumes is gone before the tasks start
	return d, nil
}

func (d *checkpointDriver) start() {
	d.coord.Start(time.Now())
	go d.loop()
}

func (d *checkpointDriver) loop() {
	defer close(d.exited)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if next, ok := d.coord.NextWakeup(); ok {
			timer.Reset(max(time.Until(next), 0))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case f := <-d.events:
			f()
		case <-timer.C:
			d.exec(d.coord.Tick(time.Now()))
		case <-d.quit:
			return
		}
	}
}

// submit runs f on the driver goroutine; it is dropped once the driver
// has stopped.
func (d *checkpointDriver) submit(f func()) {
	select {
	case d.events <- f:
	case <-d.quit:
	}
}

// call runs f on the driver goroutine and waits for it.
func (d *checkpointDriver) call(f func()) bool {
	done := make(chan struct{})
	select {
	case d.events <- func() { f(); close(done) }:
	case <-d.quit:
		return false
	}
	select {
	case <-done:
		return true
	case <-d.quit:
		return false
	}
}

// ref names task id of the driver's attempt.
func (d *checkpointDriver) ref(id checkpoint.TaskID) TaskRef {
	return TaskRef{JobID: d.a.job.id, Attempt: d.a.number, Task: id, Execution: d.a.execution(id)}
}

// toTask logs a message the task gateway did not take: a task whose
// mailbox closed has ended, and the coordinator learns of it on its own.
func (d *checkpointDriver) toTask(err error) {
	if err != nil {
		d.a.job.logger.Debug("message to a task not delivered", "err", err)
	}
}

// location returns where checkpoint id is written.
func (d *checkpointDriver) location(id int64) (*storage.Location, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l := d.locations[id]; l != nil {
		return l, nil
	}
	l, err := d.store.Checkpoint(id)
	if err != nil {
		return nil, err
	}
	d.locations[id] = l
	return l, nil
}

func (d *checkpointDriver) forget(id int64) {
	d.mu.Lock()
	delete(d.locations, id)
	d.mu.Unlock()
}

// discard deletes what a Discard action names.
func (d *checkpointDriver) discard(a checkpoint.Discard) error {
	if a.SavepointDir != "" {
		return d.store.DiscardSavepoint(a.SavepointDir)
	}
	return d.store.DiscardCheckpoint(a.ID, a.Shared)
}

// discardLater carries out Discard action a on a goroutine of its own,
// after retrying the discards that failed before; a discard that fails is
// kept to be retried.
func (d *checkpointDriver) discardLater(a checkpoint.Discard) {
	d.discarding.Add(1)
	go func() {
		defer d.discarding.Done()
		d.io.Lock()
		defer d.io.Unlock()
		d.retryDiscards()
		if err := d.discard(a); err != nil {
			d.a.job.logger.Warn("discard checkpoint; retried later", "checkpoint", a.ID, "err", err)
			d.undiscarded = append(d.undiscarded, a)
		}
	}()
}

// retryDiscards tries the failed discards again, keeping those that fail
// still; io is held.
func (d *checkpointDriver) retryDiscards() {
	failed := d.undiscarded[:0]
	for _, a := range d.undiscarded {
		if err := d.discard(a); err != nil {
			failed = append(failed, a)
		} else {
			d.a.job.logger.Info("discarded checkpoint after an earlier failure", "checkpoint", a.ID)
		}
	}
	d.undiscarded = failed
}

// shutdown stops the coordinator when the attempt ends: pending
// checkpoints are aborted, completed ones kept (the job's end applies the
// retention policy once its result is recorded); it waits for the
// discards still running.
func (d *checkpointDriver) shutdown() {
	d.call(func() {
		d.exec(d.coord.Suspend(time.Now()))
		d.discarding.Wait()
		d.io.Lock()
		d.retryDiscards()
		for _, a := range d.undiscarded {
			d.a.job.logger.Warn("checkpoint files left in storage: the discard failed; the next start of the job deletes them", "checkpoint", a.ID)
		}
		d.io.Unlock()
		final := d.coord.Stats()
		d.mu.Lock()
		d.final = &final
		d.mu.Unlock()
	})
	close(d.quit)
	<-d.exited
	d.mu.Lock()
	for id, ch := range d.savepoints {
		ch <- savepointResult{err: fmt.Errorf("savepoint %d: the job stopped first: %w", id, checkpoint.ErrCoordinatorStopped)}
		delete(d.savepoints, id)
	}
	d.mu.Unlock()
	d.failRequests(fmt.Errorf("checkpoint: the job stopped first: %w", checkpoint.ErrCoordinatorStopped))
}

// exec carries out the coordinator's actions, on the driver goroutine.
func (d *checkpointDriver) exec(acts []checkpoint.CoordinatorAction) {
	logger := d.a.job.logger
	for len(acts) > 0 {
		act := acts[0]
		acts = acts[1:]
		switch a := act.(type) {
		case checkpoint.Trigger:
			if a.SavepointDir != "" {
				l, err := d.store.SavepointAt(a.SavepointDir, a.Barrier.ID)
				if err != nil {
					acts = append(acts, d.coord.Decline(time.Now(), a.Tasks[0], a.Barrier.ID, checkpoint.ReasonIOFailure, err)...)
					continue
				}
				d.mu.Lock()
				d.locations[a.Barrier.ID] = l
				d.mu.Unlock()
				if ss, ok := d.tasks.(SavepointDirSetter); ok {
					if err := ss.SetSavepointDir(a.Barrier.ID, a.SavepointDir); err != nil {
						acts = append(acts, d.coord.Decline(time.Now(), a.Tasks[0], a.Barrier.ID, checkpoint.ReasonIOFailure, err)...)
						continue
					}
				}
			}
			if a.SavepointDir == "" {
				d.checkpointTriggered(a.Barrier.ID, a.Barrier.Options.Kind)
			}
			for _, id := range a.Tasks {
				d.toTask(d.tasks.TriggerCheckpoint(TriggerCheckpoint{To: d.ref(id), Barrier: a.Barrier, Urgent: a.Urgent, Stop: a.Stop}))
			}
		case checkpoint.WriteMetadata:
			id := a.Metadata.CheckpointID
			l, err := d.location(id)
			var path string
			if err == nil {
				path, err = l.WriteMetadata(a.Metadata)
			}
			if pub := d.a.job.cfg.PublishCheckpoint; err == nil && pub != nil && a.Metadata.Kind != storage.KindSavepoint {
				if perr := pub(id, l.Dir()); perr != nil {
					err = fmt.Errorf("publish checkpoint %d: %w", id, perr)
					if suppressesRestarts(perr) {
						d.a.fail("checkpoint coordinator", &fatalError{Err: err})
					}
				}
			}
			if err != nil {
				logger.Warn("write checkpoint metadata", "checkpoint", id, "err", err)
			} else {
				logger.Info("checkpoint completed", "checkpoint", id, "kind", a.Metadata.Kind, "path", path)
			}
			acts = append(acts, d.coord.MetadataWritten(time.Now(), id, path, err)...)
			// The listener hears of the checkpoint before the tasks are
			// notified (a listener that holds it holds the commits); the
			// notify phase is in the statistics read later.
			d.report(id)
			if a.Metadata.Kind != storage.KindSavepoint {
				if err != nil {
					d.checkpointEnded(id, "", fmt.Errorf("checkpoint %d: %w", id, err))
				} else {
					d.checkpointEnded(id, path, nil)
					d.a.job.attemptCheckpointed(d.a)
				}
			}
		case checkpoint.NotifyComplete:
			d.forget(a.ID)
			d.dropAdopted()
			for _, id := range a.Tasks {
				d.toTask(d.tasks.NotifyCheckpoint(CheckpointNotification{To: d.ref(id), CheckpointID: a.ID, Complete: true}))
			}
			d.coord.Notified(time.Now(), a.ID)
		case checkpoint.NotifyAborted:
			d.forget(a.ID)
			d.report(a.ID)
			msg := a.Reason.String()
			if cs, ok := d.coord.CheckpointStats(a.ID); ok && cs.FailureMessage != "" {
				msg += ": " + cs.FailureMessage
			}
			d.checkpointEnded(a.ID, "", fmt.Errorf("checkpoint %d failed (%s)", a.ID, msg))
			for _, id := range a.Tasks {
				d.toTask(d.tasks.NotifyCheckpoint(CheckpointNotification{To: d.ref(id), CheckpointID: a.ID}))
			}
		case checkpoint.Discard:
			d.discardLater(a)
		case checkpoint.SavepointCompleted:
			logger.Info("savepoint completed", "savepoint", a.ID, "path", a.Path, "stop", a.Stop)
			if a.Stop {
				d.a.mu.Lock()
				d.a.savepoint = a.Path
				d.a.mu.Unlock()
				d.a.stopAfterSavepoint()
			}
			d.resolveSavepoint(a.ID, savepointResult{path: a.Path})
		case checkpoint.SavepointFailed:
			d.resolveSavepoint(a.ID, savepointResult{err: fmt.Errorf("savepoint %d failed (%s): %w", a.ID, a.Reason, a.Err)})
		case checkpoint.StopCompleted:
			logger.Info("stop checkpoint completed; stopping the tasks", "checkpoint", a.ID, "path", a.Path)
			d.a.stopForRescale(a.ID)
		case checkpoint.StopFailed:
			logger.Warn("stop checkpoint failed; the job carries on", "checkpoint", a.ID, "reason", a.Reason, "err", a.Err)
			go d.a.stopFailed(a.Err) // not on the driver's goroutine: the scaling machine may act
		case checkpoint.FailJob:
			d.a.fail("checkpoint coordinator", a.Err)
		case checkpoint.AllowFinish:
			for _, t := range d.a.specs {
				d.toTask(d.tasks.AllowFinish(d.ref(t.ID)))
			}
		default:
			logger.Warn("unknown checkpoint coordinator action", "action", act.String())
		}
	}
}

// dropAdopted deletes a snapshot outside the job's directory that the run
// claimed (CLAIM), once the run's own first checkpoint completed.
func (d *checkpointDriver) dropAdopted() {
	j := d.a.job
	if j.adopt == "" {
		return
	}
	dir := j.adopt
	j.adopt = ""
	if err := d.store.DiscardSavepoint(dir); err != nil {
		j.logger.Warn("delete the claimed snapshot", "dir", dir, "err", err)
		return
	}
	j.logger.Info("deleted the claimed snapshot the job was restored from", "dir", dir)
}

// report hands the statistics of a checkpoint that ended to the
// configured listener.
func (d *checkpointDriver) report(id int64) {
	ls := d.a.job.cfg.CheckpointListeners
	if len(ls) == 0 {
		return
	}
	if cs, ok := d.coord.CheckpointStats(id); ok {
		for _, l := range ls {
			l(cs)
		}
	}
}

func (d *checkpointDriver) resolveSavepoint(id int64, r savepointResult) {
	d.mu.Lock()
	ch := d.savepoints[id]
	delete(d.savepoints, id)
	d.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// triggerSavepoint asks for a savepoint in parent (or the configured
// savepoint directory) and waits for it; stop ends the job once it
// completed, drain first lets event time run to its end.
func (d *checkpointDriver) triggerSavepoint(ctx context.Context, parent string, stop, drain bool) (string, error) {
	if parent == "" {
		parent, _ = d.a.job.cfg.Checkpoint.SavepointTarget()
	}
	dir, err := d.store.NewSavepointDir(parent)
	if err != nil {
		return "", err
	}
	res := make(chan savepointResult, 1)
	var terr error
	ok := d.call(func() {
		if stop && drain {
			// Sources emit the end of event time first: every event-time
			// timer fires before the savepoint's barrier.
			if stopper, ok := d.tasks.(TaskStopper); ok {
				for _, t := range d.a.specs {
					if t.Vertex.Head().BuildSource != nil {
						d.toTask(stopper.DrainEventTime(d.ref(t.ID)))
					}
				}
			}
		}
		id, acts, err := d.coord.TriggerSavepoint(time.Now(), checkpoint.SavepointRequest{Dir: dir, Stop: stop, Drain: drain})
		if err != nil {
			terr = err
			return
		}
		d.mu.Lock()
		d.savepoints[id] = res
		d.mu.Unlock()
		d.exec(acts)
	})
	if !ok {
		return "", fmt.Errorf("savepoint: %w", checkpoint.ErrCoordinatorStopped)
	}
	if terr != nil {
		return "", fmt.Errorf("savepoint: %w", terr)
	}
	select {
	case r := <-res:
		return r.path, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// stats returns the coordinator's checkpoint statistics.
func (d *checkpointDriver) stats() (checkpoint.JobStats, bool) {
	var s checkpoint.JobStats
	if d.call(func() { s = d.coord.Stats() }) {
		return s, true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.final != nil {
		return *d.final, true // the attempt ended: its last statistics
	}
	return s, false
}

// TriggerSavepoint takes a savepoint (always aligned) into a new directory
// under parent, or when parent is empty under the configured savepoint
// directory (checkpoint.Config.SavepointTarget: the savepoint-dir, else
// <checkpoint dir>/savepoints), and returns its path.
func (j *Job) TriggerSavepoint(ctx context.Context, parent string) (string, error) {
	a := j.att.Load()
	if a == nil || a.driver == nil {
		return "", ErrNoCheckpointing
	}
	return a.driver.triggerSavepoint(ctx, parent, false, false)
}

// StopWithSavepoint takes a savepoint and stops the job once it completed
// and the sinks committed; with drain the sources first end event time, so
// every event-time timer and window fires. The sources read nothing after
// the savepoint's barrier, so the savepoint is the job's last state (if
// it fails, they carry on). Wait then returns nil.
func (j *Job) StopWithSavepoint(ctx context.Context, parent string, drain bool) (string, error) {
	a := j.att.Load()
	if a == nil || a.driver == nil {
		return "", ErrNoCheckpointing
	}
	return a.driver.triggerSavepoint(ctx, parent, true, drain)
}

// CheckpointStats returns the checkpoint statistics of the current
// attempt: counts, the history with per-task figures, and the latest ones.
func (j *Job) CheckpointStats() (checkpoint.JobStats, bool) {
	a := j.att.Load()
	if a == nil || a.driver == nil {
		return checkpoint.JobStats{}, false
	}
	return a.driver.stats()
}

// stopAfterSavepoint ends the attempt after a stop-with-savepoint: every
// task gets a stop mail behind the notify-complete mail already queued, so
// sinks commit first.
func (a *attempt) stopAfterSavepoint() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	stopper, _ := a.driver.tasks.(TaskStopper)
	if stopper == nil {
		a.job.logger.Warn("stop with savepoint: the task gateway cannot stop tasks; cancelling the attempt")
		a.stopAll()
		return
	}
	for _, s := range a.specs {
		a.driver.toTask(stopper.StopTask(a.driver.ref(s.ID)))
	}
}
