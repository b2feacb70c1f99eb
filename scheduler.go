package sluice

import (
	"fmt"

	"github.com/sluicehq/sluice/runtime/scaling"
)

// SchedulerConfig is how a running job's parallelism changes (Flink's
// adaptive scheduler): the scheduler mode (scheduler-mode: reactive
// follows the task slots of a cluster's workers) and the timing of the
// rescales it decides by itself.
type SchedulerConfig = scaling.Config

// The scheduler modes.
const (
	// SchedulerDefault: the parallelism changes only when the job's
	// resource requirements ask (Job.SetResourceRequirements, PUT
	// /jobs/:jobid/resource-requirements, sluice rescale).
	SchedulerDefault = scaling.Default
	// SchedulerReactive: the parallelism follows the task slots the
	// workers of a cluster offer (scheduler-mode: reactive).
	SchedulerReactive = scaling.Reactive
)

// WithScheduler edits the job's SchedulerConfig (the scheduler-mode and
// jobmanager.adaptive-scheduler.* keys). Durations left zero take Flink's
// defaults; negative ones are refused.
func WithScheduler(edit func(*SchedulerConfig)) Option {
	return func(e *Environment) {
		c := e.cfg.Scaling
		edit(&c)
		if c.Cooldown < 0 || c.Stabilization < 0 {
			e.addErr(fmt.Errorf("%w: the scheduler's cooldown (%v) and stabilization timeout (%v) must not be negative",
				ErrInvalidOption, c.Cooldown, c.Stabilization))
			return
		}
		e.cfg.Scaling = c
	}
}
