package checkpoint

import (
	"errors"
	"math"
	"strings"

	"github.com/sluicehq/sluice/config"
)

// The execution.checkpointing.* keys, which Config.Configure reads.
var (
	keyInterval = config.Duration("execution.checkpointing.interval",
		"Checkpoint interval; 0 or unset: no periodic checkpoints.")
	keyMode = config.Enum("execution.checkpointing.mode", "The consistency guarantee of checkpoints.",
		trimmed(ParseMode), "EXACTLY_ONCE", "AT_LEAST_ONCE").Default(ExactlyOnce)
	keyTimeout = config.Duration("execution.checkpointing.timeout",
		"A pending checkpoint older than this is aborted.").Default(DefaultTimeout)
	keyMinPause = config.Duration("execution.checkpointing.min-pause",
		"The least pause between the end of a checkpoint and the trigger of the next.").Default(0)
	keyMaxConcurrent = config.Int("execution.checkpointing.max-concurrent-checkpoints",
		"How many checkpoints may be pending at once.").Default(DefaultMaxConcurrent).Check(config.AtLeast(1))
	keyTolerableFailed = config.Int("execution.checkpointing.tolerable-failed-checkpoints",
		"How many consecutive checkpoint failures the job survives; one more fails it.").Default(0).Check(config.AtLeast(0))
	keyUnaligned = config.Bool("execution.checkpointing.unaligned.enabled",
		"Unaligned checkpoints: barriers overtake in-flight data, which is stored with the checkpoint.").
		Default(false).DeprecatedKeys("execution.checkpointing.unaligned")
	keyAlignedTimeout = config.Duration("execution.checkpointing.aligned-checkpoint-timeout",
		"With unaligned checkpoints, a checkpoint starts aligned and switches to unaligned when older than this; 0 starts them unaligned.").
		Default(0).DeprecatedKeys("execution.checkpointing.alignment-timeout")
	keyRetained = config.Int("execution.checkpointing.num-retained", "Completed checkpoints kept.").
			Default(DefaultRetainedCheckpoints).Check(config.AtLeast(1)).DeprecatedKeys("state.checkpoints.num-retained")
	keyRetention = config.Enum("execution.checkpointing.externalized-checkpoint-retention",
		"What happens to the completed checkpoints when the job ends.", trimmed(ParseRetention),
		"NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION").Default(NoExternalizedCheckpoints)
	keyDir = config.String("execution.checkpointing.dir",
		"Where checkpoints are written, `<dir>/<job id>/chk-<n>`: a path, or a URL of a storage scheme the program links (s3://).").
		DeprecatedKeys("state.checkpoints.dir")
	keySavepointDir = config.String("execution.checkpointing.savepoint-dir",
		"The default directory of savepoints.").DeprecatedKeys("state.savepoints.dir")
)

// The restart-strategy.* keys, which ConfigureRestart reads.
var (
	keyRestartType = config.Enum("restart-strategy.type",
		"The restart strategy; unset: none without checkpoints, exponential-delay with them.",
		ParseRestartKind, "none", "fixed-delay", "exponential-delay").DeprecatedKeys("restart-strategy")
	keyFixedAttempts = config.Int("restart-strategy.fixed-delay.attempts",
		"Restarts fixed-delay allows before the job fails.").Default(DefaultFixedDelayAttempts).Check(config.AtLeast(0))
	keyFixedDelay = config.Duration("restart-strategy.fixed-delay.delay",
		"fixed-delay's pause before each restart.").Default(DefaultFixedDelay)
	keyInitialBackoff = config.Duration("restart-strategy.exponential-delay.initial-backoff",
		"exponential-delay's first delay.").Default(DefaultInitialBackoff).Check(config.Positive)
	keyMaxBackoff = config.Duration("restart-strategy.exponential-delay.max-backoff",
		"The longest delay of exponential-delay.").Default(DefaultMaxBackoff).Check(config.Positive)
	keyBackoffMultiplier = config.Float("restart-strategy.exponential-delay.backoff-multiplier",
		"How the delay grows after each failure.").Default(DefaultBackoffMultiplier).Check(config.Between(1, math.MaxFloat64))
	keyJitter = config.Float("restart-strategy.exponential-delay.jitter-factor",
		"Up to this share of the delay is added or taken at random.").Default(DefaultJitterFactor).Check(config.Between(0.0, 1.0))
	keyResetThreshold = config.Duration("restart-strategy.exponential-delay.reset-backoff-threshold",
		"Once the job ran this long without failure, the delay and the attempts start over.").
		Default(DefaultResetBackoffThreshold).Check(config.Positive)
	keyAttemptsBeforeReset = config.Int("restart-strategy.exponential-delay.attempts-before-reset-backoff",
		"Restarts allowed before the backoff resets; one more fails the job.").DefaultText("unbounded").Check(config.AtLeast(1))
)

