package autoscaler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
)

// The job.autoscaler.* keys, Flink's Kubernetes operator's names, defaults
// and units (its AutoScalerOptions), with Flink's deprecated names; the
// loop's interval is the standalone autoscaler's
// autoscaler.standalone.control-loop.interval. Config holds their values;
// FromConfiguration reads them.
var (
	keyEnabled = config.Bool("job.autoscaler.enabled",
		"Run the autoscaler in the coordinator: it sets each vertex's parallelism from its busy time, input rate and the Kafka lag to catch up.").
		Default(false)
	keyScalingEnabled = config.Bool("job.autoscaler.scaling.enabled",
		"Apply the autoscaler's decisions; false: evaluate and log the recommended parallelism only.").Default(true)
	keyInterval = config.Duration("autoscaler.standalone.control-loop.interval",
		"How often the autoscaler reads the job's metrics and evaluates them.").Default(10 * time.Second).Check(config.Positive)
	keyMetricsWindow = config.Duration("job.autoscaler.metrics.window",
		"The span of metrics a decision averages over; nothing is decided before a full window is collected.").
		Default(15 * time.Minute).Check(config.Positive)
	keyStabilization = config.Duration("job.autoscaler.stabilization.interval",
		"After the job starts or rescales, how long its metrics are ignored and nothing scales.").Default(5 * time.Minute)
	keyTargetUtilization = config.Float("job.autoscaler.utilization.target",
		"The share of time a vertex's subtasks should be busy at the target rate: the capacity the autoscaler provides is the target rate over it.").
		Default(0.7).Check(openUnit).DeprecatedKeys("job.autoscaler.target.utilization")
	keyUtilizationBoundary = config.Float("job.autoscaler.target.utilization.boundary",
		"No scaling while every vertex that would change is busy within the target utilization plus or minus this (unless utilization.max or utilization.min is set).").
		Default(0.3).Check(config.Between(0.0, 1.0))
	keyUtilizationMax = config.Float("job.autoscaler.utilization.max",
		"The busy share above which a vertex scales up.").DefaultText("utilization.target + target.utilization.boundary").Check(config.Between(0.0, 1.0))
	keyUtilizationMin = config.Float("job.autoscaler.utilization.min",
		"The busy share below which a vertex scales down.").DefaultText("utilization.target - target.utilization.boundary").Check(config.Between(0.0, 1.0))
	keyScaleDownInterval = config.Duration("job.autoscaler.scale-down.interval",
		"How long a scale-down is delayed: it happens once it has been recommended for this long, to the largest parallelism recommended meanwhile; 0: at once.").
		Default(time.Hour).DeprecatedKeys("job.autoscaler.scale-up.grace-period")
	keyMinParallelism = config.Int("job.autoscaler.vertex.min-parallelism",
		"The smallest parallelism the autoscaler gives a vertex.").Default(1).Check(config.AtLeast(1))
	keyMaxParallelism = config.Int("job.autoscaler.vertex.max-parallelism",
		"The largest parallelism the autoscaler gives a vertex; a vertex's max parallelism and a Kafka source's partition count bound it further.").
		Default(200).Check(config.AtLeast(1))
	keyScaleDownMaxFactor = config.Float("job.autoscaler.scale-down.max-factor",
		"The largest share of its parallelism a vertex loses in one decision: 0.6 keeps at least 40%; 1: no limit.").
		Default(0.6).Check(config.Between(0.0, 1.0))
	keyScaleUpMaxFactor = config.Float("job.autoscaler.scale-up.max-factor",
		"The largest growth of a vertex's parallelism in one decision, as a share of it: 2.0 allows 3 times the parallelism.").
		Default(100000.0).Check(config.AtLeast(0.0))
	keyCatchUpDuration = config.Duration("job.autoscaler.catch-up.duration",
		"The time the job should take to process its backlog (the Kafka source's pending records) after a decision; 0: no backlog-based scaling.").
		Default(30 * time.Minute)
	keyRestartTime = config.Duration("job.autoscaler.restart.time",
		"The expected downtime of a rescale, whose input the capacity must catch up too.").Default(5 * time.Minute)
	keyBacklogThreshold = config.Duration("job.autoscaler.backlog-processing.lag-threshold",
		"A source whose backlog takes longer than this to read at its input rate is processing backlog: the job then scales up to full utilization and does not scale down.").
		Default(5 * time.Minute)
	keyBusyAggregator = config.Choice("job.autoscaler.metrics.busy-time.aggregator",
		"How a vertex's busy share is taken over its subtasks: MAX copes with skew, AVG is steadier with an even load.", "MAX", "AVG", "MIN").
		Default("MAX")
	keyAdjustMode = config.Choice("job.autoscaler.scaling.key-group.partitions.adjust.mode",
		"How the parallelism of a keyed vertex or a Kafka source is aligned to its key groups or partitions: EVENLY_SPREAD to a divisor, MAXIMIZE_UTILISATION to the least parallelism with the same largest share.",
		"EVENLY_SPREAD", "MAXIMIZE_UTILISATION").Default("EVENLY_SPREAD")
)

