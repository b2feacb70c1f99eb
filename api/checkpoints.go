package api

import (
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime"
)

// history keeps the finished checkpoints of a job, more of them than the
// coordinator's recent history: for the summary, the timeline and the
// details of older checkpoints.
type history struct {
	mu    sync.Mutex
	size  int
	order []int64 // ascending
	byID  map[int64]checkpoint.Stats
}

func newHistory(size int) *history {
	return &history{size: size, byID: map[int64]checkpoint.Stats{}}
}

// merge takes in the finished checkpoints of st.
func (h *history) merge(st checkpoint.JobStats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	put := func(cs *checkpoint.Stats) {
		if cs == nil || cs.Status == checkpoint.StatusInProgress {
			return
		}
		if _, ok := h.byID[cs.ID]; !ok {
			i, _ := slices.BinarySearch(h.order, cs.ID)
			h.order = slices.Insert(h.order, i, cs.ID)
		}
		h.byID[cs.ID] = *cs
	}
	for i := range st.History {
		put(&st.History[i])
	}
	put(st.LatestCompleted)
	put(st.LatestSavepoint)
	put(st.LatestFailed)
	for len(h.order) > h.size {
		delete(h.byID, h.order[0])
		h.order = h.order[1:]
	}
}

func (h *history) get(id int64) (checkpoint.Stats, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs, ok := h.byID[id]
	return cs, ok
}

// all returns the kept checkpoints, oldest first.
func (h *history) all() []checkpoint.Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]checkpoint.Stats, 0, len(h.order))
	for _, id := range h.order {
		out = append(out, h.byID[id])
	}
	return out
}

// CheckpointType returns Flink's REST checkpoint type: CHECKPOINT,
// UNALIGNED_CHECKPOINT or SAVEPOINT.
func CheckpointType(cs checkpoint.Stats) string {
	switch {
	case cs.Kind == checkpoint.KindSavepoint:
		return "SAVEPOINT"
	case cs.Unaligned:
		return "UNALIGNED_CHECKPOINT"
	}
	return "CHECKPOINT"
}

func className(s checkpoint.Status) string {
	switch s {
	case checkpoint.StatusCompleted:
		return "completed"
	case checkpoint.StatusFailed:
		return "failed"
	}
	return "in_progress"
}

// vertexOf returns the index of the vertex a task of a checkpoint belongs
// to: tasks are numbered vertex by vertex, subtask by subtask; the name
// confirms it.
func (e *jobEntry) vertexOf(ts checkpoint.TaskStats) int {
	vs := e.job.Graph().Vertices
	id := int(ts.Task)
	for i, v := range vs {
		if id < v.Parallelism {
			if v.Name == ts.Vertex {
				return i
			}
			break
		}
		id -= v.Parallelism
	}
	return slices.IndexFunc(vs, func(v *runtime.JobVertex) bool { return v.Name == ts.Vertex })
}

// externalPath is the directory of a checkpoint (as Flink reports it and
// as restores take it), not its _metadata file.
func externalPath(p string) string {
	if d, ok := strings.CutSuffix(p, "/_metadata"); ok {
		return d // a URL (s3://...) or a slash-separated path
	}
	if filepath.Base(p) == "_metadata" {
		return filepath.Dir(p)
	}
	return p
}

// statistics converts one checkpoint.
func (e *jobEntry) statistics(cs checkpoint.Stats) CheckpointStatistics {
	out := CheckpointStatistics{
		ClassName: className(cs.Status), ID: cs.ID, Status: cs.Status.String(),
		IsSavepoint: cs.Kind == checkpoint.KindSavepoint, TriggerTimestamp: millis(cs.TriggerTime),
		LatestAckTimestamp: millis(cs.LatestAck), CheckpointedSize: cs.CheckpointedSize, StateSize: cs.StateSize,
		EndToEndDuration: cs.EndToEndDuration.Milliseconds(), ProcessedData: cs.ProcessedData,
		PersistedData: cs.PersistedData, NumSubtasks: cs.NumTasks, NumAcknowledgedSubtasks: cs.NumAcknowledged,
		CheckpointType: CheckpointType(cs), Tasks: map[string]TaskCheckpointStatistics{},
	}
	if cs.LatestAck.IsZero() {
		out.EndToEndDuration = -1
	}
	if out.IsSavepoint {
		f := "CANONICAL"
		out.SavepointFormat = &f
	}
	switch cs.Status {
	case checkpoint.StatusCompleted:
		out.CompletedCheckpointFields = &CompletedCheckpointFields{ExternalPath: externalPath(cs.Path), Discarded: cs.Discarded}
		out.Phases = phases(cs)
	case checkpoint.StatusFailed:
		msg := cs.FailureMessage
		if msg == "" {
			msg = cs.FailureReason.String()
		} else {
			msg = cs.FailureReason.String() + ": " + msg
		}
		out.FailedCheckpointFields = &FailedCheckpointFields{FailureTimestamp: millis(cs.EndTime), FailureMessage: msg}
	}
	for i, v := range e.job.Graph().Vertices {
		ts := e.tasksOf(cs, i)
		if len(ts) == 0 {
			continue
		}
		out.Tasks[e.vertexIDs[i]] = taskStatistics(cs, v.Parallelism, ts)
	}
	return out
}

