package sluice

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/runtime/autoscaler"
)

// AutoscalerConfig is the autoscaler's settings (the job.autoscaler.*
// keys, package runtime/autoscaler); the autoscaler runs with the job
// when Enabled is true.
type AutoscalerConfig = autoscaler.Config

// WithAutoscaler edits the job's AutoscalerConfig, which starts from
// Flink's defaults (autoscaler.DefaultConfig: off) or the job.autoscaler.*
// keys of WithConfiguration. Settings that contradict each other are
// refused (autoscaler.ErrConfig) naming the keys.
func WithAutoscaler(edit func(*AutoscalerConfig)) Option {
	return func(e *Environment) {
		c := e.autoscalerConfig()
		edit(&c)
		if err := c.Validate(); err != nil {
			e.addErr(fmt.Errorf("%w: %w", ErrInvalidOption, err))
			return
		}
		e.autoscale = &c
	}
}

// autoscalerConfig is the settings so far: Flink's defaults until an
// option or the configuration set them.
func (e *Environment) autoscalerConfig() AutoscalerConfig {
	if e.autoscale != nil {
		return *e.autoscale
	}
	return autoscaler.DefaultConfig()
}

// configureAutoscaler reads the job.autoscaler.* keys of c.
func configureAutoscaler(e *Environment, c *Configuration) {
	cfg, err := autoscaler.FromConfiguration(c)
	if err != nil {
		e.addErr(err)
		return
	}
	e.autoscale = &cfg
}

// validateAutoscaler refuses an autoscaler the job cannot follow: its
// decisions are rescales in place, which restore a checkpoint.
func (e *Environment) validateAutoscaler() error {
	if e.autoscale == nil || !e.autoscale.Enabled {
		return nil
	}
	if !e.cfg.Checkpoint.Enabled() {
		return fmt.Errorf("%w: job.autoscaler.enabled: the autoscaler rescales the job in place, at a checkpoint; the job has no checkpointing (execution.checkpointing.interval)",
			ErrInvalidOption)
	}
	return nil
}

// startAutoscaler starts the autoscaler of a job that has just started,
// when enabled, until ctx ends or the job does; a job graph the
// autoscaler cannot follow cancels the job and is returned.
func (e *Environment) startAutoscaler(ctx context.Context, j *Job) error {
	if e.autoscale == nil || !e.autoscale.Enabled {
		return nil
	}
	if _, err := autoscaler.Start(ctx, j, *e.autoscale, e.cfg.Logger); err != nil {
		j.Cancel()
		<-j.Done()
		return fmt.Errorf("job.autoscaler.enabled: %w", err)
	}
	return nil
}
