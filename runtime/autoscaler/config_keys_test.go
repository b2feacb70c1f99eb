package autoscaler

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

// The defaults are Flink's (the operator's AutoScalerOptions).
func TestDefaultsAreFlinks(t *testing.T) {
	got := DefaultConfig()
	target, boundary := 0.7, 0.3 // as the machine computes it, not as a constant
	want := Config{Enabled: false, ScalingEnabled: true, Interval: 10 * time.Second, MetricsWindow: 15 * time.Minute,
		Stabilization: 5 * time.Minute, TargetUtilization: 0.7, UtilizationMax: 1, UtilizationMin: target - boundary,
		ScaleDownInterval: time.Hour, MinParallelism: 1, MaxParallelism: 200, ScaleDownMaxFactor: 0.6, ScaleUpMaxFactor: 100000,
		CatchUpDuration: 30 * time.Minute, RestartTime: 5 * time.Minute, BacklogThreshold: 5 * time.Minute,
		BusyAggregator: AggregateMax, AdjustMode: EvenlySpread}
	if got != want {
		t.Fatalf("defaults\n%+v\nwant\n%+v", got, want)
	}
}

// Flink's deprecated names set the keys, and values are read in Flink's
// units.
func TestFlinkNames(t *testing.T) {
	c := config.New()
	for k, v := range map[string]string{
		"job.autoscaler.enabled": "true", "job.autoscaler.target.utilization": "0.6",
		"job.autoscaler.scale-up.grace-period": "10 min", "job.autoscaler.utilization.max": "0.8",
		"job.autoscaler.metrics.busy-time.aggregator": "avg", "job.autoscaler.catch-up.duration": "0",
	} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := FromConfiguration(c)
	if err != nil {
		t.Fatal(err)
	}
	target, boundary := 0.6, 0.3
	if !cfg.Enabled || cfg.TargetUtilization != 0.6 || cfg.ScaleDownInterval != 10*time.Minute || cfg.UtilizationMax != 0.8 ||
		cfg.UtilizationMin != target-boundary || cfg.BusyAggregator != AggregateAvg || cfg.CatchUpDuration != 0 {
		t.Fatalf("read %+v", cfg)
	}
}

// Settings that contradict each other are refused naming the key the
// user must change.
func TestContradictingSettings(t *testing.T) {
	c := config.New()
	if err := c.Set("job.autoscaler.utilization.min", "0.8"); err != nil {
		t.Fatal(err)
	}
	_, err := FromConfiguration(c)
	var ce *config.Error
	if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Key != "job.autoscaler.utilization.min" {
		t.Fatalf("utilization.min above the target: %v", err)
	}
}