// phases converts the phases of a completed checkpoint.
func phases(cs checkpoint.Stats) *CheckpointPhases {
	p := cs.Phases
	out := &CheckpointPhases{
		TriggerToSource: p.TriggerToSource.Microseconds(), BarrierToLast: p.BarrierToLast.Microseconds(),
		Alignment: p.Alignment.Microseconds(), Sync: p.Sync.Microseconds(), Async: p.Async.Microseconds(),
		Ack: p.Ack.Microseconds(), Metadata: p.Metadata.Microseconds(), Notify: p.Notify.Microseconds(),
		Completion: p.Completion.Microseconds(),
	}
	for _, ts := range cs.Tasks {
		if ts.Task == p.LastTask {
			out.LastSubtask = fmt.Sprintf("%s/%d", ts.Vertex, ts.Subtask)
		}
	}
	return out
}

// tasksOf returns the tasks of the checkpoint that belong to vertex i,
// ordered by subtask.
func (e *jobEntry) tasksOf(cs checkpoint.Stats, i int) []checkpoint.TaskStats {
	var out []checkpoint.TaskStats
	for _, ts := range cs.Tasks {
		if e.vertexOf(ts) == i {
			out = append(out, ts)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Subtask < out[b].Subtask })
	return out
}

func taskStatistics(cs checkpoint.Stats, parallelism int, tasks []checkpoint.TaskStats) TaskCheckpointStatistics {
	out := TaskCheckpointStatistics{ID: cs.ID, Status: cs.Status.String(), NumSubtasks: len(tasks), EndToEndDuration: -1, LatestAckTimestamp: -1}
	var last time.Time
	for _, ts := range tasks {
		if !ts.Acknowledged {
			continue
		}
		out.NumAcknowledgedSubtasks++
		if ts.AckTime.After(last) {
			last = ts.AckTime
		}
		f := ts.Figures
		out.CheckpointedSize += f.CheckpointedSize
		out.StateSize += f.StateSize
		out.ProcessedData += f.ProcessedData
		out.PersistedData += f.PersistedData
	}
	if !last.IsZero() {
		out.LatestAckTimestamp = last.UnixMilli()
		out.EndToEndDuration = last.Sub(cs.TriggerTime).Milliseconds()
	}
	return out
}

// summarize returns Flink's StatsSummaryDto of values: min, max, mean
// and percentiles interpolated between the closest ranks.
func summarize(values []int64) StatsSummary {
	if len(values) == 0 {
		return StatsSummary{}
	}
	v := slices.Clone(values)
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	q := func(p float64) float64 {
		r := p * float64(len(v)-1)
		lo := int(math.Floor(r))
		hi := min(lo+1, len(v)-1)
		return float64(v[lo]) + (r-float64(lo))*float64(v[hi]-v[lo])
	}
	return StatsSummary{Min: v[0], Max: v[len(v)-1], Avg: int64(math.Round(sum / float64(len(v)))),
		P50: q(0.5), P90: q(0.9), P95: q(0.95), P99: q(0.99), P999: q(0.999)}
}

