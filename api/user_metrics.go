package api

import (
	"strconv"

	"github.com/sluicehq/sluice/operators"
)

// userMetricValues are the ids and values of a subtask's user-defined
// metrics as Flink's REST API names them (its metric store):
// "<operator>.<name>" for a counter, gauge or meter (its rate), and a
// histogram's "<name>_min", "_max", "_mean", "_median", "_stddev",
// "_p75", "_p90", "_p95", "_p98", "_p99" and "_p999". Sluice adds
// "<name>_count", a meter's or histogram's count of events, which Flink's
// REST API does not show.
func userMetricValues(us []operators.UserMetric) [][2]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var out [][2]string
	for _, u := range us {
		id := u.Operator + "." + u.Name
		switch u.Kind {
		case operators.MetricHistogram:
			out = append(out, [2]string{id + "_count", strconv.FormatInt(u.Count, 10)})
			if h := u.Histogram; h != nil {
				out = append(out, [2]string{id + "_min", f(h.Min)}, [2]string{id + "_max", f(h.Max)},
					[2]string{id + "_mean", f(h.Mean)}, [2]string{id + "_stddev", f(h.StdDev)})
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

// flinkQuantiles name the reported quantiles as Flink's metric store
// names a histogram's.
var flinkQuantiles = map[string]string{"0.5": "median", "0.75": "p75", "0.9": "p90", "0.95": "p95", "0.98": "p98",
	"0.99": "p99", "0.999": "p999"}
