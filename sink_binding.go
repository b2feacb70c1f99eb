package sluice

import (
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
)

// jobAwareSink is a sink that learns the job's facts before it starts
// (sink.JobAware), with its operator.
type jobAwareSink struct {
	node *runtime.Node
	sink sink.JobAware
}

// bindSinks tells every job-aware sink the job's id, its own uid and the
// job's checkpointing, and refuses two sinks that claim the same
// exclusive thing (sink.Exclusive), naming both.
func (e *Environment) bindSinks() error {
	if len(e.jobAware) == 0 {
		return nil
	}
	g, err := runtime.Compile(&e.plan, e.cfg)
	if err != nil {
		return err
	}
	job := sink.JobInfo{JobID: runtime.JobIDOf(e.cfg, g), Checkpointing: sinkCheckpointing(e.cfg.Checkpoint), Logger: e.cfg.Logger}
	if job.Logger == nil {
		job.Logger = slog.Default()
	}
	type claim struct {
		node *runtime.Node
		ex   sink.Exclusive
	}
	claimed := map[string]claim{}
	for _, s := range e.jobAware {
		job.UID, job.Name = s.node.UID, s.node.Name
		exs, err := s.sink.BindJob(job)
		if err != nil {
			return fmt.Errorf("%w: sink %q (uid %q): %w", ErrInvalidOption, s.node.Name, s.node.UID, err)
		}
		for _, ex := range exs {
			if prev, dup := claimed[ex.What]; dup {
				return fmt.Errorf("%w: sinks %q (uid %q) and %q (uid %q) both use %s: %s",
					ErrInvalidOption, prev.node.Name, prev.node.UID, s.node.Name, s.node.UID, ex.What, ex.Why)
			}
			claimed[ex.What] = claim{s.node, ex}
		}
	}
	return nil
}

// sinkCheckpointing is the job's checkpointing as its sinks see it.
func sinkCheckpointing(c checkpoint.Config) sink.Checkpointing {
	switch {
	case !c.Enabled():
		return sink.NoCheckpoints
	case c.Mode == checkpoint.AtLeastOnce:
		return sink.AtLeastOnceCheckpoints
	}
	return sink.ExactlyOnceCheckpoints
}
