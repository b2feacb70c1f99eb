package controller

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/operator/internal/jobapi"
)

// The job's autoscaler, as GET /jobs/:id/autoscaler reports it, is
// reflected in status.autoscaler: its latest evaluation, and its latest
// decision with the vertices it rescales (one event per decision).
func TestAutoscalerInStatus(t *testing.T) {
	body := `{"enabled":true,"rescales":1,
		"last":{"time":"2026-01-01T00:05:00Z","outcome":"stabilizing","until":"2026-01-01T00:10:00Z"},
		"lastDecision":{"time":"2026-01-01T00:04:00Z","outcome":"scale","parallelism":{"1":4},"vertices":[
			{"vertex":0,"name":"source","parallelism":2,"newParallelism":2,"change":"none","reason":"within the target","inputRate":10,"load":0.1,"trueProcessingRate":100,"targetRate":10,"lag":0},
			{"vertex":1,"name":"count","parallelism":2,"newParallelism":4,"change":"up","inputRate":10,"load":0.9,"trueProcessingRate":11,"targetRate":20,"lag":-1}]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jobs/j/autoscaler" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	as, err := (&jobapi.Client{Base: srv.URL}).Autoscaler(t.Context(), "j")
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{}
	job := testJob()
	r.observeAutoscaler(job, as)
	st := job.Status.Autoscaler
	if st == nil || !st.Enabled || st.Rescales != 1 || st.LastOutcome != "stabilizing" || st.LastEvaluation == nil ||
		st.LastEvaluation.Minute() != 5 {
		t.Fatalf("status.autoscaler %+v", st)
	}
	d := st.LastDecision
	if d == nil || d.Outcome != "scale" || d.Time.Minute() != 4 || len(d.Vertices) != 1 {
		t.Fatalf("last decision %+v", d)
	}
	if v := d.Vertices[0]; v.Name != "count" || v.Parallelism != 2 || v.NewParallelism != 4 {
		t.Errorf("the decision's vertex %+v, want count 2 -> 4", v)
	}
	if got := decisionString(d); got != "count 2 -> 4" {
		t.Errorf("decision %q", got)
	}
	// Off: enabled false, nothing else.
	r.observeAutoscaler(job, &jobapi.Autoscaler{})
	if st := job.Status.Autoscaler; st.Enabled || st.LastDecision != nil {
		t.Errorf("an autoscaler that is off: %+v", st)
	}
}
