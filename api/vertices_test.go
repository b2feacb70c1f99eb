package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/runtime"
)

// TestVertexDetailsAndWatermarks: the vertex endpoint lists every subtask
// with the job's own figures, and the watermarks endpoint gives each
// subtask's input and output watermark as the job reports them. The
// figures are read from the job after it finished, so both sides are the
// same instant.
func TestVertexDetailsAndWatermarks(t *testing.T) {
	e := start(t, testjob.Options{Records: 2000, Options: []sluice.Option{sluice.WithParallelism(2)}}, api.Options{})
	if err := e.run.Wait(t); err != nil {
		t.Fatal(err)
	}
	var details struct {
		Vertices []struct{ ID, Name string } `json:"vertices"`
	}
	if err := json.Unmarshal(e.rawBytes(t, http.MethodGet, "/jobs/"+e.jobID, nil, http.StatusOK), &details); err != nil {
		t.Fatal(err)
	}
	byVertex := map[string]map[int]runtime.TaskMetrics{}
	for _, m := range e.run.Job.Metrics() {
		if byVertex[m.Vertex] == nil {
			byVertex[m.Vertex] = map[int]runtime.TaskMetrics{}
		}
		byVertex[m.Vertex][m.Subtask] = m
	}
	for _, v := range details.Vertices {
		var vd api.JobVertexDetailsInfo
		if err := json.Unmarshal(e.rawBytes(t, http.MethodGet, "/jobs/"+e.jobID+"/vertices/"+v.ID, nil, http.StatusOK), &vd); err != nil {
			t.Fatal(err)
		}
		want := byVertex[v.Name]
		if vd.Name != v.Name || len(vd.Subtasks) != len(want) || vd.Parallelism != len(want) {
			t.Fatalf("vertex %s: %+v, want %d subtasks", v.Name, vd, len(want))
		}
		for _, st := range vd.Subtasks {
			m := want[st.Subtask]
			if st.Status != m.Status.String() || st.Metrics.ReadRecords != m.RecordsIn || st.Metrics.WriteRecords != m.RecordsOut ||
				st.CurrentInputWatermark != m.InputWatermark || st.CurrentOutputWatermark != m.OutputWatermark ||
				st.StartTime != m.Started.UnixMilli() || st.EndTime != m.Ended.UnixMilli() {
				t.Fatalf("vertex %s subtask %d: %+v, the job says %+v", v.Name, st.Subtask, st, m)
			}
		}
		var wms []api.Metric
		if err := json.Unmarshal(e.rawBytes(t, http.MethodGet, "/jobs/"+e.jobID+"/vertices/"+v.ID+"/watermarks", nil, http.StatusOK), &wms); err != nil {
			t.Fatal(err)
		}
		if len(wms) != 2*len(want) {
			t.Fatalf("vertex %s watermarks: %+v", v.Name, wms)
		}
		for _, w := range wms {
			sub, name, _ := strings.Cut(w.ID, ".")
			i, _ := strconv.Atoi(sub)
			m := want[i]
			wm := m.InputWatermark
			if name == "currentOutputWatermark" {
				wm = m.OutputWatermark
			} else if name != "currentInputWatermark" {
				t.Fatalf("vertex %s: metric %q", v.Name, w.ID)
			}
			if w.Value == nil || *w.Value != strconv.FormatInt(wm, 10) {
				t.Fatalf("vertex %s %s: %v, want %d", v.Name, w.ID, w.Value, wm)
			}
		}
		// ?get picks values; without it only ids.
		var ids, got []api.Metric
		base := "/jobs/" + e.jobID + "/vertices/" + v.ID + "/metrics"
		_ = json.Unmarshal(e.rawBytes(t, http.MethodGet, base, nil, http.StatusOK), &ids)
		_ = json.Unmarshal(e.rawBytes(t, http.MethodGet, base+"?get=0.numRecordsOut,0.currentInputWatermark", nil, http.StatusOK), &got)
		if len(ids) == 0 || ids[0].Value != nil || len(got) != 2 {
			t.Fatalf("vertex %s metrics: ids %+v, values %+v", v.Name, ids, got)
		}
		for _, g := range got {
			want := strconv.FormatInt(want[0].RecordsOut, 10)
			if g.ID == "0.currentInputWatermark" {
				want = strconv.FormatInt(byVertex[v.Name][0].InputWatermark, 10)
			}
			if g.Value == nil || *g.Value != want {
				t.Fatalf("vertex %s %s = %v, want %s", v.Name, g.ID, g.Value, want)
			}
		}
	}
	e.rawBytes(t, http.MethodGet, "/jobs/"+e.jobID+"/vertices/0123456789abcdef0123456789abcdef", nil, http.StatusNotFound)
}

// TestExceptionsEndpoint: a job that failed and restarted lists the
// failure, with the task's name; a job that never failed lists none.
func TestExceptionsEndpoint(t *testing.T) {
	failOnce := filepath.Join(t.TempDir(), "failed")
	e := start(t, testjob.Options{Records: 500, Options: []sluice.Option{
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(1, time.Millisecond)),
	}, FailOnce: failOnce}, api.Options{})
	if err := e.run.Wait(t); err != nil {
		t.Fatal(err)
	}
	var ex api.JobExceptionsInfoWithHistory
	if err := json.Unmarshal(e.rawBytes(t, http.MethodGet, "/jobs/"+e.jobID+"/exceptions", nil, http.StatusOK), &ex); err != nil {
		t.Fatal(err)
	}
	exs, _ := e.run.Job.Exceptions()
	if len(exs) != 1 || len(ex.ExceptionHistory.Entries) != 1 {
		t.Fatalf("exceptions: the job has %+v, the API %+v", exs, ex)
	}
	got := ex.ExceptionHistory.Entries[0]
	if got.Stacktrace != exs[0].Err.Error() || got.TaskName == nil || *got.TaskName != exs[0].Task ||
		got.Timestamp != exs[0].Time.UnixMilli() || ex.RootException == nil || *ex.RootException != got.Stacktrace {
		t.Fatalf("exception entry %+v (root %v), the job has %+v", got, ex.RootException, exs[0])
	}
	if _, err := os.Stat(failOnce); err != nil {
		t.Fatalf("the job did not fail: %v", err)
	}
	e.rawBytes(t, http.MethodGet, "/jobs/"+e.jobID+"/exceptions?maxExceptions=x", nil, http.StatusBadRequest)
}
