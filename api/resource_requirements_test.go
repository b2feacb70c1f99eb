package api_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

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
