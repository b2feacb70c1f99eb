package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/checkpoint/snapshot"
)

// Errors of the coordinator.
var (
	// ErrTolerableFailuresExceeded is wrapped by FailJob.Err.
	ErrTolerableFailuresExceeded = errors.New("exceeded checkpoint tolerable failure threshold")
	// ErrCoordinatorStopped: the coordinator was stopped (job failed,
	// failing over, or shut down).
	ErrCoordinatorStopped = errors.New("checkpoint coordinator stopped")
	// ErrNoRunningTasks: every task finished; there is nothing to snapshot.
	ErrNoRunningTasks = errors.New("no running task to take a snapshot")
	// ErrStopInProgress: a stop (with a savepoint, or at a checkpoint
	// for a rescale) is already in progress.
	ErrStopInProgress = errors.New("a stop of the job is already in progress")
	// ErrFinishing: every source reached the end of its input; the job is
	// finishing, and a stop at a checkpoint would only delay it.
	ErrFinishing = errors.New("the job is finishing")
	// ErrRegionRestarting: the tasks of a failover region are restarting;
	// a savepoint or a stop is refused until RegionRestored.
	ErrRegionRestarting = errors.New("a failover region is restarting")
	// ErrRegionFailoverRefused is returned (wrapped) by RegionFailed when
	// only a restart of the whole job is safe; the error says why.
	ErrRegionFailoverRefused = errors.New("region failover refused")
)

// Coordinator is the checkpoint coordinator of one job (Flink's
// CheckpointCoordinator) as a deterministic core: no goroutines, no clock,
// no I/O. Every method takes the current time and returns the actions to
// carry out, in order. The runtime calls Tick at NextWakeup (or more
// often), and reports triggers, acknowledgements, declines, metadata writes
// and task lifecycle events. Not safe for concurrent use: the job master
// calls it from one goroutine.
//
// It triggers periodic checkpoints honouring the interval, the min pause
// (from the end of the last completed checkpoint) and the max concurrent
// checkpoints; aborts checkpoints that time out or are declined; counts
// consecutive failures against the tolerable number and fails the job past
// it; completes a checkpoint once every task acknowledged and its metadata
// is written; subsumes older pending checkpoints; keeps the configured
// number of completed checkpoints and discards older ones, deleting shared
// files only when no retained checkpoint references them.
type Coordinator struct {
	job     string
	run     string // recorded in every _metadata
	origin  string // the lineage's restore path, likewise
	cfg     Config
	tasks   []TaskInfo // by ID
	byID    map[TaskID]*TaskInfo
	sources []TaskID

	finished map[TaskID]bool
	ended    map[TaskID]bool // sources at the end of their input
	// down are the tasks of a failover region being restarted
	// (RegionFailed until RegionRestored): nothing is triggered meanwhile.
	down map[TaskID]bool

	started, stopped bool
	nextID           int64

	nextPeriodic   time.Time
	periodicDue    bool
	lastCompletion time.Time
	hasCompletion  bool
	requests       []Kind // manual and final checkpoints, waiting for a free slot
	suspended      bool   // a stop-with-savepoint or a stop at a checkpoint is in flight
	// deferred: a checkpoint ended (completed or aborted) while a trigger
	// was due; the trigger waits for the next Tick, due at deferredAt, so
	// that its time is taken after the runtime has carried out the end
	// (the checkpoint listener, the notifications, the discards).
	deferred   bool
	deferredAt time.Time

	pending         map[int64]*pendingCheckpoint
	retained        []int64 // completed checkpoints kept, ascending
	latestCompleted int64
	registry        *snapshot.SharedRegistry
	failures        failureCounter

	finalWanted   bool // every source reached its end: a final checkpoint must complete
	allowedFinish bool
	aborted       map[int64]abortedCheckpoint // recently aborted, for late acknowledgements

	stats statsTracker
}

type pendingCheckpoint struct {
	barrier   Barrier
	trigger   time.Time
	awaiting  map[TaskID]bool
	states    []snapshot.SubtaskState
	savepoint *SavepointRequest
	final     bool
	// stop: a checkpoint after whose barrier the sources read nothing
	// more, the job stopping once it completed (TriggerStop).
	stop       bool
	finalizing bool // all acknowledged, metadata being written
}

func (p *pendingCheckpoint) id() int64 { return p.barrier.ID }

type abortedCheckpoint struct {
	savepointDir string
	reason       Reason
}

const maxRememberedAborts = 64