// summary summarizes the completed checkpoints the server kept.
func (e *jobEntry) summary() CheckpointSummary {
	var size, full, dur, proc, pers []int64
	for _, cs := range e.history.all() {
		if cs.Status != checkpoint.StatusCompleted {
			continue
		}
		size = append(size, cs.CheckpointedSize)
		full = append(full, cs.StateSize)
		dur = append(dur, cs.EndToEndDuration.Milliseconds())
		proc = append(proc, cs.ProcessedData)
		pers = append(pers, cs.PersistedData)
	}
	zero := make([]int64, len(size))
	return CheckpointSummary{CheckpointedSize: summarize(size), StateSize: summarize(full), EndToEndDuration: summarize(dur),
		AlignmentBuffered: summarize(zero), ProcessedData: summarize(proc), PersistedData: summarize(pers)}
}

func (s *Server) handleCheckpoints(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	st, ok := e.poll()
	if !ok {
		writeError(w, http.StatusNotFound, "Checkpointing is not enabled for job %s (%s).", e.id, e.name)
		return
	}
	out := CheckpointingStatistics{
		Counts: CheckpointCounts{Restored: st.Restored, Total: st.Total, InProgress: st.InProgress,
			Completed: st.Completed, Failed: st.Failed},
		Summary: e.summary(), History: []CheckpointStatistics{},
	}
	latest := func(cs *checkpoint.Stats) *CheckpointStatistics {
		if cs == nil {
			return nil
		}
		c := e.statistics(*cs)
		return &c
	}
	out.Latest.Completed = latest(st.LatestCompleted)
	out.Latest.Savepoint = latest(st.LatestSavepoint)
	out.Latest.Failed = latest(st.LatestFailed)
	if rs := st.LatestRestored; rs != nil {
		rc := &RestoredCheckpoint{ID: rs.ID, RestoreTimestamp: millis(rs.RestoreTime), IsSavepoint: rs.IsSavepoint}
		if info, ok := e.job.LastRestore(); ok && info.CheckpointID == rs.ID {
			rc.ExternalPath = info.Path
		}
		out.Latest.Restored = rc
	}
	for _, cs := range st.History {
		out.History = append(out.History, e.statistics(cs))
	}
	writeJSON(w, http.StatusOK, out)
}

// checkpoint finds a checkpoint by its id (or "latest", with
// ?status=COMPLETED or FAILED, as Flink 2.1's details/latest).
func (e *jobEntry) checkpoint(r *http.Request) (checkpoint.Stats, error) {
	st, _ := e.poll()
	ref := r.PathValue("checkpointid")
	if ref == "latest" {
		var cs *checkpoint.Stats
		switch strings.ToUpper(r.URL.Query().Get("status")) {
		case "", "COMPLETED":
			cs = st.LatestCompleted
		case "FAILED":
			cs = st.LatestFailed
		default:
			return checkpoint.Stats{}, fmt.Errorf("status %q: want COMPLETED or FAILED", r.URL.Query().Get("status"))
		}
		if cs == nil {
			return checkpoint.Stats{}, fmt.Errorf("Could not find latest checkpointing statistics.")
		}
		return *cs, nil
	}
	id, err := strconv.ParseInt(ref, 10, 64)
	if err != nil {
		return checkpoint.Stats{}, fmt.Errorf("checkpoint id %q is not a number", ref)
	}
	for _, cs := range st.History {
		if cs.ID == id {
			return cs, nil
		}
	}
	if cs, ok := e.history.get(id); ok {
		return cs, nil
	}
	return checkpoint.Stats{}, fmt.Errorf("Could not find checkpointing statistics for checkpoint %d.", id)
}

func (s *Server) handleCheckpointDetails(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	cs, err := e.checkpoint(r)
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, e.statistics(cs))
}

func (s *Server) handleSubtaskDetails(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	cs, err := e.checkpoint(r)
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	vi := slices.Index(e.vertexIDs, r.PathValue("vertexid"))
	if vi < 0 {
		writeError(w, http.StatusNotFound, "No vertex with id %s in job %s.", r.PathValue("vertexid"), e.id)
		return
	}
	tasks := e.tasksOf(cs, vi)
	if len(tasks) == 0 {
		writeError(w, http.StatusNotFound, "Checkpoint %d has no statistics for vertex %s.", cs.ID, r.PathValue("vertexid"))
		return
	}
	writeJSON(w, http.StatusOK, subtaskDetails(cs, e.job.Graph().Vertices[vi].Parallelism, tasks))
}

