package checkpoint

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// RestartKind names a restart strategy (restart-strategy.type).
type RestartKind uint8

const (
	// NoRestart fails the job on the first failure ("none", "off",
	// "disable"). Flink's default when checkpointing is off.
	NoRestart RestartKind = iota
	// FixedDelay restarts a fixed number of times with a fixed delay
	// ("fixed-delay").
	FixedDelay
	// ExponentialDelay restarts with a growing delay, reset after the job
	// ran long enough ("exponential-delay"). Flink's default when
	// checkpointing is on.
	ExponentialDelay
)

func (k RestartKind) String() string {
	switch k {
	case NoRestart:
		return "none"
	case FixedDelay:
		return "fixed-delay"
	case ExponentialDelay:
		return "exponential-delay"
	}
	return fmt.Sprintf("RestartKind(%d)", uint8(k))
}

// RestartConfig configures the restart strategy with Flink's
// restart-strategy.* options. Build it with DefaultRestartConfig,
// FixedDelayRestart or ExponentialDelayRestart, which start from Flink's
// defaults; zero fields are taken literally.
type RestartConfig struct {
	// Kind is restart-strategy.type.
	Kind RestartKind

	// Attempts is how many restarts fixed-delay allows before the job fails
	// (restart-strategy.fixed-delay.attempts, default 1).
	Attempts int
	// Delay is fixed-delay's pause before each restart
	// (restart-strategy.fixed-delay.delay, default 1 s).
	Delay time.Duration

	// InitialBackoff is exponential-delay's first delay
	// (restart-strategy.exponential-delay.initial-backoff, default 1 s).
	InitialBackoff time.Duration
	// MaxBackoff caps the delay
	// (restart-strategy.exponential-delay.max-backoff, default 1 min).
	MaxBackoff time.Duration
	// BackoffMultiplier grows the delay after each failure
	// (restart-strategy.exponential-delay.backoff-multiplier, default 1.5).
	BackoffMultiplier float64
	// JitterFactor adds or subtracts up to this share of the delay, at
	// random (restart-strategy.exponential-delay.jitter-factor, default 0.1).
	JitterFactor float64
	// ResetBackoffThreshold: once the job ran this long without failure
	// after a restart, the delay and the attempt count start over
	// (restart-strategy.exponential-delay.reset-backoff-threshold, default
	// 1 h).
	ResetBackoffThreshold time.Duration
	// AttemptsBeforeResetBackoff is how many restarts are allowed before the
	// backoff resets; one more fails the job
	// (restart-strategy.exponential-delay.attempts-before-reset-backoff,
	// default "infinite", math.MaxInt32).
	AttemptsBeforeResetBackoff int
}

// Flink's defaults of the restart-strategy.* options.
const (
	DefaultFixedDelayAttempts         = 1
	DefaultFixedDelay                 = time.Second
	DefaultInitialBackoff             = time.Second
	DefaultMaxBackoff                 = time.Minute
	DefaultBackoffMultiplier          = 1.5
	DefaultJitterFactor               = 0.1
	DefaultResetBackoffThreshold      = time.Hour
	DefaultAttemptsBeforeResetBackoff = math.MaxInt32
)

// DefaultRestartConfig is Flink's default restart strategy: none when
// checkpointing is off, exponential-delay with its defaults when it is on.
func DefaultRestartConfig(checkpointing bool) RestartConfig {
	if !checkpointing {
		return RestartConfig{Kind: NoRestart}
	}
	return ExponentialDelayRestart()
}

// FixedDelayRestart is the fixed-delay strategy with the given attempts and
// delay.
func FixedDelayRestart(attempts int, delay time.Duration) RestartConfig {
	return RestartConfig{Kind: FixedDelay, Attempts: attempts, Delay: delay}
}

// ExponentialDelayRestart is the exponential-delay strategy with Flink's
// defaults; change fields to tune it.
func ExponentialDelayRestart() RestartConfig {
	return RestartConfig{
		Kind:                       ExponentialDelay,
		InitialBackoff:             DefaultInitialBackoff,
		MaxBackoff:                 DefaultMaxBackoff,
		BackoffMultiplier:          DefaultBackoffMultiplier,
		JitterFactor:               DefaultJitterFactor,
		ResetBackoffThreshold:      DefaultResetBackoffThreshold,
		AttemptsBeforeResetBackoff: DefaultAttemptsBeforeResetBackoff,
	}
}

