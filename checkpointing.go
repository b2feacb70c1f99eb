package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
)

// CheckpointingMode is exactly-once or at-least-once
// (execution.checkpointing.mode).
type CheckpointingMode = checkpoint.Mode

const (
	// ExactlyOnce aligns barriers (or persists in-flight data when
	// unaligned): state reflects every record exactly once.
	ExactlyOnce = checkpoint.ExactlyOnce
	// AtLeastOnce never blocks a channel: after a restore some records may
	// be processed again.
	AtLeastOnce = checkpoint.AtLeastOnce
)

// RestartConfig says whether and when a failed job restarts from its
// latest checkpoint (restart-strategy.type and its options):
// WithRestartStrategy takes it.
type RestartConfig = checkpoint.RestartConfig

// RestartStrategy is RestartConfig, by the name earlier versions gave it
// (checkpoint.RestartStrategy is the strategy's state machine, another
// type).
//
// Deprecated: use RestartConfig.
type RestartStrategy = RestartConfig

// NoRestart fails the job at its first failure.
func NoRestart() RestartConfig { return checkpoint.RestartConfig{Kind: checkpoint.NoRestart} }

// FixedDelayRestart restarts up to attempts times, delay apart
// (restart-strategy.fixed-delay.attempts / .delay).
func FixedDelayRestart(attempts int, delay time.Duration) RestartConfig {
	return checkpoint.FixedDelayRestart(attempts, delay)
}

// ExponentialDelayRestart restarts with Flink's exponential-delay defaults
// (1 s initial backoff, 1 min max, multiplier 1.5, jitter 0.1); it is the
// default when checkpointing is on.
func ExponentialDelayRestart() RestartConfig { return checkpoint.ExponentialDelayRestart() }

// WithCheckpointing turns on periodic checkpoints every interval
// (execution.checkpointing.interval) into dir (execution.checkpointing.dir).
func WithCheckpointing(interval time.Duration, dir string) Option {
	return func(e *Environment) {
		if interval <= 0 {
			e.addErr(fmt.Errorf("%w: checkpoint interval must be positive, got %v", ErrInvalidOption, interval))
			return
		}
		e.cfg.Checkpoint.Interval = interval
		e.cfg.Checkpoint.Directory = dir
	}
}

// WithCheckpointConfig edits the whole checkpoint configuration, with
// Flink's option names on its fields; Execute validates it.
func WithCheckpointConfig(edit func(c *checkpoint.Config)) Option {
	return func(e *Environment) { edit(&e.cfg.Checkpoint) }
}

// WithCheckpointingMode sets exactly-once (default) or at-least-once.
func WithCheckpointingMode(m CheckpointingMode) Option {
	return func(e *Environment) { e.cfg.Checkpoint.Mode = m }
}

// WithUnalignedCheckpoints turns unaligned checkpoints on
// (execution.checkpointing.unaligned.enabled); with alignedTimeout > 0 each
// checkpoint starts aligned and switches to unaligned when it is older
// than that (execution.checkpointing.aligned-checkpoint-timeout).
func WithUnalignedCheckpoints(alignedTimeout time.Duration) Option {
	return func(e *Environment) {
		e.cfg.Checkpoint.Unaligned = true
		e.cfg.Checkpoint.AlignedCheckpointTimeout = alignedTimeout
	}
}

// WithSavepointDir sets where savepoints go by default
// (execution.checkpointing.savepoint-dir). Unset, they go to
// <checkpoint dir>/savepoints, beside the job directories.
func WithSavepointDir(dir string) Option {
	return func(e *Environment) { e.cfg.Checkpoint.SavepointDirectory = dir }
}

// WithRestartStrategy sets the restart strategy.
func WithRestartStrategy(r RestartConfig) Option {
	return func(e *Environment) { e.cfg.Restart, e.cfg.RestartSet = r, true }
}

// WithRestoreFrom starts the job from a savepoint or checkpoint directory
// (the one holding _metadata), as `flink run -s`
// (execution.state-recovery.path), rather than from the job's own latest
// checkpoint. The claim mode (WithClaimMode, default NoClaim) says whether
// the job may delete it. A coordinator taking over a job under HA resumes
// from the HA store's checkpoint instead: the job ran past the snapshot.
func WithRestoreFrom(path string) Option {
	return func(e *Environment) { e.cfg.RestoreFrom = path }
}

