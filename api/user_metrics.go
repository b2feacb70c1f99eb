package api

import (
	"strconv"

	"github.com/sluicehq/sluice/operators"
)

// userMetricValues are the ids and values of a subtask's user-defined
// metrics as Flink's REST API names them: "<operator>.<name>" for a
// counter, gauge or meter (its rate), "<name>_count" for a meter's
// events, and a histogram's "<name>_count", "_min", "_max", "_mean" and
// "_p50" ... "_p999".
func userMetricValues(us []operators.UserMetric) [][2]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var out [][2]string
	for _, u := range us {
		id := u.Operator + "." + u.Name
		switch u.Kind {
		case operators.MetricHistogram:
			out = append(out, [2]string{id + "_count", strconv.FormatInt(u.Count, 10)})
			if h := u.Histogram; h != nil {
				out = append(out, [2]string{id + "_min", f(h.Min)}, [2]string{id + "_max", f(h.Max)}, [2]string{id + "_mean", f(h.Mean)})
				for _, q := range operators.HistogramQuantiles {
					qs := strconv.FormatFloat(q, 'g', -1, 64)
					out = append(out, [2]string{id + "_" + flinkQuantiles[qs], f(h.Quantiles[qs])})
				}
			}
		case operators.MetricMeter:
			out = append(out, [2]string{id, f(u.Value)}, [2]string{id + "_count", strconv.FormatInt(u.Count, 10)})
		default:
			out = append(out, [2]string{id, f(u.Value)})
		}
	}
	return out
}

// flinkQuantiles name the reported quantiles as Flink's histogram dump.
var flinkQuantiles = map[string]string{"0.5": "p50", "0.75": "p75", "0.95": "p95", "0.98": "p98", "0.99": "p99", "0.999": "p999"}
