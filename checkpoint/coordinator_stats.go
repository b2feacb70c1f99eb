package checkpoint

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/checkpoint/snapshot"
)

// DefaultStatsHistory is how many recent checkpoints the statistics keep
// in detail (Flink's web.checkpoints.history).
const DefaultStatsHistory = 10

// Status is the state of a checkpoint in the statistics.
type Status uint8

const (
	StatusInProgress Status = iota
	StatusCompleted
	StatusFailed
)

func (s Status) String() string {
	switch s {
	case StatusInProgress:
		return "IN_PROGRESS"
	case StatusCompleted:
		return "COMPLETED"
	}
	return "FAILED"
}

// Stats are the figures of one checkpoint, with a line per task:
// what Flink's REST API reports under /jobs/:id/checkpoints/details/:cid.
type Stats struct {
	ID     int64
	Kind   Kind
	Status Status
	// Unaligned is set when any task took it unaligned.
	Unaligned   bool
	TriggerTime time.Time
	// LatestAck is the time of the last acknowledgement so far.
	LatestAck time.Time
	// EndTime is when it completed or failed.
	EndTime time.Time
	// EndToEndDuration: from the trigger to the last acknowledgement
	// (Flink's end_to_end_duration).
	EndToEndDuration time.Duration
	CheckpointedSize int64
	StateSize        int64
	ProcessedData    int64
	PersistedData    int64
	NumTasks         int
	NumAcknowledged  int
	FailureReason    Reason
	FailureMessage   string
	// Path is where its _metadata is, once complete.
	Path string
	// Discarded: its files were deleted (subsumed, or at shutdown).
	Discarded bool
	// Phases break its time down, once it completed.
	Phases Phases
	Tasks  []TaskStats
}

// Phases break a completed checkpoint's time down along its
// critical path: the task whose acknowledgement came last. Up to the last
// acknowledgement the parts are consecutive and sum to EndToEndDuration
// (TriggerToSource + BarrierToLast + Alignment + Sync + Async + Ack); the
// coordinator's own work follows (Metadata, then Notify), and Completion
// is the whole. The task figures are Flink's (checkpoint_start_delay,
// alignment_duration, sync_duration, async_duration); the other parts are
// Sluice's.
type Phases struct {
	// LastTask is the task whose acknowledgement came last.
	LastTask TaskID
	// TriggerToSource: from the trigger to the latest of the source tasks
	// taking it (their start delay), but no later than LastTask's start.
	TriggerToSource time.Duration
	// BarrierToLast: from there until the first barrier reached LastTask
	// (the barrier's way through the network and the tasks before it).
	BarrierToLast time.Duration
	// Alignment, Sync and Async are LastTask's figures.
	Alignment, Sync, Async time.Duration
	// Ack: from LastTask's snapshot written until the coordinator had its
	// acknowledgement.
	Ack time.Duration
	// Metadata: from the last acknowledgement until the _metadata file was
	// written and made durable (the checkpoint's commit point).
	Metadata time.Duration
	// Notify: from the _metadata written until every running task was
	// sent the notification of completion.
	Notify time.Duration
	// Completion: from the trigger until the notifications were sent.
	Completion time.Duration
}

// Parts returns the consecutive parts of the phases, named, in order:
// they sum to Completion.
func (p Phases) Parts() []PhasePart {
	return []PhasePart{
		{"trigger_to_source", p.TriggerToSource}, {"barrier_to_last", p.BarrierToLast},
		{"alignment", p.Alignment}, {"sync", p.Sync}, {"async", p.Async}, {"ack", p.Ack},
		{"metadata", p.Metadata}, {"notify", p.Notify},
	}
}

// PhasePart is one named part of a checkpoint's time.
type PhasePart struct {
	Name     string
	Duration time.Duration
}

// TaskStats are one task's figures for a checkpoint.
type TaskStats struct {
	Task    TaskID
	Vertex  string
	Subtask int
	// Source: the coordinator triggers it (a task without running
	// upstream tasks), rather than its input's barriers.
	Source       bool
	Acknowledged bool
	AckTime      time.Time
	// EndToEndDuration: from the trigger to this task's acknowledgement.
	EndToEndDuration time.Duration
	Figures          TaskFigures
}