// WithResumeFromLatestCheckpoint does what a job does by default: it
// starts from the latest usable completed checkpoint of its checkpoint
// directory (<dir>/<job id>/) when there is one, as after its process was
// killed or suspended, and does nothing when its recorded result says it
// finished.
//
// Deprecated: resuming is the default; the option changes nothing. Use
// WithFreshStart to start from no state instead, WithRestoreFrom to start
// from a given savepoint or checkpoint.
func WithResumeFromLatestCheckpoint() Option { return func(*Environment) {} }

// WithStateBackend sets the keyed state backend (default: the heap
// backend).
func WithStateBackend(f runtime.StateBackendFactory) Option {
	return func(e *Environment) { e.cfg.StateBackend = f }
}

// checkpointValidator is implemented by sinks and sources whose settings
// must fit the checkpoint and restart configuration (a Kafka transaction
// timeout must outlast the longest wait of a transaction for its commit).
type checkpointValidator interface {
	ValidateCheckpointing(t sink.CheckpointTiming) error
}

func (e *Environment) validateCheckpointing() error {
	cfg := e.cfg.Checkpoint.WithDefaults()
	restart := e.cfg.Restart
	if !e.cfg.RestartSet {
		restart = checkpoint.DefaultRestartConfig(cfg.Enabled())
	}
	timing := sink.CheckpointTiming{
		Interval: cfg.Interval, Timeout: cfg.Timeout, MinPause: cfg.MinPause, TolerableFailures: cfg.TolerableFailed,
		RestartDelayOption: "restart-strategy.type none",
	}
	// The longest wait before a restart: a transaction whose checkpoint
	// completed just before a failure is committed by the next attempt.
	switch restart.Kind {
	case checkpoint.FixedDelay:
		if restart.Attempts > 0 {
			timing.RestartDelay = restart.Delay
			timing.RestartDelayOption = fmt.Sprintf("restart-strategy.fixed-delay.delay %v", restart.Delay)
		}
	case checkpoint.ExponentialDelay:
		// The jitter may add up to jitter-factor × max-backoff.
		timing.RestartDelay = restart.MaxBackoff + time.Duration(restart.JitterFactor*float64(restart.MaxBackoff))
		timing.RestartDelayOption = fmt.Sprintf("restart-strategy.exponential-delay.max-backoff %v", restart.MaxBackoff)
		if restart.JitterFactor > 0 {
			timing.RestartDelayOption += fmt.Sprintf(" × (1 + restart-strategy.exponential-delay.jitter-factor %v) = %v",
				restart.JitterFactor, timing.RestartDelay)
		}
	}
	for _, v := range e.validators {
		if err := v.ValidateCheckpointing(timing); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
	}
	return nil
}

// WithCheckpointListener calls fn with the statistics of every checkpoint
// and savepoint that completes or fails (id, end-to-end duration, sizes,
// persisted in-flight data, and every subtask's figures). It runs on the
// checkpoint coordinator's goroutine and must return quickly.
func WithCheckpointListener(fn func(checkpoint.Stats)) Option {
	return func(e *Environment) { e.cfg.CheckpointListeners = append(e.cfg.CheckpointListeners, fn) }
}

// WithCheckpointStorageFS writes checkpoints through fsys instead of the
// operating system's filesystem: for tests that inject storage faults.
func WithCheckpointStorageFS(fsys storage.FS) Option {
	return func(e *Environment) { e.cfg.CheckpointFS = fsys }
}

// RestoreInfo says what a job attempt restored and how long it took.
type RestoreInfo = runtime.RestoreInfo

// WithRestoreListener calls fn once per job attempt that restored state
// from a checkpoint or savepoint, and once per failover region's restart
// that did (RestoreInfo.Attempt is then the attempt the region restarted
// in).
func WithRestoreListener(fn func(RestoreInfo)) Option {
	return func(e *Environment) { e.cfg.RestoreListeners = append(e.cfg.RestoreListeners, fn) }
}