// NewCoordinator builds the coordinator of job for the given tasks.
func NewCoordinator(job string, cfg Config, tasks []TaskInfo) (*Coordinator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return nil, errors.New("checkpoint coordinator: no tasks")
	}
	c := &Coordinator{
		job:      job,
		cfg:      cfg,
		tasks:    slices.SortedFunc(slices.Values(tasks), func(a, b TaskInfo) int { return cmp.Compare(a.ID, b.ID) }),
		byID:     map[TaskID]*TaskInfo{},
		finished: map[TaskID]bool{},
		ended:    map[TaskID]bool{},
		down:     map[TaskID]bool{},
		nextID:   1,
		pending:  map[int64]*pendingCheckpoint{},
		registry: snapshot.NewSharedRegistry(),
		failures: failureCounter{tolerable: cfg.TolerableFailed},
		aborted:  map[int64]abortedCheckpoint{},
		stats:    newStatsTracker(DefaultStatsHistory),
	}
	for i := range c.tasks {
		t := &c.tasks[i]
		if _, dup := c.byID[t.ID]; dup {
			return nil, fmt.Errorf("checkpoint coordinator: task %d listed twice", t.ID)
		}
		c.byID[t.ID] = t
	}
	for _, t := range c.tasks {
		for _, up := range t.Upstream {
			if _, ok := c.byID[up]; !ok || up == t.ID {
				return nil, fmt.Errorf("checkpoint coordinator: task %d has unknown upstream task %d", t.ID, up)
			}
		}
		if len(t.Upstream) == 0 {
			c.sources = append(c.sources, t.ID)
		}
	}
	if len(c.sources) == 0 {
		return nil, errors.New("checkpoint coordinator: no source task (a task without upstream tasks)")
	}
	return c, nil
}

// Config returns the effective configuration (with defaults).
func (c *Coordinator) Config() Config { return c.cfg }

// Restore tells the coordinator, before Start, what the job restored:
// retained are the usable completed checkpoints of its storage (their shared
// files are registered, and those beyond the retained number discarded),
// from is the checkpoint or savepoint the job restored from (nil for a
// fresh start), and maxID the highest checkpoint id found on disk. New
// checkpoints get ids above all of them.
func (c *Coordinator) Restore(now time.Time, retained []*snapshot.Metadata, from *snapshot.Metadata, maxID int64) ([]CoordinatorAction, error) {
	if c.started {
		return nil, errors.New("checkpoint coordinator: Restore after Start")
	}
	c.nextID = max(c.nextID, maxID+1)
	for _, md := range retained {
		if md.Kind == snapshot.KindSavepoint {
			return nil, fmt.Errorf("checkpoint coordinator: savepoint %d passed as a retained checkpoint", md.CheckpointID)
		}
		if !slices.Contains(c.retained, md.CheckpointID) {
			c.retained = append(c.retained, md.CheckpointID)
		}
		c.registry.Register(md.CheckpointID, md.SharedFiles())
		c.nextID = max(c.nextID, md.CheckpointID+1)
		c.latestCompleted = max(c.latestCompleted, md.CheckpointID)
	}
	slices.Sort(c.retained)
	if from != nil {
		c.nextID = max(c.nextID, from.CheckpointID+1)
		c.stats.restored(from, now)
	}
	return c.trimRetained(nil), nil
}

// SetRunID sets the run id recorded in the metadata of every checkpoint
// and savepoint this coordinator completes.
func (c *Coordinator) SetRunID(run string) { c.run = run }

// SetOrigin sets the lineage recorded in the metadata of every checkpoint
// and savepoint this coordinator completes (snapshot.Metadata.Origin).
func (c *Coordinator) SetOrigin(origin string) { c.origin = origin }

// Pin registers, before Start, the shared files of completed checkpoints
// on disk that this run does not own (another run's, a NO_CLAIM restore
// source): they are never discarded by this coordinator, and no file they
// reference is ever released for deletion.
func (c *Coordinator) Pin(mds []*snapshot.Metadata) {
	for _, md := range mds {
		if slices.Contains(c.retained, md.CheckpointID) {
			continue
		}
		c.registry.Register(md.CheckpointID, md.SharedFiles())
		c.nextID = max(c.nextID, md.CheckpointID+1)
	}
}

// Start starts periodic checkpoints (when the interval is set): the first
// one is due one interval from now.
func (c *Coordinator) Start(now time.Time) {
	c.started = true
	if c.cfg.Enabled() {
		c.nextPeriodic = now.Add(c.cfg.Interval)
	}
}

