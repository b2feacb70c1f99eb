package api

import (
	"net/http"

	"github.com/sluicehq/sluice/runtime/autoscaler"
)

// AutoscalerInfo is GET /jobs/:jobid/autoscaler (Sluice): whether an
// autoscaler runs with the job (job.autoscaler.enabled), its latest
// evaluation with the figures of every vertex, the latest one that
// rescaled the job (or recommended it), and how many rescales it asked.
type AutoscalerInfo struct {
	Enabled      bool                   `json:"enabled"`
	Rescales     int64                  `json:"rescales"`
	Last         *autoscaler.Evaluation `json:"last,omitempty"`
	LastDecision *autoscaler.Evaluation `json:"lastDecision,omitempty"`
}

// handleAutoscaler is GET /jobs/:jobid/autoscaler: enabled false (and
// nothing else) when no autoscaler runs with the job: it is off, or the
// job has ended.
func (s *Server) handleAutoscaler(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	d := autoscaler.Of(e.job)
	if d == nil {
		writeJSON(w, http.StatusOK, AutoscalerInfo{})
		return
	}
	out := AutoscalerInfo{Enabled: true, Rescales: d.Rescales()}
	if ev := d.Last(); !ev.Time.IsZero() {
		out.Last = &ev
	}
	if ev := d.LastDecision(); !ev.Time.IsZero() {
		out.LastDecision = &ev
	}
	writeJSON(w, http.StatusOK, out)
}
