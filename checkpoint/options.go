package checkpoint

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Mode is the consistency guarantee of checkpoints
// (execution.checkpointing.mode).
type Mode uint8

const (
	// ExactlyOnce aligns barriers (or persists in-flight data when
	// unaligned): every record is reflected exactly once in the state of a
	// completed checkpoint. Flink's default.
	ExactlyOnce Mode = iota
	// AtLeastOnce never blocks a channel: records that arrive after a
	// barrier on one channel but before it on another are in the snapshot
	// and replayed after a restore.
	AtLeastOnce
)

func (m Mode) String() string {
	switch m {
	case ExactlyOnce:
		return "EXACTLY_ONCE"
	case AtLeastOnce:
		return "AT_LEAST_ONCE"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses Flink's spelling (EXACTLY_ONCE, AT_LEAST_ONCE), in any
// case, with '-' accepted for '_'.
func ParseMode(s string) (Mode, error) {
	switch strings.ReplaceAll(strings.ToUpper(s), "-", "_") {
	case "EXACTLY_ONCE":
		return ExactlyOnce, nil
	case "AT_LEAST_ONCE":
		return AtLeastOnce, nil
	}
	return 0, fmt.Errorf("%w: execution.checkpointing.mode %q: want EXACTLY_ONCE or AT_LEAST_ONCE", ErrInvalidConfig, s)
}

// Retention says what happens to completed checkpoints when the job
// terminates (execution.checkpointing.externalized-checkpoint-retention).
// Subsumed checkpoints are always discarded, whatever the retention.
//
// The zero value, the default, is DeleteOnCancellation: a job that fails
// for good keeps its latest checkpoint, so that the next start resumes
// from it rather than from no state (Flink's default,
// NO_EXTERNALIZED_CHECKPOINTS, deletes it: the next start would write
// again the output its transactions committed). Only an explicit
// NoExternalizedCheckpoints deletes the checkpoints of a failed job.
type Retention uint8

const (
	// DeleteOnCancellation (the default) keeps the checkpoints when the
	// job fails for good and deletes them when it is cancelled or
	// finishes.
	DeleteOnCancellation Retention = iota
	// NoExternalizedCheckpoints deletes the completed checkpoints when the
	// job reaches any terminal state: finished, cancelled or failed for good
	// (the restart strategy gave up). A crashed process deletes nothing, so
	// the next run can still restore.
	NoExternalizedCheckpoints
	// RetainOnCancellation keeps the checkpoints when the job fails or is
	// cancelled; only a finished job deletes them.
	RetainOnCancellation
)

func (r Retention) String() string {
	switch r {
	case NoExternalizedCheckpoints:
		return "NO_EXTERNALIZED_CHECKPOINTS"
	case DeleteOnCancellation:
		return "DELETE_ON_CANCELLATION"
	case RetainOnCancellation:
		return "RETAIN_ON_CANCELLATION"
	}
	return fmt.Sprintf("Retention(%d)", uint8(r))
}

// ParseRetention parses Flink's spelling of the retention, in any case, with
// '-' accepted for '_'.
func ParseRetention(s string) (Retention, error) {
	switch strings.ReplaceAll(strings.ToUpper(s), "-", "_") {
	case "NO_EXTERNALIZED_CHECKPOINTS":
		return NoExternalizedCheckpoints, nil
	case "DELETE_ON_CANCELLATION":
		return DeleteOnCancellation, nil
	case "RETAIN_ON_CANCELLATION":
		return RetainOnCancellation, nil
	}
	return 0, fmt.Errorf("%w: execution.checkpointing.externalized-checkpoint-retention %q: want NO_EXTERNALIZED_CHECKPOINTS, DELETE_ON_CANCELLATION or RETAIN_ON_CANCELLATION", ErrInvalidConfig, s)
}

// Termination is how a job ended, for Retention.Discards.
type Termination uint8

const (
	// JobFinished: every task reached the end of its input.
	JobFinished Termination = iota
	// JobCanceled: the user cancelled the job.
	JobCanceled
	// JobFailed: the job failed and the restart strategy gave up.
	JobFailed
)

func (t Termination) String() string {
	switch t {
	case JobFinished:
		return "finished"
	case JobCanceled:
		return "canceled"
	case JobFailed:
		return "failed"
	}
	return fmt.Sprintf("Termination(%d)", uint8(t))
}

// Discards reports whether the completed checkpoints are deleted when the
// job ends with t (Flink's CheckpointProperties for each retention policy).
func (r Retention) Discards(t Termination) bool {
	switch t {
	case JobFinished:
		return true
	case JobCanceled:
		return r != RetainOnCancellation
	case JobFailed:
		return r == NoExternalizedCheckpoints
	}
	return false
}

// Flink's defaults for the checkpoint options.
const (
	DefaultTimeout             = 10 * time.Minute
	DefaultMaxConcurrent       = 1
	DefaultRetainedCheckpoints = 1
	// MinInterval is the shortest checkpoint interval and timeout Flink
	// accepts (CheckpointConfig's MINIMAL_CHECKPOINT_TIME, 10 ms).
	MinInterval = 10 * time.Millisecond
)

// Config holds the checkpoint options, named after Flink's
// execution.checkpointing.* keys. The zero Config is checkpointing off with
// Flink's defaults: zero Timeout, MaxConcurrent and RetainedCheckpoints mean
// the defaults (see WithDefaults); every other zero is the default itself.
type Config struct {
	// Interval between periodic checkpoints; 0 turns periodic checkpoints
	// off (execution.checkpointing.interval, no default).
	Interval time.Duration
	// Mode is exactly-once or at-least-once
	// (execution.checkpointing.mode, default EXACTLY_ONCE).
	Mode Mode
	// Timeout after which a pending checkpoint is aborted
	// (execution.checkpointing.timeout, default 10 min).
	Timeout time.Duration
	// MinPause is the least time between the end of one checkpoint and the
	// trigger of the next periodic one (execution.checkpointing.min-pause,
	// default 0).
	MinPause time.Duration
	// MaxConcurrent is how many checkpoints may be pending at once
	// (execution.checkpointing.max-concurrent-checkpoints, default 1).
	MaxConcurrent int
	// TolerableFailed is how many consecutive checkpoint failures the job
	// survives; one more fails the job
	// (execution.checkpointing.tolerable-failed-checkpoints, default 0).
	TolerableFailed int
	// Unaligned enables unaligned checkpoints
	// (execution.checkpointing.unaligned.enabled, default false).
	Unaligned bool
	// AlignedCheckpointTimeout, with Unaligned on, starts every checkpoint
	// aligned and switches it to unaligned when it is older than this; 0
	// starts them unaligned (execution.checkpointing.aligned-checkpoint-timeout,
	// default 0). Ignored when Unaligned is off.
	AlignedCheckpointTimeout time.Duration
	// RetainedCheckpoints is how many completed checkpoints are kept
	// (execution.checkpointing.num-retained, default 1).
	RetainedCheckpoints int
	// Retention says what happens to completed checkpoints when the job ends
	// (execution.checkpointing.externalized-checkpoint-retention, default
	// DELETE_ON_CANCELLATION: a failed job keeps its latest checkpoint).
	Retention Retention
	// Directory is where checkpoints are written: <Directory>/<job>/chk-<n>
	// (execution.checkpointing.dir, no default; required when checkpointing
	// is on).
	Directory string
	// SavepointDirectory is the default target of savepoints
	// (execution.checkpointing.savepoint-dir); unset, savepoints go to
	// <Directory>/savepoints (see SavepointTarget).
	SavepointDirectory string
}

// DefaultSavepointSubdir is the directory under the checkpoint directory
// (execution.checkpointing.dir) where savepoints go when
// execution.checkpointing.savepoint-dir is not set: beside the job
// directories, as Flink users set state.savepoints.dir beside
// state.checkpoints.dir. A savepoint belongs to its user, not to the job:
// nothing that cleans a job directory ever touches it.
const DefaultSavepointSubdir = "savepoints"

// SavepointTarget returns the directory a savepoint goes to when its
// request names none, and the configuration key it comes from:
// SavepointDirectory (execution.checkpointing.savepoint-dir), else
// <Directory>/savepoints (execution.checkpointing.dir); "" when neither
// is set. Directory may be a path or a URL (s3://bucket/checkpoints).
func (c Config) SavepointTarget() (dir, key string) {
	switch {
	case c.SavepointDirectory != "":
		return c.SavepointDirectory, "execution.checkpointing.savepoint-dir"
	case c.Directory != "":
		return strings.TrimRight(c.Directory, "/") + "/" + DefaultSavepointSubdir, "execution.checkpointing.dir"
	}
	return "", ""
}

// DefaultConfig returns Flink's defaults with checkpointing off.
func DefaultConfig() Config { return Config{}.WithDefaults() }

// WithDefaults returns c with the zero fields whose default is not zero
// (Timeout, MaxConcurrent, RetainedCheckpoints) set to Flink's defaults.
func (c Config) WithDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.RetainedCheckpoints == 0 {
		c.RetainedCheckpoints = DefaultRetainedCheckpoints
	}
	return c
}

// Enabled reports whether periodic checkpoints are on.
func (c Config) Enabled() bool { return c.Interval > 0 }

// Errors returned by Validate; each is wrapped with the offending values.
var (
	// ErrInvalidConfig is wrapped by every Validate error that is not one
	// of the more specific ones below.
	ErrInvalidConfig = errors.New("invalid checkpoint configuration")
	// ErrUnalignedAtLeastOnce: unaligned checkpoints with at-least-once mode.
	ErrUnalignedAtLeastOnce = errors.New("unaligned checkpoints need exactly-once mode")
	// ErrUnalignedConcurrent: unaligned checkpoints with more than one
	// concurrent checkpoint.
	ErrUnalignedConcurrent = errors.New("unaligned checkpoints allow only one concurrent checkpoint")
)

// Validate refuses configurations that cannot work, with an error that
// names the option and says why.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Interval < 0 {
		bad("execution.checkpointing.interval is %s: must not be negative (0 turns checkpointing off)", c.Interval)
	} else if c.Interval > 0 && c.Interval < MinInterval {
		bad("execution.checkpointing.interval is %s: must be at least %s", c.Interval, MinInterval)
	}
	if c.Mode != ExactlyOnce && c.Mode != AtLeastOnce {
		bad("execution.checkpointing.mode is %s: want EXACTLY_ONCE or AT_LEAST_ONCE", c.Mode)
	}
	if c.Timeout < MinInterval {
		bad("execution.checkpointing.timeout is %s: must be at least %s", c.Timeout, MinInterval)
	}
	if c.MinPause < 0 {
		bad("execution.checkpointing.min-pause is %s: must not be negative", c.MinPause)
	}
	if c.MaxConcurrent < 1 {
		bad("execution.checkpointing.max-concurrent-checkpoints is %d: must be at least 1", c.MaxConcurrent)
	}
	if c.TolerableFailed < 0 {
		bad("execution.checkpointing.tolerable-failed-checkpoints is %d: must not be negative", c.TolerableFailed)
	}
	if c.AlignedCheckpointTimeout < 0 {
		bad("execution.checkpointing.aligned-checkpoint-timeout is %s: must not be negative (0 starts unaligned)", c.AlignedCheckpointTimeout)
	}
	if c.RetainedCheckpoints < 1 {
		bad("execution.checkpointing.num-retained is %d: must be at least 1, or there would be nothing to restore from", c.RetainedCheckpoints)
	}
	if c.Retention > RetainOnCancellation {
		bad("execution.checkpointing.externalized-checkpoint-retention is %s", c.Retention)
	}
	if c.Enabled() && c.Directory == "" {
		bad("execution.checkpointing.dir is empty: checkpoints need a directory when execution.checkpointing.interval is set")
	}
	if c.Unaligned && c.Mode == AtLeastOnce {
		errs = append(errs, fmt.Errorf("%w (execution.checkpointing.unaligned.enabled=true with execution.checkpointing.mode=AT_LEAST_ONCE): "+
			"at-least-once never blocks a channel, so there is no alignment for unaligned checkpoints to skip, "+
			"and its snapshots would mix records from both sides of a barrier with persisted in-flight data that replays them again; "+
			"use EXACTLY_ONCE with unaligned checkpoints, or turn unaligned off", ErrUnalignedAtLeastOnce))
	}
	if c.Unaligned && c.MaxConcurrent > 1 {
		errs = append(errs, fmt.Errorf("%w (execution.checkpointing.unaligned.enabled=true with execution.checkpointing.max-concurrent-checkpoints=%d): "+
			"a task persists the in-flight data of one checkpoint at a time, and the priority barrier of a second checkpoint would overtake "+
			"data that the first one still has to persist; set max-concurrent-checkpoints to 1", ErrUnalignedConcurrent, c.MaxConcurrent))
	}
	return errors.Join(errs...)
}

// BarrierOptions returns the options of a checkpoint of the given kind under
// this configuration. Savepoints are always aligned; so is every checkpoint
// in at-least-once mode, where alignment is never waited for anyway.
func (c Config) BarrierOptions(kind Kind) Options {
	if kind == KindSavepoint {
		return SavepointOptions()
	}
	o := Options{Kind: kind, Alignment: Aligned}
	if c.Mode == ExactlyOnce && c.Unaligned {
		if c.AlignedCheckpointTimeout > 0 {
			o.Alignment = AlignedWithTimeout
			o.AlignedTimeout = c.AlignedCheckpointTimeout
		} else {
			o.Alignment = Unaligned
		}
	}
	return o
}
