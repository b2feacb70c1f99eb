package controller

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sluicev1 "github.com/sluicehq/sluice/operator/api/v1alpha1"
	"github.com/sluicehq/sluice/operator/internal/jobapi"
)

// savepointAPI is a job's REST API for savepoints: each trigger completes
// at the next poll, at savepoint-N; disposals are recorded.
type savepointAPI struct {
	mu       sync.Mutex
	n        int
	disposed []string
}

func (s *savepointAPI) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /jobs/j/savepoints", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.n++
		n := s.n
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]string{"request-id": fmt.Sprint(n)})
	})
	mux.HandleFunc("GET /jobs/j/savepoints/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"status":{"id":"COMPLETED"},"operation":{"location":"/sp/savepoint-%s"}}`, r.PathValue("id"))
	})
	mux.HandleFunc("POST /savepoint-disposal", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		s.mu.Lock()
		s.disposed = append(s.disposed, body["savepoint-path"])
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]string{"request-id": "d"})
	})
	return mux
}

// Periodic savepoints on the interval, one on a new trigger nonce, and
// the oldest disposed of past maxCount, never the one the job restored
// from nor an upgrade's.
func TestSavepointScheduleAndRetention(t *testing.T) {
	api := &savepointAPI{}
	srv := httptest.NewServer(api.handler())
	defer srv.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Reconciler{Now: func() time.Time { return now }}
	job := testJob()
	job.Spec.Savepoints = sluicev1.SavepointSpec{Interval: &metav1.Duration{Duration: time.Hour}, MaxCount: 2}
	job.Status.Deployed = job.Spec.DeepCopy()
	job.Status.Savepoints.History = []sluicev1.SavepointInfo{{Location: "/sp/upgrade", Trigger: TriggerUpgrade}}
	c := &jobapi.Client{Base: srv.URL}
	step := func() {
		t.Helper()
		if err := r.savepoints(t.Context(), job, c, "j"); err != nil {
			t.Fatal(err)
		}
	}
	step() // the first periodic one is due at once
	step() // completes
	now = now.Add(30 * time.Minute)
	step() // not due
	if api.n != 1 {
		t.Fatalf("%d savepoints after 30 min of a 1 h interval, want 1", api.n)
	}
	job.Spec.Savepoints.TriggerNonce = 7
	step()
	step()
	if api.n != 2 || job.Status.Savepoints.LastTriggerNonce != 7 {
		t.Fatalf("a new nonce: %d savepoints, last nonce %d", api.n, job.Status.Savepoints.LastTriggerNonce)
	}
	job.Status.RestorePath = "/sp/savepoint-1" // the job restored from the first: kept
	for range 2 {
		now = now.Add(time.Hour)
		step()
		step()
	}
	var kept []string
	for _, s := range job.Status.Savepoints.History {
		kept = append(kept, s.Location)
	}
	// Savepoints 1 (restored from) and 3, 4 (the newest two) are kept;
	// 2 is disposed of, the upgrade's stays.
	if want := []string{"/sp/upgrade", "/sp/savepoint-1", "/sp/savepoint-3", "/sp/savepoint-4"}; !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if !slices.Equal(api.disposed, []string{"/sp/savepoint-2"}) {
		t.Errorf("disposed of %v, want savepoint-2", api.disposed)
	}
}
