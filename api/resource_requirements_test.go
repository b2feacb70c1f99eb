package api_test

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testjob"
)

// GET and PUT /jobs/:jobid/resource-requirements in Flink's shape: every
// vertex's bounds by vertex id; a PUT rescales the job in place (GET
// /jobs/:jobid then shows the parallelism); a vertex the job lacks and
// bounds out of [1, max parallelism] are 400 naming them; a job without
// checkpoints cannot rescale in place (409).
func TestResourceRequirements(t *testing.T) {
	e := start(t, testjob.Options{Name: "elastic", Rate: 5000, Interval: 20 * time.Millisecond}, api.Options{})
	e.run.AwaitCompleted(t, 1)
	ctx := t.Context()
	req, err := e.client.ResourceRequirements(ctx, e.jobID)
	if err != nil {
		t.Fatal(err)
	}
	job, err := e.client.Job(ctx, e.jobID)
	if err != nil {
		t.Fatal(err)
	}
	if len(req) != len(job.Vertices) {
		t.Fatalf("requirements of %d vertices, the job has %d: %+v", len(req), len(job.Vertices), req)
	}
	var count string
	for _, v := range job.Vertices {
		if b := req[v.ID].Parallelism; b.LowerBound != 2 || b.UpperBound != 2 {
			t.Errorf("vertex %s (%s): bounds %+v, want [2, 2]", v.ID, v.Name, b)
		}
		if v.Name == testjob.CountVertex {
			count = v.ID
		}
	}
	at := func(p int) api.JobResourceRequirements {
		return api.JobResourceRequirements{count: {Parallelism: api.ParallelismBounds{LowerBound: p, UpperBound: p}}}
	}
	for _, bad := range []struct {
		req  api.JobResourceRequirements
		want string
	}{
		{api.JobResourceRequirements{strings.Repeat("0", 32): {Parallelism: api.ParallelismBounds{LowerBound: 1, UpperBound: 1}}}, "No vertex with id " + strings.Repeat("0", 32)},
		{at(129), "exceeds its max parallelism 128"},
		{at(0), "lower bound 0 must be at least 1"},
	} {
		err := e.client.SetResourceRequirements(ctx, e.jobID, bad.req)
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("PUT %+v: %v, want 400 saying %q", bad.req, err, bad.want)
		}
	}
	if err := e.client.SetResourceRequirements(ctx, e.jobID, at(3)); err != nil {
		t.Fatal(err)
	}
	testjob.Await(t, "the count at parallelism 3", func() bool {
		job, err := e.client.Job(ctx, e.jobID)
		return err == nil && job.State == "RUNNING" && job.Vertices[1].Parallelism == 3 && job.Vertices[0].Parallelism == 2
	})
	if req, err = e.client.ResourceRequirements(ctx, e.jobID); err != nil || req[count].Parallelism.UpperBound != 3 {
		t.Fatalf("GET after the PUT: %v %+v", err, req)
	}

	plain := start(t, testjob.Options{Name: "plain"}, api.Options{})
	err = plain.client.SetResourceRequirements(ctx, plain.jobID, api.JobResourceRequirements{})
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(err.Error(), "execution.checkpointing.interval") {
		t.Errorf("PUT on a job without checkpoints: %v, want 409 naming execution.checkpointing.interval", err)
	}
}

// A job that failed once and restarted shows the outage in its details:
// when it learned of the failure, the cause, and the milliseconds to the
// next attempt running and to its first completed checkpoint; a job that
// never failed shows none.
func TestFailoverDowntimeInDetails(t *testing.T) {
	failOnce := filepath.Join(t.TempDir(), "failed")
	e := start(t, testjob.Options{Rate: 5000, Interval: 20 * time.Millisecond, FailOnce: failOnce, Options: []sluice.Option{
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(1, time.Millisecond)),
	}}, api.Options{})
	var got []api.FailoverDowntimeInfo
	testjob.Await(t, "an outage that ended with a checkpoint", func() bool {
		job, err := e.client.Job(t.Context(), e.jobID)
		got = job.Failovers
		return err == nil && len(got) == 1 && got[0].CheckpointAfter >= 0
	})
	d := got[0]
	if d.RunningAfter <= -1 || d.CheckpointAfter < d.RunningAfter || !strings.Contains(d.Cause, testjob.ErrInjected.Error()) ||
		d.Timestamp < e.run.Job.Downtimes()[0].Failed.UnixMilli() {
		t.Errorf("outage %+v", d)
	}
	if e.run.Job.Downtime() != 0 {
		t.Errorf("the job runs, yet its current downtime is %v", e.run.Job.Downtime())
	}
	plain := start(t, testjob.Options{Name: "plain"}, api.Options{})
	if job, err := plain.client.Job(t.Context(), plain.jobID); err != nil || job.Failovers != nil {
		t.Errorf("a job that never failed: %v %+v", err, job.Failovers)
	}
}
