package api

import (
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/runtime"
)

// vertex resolves {vertexid} of the request, answering 404 itself when
// the job has no such vertex.
func (e *jobEntry) vertex(w http.ResponseWriter, r *http.Request) (int, *runtime.JobVertex, bool) {
	vi := slices.Index(e.vertexIDs, r.PathValue("vertexid"))
	if vi < 0 {
		writeError(w, http.StatusNotFound, "No vertex with id %s in job %s.", r.PathValue("vertexid"), e.id)
		return 0, nil, false
	}
	return vi, e.job.Graph().Vertices[vi], true
}

// subtaskMetrics returns the metrics of vertex v's subtasks, by subtask.
func (e *jobEntry) subtaskMetrics(v *runtime.JobVertex) []runtime.TaskMetrics {
	var out []runtime.TaskMetrics
	for _, m := range e.job.Metrics() {
		if m.Vertex == v.Name {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b runtime.TaskMetrics) int { return a.Subtask - b.Subtask })
	return out
}

var hostname = func() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}()

// handleVertex is GET /jobs/:jobid/vertices/:vertexid: the vertex and
// every subtask's state, times, throughput and watermarks.
func (s *Server) handleVertex(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	_, v, ok := e.vertex(w, r)
	if !ok {
		return
	}
	now := time.Now()
	out := JobVertexDetailsInfo{ID: r.PathValue("vertexid"), Name: v.Name, Parallelism: v.Parallelism,
		MaxParallelism: v.MaxParallelism, Now: now.UnixMilli(), Subtasks: []SubtaskExecutionAttemptDetailsInfo{}}
	attempt := int(e.job.Restarts())
	for _, m := range e.subtaskMetrics(v) {
		host := hostname
		if m.Worker != "" {
			host = m.Worker
		}
		st := SubtaskExecutionAttemptDetailsInfo{
			Subtask: m.Subtask, Status: m.Status.String(), Attempt: attempt, Endpoint: host, Host: host,
			StartTime: millis(m.Started), EndTime: millis(m.Ended), Duration: m.Elapsed.Milliseconds(),
			Metrics: IOMetricsInfo{
				ReadBytes: m.BytesIn, ReadBytesComplete: true, WriteBytes: m.BytesOut, WriteBytesComplete: true,
				ReadRecords: m.RecordsIn, ReadRecordsComplete: true, WriteRecords: m.RecordsOut, WriteRecordsComplete: true,
				AccumulatedBackpressuredTime: m.BackPressuredTime.Milliseconds(), AccumulatedIdleTime: m.IdleTime.Milliseconds(),
				AccumulatedBusyTime: float64(m.BusyTime.Milliseconds()),
			},
			TaskManagerID: m.Worker, CurrentInputWatermark: m.InputWatermark, CurrentOutputWatermark: m.OutputWatermark,
		}
		if st.TaskManagerID == "" {
			st.TaskManagerID = hostname
		}
		out.Subtasks = append(out.Subtasks, st)
	}
	writeJSON(w, http.StatusOK, out)
}

// subtaskMetricValues are the metrics of one subtask that
// GET /jobs/:jobid/vertices/:vertexid/metrics lists, with Flink's names:
// the task's, its operators' user-defined metrics, and its connectors'
// (the Kafka source's records lag and offsets, the Kafka sink's
// transactions).
func subtaskMetricValues(m runtime.TaskMetrics) [][2]string {
	i := strconv.FormatInt
	out := [][2]string{
		{"numRecordsIn", i(m.RecordsIn, 10)},
		{"numRecordsOut", i(m.RecordsOut, 10)},
		{"numBytesIn", i(m.BytesIn, 10)},
		{"numBytesOut", i(m.BytesOut, 10)},
		{"currentInputWatermark", i(m.InputWatermark, 10)},
		{"currentOutputWatermark", i(m.OutputWatermark, 10)},
		{"accumulateBusyTimeMs", i(m.BusyTime.Milliseconds(), 10)},
		{"accumulateIdleTimeMs", i(m.IdleTime.Milliseconds(), 10)},
		{"accumulateBackPressuredTimeMs", i(m.BackPressuredTime.Milliseconds(), 10)},
	}
	out = append(out, userMetricValues(m.User)...)
	return append(out, connectorMetricValues(m.Connectors)...)
}

// handleVertexMetrics is GET /jobs/:jobid/vertices/:vertexid/metrics: as
// Flink, the ids ("<subtask>.<metric>") without ?get, the values of the
// ids ?get lists (comma-separated) with it.
func (s *Server) handleVertexMetrics(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	_, v, ok := e.vertex(w, r)
	if !ok {
		return
	}
	var want map[string]bool
	if g := r.URL.Query().Get("get"); g != "" {
		want = map[string]bool{}
		for _, id := range strings.Split(g, ",") {
			want[strings.TrimSpace(id)] = true
		}
	}
	out := []Metric{}
	for _, m := range e.subtaskMetrics(v) {
		for _, kv := range subtaskMetricValues(m) {
			id := strconv.Itoa(m.Subtask) + "." + kv[0]
			switch {
			case want == nil:
				out = append(out, Metric{ID: id})
			case want[id]:
				val := kv[1]
				out = append(out, Metric{ID: id, Value: &val})
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleWatermarks is GET /jobs/:jobid/vertices/:vertexid/watermarks:
// every subtask's currentInputWatermark (as Flink) and
// currentOutputWatermark, unix milliseconds as strings.
func (s *Server) handleWatermarks(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	_, v, ok := e.vertex(w, r)
	if !ok {
		return
	}
	out := []Metric{}
	for _, m := range e.subtaskMetrics(v) {
		in, o := strconv.FormatInt(m.InputWatermark, 10), strconv.FormatInt(m.OutputWatermark, 10)
		out = append(out, Metric{ID: strconv.Itoa(m.Subtask) + ".currentInputWatermark", Value: &in},
			Metric{ID: strconv.Itoa(m.Subtask) + ".currentOutputWatermark", Value: &o})
	}
	writeJSON(w, http.StatusOK, out)
}