func openUnit(f float64) error {
	if f <= 0 || f > 1 {
		return errors.New("must be above 0 and at most 1")
	}
	return nil
}

// Aggregator says how a vertex's busy share is taken over its subtasks.
type Aggregator string

const (
	AggregateMax Aggregator = "MAX"
	AggregateAvg Aggregator = "AVG"
	AggregateMin Aggregator = "MIN"
)

// AdjustMode says how a parallelism is aligned to key groups or
// partitions.
type AdjustMode string

const (
	// EvenlySpread aligns to a divisor of the key groups or partitions, so
	// that every subtask has as many.
	EvenlySpread AdjustMode = "EVENLY_SPREAD"
	// MaximizeUtilisation takes the least parallelism at which no subtask
	// has more key groups or partitions than at the computed one.
	MaximizeUtilisation AdjustMode = "MAXIMIZE_UTILISATION"
)

// Config is the autoscaler's settings: the job.autoscaler.* keys (see
// docs/configuration.md). DefaultConfig has Flink's defaults.
type Config struct {
	Enabled        bool
	ScalingEnabled bool
	Interval       time.Duration
	MetricsWindow  time.Duration
	Stabilization  time.Duration
	// TargetUtilization is the busy share at the target rate;
	// UtilizationMax and UtilizationMin bound the busy share within which
	// nothing scales.
	TargetUtilization, UtilizationMax, UtilizationMin float64
	ScaleDownInterval                                 time.Duration
	MinParallelism, MaxParallelism                    int
	ScaleDownMaxFactor, ScaleUpMaxFactor              float64
	CatchUpDuration, RestartTime                      time.Duration
	BacklogThreshold                                  time.Duration
	BusyAggregator                                    Aggregator
	AdjustMode                                        AdjustMode
}

// DefaultConfig returns the settings of no key set: Flink's defaults.
func DefaultConfig() Config {
	c, err := FromConfiguration(nil)
	if err != nil {
		panic(err) // the defaults pass their checks
	}
	return c
}