func trimmed[T any](parse func(string) (T, error)) func(string) (T, error) {
	return func(v string) (T, error) { return parse(strings.TrimSpace(v)) }
}

// ParseRestartKind parses restart-strategy.type: none (off, disable),
// fixed-delay, exponential-delay.
func ParseRestartKind(v string) (RestartKind, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "none", "off", "disable":
		return NoRestart, nil
	case "fixed-delay", "fixeddelay":
		return FixedDelay, nil
	case "exponential-delay", "exponentialdelay":
		return ExponentialDelay, nil
	case "failure-rate", "failurerate":
		return 0, errors.New("failure-rate is not supported: want none, fixed-delay or exponential-delay")
	}
	return 0, errors.New("want none, fixed-delay or exponential-delay")
}

// Configure sets the fields of the execution.checkpointing.* keys conf
// sets (see docs/configuration.md), leaving the others; the error names
// every key whose value it refuses.
func (c *Config) Configure(conf *config.Configuration) error {
	var errs []error
	set := func(err error) { errs = append(errs, err) }
	set(use(conf, keyInterval, &c.Interval))
	set(use(conf, keyMode, &c.Mode))
	set(use(conf, keyTimeout, &c.Timeout))
	set(use(conf, keyMinPause, &c.MinPause))
	set(use(conf, keyMaxConcurrent, &c.MaxConcurrent))
	set(use(conf, keyTolerableFailed, &c.TolerableFailed))
	set(use(conf, keyUnaligned, &c.Unaligned))
	set(use(conf, keyAlignedTimeout, &c.AlignedCheckpointTimeout))
	set(use(conf, keyRetained, &c.RetainedCheckpoints))
	set(use(conf, keyRetention, &c.Retention))
	set(use(conf, keyDir, &c.Directory))
	set(use(conf, keySavepointDir, &c.SavepointDirectory))
	return errors.Join(errs...)
}

// use sets *dst to the key's value when conf sets it.
func use[T any](conf *config.Configuration, k *config.Key[T], dst *T) error {
	v, ok, err := k.Get(conf)
	if ok && err == nil {
		*dst = v
	}
	return err
}

// ConfigureRestart returns the restart strategy of conf's
// restart-strategy.* keys: the kind restart-strategy.type names, with
// its defaults; without it, current when the program chose one
// (currentSet), else Flink's default strategy with checkpoints on
// (exponential-delay) when one of its options is set; with the options
// of that kind that conf sets over it. ok is false when the keys choose
// nothing: none is set, or only options of a strategy not chosen, which
// Flink ignores. A strategy that cannot work is an error naming the key.
func ConfigureRestart(conf *config.Configuration, current RestartConfig, currentSet, checkpointing bool) (rc RestartConfig, ok bool, err error) {
	kind, kindSet, err := keyRestartType.Get(conf)
	if err != nil {
		return rc, false, err
	}
	exponentialKeys := []string{keyInitialBackoff.Name(), keyMaxBackoff.Name(), keyBackoffMultiplier.Name(), keyJitter.Name(),
		keyResetThreshold.Name(), keyAttemptsBeforeReset.Name()}
	anySet := func(keys ...string) bool {
		for _, k := range keys {
			if _, set := conf.Get(k); set {
				return true
			}
		}
		return false
	}
	switch {
	case kindSet:
		switch kind {
		case NoRestart:
			rc = RestartConfig{Kind: NoRestart}
		case FixedDelay:
			rc = FixedDelayRestart(DefaultFixedDelayAttempts, DefaultFixedDelay)
		default:
			rc = ExponentialDelayRestart()
		}
	case !anySet(append(exponentialKeys, keyFixedAttempts.Name(), keyFixedDelay.Name())...):
		return rc, false, nil
	case currentSet:
		rc = current
	case checkpointing && anySet(exponentialKeys...):
		rc = ExponentialDelayRestart()
	default:
		return rc, false, nil // the options of a strategy not chosen are ignored, as in Flink
	}
	var errs []error
	set := func(err error) { errs = append(errs, err) }
	switch rc.Kind {
	case FixedDelay:
		set(use(conf, keyFixedAttempts, &rc.Attempts))
		set(use(conf, keyFixedDelay, &rc.Delay))
	case ExponentialDelay:
		set(use(conf, keyInitialBackoff, &rc.InitialBackoff))
		set(use(conf, keyMaxBackoff, &rc.MaxBackoff))
		set(use(conf, keyBackoffMultiplier, &rc.BackoffMultiplier))
		set(use(conf, keyJitter, &rc.JitterFactor))
		set(use(conf, keyResetThreshold, &rc.ResetBackoffThreshold))
		set(use(conf, keyAttemptsBeforeReset, &rc.AttemptsBeforeResetBackoff))
	}
	if err := errors.Join(errs...); err != nil {
		return rc, false, err
	}
	if err := rc.Validate(); err != nil {
		return rc, false, conf.Blame(err, keyRestartType.Name())
	}
	return rc, true, nil
}