// RestoreStats describe what the job restored from.
type RestoreStats struct {
	ID          int64
	IsSavepoint bool
	RestoreTime time.Time
}

// JobStats is the checkpoint history of the job: counts, the
// latest of each outcome and the recent checkpoints, newest first (Flink's
// /jobs/:id/checkpoints).
type JobStats struct {
	Restored, Total, InProgress, Completed, Failed int
	LatestCompleted                                *Stats
	LatestSavepoint                                *Stats
	LatestFailed                                   *Stats
	LatestRestored                                 *RestoreStats
	History                                        []Stats
}

// The names of earlier versions.
type (
	// Deprecated: use Stats.
	CheckpointStats = Stats
	// Deprecated: use JobStats.
	CheckpointingStats = JobStats
	// Deprecated: use TaskStats.
	TaskCheckpointStats = TaskStats
	// Deprecated: use Phases.
	CheckpointPhases = Phases
	// Deprecated: use Status.
	CheckpointStatus = Status
)

type statsTracker struct {
	size    int
	history []*Stats // oldest first
	byID    map[int64]*Stats
	counts  JobStats // counts and latest pointers only
}

func newStatsTracker(size int) statsTracker {
	return statsTracker{size: size, byID: map[int64]*Stats{}}
}

func (s *statsTracker) triggered(p *pendingCheckpoint, tasks []TaskInfo, finished map[TaskID]bool, sources []TaskID) {
	cs := &Stats{ID: p.id(), Kind: p.barrier.Options.Kind, TriggerTime: p.trigger}
	for _, t := range tasks {
		if finished[t.ID] {
			continue
		}
		cs.Tasks = append(cs.Tasks, TaskStats{Task: t.ID, Vertex: t.Vertex, Subtask: t.Subtask, Source: slices.Contains(sources, t.ID)})
	}
	cs.NumTasks = len(cs.Tasks)
	s.counts.Total++
	s.counts.InProgress++
	s.byID[cs.ID] = cs
	s.history = append(s.history, cs)
	s.trim()
}

func (s *statsTracker) trim() {
	for len(s.history) > s.size {
		i := slices.IndexFunc(s.history, func(cs *Stats) bool { return cs.Status != StatusInProgress })
		if i < 0 {
			return
		}
		delete(s.byID, s.history[i].ID)
		s.history = slices.Delete(s.history, i, i+1)
	}
}

func (s *statsTracker) acked(id int64, task TaskID, now time.Time, fig TaskFigures) {
	cs := s.byID[id]
	if cs == nil {
		return
	}
	for i := range cs.Tasks {
		ts := &cs.Tasks[i]
		if ts.Task != task {
			continue
		}
		ts.Acknowledged, ts.AckTime, ts.Figures = true, now, fig
		ts.EndToEndDuration = now.Sub(cs.TriggerTime)
		cs.NumAcknowledged++
		cs.LatestAck = now
		cs.EndToEndDuration = now.Sub(cs.TriggerTime)
		cs.CheckpointedSize += fig.CheckpointedSize
		cs.StateSize += fig.StateSize
		cs.ProcessedData += fig.ProcessedData
		cs.PersistedData += fig.PersistedData
		cs.Unaligned = cs.Unaligned || fig.Unaligned
		cs.Phases.LastTask = task
		return
	}
}

// phases computes the parts of cs up to its last acknowledgement, and
// Metadata with the checkpoint completing at now.
func (cs *Stats) phases(now time.Time) {
	ph := &cs.Phases
	var last *TaskStats
	var source time.Duration
	for i := range cs.Tasks {
		ts := &cs.Tasks[i]
		if ts.Task == ph.LastTask && ts.Acknowledged {
			last = ts
		}
		if ts.Source && ts.Acknowledged {
			source = max(source, ts.Figures.StartDelay)
		}
	}
	ph.Metadata = nonNegative(now.Sub(cs.LatestAck))
	ph.Completion = nonNegative(now.Sub(cs.TriggerTime))
	if last == nil {
		return
	}
	f := last.Figures
	// The start delay of a task is measured from the barrier's trigger
	// timestamp (milliseconds): it may overstate by up to a millisecond,
	// and the parts are bounded so that they never exceed the whole.
	rest := cs.EndToEndDuration
	take := func(d time.Duration) time.Duration {
		d = min(nonNegative(d), rest)
		rest -= d
		return d
	}
	if last.Source {
		source = f.StartDelay
	}
	ph.TriggerToSource = take(min(source, f.StartDelay))
	ph.BarrierToLast = take(f.StartDelay - ph.TriggerToSource)
	ph.Alignment = take(f.Alignment)
	ph.Sync = take(f.Sync)
	ph.Async = take(f.Async)
	ph.Ack = rest
}

