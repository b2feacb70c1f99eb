package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
)

// User scope: the metrics user functions register in their operator's
// MetricGroup (Flink's user-defined metrics), labelled by operator and
// metric name.
var (
	userLabels = []string{labelJob, labelVertex, labelSubtask, "operator", "name"}

	descUserCounter   = prometheus.NewDesc(Prefix+"user_counter", "A user-defined counter.", userLabels, nil)
	descUserGauge     = prometheus.NewDesc(Prefix+"user_gauge", "A user-defined gauge.", userLabels, nil)
	descUserMeterRate = prometheus.NewDesc(Prefix+"user_meter_rate", "A user-defined meter: events per second over the last minute.", userLabels, nil)
	descUserMeterN    = prometheus.NewDesc(Prefix+"user_meter_count", "A user-defined meter: events in all.", userLabels, nil)
	descUserHistogram = prometheus.NewDesc(Prefix+"user_histogram", "A user-defined histogram: quantiles over its last 1024 values (the sum is the window's mean times the count).", userLabels, nil)
)

func init() {
	allDescs = append(allDescs, descUserCounter, descUserGauge, descUserMeterRate, descUserMeterN, descUserHistogram)
}

// collectUser sends the user-defined metrics of one task.
func collectUser(ch chan<- prometheus.Metric, job string, t runtime.TaskMetrics) {
	sub := strconv.Itoa(t.Subtask)
	for _, u := range t.User {
		labels := []string{job, t.Vertex, sub, u.Operator, u.Name}
		switch u.Kind {
		case operators.MetricCounter:
			ch <- prometheus.MustNewConstMetric(descUserCounter, prometheus.CounterValue, u.Value, labels...)
		case operators.MetricGauge:
			ch <- prometheus.MustNewConstMetric(descUserGauge, prometheus.GaugeValue, u.Value, labels...)
		case operators.MetricMeter:
			ch <- prometheus.MustNewConstMetric(descUserMeterRate, prometheus.GaugeValue, u.Value, labels...)
			ch <- prometheus.MustNewConstMetric(descUserMeterN, prometheus.CounterValue, float64(u.Count), labels...)
		case operators.MetricHistogram:
			q := map[float64]float64{}
			if u.Histogram != nil {
				for k, v := range u.Histogram.Quantiles {
					if f, err := strconv.ParseFloat(k, 64); err == nil {
						q[f] = v
					}
				}
			}
			ch <- prometheus.MustNewConstSummary(descUserHistogram, uint64(max(u.Count, 0)), u.Value*float64(u.Count), q, labels...)
		}
	}
}
