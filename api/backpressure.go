package api

import (
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/backpressure"
)

// handleBackpressure is GET /jobs/:jobid/vertices/:vertexid/backpressure:
// every subtask's share of time backpressured, idle and busy, measured
// between requests at least a second of task time apart (the first
// request measures since the task started), and Flink's levels.
func (s *Server) handleBackpressure(w http.ResponseWriter, r *http.Request, e *jobEntry) {
	vi := slices.Index(e.vertexIDs, r.PathValue("vertexid"))
	if vi < 0 {
		writeError(w, http.StatusNotFound, "No vertex with id %s in job %s.", r.PathValue("vertexid"), e.id)
		return
	}
	v := e.job.Graph().Vertices[vi]
	ms := e.job.Metrics()
	rates := e.rates.Rates(ms)
	attempt := int(e.job.Restarts())
	out := JobVertexBackPressureInfo{Status: "ok", BackpressureLevel: backpressure.LevelOK,
		EndTimestamp: time.Now().UnixMilli(), Subtasks: []SubtaskBackPressureInfo{}}
	var levels []string
	for i, m := range ms {
		if m.Vertex != v.Name {
			continue
		}
		rt := rates[i]
		lvl := backpressure.Level(rt.BackPressuredRatio())
		levels = append(levels, lvl)
		out.Subtasks = append(out.Subtasks, SubtaskBackPressureInfo{
			Subtask: m.Subtask, AttemptNumber: attempt, BackpressureLevel: lvl,
			Ratio: round3(rt.BackPressuredRatio()), IdleRatio: round3(rt.IdleRatio()), BusyRatio: round3(rt.BusyRatio()),
			TaskManagerID: m.Worker,
		})
	}
	slices.SortFunc(out.Subtasks, func(a, b SubtaskBackPressureInfo) int { return a.Subtask - b.Subtask })
	out.BackpressureLevel = backpressure.WorstLevel(levels...)
	writeJSON(w, http.StatusOK, out)
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