// FromConfiguration reads the job.autoscaler.* keys of c (a nil c has
// none set). The error names every key whose value is refused, and the
// keys whose values contradict each other.
func FromConfiguration(c *config.Configuration) (Config, error) {
	var cfg Config
	var errs []error
	get := func(err error) { errs = append(errs, err) }
	var agg, mode string
	get(read(c, keyEnabled, &cfg.Enabled))
	get(read(c, keyScalingEnabled, &cfg.ScalingEnabled))
	get(read(c, keyInterval, &cfg.Interval))
	get(read(c, keyMetricsWindow, &cfg.MetricsWindow))
	get(read(c, keyStabilization, &cfg.Stabilization))
	get(read(c, keyTargetUtilization, &cfg.TargetUtilization))
	var boundary float64
	get(read(c, keyUtilizationBoundary, &boundary))
	maxSet, minSet := false, false
	if v, set, err := keyUtilizationMax.Get(c); err != nil {
		get(err)
	} else if maxSet = set; set {
		cfg.UtilizationMax = v
	}
	if v, set, err := keyUtilizationMin.Get(c); err != nil {
		get(err)
	} else if minSet = set; set {
		cfg.UtilizationMin = v
	}
	if !maxSet {
		cfg.UtilizationMax = min(cfg.TargetUtilization+boundary, 1)
	}
	if !minSet {
		cfg.UtilizationMin = max(cfg.TargetUtilization-boundary, 0)
	}
	get(read(c, keyScaleDownInterval, &cfg.ScaleDownInterval))
	get(read(c, keyMinParallelism, &cfg.MinParallelism))
	get(read(c, keyMaxParallelism, &cfg.MaxParallelism))
	get(read(c, keyScaleDownMaxFactor, &cfg.ScaleDownMaxFactor))
	get(read(c, keyScaleUpMaxFactor, &cfg.ScaleUpMaxFactor))
	get(read(c, keyCatchUpDuration, &cfg.CatchUpDuration))
	get(read(c, keyRestartTime, &cfg.RestartTime))
	get(read(c, keyBacklogThreshold, &cfg.BacklogThreshold))
	get(read(c, keyBusyAggregator, &agg))
	get(read(c, keyAdjustMode, &mode))
	cfg.BusyAggregator, cfg.AdjustMode = Aggregator(agg), AdjustMode(mode)
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		if c == nil {
			return cfg, err
		}
		return cfg, c.Blame(err, keyTargetUtilization.Name())
	}
	return cfg, nil
}

func read[T any](c *config.Configuration, k *config.Key[T], dst *T) error {
	v, _, err := k.Get(c)
	if err == nil {
		*dst = v
	}
	return err
}

// ErrConfig is matched by the error of settings that contradict each
// other.
var ErrConfig = errors.New("autoscaler: invalid settings")

// Validate refuses settings the machine cannot work with, naming the
// keys.
func (c Config) Validate() error {
	var bad []string
	if c.MinParallelism < 1 {
		bad = append(bad, fmt.Sprintf("%s %d must be at least 1", keyMinParallelism.Name(), c.MinParallelism))
	}
	if c.MaxParallelism < c.MinParallelism {
		bad = append(bad, fmt.Sprintf("%s %d is below %s %d", keyMaxParallelism.Name(), c.MaxParallelism, keyMinParallelism.Name(), c.MinParallelism))
	}
	if c.TargetUtilization <= 0 || c.TargetUtilization > 1 {
		bad = append(bad, fmt.Sprintf("%s %g must be above 0 and at most 1", keyTargetUtilization.Name(), c.TargetUtilization))
	}
	if c.UtilizationMin > c.TargetUtilization || c.UtilizationMax < c.TargetUtilization {
		bad = append(bad, fmt.Sprintf("%s %g must lie within %s %g and %s %g", keyTargetUtilization.Name(), c.TargetUtilization,
			keyUtilizationMin.Name(), c.UtilizationMin, keyUtilizationMax.Name(), c.UtilizationMax))
	}
	if c.MetricsWindow <= 0 || c.Interval <= 0 {
		bad = append(bad, fmt.Sprintf("%s and %s must be positive", keyMetricsWindow.Name(), keyInterval.Name()))
	}
	if c.ScaleDownMaxFactor < 0 || c.ScaleDownMaxFactor > 1 || c.ScaleUpMaxFactor < 0 {
		bad = append(bad, fmt.Sprintf("%s must be within 0 and 1, %s at least 0", keyScaleDownMaxFactor.Name(), keyScaleUpMaxFactor.Name()))
	}
	switch c.BusyAggregator {
	case AggregateMax, AggregateAvg, AggregateMin:
	default:
		bad = append(bad, fmt.Sprintf("%s %q: want MAX, AVG or MIN", keyBusyAggregator.Name(), c.BusyAggregator))
	}
	switch c.AdjustMode {
	case EvenlySpread, MaximizeUtilisation:
	default:
		bad = append(bad, fmt.Sprintf("%s %q: want EVENLY_SPREAD or MAXIMIZE_UTILISATION", keyAdjustMode.Name(), c.AdjustMode))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(bad, "; "))
	}
	return nil
}