// notified records that the notifications of completed checkpoint id
// were sent at now.
func (s *statsTracker) notified(id int64, now time.Time) {
	cs := s.byID[id]
	if cs == nil || cs.Status != StatusCompleted {
		return
	}
	end := cs.TriggerTime.Add(cs.EndToEndDuration + cs.Phases.Metadata)
	cs.Phases.Notify = nonNegative(now.Sub(end))
	cs.Phases.Completion = nonNegative(now.Sub(cs.TriggerTime))
}

func (s *statsTracker) completed(id int64, now time.Time, path string) {
	s.counts.InProgress--
	s.counts.Completed++
	cs := s.byID[id]
	if cs == nil {
		return
	}
	cs.Status, cs.EndTime, cs.Path = StatusCompleted, now, path
	cs.phases(now)
	if cs.Kind == KindSavepoint {
		s.counts.LatestSavepoint = cs
	} else {
		s.counts.LatestCompleted = cs
	}
	s.trim()
}

func (s *statsTracker) failed(id int64, now time.Time, reason Reason, cause error) {
	s.counts.InProgress--
	s.counts.Failed++
	cs := s.byID[id]
	if cs == nil {
		return
	}
	cs.Status, cs.EndTime, cs.FailureReason = StatusFailed, now, reason
	if cause != nil {
		cs.FailureMessage = cause.Error()
	}
	s.counts.LatestFailed = cs
	s.trim()
}

func (s *statsTracker) discarded(id int64) {
	if cs := s.byID[id]; cs != nil {
		cs.Discarded = true
	}
}

func (s *statsTracker) restored(md *snapshot.Metadata, now time.Time) {
	s.counts.Restored++
	s.counts.LatestRestored = &RestoreStats{ID: md.CheckpointID, IsSavepoint: md.Kind == snapshot.KindSavepoint, RestoreTime: now}
}

// Stats returns a copy of the checkpoint statistics.
func (c *Coordinator) Stats() JobStats {
	s := &c.stats
	out := s.counts
	out.LatestCompleted = copyStats(s.counts.LatestCompleted)
	out.LatestSavepoint = copyStats(s.counts.LatestSavepoint)
	out.LatestFailed = copyStats(s.counts.LatestFailed)
	if r := s.counts.LatestRestored; r != nil {
		cp := *r
		out.LatestRestored = &cp
	}
	out.History = nil
	for i := len(s.history) - 1; i >= 0; i-- {
		out.History = append(out.History, *copyStats(s.history[i]))
	}
	return out
}

// CheckpointStats returns the figures of a recent checkpoint.
func (c *Coordinator) CheckpointStats(id int64) (Stats, bool) {
	cs := c.stats.byID[id]
	if cs == nil {
		return Stats{}, false
	}
	return *copyStats(cs), true
}

func copyStats(cs *Stats) *Stats {
	if cs == nil {
		return nil
	}
	cp := *cs
	cp.Tasks = slices.Clone(cs.Tasks)
	return &cp
}

// InheritStats carries the statistics of the coordinator of a previous
// attempt of the job (stopped by then) into this one, before Restore and
// Start: counts and history then span restarts, as Flink's do.
func (c *Coordinator) InheritStats(prev *Coordinator) {
	if prev == nil || c.started {
		return
	}
	c.stats = prev.stats
	c.stats.byID = make(map[int64]*Stats, len(prev.stats.byID))
	for id, cs := range prev.stats.byID {
		c.stats.byID[id] = cs
	}
	c.stats.history = append([]*Stats(nil), prev.stats.history...)
}
