package api

import (
	"strconv"

	"github.com/sluicehq/sluice/metrics/report"
)

// connectorMetricValues are the ids and values of a subtask's connector
// figures (its readers' and writers', package report) as Flink's REST
// API names an operator's metrics: "<operator>.<identifier>", the
// family's Flink identifier with its labels' values put in
// ("lines.KafkaSourceReader.KafkaConsumer.records-lag-max",
// "lines.KafkaSourceReader.topic.lines.partition.0.currentOffset",
// "lines.pendingRecords"); a histogram as "<id>_count" and "<id>_mean".
// A figure of a family this program does not register is left out.
func connectorMetricValues(figs []report.Figure) [][2]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var out [][2]string
	for _, fig := range figs {
		fam := report.Lookup(fig.Family)
		if fam == nil {
			continue
		}
		id := fig.Operator + "." + fam.FlinkID(fig.Labels)
		if fam.Kind == report.Histogram {
			mean := 0.0
			if fig.Count > 0 {
				mean = fig.Sum / float64(fig.Count)
			}
			out = append(out, [2]string{id + "_count", strconv.FormatUint(fig.Count, 10)}, [2]string{id + "_mean", f(mean)})
			continue
		}
		out = append(out, [2]string{id, f(fig.Value)})
	}
	return out
}
