package api

import (
	"net/http"

	"github.com/sluicehq/sluice/runtime"
)

// Version is what /overview and /config report as the flink-version.
var Version = "sluice"

// handleOverview is GET /overview: Flink's cluster overview, for the jobs
// this server follows.
func (s *Server) handleOverview(w http.ResponseWriter, r *http.Request) {
	out := ClusterOverviewWithVersion{FlinkVersion: Version, FlinkCommit: ""}
	workers := map[string]bool{}
	for _, e := range s.entries() {
		status := e.job.Status()
		switch status {
		case runtime.JobFinished:
			out.JobsFinished++
			continue
		case runtime.JobCanceled:
			out.JobsCancelled++
			continue
		case runtime.JobFailed:
			out.JobsFailed++
			continue
		case runtime.JobSuspended:
			continue
		}
		out.JobsRunning++
		for _, m := range e.job.Metrics() {
			out.SlotsTotal++
			workers[m.Worker] = true
		}
	}
	out.TaskManagers = len(workers)
	writeJSON(w, http.StatusOK, out)
}
