package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/runtime"
)

// executionStates are Flink's task states, the keys of task counts.
var executionStates = []string{"CREATED", "SCHEDULED", "DEPLOYING", "RUNNING", "FINISHED", "CANCELING",
	"CANCELED", "FAILED", "RECONCILING", "INITIALIZING"}

// jobStates are Flink's job states, the keys of the timestamps.
var jobStates = []string{"INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING", "CANCELED",
	"FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING"}

func zeroCounts(keys []string) map[string]int {
	m := make(map[string]int, len(keys))
	for _, k := range keys {
		m[k] = 0
	}
	return m
}

// vertexStatus aggregates the states of a vertex's subtasks as Flink does:
// the "worst" state any subtask is in.
func vertexStatus(counts map[string]int) string {
	for _, s := range []string{"FAILED", "CANCELED", "RUNNING", "CREATED"} {
		if counts[s] > 0 {
			return s
		}
	}
	if counts["FINISHED"] > 0 {
		return "FINISHED"
	}
	return "CREATED"
}

// timing returns the job's start, end (-1 while running) and duration.
func (e *jobEntry) timing(now time.Time) (start, end, duration int64) {
	start, end = e.start.UnixMilli(), -1
	stop := now
	if t := e.endTime(); !t.IsZero() {
		end, stop = t.UnixMilli(), t
	}
	return start, end, stop.Sub(e.start).Milliseconds()
}

func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request) {
	out := JobIDsWithStatusOverview{Jobs: []JobIDWithStatus{}}
	for _, e := range s.entries() {
		out.Jobs = append(out.Jobs, JobIDWithStatus{ID: e.id, Status: e.job.Status().String()})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleJobsOverview(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	out := MultipleJobsDetails{Jobs: []JobDetails{}}
	for _, e := range s.entries() {
		tasks := map[string]int{"total": 0}
		for _, st := range executionStates {
			tasks[strings.ToLower(st)] = 0
		}
		for _, m := range e.job.Metrics() {
			tasks["total"]++
			tasks[strings.ToLower(m.Status.String())]++
		}
		start, end, dur := e.timing(now)
		out.Jobs = append(out.Jobs, JobDetails{
			JID: e.id, Name: e.name, State: e.job.Status().String(), StartTime: start, EndTime: end,
			Duration: dur, LastModification: now.UnixMilli(), Tasks: tasks,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleJob(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	writeJSON(w, http.StatusOK, e.details(time.Now()))
}

// details builds the job's JobDetailsInfo.
func (e *jobEntry) details(now time.Time) JobDetailsInfo {
	g := e.job.Graph()
	status := e.job.Status()
	start, end, dur := e.timing(now)
	cfg := e.job.Config()
	info := JobDetailsInfo{
		JID: e.id, Name: e.name, State: status.String(), JobType: "STREAMING",
		IsStoppable: cfg.Checkpoint.Directory != "" && status == runtime.JobRunning,
		StartTime:   start, EndTime: end, Duration: dur, Now: now.UnixMilli(),
		Timestamps: map[string]int64{}, StatusCounts: zeroCounts(executionStates),
		Vertices: []JobVertexInfo{}, Plan: JobPlan{JID: e.id, Name: e.name, Type: "STREAMING", Nodes: []PlanNode{}},
	}
	for _, st := range jobStates {
		info.Timestamps[st] = 0
	}
	info.Timestamps["INITIALIZING"], info.Timestamps["CREATED"], info.Timestamps["RUNNING"] = start, start, start
	if end > 0 {
		info.Timestamps[status.String()] = end
	}
	byVertex := map[string][]runtime.TaskMetrics{}
	for _, m := range e.job.Metrics() {
		byVertex[m.Vertex] = append(byVertex[m.Vertex], m)
	}
	for i, v := range g.Vertices {
		id := e.vertexIDs[i]
		counts := zeroCounts(executionStates)
		var io IOMetricsInfo
		io.ReadBytesComplete, io.WriteBytesComplete, io.ReadRecordsComplete, io.WriteRecordsComplete = true, true, true, true
		for _, m := range byVertex[v.Name] {
			counts[m.Status.String()]++
			io.ReadBytes += m.BytesIn
			io.WriteBytes += m.BytesOut
			io.ReadRecords += m.RecordsIn
			io.WriteRecords += m.RecordsOut
			io.AccumulatedBackpressuredTime = max(io.AccumulatedBackpressuredTime, m.BackPressuredTime.Milliseconds())
			io.AccumulatedIdleTime = max(io.AccumulatedIdleTime, m.IdleTime.Milliseconds())
			io.AccumulatedBusyTime = max(io.AccumulatedBusyTime, float64(m.BusyTime.Milliseconds()))
		}
		vs := vertexStatus(counts)
		info.StatusCounts[vs]++
		info.MaxParallelism = max(info.MaxParallelism, v.MaxParallelism)
		info.Vertices = append(info.Vertices, JobVertexInfo{
			ID: id, Name: v.Name, MaxParallelism: v.MaxParallelism, Parallelism: v.Parallelism, Status: vs,
			StartTime: start, EndTime: end, Duration: dur, Tasks: counts, Metrics: io,
		})
		node := PlanNode{ID: id, Parallelism: v.Parallelism, Operator: "", OperatorStrategy: "",
			Description: v.Name, OptimizerProperties: map[string]any{}}
		for num, edge := range v.In {
			from := g.VertexOf(edge.From)
			if from == nil {
				continue
			}
			node.Inputs = append(node.Inputs, PlanInput{Num: num, ID: e.vertexIDs[from.ID],
				ShipStrategy: edge.Partitioner.String(), Exchange: "pipelined_bounded"})
		}
		info.Plan.Nodes = append(info.Plan.Nodes, node)
	}
	info.Failovers = e.failovers()
	return info
}

// handleCancel is PATCH /jobs/:jobid?mode=cancel.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	switch mode := r.URL.Query().Get("mode"); mode {
	case "", "cancel":
		e.job.Cancel()
		s.logger.Info("job cancelled through the api", "job", e.name, "jid", e.id)
		writeJSON(w, http.StatusAccepted, struct{}{})
	case "stop":
		writeError(w, http.StatusBadRequest, "mode=stop is not supported: use POST /jobs/%s/stop", e.id)
	default:
		writeError(w, http.StatusBadRequest, "unknown mode %q: want cancel", mode)
	}
}
