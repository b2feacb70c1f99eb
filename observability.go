package sluice

import (
	"fmt"

	"github.com/sluicehq/sluice/checkpoint"
)

// CheckpointObserver is told about every checkpoint and savepoint of a job
// that completes or fails, with the job's name: metrics.Collector (the
// checkpoint duration histogram) and tracing.Tracer (a trace per
// checkpoint) are ones. It runs on the checkpoint coordinator's goroutine
// and must return quickly.
type CheckpointObserver interface {
	ObserveCheckpoint(job string, cs checkpoint.Stats)
}

// RestoreObserver is told about every job attempt that restored state,
// with the job's name: tracing.Tracer (a JobInitialization trace) is one.
type RestoreObserver interface {
	ObserveRestore(job string, r RestoreInfo)
}

// JobObserver is given every job the environment starts: metrics.Collector
// (scrapes its figures), api.Server (serves it) and tracing.Tracer (a
// JobStart span) are ones.
type JobObserver interface {
	ObserveJob(j *Job)
}

// WorkerObserver is given the worker's view (its tasks' figures, for its
// own /metrics) when the environment runs as a worker of a job on several
// hosts (cluster.RoleWorker): the job runner's metrics are one.
type WorkerObserver interface {
	ObserveWorker(w WorkerView)
}

// StandbyObserver is told when a coordinator with HA stands by for the
// job's leadership (true) and when it leads (false): the job runner's
// readiness probe passes for a standby.
type StandbyObserver interface {
	ObserveStandby(waiting bool)
}

// WithObservers hands the job's checkpoints to each observer that is a
// CheckpointObserver, its restores to each that is a RestoreObserver, under
// the job's name (set by WithJobName, before or after this option), the
// started job to each JobObserver, a worker's view to each
// WorkerObserver and a coordinator's standing by to each
// StandbyObserver. An observer that is none of these is an invalid
// option.
func WithObservers(observers ...any) Option {
	return func(e *Environment) {
		for _, o := range observers {
			co, isCO := o.(CheckpointObserver)
			ro, isRO := o.(RestoreObserver)
			jo, isJO := o.(JobObserver)
			wo, isWO := o.(WorkerObserver)
			so, isSO := o.(StandbyObserver)
			if isSO {
				e.standbyObservers = append(e.standbyObservers, so)
			}
			if !isCO && !isRO && !isJO && !isWO && !isSO {
				e.addErr(fmt.Errorf("%w: observer %T observes neither jobs, checkpoints nor restores", ErrInvalidOption, o))
				continue
			}
			if isJO {
				e.jobObservers = append(e.jobObservers, jo)
			}
			if isWO {
				e.workerObservers = append(e.workerObservers, wo)
			}
			// The name is read when the listener runs, after every option
			// has been applied.
			if isCO {
				e.cfg.CheckpointListeners = append(e.cfg.CheckpointListeners, func(cs checkpoint.Stats) {
					co.ObserveCheckpoint(e.cfg.JobName, cs)
				})
			}
			if isRO {
				e.cfg.RestoreListeners = append(e.cfg.RestoreListeners, func(r RestoreInfo) {
					ro.ObserveRestore(e.cfg.JobName, r)
				})
			}
		}
	}
}
