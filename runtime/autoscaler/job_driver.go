package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/sluicehq/sluice/runtime"
)

// drivers are the drivers running with a job, by job (Of); a job's entry
// goes when the job ends.
var drivers sync.Map // *runtime.Job -> *Driver

// Start runs the autoscaler of a running job: a Machine of cfg on the
// job's graph, fed by JobSource every cfg.Interval, whose decisions
// become the job's resource requirements (runtime.Job.
// SetResourceRequirementsBy, cause "autoscaler", each vertex at the parallelism decided or the
// one it runs at). It runs until ctx ends or the job does; Of returns it
// meanwhile. A graph the machine cannot use (ErrTopology: two vertices of
// one name among them) is an error and nothing starts.
func Start(ctx context.Context, job *runtime.Job, cfg Config, log *slog.Logger) (*Driver, error) {
	m, err := New(cfg, TopologyOf(job.Graph()))
	if err != nil {
		return nil, fmt.Errorf("autoscaler of job %s: %w", job.Config().JobName, err)
	}
	src := NewJobSource(job)
	// Vertices the figures cannot tell apart are refused now, not at
	// every step.
	if _, err := src.Snapshot(ctx); errors.Is(err, ErrTopology) {
		return nil, fmt.Errorf("autoscaler of job %s: %w", job.Config().JobName, err)
	}
	d := NewDriver(m, src, JobRescaler(job), log)
	drivers.Store(job, d)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-ctx.Done():
		case <-job.Done():
		}
		cancel()
	}()
	go func() {
		defer drivers.Delete(job)
		d.RunEvery(ctx, cfg.Interval)
	}()
	return d, nil
}

// Of returns the autoscaler running with job, nil when none runs: job is
// not a *runtime.Job, job.autoscaler.enabled is false, or the job has
// ended.
func Of(job any) *Driver {
	j, ok := job.(*runtime.Job)
	if !ok || j == nil {
		return nil
	}
	if d, ok := drivers.Load(j); ok {
		return d.(*Driver)
	}
	return nil
}

// JobRescaler is the Rescaler of a job: it sets the job's resource
// requirements (cause "autoscaler") to the parallelism decided for the vertices given and the
// one they run at for the others.
func JobRescaler(job *runtime.Job) Rescaler {
	return RescalerFunc(func(_ context.Context, par map[int]int) error {
		cur := job.Graph().Parallelism()
		req := runtime.ResourceRequirements{}
		for i, p := range cur {
			req[i] = runtime.ParallelismBounds{Lower: p, Upper: p}
		}
		for i, p := range par {
			if i < 0 || i >= len(cur) {
				return fmt.Errorf("%w: parallelism %s for a job of %d vertices", ErrTopology, formatParallelism(par), len(cur))
			}
			req[i] = runtime.ParallelismBounds{Lower: p, Upper: p}
		}
		return job.SetResourceRequirementsBy(req, "autoscaler")
	})
}
