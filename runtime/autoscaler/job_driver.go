package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/runtime"
)

// drivers are the drivers running with a job, by job (Of); a job's entry
// goes when the job ends.
var drivers sync.Map // *runtime.Job -> *Driver

// Start runs the autoscaler of a running job: a Machine of cfg on the
// job's graph, fed by JobSource every cfg.Interval, whose decisions the
// job carries out within the bounds of its resource requirements
// (runtime.Job.Autoscale: they stay the user's). It runs until ctx ends or the job does; Of returns it
// meanwhile. Where the job keeps its scaling state for a coordinator
// taking over (runtime.Job.KeepsScalingState), the driver's state goes
// with it at every step, and a job that resumed one (a new leader's)
// resumes its autoscaler's: the metrics window, the stabilization and
// scale-down clocks, a rescale asked for. A graph the machine cannot use (ErrTopology: two vertices of
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
	resume(d, job)
	if job.KeepsScalingState() {
		// Under HA the leader writes it to etcd with the job's scaling
		// state; the next leader resumes from it.
		d.KeepState(job.SetAutoscalerState)
	}
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

// JobRescaler is the Rescaler of a job: the vertices given run at the
// parallelism decided, within the bounds of the job's resource
// requirements, which it does not change (runtime.Job.Autoscale, cause
// "autoscaler"); the others keep theirs.
func JobRescaler(job *runtime.Job) Rescaler {
	return RescalerFunc(func(_ context.Context, par map[int]int) error {
		if n := len(job.Graph().Vertices); slices.ContainsFunc(slices.Collect(maps.Keys(par)), func(i int) bool { return i < 0 || i >= n }) {
			return fmt.Errorf("%w: parallelism %s for a job of %d vertices", ErrTopology, formatParallelism(par), n)
		}
		return job.Autoscale(par)
	})
}

// resume has d go on from the autoscaler state the job resumed with (a
// new leader's job, from the last leader's), if any. A rescale that
// state waits for and the job's scaling state does not hold (the last
// leader died between keeping one and asking for the other) will not
// come: the machine does not wait for it.
func resume(d *Driver, job *runtime.Job) {
	data := job.ResumedAutoscalerState()
	if data == nil {
		return
	}
	if err := d.Resume(data); err != nil {
		d.log.Warn("the autoscaler state the last leader kept does not fit the job; the autoscaler starts afresh", "err", err)
		return
	}
	m := d.m
	if m.pending == nil {
		return
	}
	decided := job.Autoscaled()
	for i, p := range changes(m.parallelism, m.pending) {
		if decided[i] != p {
			d.log.Info("the rescale the last leader's autoscaler asked for is not in the job's scaling state; not waiting for it",
				"parallelism", formatParallelism(changes(m.parallelism, m.pending)))
			m.pending = nil
			return
		}
	}
}
