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
	ObserveCheckpoint(job string, cs checkpoint.CheckpointStats)
}

// RestoreObserver is told about every job attempt that restored state,
// with the job's name: tracing.Tracer (a JobInitialization trace) is one.
type RestoreObserver interface {
	ObserveRestore(job string, r RestoreInfo)
}

// WithObservers hands the job's checkpoints to each observer that is a
// CheckpointObserver and its restores to each that is a RestoreObserver,
// under the job's name (set by WithJobName, before or after this option).
// An observer that is neither is an invalid option.
//
// The observers that read the running job (metrics.Collector.AddJob,
// api.Server.AddJob, tracing.Tracer.JobStarted) are given the Job that
// ExecuteAsync returns.
func WithObservers(observers ...any) Option {
	return func(e *Environment) {
		for _, o := range observers {
			co, isCO := o.(CheckpointObserver)
			ro, isRO := o.(RestoreObserver)
			if !isCO && !isRO {
				e.addErr(fmt.Errorf("%w: observer %T observes neither checkpoints nor restores", ErrInvalidOption, o))
				continue
			}
			// The name is read when the listener runs, after every option
			// has been applied.
			if isCO {
				e.cfg.CheckpointListeners = append(e.cfg.CheckpointListeners, func(cs checkpoint.CheckpointStats) {
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
