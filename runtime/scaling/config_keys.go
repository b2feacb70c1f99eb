package scaling

import (
	"errors"

	"github.com/sluicehq/sluice/config"
)

// The keys of the adaptive scheduler's modes and timing (Flink's names),
// which Config.Configure reads.
var (
	keyMode = config.Enum("scheduler-mode",
		"reactive: the job's parallelism follows the task slots the workers offer (a cluster's); unset: it changes only when its resource requirements ask.",
		ParseMode, "reactive", "default").Default(Default)
	keyCooldown = config.Duration("jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling",
		"The least time between a rescale and one the job decides by itself (reactive mode).").
		Default(DefaultCooldown).Check(config.Positive).DeprecatedKeys("jobmanager.adaptive-scheduler.scaling-interval.min")
	keyStabilization = config.Duration("jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout",
		"How long the task slots must stay the same before a job in the reactive mode follows them.").
		Default(DefaultStabilization).Check(config.Positive)
)

// Configure sets the fields conf sets through the keys above.
func (c *Config) Configure(conf *config.Configuration) error {
	var errs []error
	if v, ok, err := keyMode.Get(conf); err != nil {
		errs = append(errs, err)
	} else if ok {
		c.Mode = v
	}
	if v, ok, err := keyCooldown.Get(conf); err != nil {
		errs = append(errs, err)
	} else if ok {
		c.Cooldown = v
	}
	if v, ok, err := keyStabilization.Get(conf); err != nil {
		errs = append(errs, err)
	} else if ok {
		c.Stabilization = v
	}
	return errors.Join(errs...)
}