// Validate refuses settings that cannot work.
func (c RestartConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch c.Kind {
	case NoRestart:
		return nil
	case FixedDelay:
		if c.Attempts < 0 {
			return bad("restart-strategy.fixed-delay.attempts is %d: must not be negative", c.Attempts)
		}
		if c.Delay < 0 {
			return bad("restart-strategy.fixed-delay.delay is %s: must not be negative", c.Delay)
		}
		return nil
	case ExponentialDelay:
		switch {
		case c.InitialBackoff <= 0:
			return bad("restart-strategy.exponential-delay.initial-backoff is %s: must be positive", c.InitialBackoff)
		case c.MaxBackoff < c.InitialBackoff:
			return bad("restart-strategy.exponential-delay.max-backoff is %s: must be at least initial-backoff (%s)", c.MaxBackoff, c.InitialBackoff)
		case c.BackoffMultiplier < 1 || math.IsNaN(c.BackoffMultiplier) || math.IsInf(c.BackoffMultiplier, 0):
			return bad("restart-strategy.exponential-delay.backoff-multiplier is %v: must be at least 1", c.BackoffMultiplier)
		case c.JitterFactor < 0 || c.JitterFactor > 1 || math.IsNaN(c.JitterFactor):
			return bad("restart-strategy.exponential-delay.jitter-factor is %v: must be in [0, 1]", c.JitterFactor)
		case c.ResetBackoffThreshold <= 0:
			return bad("restart-strategy.exponential-delay.reset-backoff-threshold is %s: must be positive", c.ResetBackoffThreshold)
		case c.AttemptsBeforeResetBackoff < 1:
			return bad("restart-strategy.exponential-delay.attempts-before-reset-backoff is %d: must be at least 1", c.AttemptsBeforeResetBackoff)
		}
		return nil
	}
	return bad("restart-strategy.type is %s", c.Kind)
}

// RestartStrategy decides whether and when a failed job restarts. It is a
// deterministic function of the failure times it is told about (and of its
// jitter source); it reads no clock. Not safe for concurrent use.
type RestartStrategy struct {
	cfg    RestartConfig
	jitter func() float64

	failed      bool          // at least one failure seen
	attempt     int           // restarts counted since the last reset
	backoff     time.Duration // un-jittered delay of the last attempt
	nextRestart time.Time     // when the last granted restart happens
	lastOK      bool          // the last decision
}

// NewRestartStrategy builds the strategy. jitter returns uniform values in
// [0, 1) for exponential-delay's jitter; nil uses math/rand/v2.
func NewRestartStrategy(cfg RestartConfig, jitter func() float64) (*RestartStrategy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if jitter == nil {
		jitter = rand.Float64
	}
	return &RestartStrategy{cfg: cfg, jitter: jitter}, nil
}

// Config returns the strategy's configuration.
func (s *RestartStrategy) Config() RestartConfig { return s.cfg }

// NextDelay is told that the job failed at failureTime and returns how long
// to wait before restarting, or ok=false when the job must fail for good.
// A failure at or before the restart already granted (several tasks
// failing for one cause) is merged into that restart: it gets the remaining
// delay and uses no attempt, as in Flink.
func (s *RestartStrategy) NextDelay(failureTime time.Time) (delay time.Duration, ok bool) {
	if s.failed && !failureTime.After(s.nextRestart) {
		if !s.lastOK {
			return 0, false
		}
		return s.nextRestart.Sub(failureTime), true
	}
	first := !s.failed
	s.failed = true
	switch s.cfg.Kind {
	case FixedDelay:
		s.attempt++
		if s.attempt > s.cfg.Attempts {
			return s.decide(failureTime, 0, false)
		}
		return s.decide(failureTime, s.cfg.Delay, true)
	case ExponentialDelay:
		if first || failureTime.Sub(s.nextRestart) >= s.cfg.ResetBackoffThreshold {
			s.attempt = 0
			s.backoff = s.cfg.InitialBackoff
		} else {
			next := time.Duration(float64(s.backoff) * s.cfg.BackoffMultiplier)
			if next > s.cfg.MaxBackoff || next < 0 {
				next = s.cfg.MaxBackoff
			}
			s.backoff = next
		}
		s.attempt++
		if s.attempt > s.cfg.AttemptsBeforeResetBackoff {
			return s.decide(failureTime, 0, false)
		}
		d := s.backoff
		if f := s.cfg.JitterFactor; f > 0 {
			d += time.Duration((2*s.jitter() - 1) * f * float64(s.backoff))
			if d < 0 {
				d = 0
			}
		}
		return s.decide(failureTime, d, true)
	default:
		return s.decide(failureTime, 0, false)
	}
}

func (s *RestartStrategy) decide(t time.Time, d time.Duration, ok bool) (time.Duration, bool) {
	s.nextRestart = t.Add(d)
	s.lastOK = ok
	return d, ok
}

// Attempts returns the restarts counted since the last backoff reset
// (fixed-delay: since the start).
func (s *RestartStrategy) Attempts() int { return s.attempt }