func subtaskDetails(cs checkpoint.Stats, parallelism int, tasks []checkpoint.TaskStats) TaskCheckpointStatisticsWithSubtaskDetails {
	out := TaskCheckpointStatisticsWithSubtaskDetails{
		TaskCheckpointStatistics: taskStatistics(cs, parallelism, tasks),
		Subtasks:                 []SubtaskCheckpointStatistics{},
	}
	var size, full, e2e, sync, async, proc, pers, align, delay []int64
	for _, ts := range tasks {
		sub := SubtaskCheckpointStatistics{Index: ts.Subtask, Status: "pending_or_failed"}
		if ts.Acknowledged {
			f := ts.Figures
			sub.Status = "completed"
			sub.CompletedSubtaskFields = &CompletedSubtaskFields{
				AckTimestamp: millis(ts.AckTime), EndToEndDuration: ts.EndToEndDuration.Milliseconds(),
				StateSize: f.StateSize, CheckpointedSize: f.CheckpointedSize,
				Checkpoint: CheckpointDuration{Sync: f.Sync.Milliseconds(), Async: f.Async.Milliseconds()},
				Alignment: CheckpointAlignment{Processed: f.ProcessedData, Persisted: f.PersistedData,
					Duration: f.Alignment.Milliseconds()},
				StartDelay: f.StartDelay.Milliseconds(), UnalignedCheckpoint: f.Unaligned,
			}
			c := sub.CompletedSubtaskFields
			size, full, e2e = append(size, c.CheckpointedSize), append(full, c.StateSize), append(e2e, c.EndToEndDuration)
			sync, async = append(sync, c.Checkpoint.Sync), append(async, c.Checkpoint.Async)
			proc, pers = append(proc, c.Alignment.Processed), append(pers, c.Alignment.Persisted)
			align, delay = append(align, c.Alignment.Duration), append(delay, c.StartDelay)
		}
		out.Subtasks = append(out.Subtasks, sub)
	}
	out.Summary = SubtaskCheckpointSummary{
		CheckpointedSize: summarize(size), StateSize: summarize(full), EndToEndDuration: summarize(e2e),
		CheckpointDuration: CheckpointDurationSummary{Sync: summarize(sync), Async: summarize(async)},
		Alignment: CheckpointAlignmentSummary{Buffered: summarize(make([]int64, len(size))), Processed: summarize(proc),
			Persisted: summarize(pers), Duration: summarize(align)},
		StartDelay: summarize(delay),
	}
	return out
}

func (s *Server) handleCheckpointConfig(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	c := e.job.Config().Checkpoint.WithDefaults()
	if !c.Enabled() {
		writeError(w, http.StatusNotFound, "Checkpointing is not enabled for job %s (%s).", e.id, e.name)
		return
	}
	ext := ExternalizedCheckpointInfo{}
	switch c.Retention {
	case checkpoint.RetainOnCancellation:
		ext = ExternalizedCheckpointInfo{Enabled: true}
	case checkpoint.DeleteOnCancellation:
		ext = ExternalizedCheckpointInfo{Enabled: true, DeleteOnCancellation: true}
	}
	writeJSON(w, http.StatusOK, CheckpointConfigInfo{
		Mode: strings.ToLower(c.Mode.String()), Interval: c.Interval.Milliseconds(),
		Timeout: c.Timeout.Milliseconds(), MinPause: c.MinPause.Milliseconds(), MaxConcurrent: c.MaxConcurrent,
		Externalization: ext, CheckpointStorage: "FileSystemCheckpointStorage (" + c.Directory + ")",
		UnalignedCheckpoints: c.Unaligned, TolerableFailedCheckpoints: c.TolerableFailed,
		AlignedCheckpointTimeout: c.AlignedCheckpointTimeout.Milliseconds(),
	})
}

func (s *Server) handleTimeline(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	e.poll()
	out := CheckpointTimeline{Checkpoints: []TimelineEntry{}}
	for _, cs := range e.history.all() {
		out.Checkpoints = append(out.Checkpoints, TimelineEntry{
			ID: cs.ID, Status: cs.Status.String(), IsSavepoint: cs.Kind == checkpoint.KindSavepoint,
			CheckpointType: CheckpointType(cs), TriggerTimestamp: millis(cs.TriggerTime),
			EndToEndDuration: cs.EndToEndDuration.Milliseconds(), CheckpointedSize: cs.CheckpointedSize,
			StateSize: cs.StateSize, ProcessedData: cs.ProcessedData, PersistedData: cs.PersistedData,
		})
	}
	writeJSON(w, http.StatusOK, out)
}
