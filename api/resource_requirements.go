package api

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice/runtime"
)

// rescaler is a job whose parallelism changes while it runs
// (*runtime.Job).
type rescaler interface {
	SetResourceRequirements(req runtime.ResourceRequirements) error
	ResourceRequirements() runtime.ResourceRequirements
}

// downtimeSource is a job that records its outages after failures
// (*runtime.Job).
type downtimeSource interface {
	Downtimes() []runtime.FailoverDowntime
}

// failovers are the job's outages, for JobDetailsInfo.
func (e *jobEntry) failovers() []FailoverDowntimeInfo {
	ds, ok := e.job.(downtimeSource)
	if !ok {
		return nil
	}
	var out []FailoverDowntimeInfo
	ms := func(d time.Duration) int64 {
		if d == 0 {
			return -1
		}
		return d.Milliseconds()
	}
	for _, d := range ds.Downtimes() {
		out = append(out, FailoverDowntimeInfo{Timestamp: d.Failed.UnixMilli(), Cause: d.Cause,
			RunningAfter: ms(d.Running), CheckpointAfter: ms(d.Checkpointed)})
	}
	return out
}

// handleResourceRequirements is GET /jobs/:jobid/resource-requirements
// (Flink 1.18): every vertex's parallelism bounds, by vertex id.
func (s *Server) handleResourceRequirements(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	out := JobResourceRequirements{}
	rs, ok := e.job.(rescaler)
	if !ok {
		writeJSON(w, http.StatusOK, out)
		return
	}
	req := rs.ResourceRequirements()
	for i, id := range e.vertexIDs {
		b, ok := req[i]
		if !ok {
			p := e.job.Graph().Vertices[i].Parallelism
			b = runtime.ParallelismBounds{Lower: p, Upper: p}
		}
		out[id] = JobVertexResourceRequirements{Parallelism: ParallelismBounds{LowerBound: b.Lower, UpperBound: b.Upper}}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSetResourceRequirements is PUT /jobs/:jobid/resource-requirements
// (Flink 1.18): the job rescales in place to what the bounds ask (a
// checkpoint, then the job runs on from it at the new parallelism); the
// answer comes at once, GET /jobs/:jobid shows the parallelism. Every
// vertex a vertex id; bounds out of [1, max parallelism] or that the
// slots cannot meet are refused (400).
func (s *Server) handleSetResourceRequirements(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	var body JobResourceRequirements
	if err := decodeBody(r, &body); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	rs, ok := e.job.(rescaler)
	if !ok {
		writeError(w, http.StatusBadRequest, "Job %s (%s) cannot change its parallelism while it runs.", e.id, e.name)
		return
	}
	req := runtime.ResourceRequirements{}
	for id, vr := range body {
		vi := slices.Index(e.vertexIDs, id)
		if vi < 0 {
			writeError(w, http.StatusBadRequest, "No vertex with id %s in job %s (GET /jobs/%s lists them).", id, e.id, e.id)
			return
		}
		req[vi] = runtime.ParallelismBounds{Lower: vr.Parallelism.LowerBound, Upper: vr.Parallelism.UpperBound}
	}
	if err := rs.SetResourceRequirements(req); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, runtime.ErrRescale) {
			status = http.StatusConflict
		}
		writeError(w, status, "Job %s (%s): %v", e.id, e.name, err)
		return
	}
	s.logger.Info("resource requirements set through the api", "job", e.name, "jid", e.id, "requirements", req)
	writeJSON(w, http.StatusOK, struct{}{})
}