// NextWakeup returns when Tick should next be called: the next periodic
// trigger, the earliest timeout of a pending checkpoint, or, when a
// checkpoint just ended with a trigger due, the time it ended (Tick is due
// at once, once the runtime has carried out the end's actions).
func (c *Coordinator) NextWakeup() (time.Time, bool) {
	if !c.started || c.stopped {
		return time.Time{}, false
	}
	var next time.Time
	if c.periodicActive() {
		next = c.nextPeriodic
	}
	if c.deferred && (next.IsZero() || c.deferredAt.Before(next)) {
		next = c.deferredAt
	}
	for _, p := range c.pending {
		if p.finalizing {
			continue
		}
		if d := p.trigger.Add(c.cfg.Timeout); next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return next, !next.IsZero()
}

func (c *Coordinator) periodicActive() bool {
	return c.cfg.Enabled() && !c.suspended && !c.finalWanted && !c.nextPeriodic.IsZero()
}

// Tick expires pending checkpoints that outlived the timeout and triggers
// what is due: the periodic checkpoint, queued requests, and a trigger
// deferred by the end of a checkpoint. When it expires a checkpoint, what
// is due is triggered by the next Tick (NextWakeup says it is due at once).
func (c *Coordinator) Tick(now time.Time) []CoordinatorAction {
	if !c.started || c.stopped {
		return nil
	}
	c.deferred = false
	var acts []CoordinatorAction
	expired := false
	for _, p := range c.pendingByID() {
		if p.finalizing || now.Before(p.trigger.Add(c.cfg.Timeout)) {
			continue
		}
		expired = true
		acts = c.abort(now, p, ReasonExpired, fmt.Errorf("checkpoint %d expired after %s (execution.checkpointing.timeout) with %d of %d tasks acknowledged; waiting for %s",
			p.id(), c.cfg.Timeout, c.acked(p), c.acked(p)+len(p.awaiting), c.describeTasks(p.awaiting)), acts)
		if c.stopped {
			return acts
		}
	}
	if c.periodicActive() && !now.Before(c.nextPeriodic) {
		c.periodicDue = true
		for !c.nextPeriodic.After(now) {
			c.nextPeriodic = c.nextPeriodic.Add(c.cfg.Interval)
		}
	}
	if expired {
		return c.deferTrigger(now, acts)
	}
	return c.tryTrigger(now, acts)
}

// RequestCheckpoint asks for a checkpoint now (KindCheckpoint or
// KindFullCheckpoint), outside the periodic schedule: it ignores the min
// pause but waits for a free slot under the max concurrent checkpoints.
func (c *Coordinator) RequestCheckpoint(now time.Time, kind Kind) ([]CoordinatorAction, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	if kind == KindSavepoint {
		return nil, errors.New("checkpoint coordinator: use TriggerSavepoint for savepoints")
	}
	c.requests = append(c.requests, kind)
	return c.tryTrigger(now, nil), nil
}

// TriggerSavepoint triggers a savepoint at once: savepoints are always
// aligned and ignore the min pause and the max concurrent checkpoints.
func (c *Coordinator) TriggerSavepoint(now time.Time, req SavepointRequest) (int64, []CoordinatorAction, error) {
	if err := c.usable(); err != nil {
		return 0, nil, err
	}
	if req.Dir == "" {
		return 0, nil, errors.New("checkpoint coordinator: savepoint without a directory")
	}
	if req.Stop && c.suspended {
		return 0, nil, ErrStopInProgress
	}
	if len(c.down) > 0 {
		return 0, nil, ErrRegionRestarting
	}
	if len(c.triggerTasks()) == 0 {
		return 0, nil, ErrNoRunningTasks
	}
	if req.Stop {
		c.suspended = true
		c.periodicDue = false
	}
	acts := c.trigger(now, KindSavepoint, &req, false, nil)
	return acts[len(acts)-1].(Trigger).Barrier.ID, acts, nil
}

// TriggerStop triggers, at once, a checkpoint at which the job stops: the
// job's own checkpoint (retained, subsuming, incremental), always aligned
// (its state is restored at another parallelism, which in-flight data
// cannot be), after whose barrier the sources read nothing more. Once it
// completes the tasks are notified (sinks commit) and StopCompleted says
// to stop them; if it fails, StopFailed, and the sources carry on.
// Periodic checkpoints wait meanwhile. A rescale in place stops the job
// so, and restarts it from the checkpoint at the new parallelism.
func (c *Coordinator) TriggerStop(now time.Time) (int64, []CoordinatorAction, error) {
	if err := c.usable(); err != nil {
		return 0, nil, err
	}
	switch {
	case c.suspended:
		return 0, nil, ErrStopInProgress
	case c.finalWanted:
		return 0, nil, ErrFinishing
	case len(c.down) > 0:
		return 0, nil, ErrRegionRestarting
	case len(c.triggerTasks()) == 0:
		return 0, nil, ErrNoRunningTasks
	}
	c.suspended = true
	c.periodicDue = false
	acts := c.trigger(now, KindCheckpoint, nil, true, nil)
	return acts[len(acts)-1].(Trigger).Barrier.ID, acts, nil
}

func (c *Coordinator) usable() error {
	if !c.started {
		return errors.New("checkpoint coordinator: not started")
	}
	if c.stopped {
		return ErrCoordinatorStopped
	}
	return nil
}

// Ack records that task took its part of checkpoint id, with the state of
// each of its operators (head first) and its figures. When every task has
// acknowledged, it asks for the metadata to be written.
func (c *Coordinator) Ack(now time.Time, task TaskID, id int64, states []snapshot.SubtaskState, fig TaskFigures) []CoordinatorAction {
	if c.stopped {
		return nil
	}
	p := c.pending[id]
	if p == nil {
		return c.lateAck(id, states)
	}
	if !p.awaiting[task] {
		return nil // a duplicate, or not a task of this checkpoint
	}
	states = slices.Clone(states)
	probe := snapshot.Metadata{Subtasks: states}
	shared := probe.SharedFiles()
	if p.savepoint != nil && len(shared) > 0 {
		return c.deferTrigger(now, c.abort(now, p, ReasonInvalidSnapshot,
			fmt.Errorf("task %s acknowledged savepoint %d with shared files %v: %w", c.describe(task), id, shared, snapshot.ErrSharedInSavepoint), nil))
	}
	if len(states) > 0 {
		states[0].Figures = fig.storage()
	}
	delete(p.awaiting, task)
	p.states = append(p.states, states...)
	if p.savepoint == nil {
		c.registry.Register(id, shared)
	}
	c.stats.acked(id, task, now, fig)
	if len(p.awaiting) > 0 {
		return nil
	}
	md := &snapshot.Metadata{
		Version:             snapshot.MetadataVersion,
		Job:                 c.job,
		RunID:               c.run,
		Origin:              c.origin,
		CheckpointID:        id,
		Kind:                storageKind(p.barrier.Options.Kind),
		TriggerTimestamp:    p.barrier.Timestamp,
		CompletionTimestamp: now.UnixMilli(),
		Subtasks:            p.states,
	}
	slices.SortStableFunc(md.Subtasks, func(a, b snapshot.SubtaskState) int {
		return cmp.Or(cmp.Compare(a.OperatorUID, b.OperatorUID), cmp.Compare(a.Subtask, b.Subtask))
	})
	if err := md.Validate(); err != nil {
		return c.deferTrigger(now, c.abort(now, p, ReasonInvalidSnapshot, fmt.Errorf("checkpoint %d: %w", id, err), nil))
	}
	p.finalizing = true
	act := WriteMetadata{Metadata: md}
	if p.savepoint != nil {
		act.SavepointDir = p.savepoint.Dir
	}
	return []CoordinatorAction{act}
}

// lateAck handles an acknowledgement of a checkpoint no longer pending: if
// it was aborted, the files the task wrote after the abort are discarded.
func (c *Coordinator) lateAck(id int64, states []snapshot.SubtaskState) []CoordinatorAction {
	a, ok := c.aborted[id]
	if !ok {
		return nil
	}
	if a.savepointDir != "" {
		return []CoordinatorAction{Discard{ID: id, SavepointDir: a.savepointDir, Reason: a.reason}}
	}
	probe := snapshot.Metadata{Subtasks: states}
	return []CoordinatorAction{Discard{ID: id, Shared: c.registry.Unreferenced(probe.SharedFiles()), Reason: a.reason}}
}

// Decline aborts checkpoint id because task declined it (its barrier
// handler aborted it, or its snapshot failed).
func (c *Coordinator) Decline(now time.Time, task TaskID, id int64, reason Reason, cause error) []CoordinatorAction {
	if c.stopped {
		return nil
	}
	p := c.pending[id]
	if p == nil || p.finalizing || !p.awaiting[task] {
		return nil
	}
	err := fmt.Errorf("task %s declined checkpoint %d (%s)", c.describe(task), id, reason)
	if cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return c.deferTrigger(now, c.abort(now, p, reason, err, nil))
}

// MetadataWritten reports the outcome of WriteMetadata: the checkpoint
// completes at path, or fails (and counts) with err. It triggers nothing:
// a checkpoint due meanwhile is triggered by the next Tick (due at once,
// NextWakeup says), so that its trigger time and its timeout start after
// the runtime has carried out the completion — a checkpoint listener that
// holds it does not eat into the next checkpoint's timeout.
func (c *Coordinator) MetadataWritten(now time.Time, id int64, path string, err error) []CoordinatorAction {
	p := c.pending[id]
	if p == nil || !p.finalizing {
		return nil
	}
	if err != nil {
		return c.deferTrigger(now, c.abort(now, p, ReasonIOFailure, fmt.Errorf("checkpoint %d: write metadata: %w", id, err), nil))
	}
	return c.deferTrigger(now, c.complete(now, p, path))
}

// Notified records, for the statistics, that the notifications of
// completed checkpoint id (NotifyComplete) were sent at now: the end of
// its Notify phase.
func (c *Coordinator) Notified(now time.Time, id int64) { c.stats.notified(id, now) }

// TaskFinished records that task finished: it takes no part in later
// checkpoints (they record its operators as finished), and the pending
// checkpoints still waiting for it are aborted (not counted as failures).
func (c *Coordinator) TaskFinished(now time.Time, task TaskID) []CoordinatorAction {
	if _, ok := c.byID[task]; !ok || c.finished[task] {
		return nil
	}
	c.finished[task] = true
	var acts []CoordinatorAction
	for _, p := range c.pendingByID() {
		if p.awaiting[task] && !p.finalizing {
			acts = c.abort(now, p, ReasonTaskFinished, fmt.Errorf("task %s finished before acknowledging checkpoint %d", c.describe(task), p.id()), acts)
		}
	}
	if len(acts) > 0 {
		return c.deferTrigger(now, c.checkEndOfInput(acts))
	}
	return c.tryTrigger(now, c.checkEndOfInput(acts))
}

// TaskEndOfInput records that source task reached the end of its input and
// waits to finish. Once every source has, a final checkpoint is requested
// (periodic checkpoints stop); AllowFinish follows when it completes.
func (c *Coordinator) TaskEndOfInput(now time.Time, task TaskID) []CoordinatorAction {
	if _, ok := c.byID[task]; !ok {
		return nil
	}
	c.ended[task] = true
	return c.tryTrigger(now, c.checkEndOfInput(nil))
}

func (c *Coordinator) checkEndOfInput(acts []CoordinatorAction) []CoordinatorAction {
	if c.finalWanted {
		return acts
	}
	for _, s := range c.sources {
		if !c.ended[s] && !c.finished[s] {
			return acts
		}
	}
	c.finalWanted = true
	c.periodicDue = false
	if !c.cfg.Enabled() {
		c.allowedFinish = true
		return append(acts, AllowFinish{})
	}
	c.requests = append(c.requests, KindCheckpoint)
	return acts
}

// RegionFailed is told that the tasks of one failover region failed and
// restart from the latest completed checkpoint while the other tasks run
// on (Flink's region failover): every pending checkpoint is aborted (not
// counted: each one waits for, or holds the snapshot of, a task whose
// state is rolled back), the tasks get no notification until they run
// again, and nothing is triggered until RegionRestored. It refuses
// (ErrRegionFailoverRefused, wrapped with why) when only a restart of the
// whole job is safe: a stop or a stop-with-savepoint in flight, the job
// finishing, another region restarting, a checkpoint whose metadata is
// being written (it holds the failed tasks' snapshots and may complete),
// or a task of the region that finished or reached the end of its input.
func (c *Coordinator) RegionFailed(now time.Time, tasks []TaskID) ([]CoordinatorAction, error) {
	if err := c.usable(); err != nil {
		return nil, err
	}
	refuse := func(format string, args ...any) ([]CoordinatorAction, error) {
		return nil, fmt.Errorf("%w: %s", ErrRegionFailoverRefused, fmt.Sprintf(format, args...))
	}
	switch {
	case c.suspended:
		return refuse("%v", ErrStopInProgress)
	case c.finalWanted:
		return refuse("%v", ErrFinishing)
	case len(c.down) > 0:
		return refuse("tasks %s are restarting already", c.describeTasks(c.down))
	}
	for _, id := range tasks {
		switch {
		case c.byID[id] == nil:
			return nil, fmt.Errorf("checkpoint coordinator: region failover of unknown task %d", id)
		case c.finished[id] || c.ended[id]:
			return refuse("task %s reached its end", c.describe(id))
		}
	}
	for _, p := range c.pending {
		if p.finalizing {
			return refuse("checkpoint %d is completing", p.id())
		}
	}
	for _, id := range tasks {
		c.down[id] = true
	}
	var acts []CoordinatorAction
	for _, p := range c.pendingByID() {
		acts = c.abort(now, p, ReasonJobFailover, fmt.Errorf("checkpoint %d: tasks %s failed over", p.id(), c.describeTasks(c.down)), acts)
	}
	return acts, nil
}

// RegionRestored is told that the tasks RegionFailed named run again,
// restored: checkpoints are triggered again, what was due at once.
func (c *Coordinator) RegionRestored(now time.Time) []CoordinatorAction {
	if c.stopped || len(c.down) == 0 {
		return nil
	}
	clear(c.down)
	return c.tryTrigger(now, nil)
}

// Suspend stops the coordinator for a failover: pending checkpoints are
// aborted (not counted) and discarded, completed ones kept for the restore.
// Call it once no metadata write is in flight: a checkpoint whose metadata
// is being written is left alone (it completes on disk or stays an orphan).
func (c *Coordinator) Suspend(now time.Time) []CoordinatorAction {
	return c.stop(now, ReasonJobFailover, nil)
}

// Shutdown stops the coordinator when the job terminates: pending
// checkpoints are aborted, and the completed ones discarded if the
// retention says so for this termination.
func (c *Coordinator) Shutdown(now time.Time, term Termination) []CoordinatorAction {
	acts := c.stop(now, ReasonShutdown, nil)
	if c.cfg.Retention.Discards(term) {
		for _, id := range c.retained {
			acts = append(acts, Discard{ID: id, Shared: c.registry.Release(id), Reason: ReasonShutdown})
			c.stats.discarded(id)
		}
		c.retained = nil
	}
	return acts
}

func (c *Coordinator) stop(now time.Time, reason Reason, acts []CoordinatorAction) []CoordinatorAction {
	c.stopped = true
	for _, p := range c.pendingByID() {
		if !p.finalizing {
			acts = c.abort(now, p, reason, fmt.Errorf("checkpoint %d: %w", p.id(), ErrCoordinatorStopped), acts)
		}
	}
	return acts
}

// deferTrigger follows the end of a checkpoint (acts carry it): what is
// due is triggered by the next Tick, not with these actions, as Flink's
// coordinator schedules the next trigger request after a completion or a
// failure. The runtime carries out acts first (the listener hears of the
// end, tasks are notified, files discarded), then calls Tick, which takes
// the trigger time — and so the start of the timeout — after all that.
func (c *Coordinator) deferTrigger(now time.Time, acts []CoordinatorAction) []CoordinatorAction {
	if !c.stopped && (c.periodicDue || len(c.requests) > 0) {
		if !c.deferred || now.Before(c.deferredAt) {
			c.deferredAt = now
		}
		c.deferred = true
	}
	return acts
}

// tryTrigger triggers what is due while there is a free slot: queued
// requests first (they ignore the min pause), then the periodic one.
func (c *Coordinator) tryTrigger(now time.Time, acts []CoordinatorAction) []CoordinatorAction {
	for !c.stopped && !c.suspended && len(c.down) == 0 && len(c.pending) < c.cfg.MaxConcurrent {
		if len(c.triggerTasks()) == 0 {
			c.requests, c.periodicDue = nil, false
			return acts
		}
		if len(c.requests) > 0 {
			kind := c.requests[0]
			c.requests = c.requests[1:]
			acts = c.trigger(now, kind, nil, false, acts)
			continue
		}
		if !c.periodicDue {
			return acts
		}
		c.periodicDue = false
		if c.hasCompletion && c.cfg.MinPause > 0 {
			if earliest := c.lastCompletion.Add(c.cfg.MinPause); now.Before(earliest) {
				// As Flink: the periodic schedule restarts at the end of the pause.
				c.nextPeriodic = earliest
				return acts
			}
		}
		acts = c.trigger(now, KindCheckpoint, nil, false, acts)
	}
	return acts
}

// trigger starts checkpoint or savepoint of kind (a stop checkpoint with
// stop); there must be a task to trigger.
func (c *Coordinator) trigger(now time.Time, kind Kind, sp *SavepointRequest, stop bool, acts []CoordinatorAction) []CoordinatorAction {
	id := c.nextID
	c.nextID++
	p := &pendingCheckpoint{
		barrier:   NewBarrier(id, now, c.cfg.BarrierOptions(kind)),
		trigger:   now,
		awaiting:  map[TaskID]bool{},
		savepoint: sp,
		final:     c.finalWanted && sp == nil && !stop,
		stop:      stop,
	}
	if p.final || p.stop {
		// The final checkpoint is aligned: it must cover every record, as
		// no later checkpoint will commit what an unaligned barrier would
		// leave behind it as in-flight data. A stop checkpoint is restored
		// at another parallelism, which in-flight data cannot be.
		p.barrier.Options.Alignment, p.barrier.Options.AlignedTimeout = Aligned, 0
	}
	for _, t := range c.tasks {
		if !c.finished[t.ID] {
			p.awaiting[t.ID] = true
			continue
		}
		for _, uid := range t.Operators {
			p.states = append(p.states, snapshot.SubtaskState{OperatorUID: uid, Subtask: t.Subtask, Parallelism: t.Parallelism, Finished: true})
		}
	}
	c.pending[id] = p
	act := Trigger{Barrier: p.barrier, Tasks: c.triggerTasks(), Urgent: p.barrier.Options.MayBeUnaligned()}
	c.stats.triggered(p, c.tasks, c.finished, act.Tasks)
	if sp != nil {
		act.SavepointDir, act.Stop = sp.Dir, sp.Stop
	}
	act.Stop = act.Stop || stop
	return append(acts, act)
}

// complete finishes checkpoint p whose metadata is on disk at path.
func (c *Coordinator) complete(now time.Time, p *pendingCheckpoint, path string) []CoordinatorAction {
	delete(c.pending, p.id())
	c.lastCompletion, c.hasCompletion = now, true
	c.stats.completed(p.id(), now, path)
	var acts []CoordinatorAction
	if sp := p.savepoint; sp != nil && !sp.Stop {
		// A plain savepoint subsumes nothing and is not notified (as in
		// Flink): the job's own checkpoints carry on.
		return append(acts, SavepointCompleted{ID: p.id(), Path: path})
	}
	if p.savepoint == nil && p.id() < c.latestCompleted {
		// Its metadata write finished after a newer checkpoint completed.
		c.stats.discarded(p.id())
		return append(acts, Discard{ID: p.id(), Shared: c.registry.Release(p.id()), Reason: ReasonSubsumed})
	}
	for _, q := range c.pendingByID() {
		if q.id() < p.id() && q.savepoint == nil && !q.finalizing {
			acts = c.abort(now, q, ReasonSubsumed, fmt.Errorf("checkpoint %d subsumed by %d", q.id(), p.id()), acts)
		}
	}
	acts = append(acts, NotifyComplete{ID: p.id(), Tasks: c.runningTasks()})
	if sp := p.savepoint; sp != nil {
		acts = append(acts, SavepointCompleted{ID: p.id(), Path: path, Stop: true, Drain: sp.Drain})
	} else {
		c.failures.succeeded(p.id())
		c.latestCompleted = p.id()
		c.retained = append(c.retained, p.id())
		acts = c.trimRetained(acts)
		if p.stop {
			acts = append(acts, StopCompleted{ID: p.id(), Path: path})
		}
	}
	if p.final && !c.allowedFinish {
		c.allowedFinish = true
		acts = append(acts, AllowFinish{CheckpointID: p.id()})
	}
	return acts
}

// trimRetained discards the oldest completed checkpoints beyond the number
// retained.
func (c *Coordinator) trimRetained(acts []CoordinatorAction) []CoordinatorAction {
	for len(c.retained) > c.cfg.RetainedCheckpoints {
		old := c.retained[0]
		c.retained = c.retained[1:]
		acts = append(acts, Discard{ID: old, Shared: c.registry.Release(old), Reason: ReasonSubsumed})
		c.stats.discarded(old)
	}
	return acts
}

// abort ends pending checkpoint p with reason: the tasks are notified, its
// files discarded, and the failure counted when the reason counts.
func (c *Coordinator) abort(now time.Time, p *pendingCheckpoint, reason Reason, cause error, acts []CoordinatorAction) []CoordinatorAction {
	delete(c.pending, p.id())
	c.stats.failed(p.id(), now, reason, cause)
	c.remember(p, reason)
	acts = append(acts, NotifyAborted{ID: p.id(), Reason: reason, Tasks: c.runningTasks()})
	if sp := p.savepoint; sp != nil {
		if sp.Stop {
			c.suspended = false
		}
		return append(acts,
			Discard{ID: p.id(), SavepointDir: sp.Dir, Reason: reason},
			SavepointFailed{ID: p.id(), Reason: reason, Err: cause})
	}
	acts = append(acts, Discard{ID: p.id(), Shared: c.registry.Release(p.id()), Reason: reason})
	if p.stop {
		c.suspended = false
		acts = append(acts, StopFailed{ID: p.id(), Reason: reason, Err: cause})
	}
	if p.final && !c.allowedFinish && !c.finalPendingOrQueued() {
		c.requests = append(c.requests, KindCheckpoint)
	}
	if reason.Counted() && c.failures.failed(p.id()) {
		c.stopped = true
		return append(acts, FailJob{Err: fmt.Errorf("%w: %d consecutive checkpoint failures, %d tolerated (execution.checkpointing.tolerable-failed-checkpoints); last: %w",
			ErrTolerableFailuresExceeded, c.failures.count, c.failures.tolerable, cause)})
	}
	return acts
}

func (c *Coordinator) finalPendingOrQueued() bool {
	if len(c.requests) > 0 {
		return true
	}
	for _, p := range c.pending {
		if p.final {
			return true
		}
	}
	return false
}

func (c *Coordinator) remember(p *pendingCheckpoint, reason Reason) {
	a := abortedCheckpoint{reason: reason}
	if p.savepoint != nil {
		a.savepointDir = p.savepoint.Dir
	}
	c.aborted[p.id()] = a
	for len(c.aborted) > maxRememberedAborts {
		delete(c.aborted, slices.Min(slices.Collect(maps.Keys(c.aborted))))
	}
}

// triggerTasks are the running tasks whose upstream tasks all finished.
func (c *Coordinator) triggerTasks() []TaskID {
	var out []TaskID
	for _, t := range c.tasks {
		if c.finished[t.ID] {
			continue
		}
		ready := true
		for _, up := range t.Upstream {
			ready = ready && c.finished[up]
		}
		if ready {
			out = append(out, t.ID)
		}
	}
	return out
}

func (c *Coordinator) runningTasks() []TaskID {
	var out []TaskID
	for _, t := range c.tasks {
		if !c.finished[t.ID] && !c.down[t.ID] {
			out = append(out, t.ID)
		}
	}
	return out
}

func (c *Coordinator) pendingByID() []*pendingCheckpoint {
	return slices.SortedFunc(maps.Values(c.pending), func(a, b *pendingCheckpoint) int { return cmp.Compare(a.id(), b.id()) })
}

func (c *Coordinator) acked(p *pendingCheckpoint) int {
	n := 0
	for _, t := range c.tasks {
		if !c.finished[t.ID] && !p.awaiting[t.ID] {
			n++
		}
	}
	return n
}

func (c *Coordinator) describe(t TaskID) string {
	if info, ok := c.byID[t]; ok && info.Vertex != "" {
		return fmt.Sprintf("%d (%s#%d)", t, info.Vertex, info.Subtask)
	}
	return fmt.Sprint(t)
}

func (c *Coordinator) describeTasks(set map[TaskID]bool) string {
	ids := slices.Sorted(maps.Keys(set))
	var parts []string
	for _, id := range ids {
		parts = append(parts, c.describe(id))
	}
	if len(parts) > 5 {
		parts = append(parts[:5], fmt.Sprintf("and %d more", len(ids)-5))
	}
	return fmt.Sprint(parts)
}

// PendingIDs returns the ids of the pending checkpoints, ascending.
func (c *Coordinator) PendingIDs() []int64 { return slices.Sorted(maps.Keys(c.pending)) }

// Retained returns the ids of the completed checkpoints kept, ascending.
func (c *Coordinator) Retained() []int64 { return slices.Clone(c.retained) }

// SharedFiles returns the shared files the registry holds references to.
func (c *Coordinator) SharedFiles() []string { return c.registry.Files() }

func storageKind(k Kind) string {
	switch k {
	case KindSavepoint:
		return snapshot.KindSavepoint
	case KindFullCheckpoint:
		return snapshot.KindFullCheckpoint
	}
	return snapshot.KindCheckpoint
}

// failureCounter counts consecutive failed checkpoints as Flink's
// CheckpointFailureManager does: only reasons that count, each checkpoint
// once, and only checkpoints newer than the last completed one; a
// completion resets the count.
type failureCounter struct {
	tolerable     int
	count         int
	lastSucceeded int64
}

// failed counts a failure of checkpoint id and reports whether the job must
// fail.
func (f *failureCounter) failed(id int64) bool {
	if id <= f.lastSucceeded {
		return false
	}
	f.count++
	return f.count > f.tolerable
}

func (f *failureCounter) succeeded(id int64) {
	if id > f.lastSucceeded {
		f.lastSucceeded = id
		f.count = 0
	}
}

// String describes the coordinator's state, for logs and tests.
func (c *Coordinator) String() string {
	var b []byte
	b = fmt.Appendf(b, "next-id=%d", c.nextID)
	for _, p := range c.pendingByID() {
		b = fmt.Appendf(b, " pending=%d", p.id())
		if p.finalizing {
			b = fmt.Appendf(b, "(finalizing)")
		} else {
			b = fmt.Appendf(b, "(awaiting %v)", slices.Sorted(maps.Keys(p.awaiting)))
		}
	}
	b = fmt.Appendf(b, " retained=%v shared=%v failures=%d", c.retained, c.registry.Files(), c.failures.count)
	if t, ok := c.NextWakeup(); ok {
		b = fmt.Appendf(b, " wakeup=%d", t.UnixMilli())
	}
	if len(c.requests) > 0 {
		b = fmt.Appendf(b, " queued=%v", c.requests)
	}
	if c.suspended {
		b = fmt.Appendf(b, " suspended")
	}
	if c.finalWanted {
		b = fmt.Appendf(b, " final-wanted")
	}
	if len(c.down) > 0 {
		b = fmt.Appendf(b, " down=%v", slices.Sorted(maps.Keys(c.down)))
	}
	if c.stopped {
		b = fmt.Appendf(b, " stopped")
	}
	return string(b)
}
