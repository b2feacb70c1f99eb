package api

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/runtime"
)

// handleHealthz is GET /healthz, the liveness probe: the process answers.
// It needs no token (probes carry none) and says nothing about the jobs.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, HealthStatus{Status: "ok"})
}

// handleReadyz is GET /readyz, the readiness probe: 200 when the server
// follows at least one job and every job it follows is RUNNING with every
// one of its tasks RUNNING, or while the coordinator stands by for the
// job's leadership (status "standby"); 503 otherwise (no job yet, a job
// deploying, restarting, or ended), with the reason. It needs no token; the reason
// names no job.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if s.standby.Load() {
		writeJSON(w, http.StatusOK, HealthStatus{Status: "standby", Reason: "another coordinator leads the job; this one takes over when it goes"})
		return
	}
	if reason := s.unready(); reason != "" {
		writeJSON(w, http.StatusServiceUnavailable, HealthStatus{Status: "not ready", Reason: reason})
		return
	}
	writeJSON(w, http.StatusOK, HealthStatus{Status: "ready"})
}

// ObserveStandby is told when the coordinator whose API this is stands by
// for its job's leadership (HA): a standby is ready, so that a second
// replica passes its readiness probe, and says it stands by.
func (s *Server) ObserveStandby(waiting bool) { s.standby.Store(waiting) }

// unready says why the server is not ready, or "" when it is.
func (s *Server) unready() string {
	entries := s.entries()
	if len(entries) == 0 {
		return "no job yet"
	}
	for i, e := range entries {
		if st := e.job.Status(); st != runtime.JobRunning {
			return fmt.Sprintf("job %d of %d is %s", i+1, len(entries), st)
		}
		ms := e.job.Metrics()
		running := 0
		for _, m := range ms {
			if m.Status == runtime.TaskRunning {
				running++
			}
		}
		if len(ms) == 0 || running < len(ms) {
			return fmt.Sprintf("job %d of %d: %d of %d tasks running", i+1, len(entries), running, len(ms))
		}
	}
	return ""
}
