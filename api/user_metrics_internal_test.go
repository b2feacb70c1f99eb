package api

import (
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
)

// TestUserMetricsInSubtaskMetrics: the user metrics a group reports are
// listed among a subtask's metrics under Flink's ids.
func TestUserMetricsInSubtaskMetrics(t *testing.T) {
	g := operators.NewMetricGroup()
	g.Counter("records").Add(5)
	g.Gauge("lag", func() float64 { return 1.5 })
	h := g.Histogram("sizes")
	for v := 1; v <= 100; v++ {
		h.Update(float64(v))
	}
	g.Meter("rate").MarkEvents(3)
	vals := map[string]string{}
	for _, kv := range subtaskMetricValues(runtime.TaskMetrics{User: g.Report("enrich")}) {
		vals[kv[0]] = kv[1]
	}
	for id, want := range map[string]string{"enrich.records": "5", "enrich.lag": "1.5", "enrich.sizes_count": "100",
		"enrich.sizes_min": "1", "enrich.sizes_max": "100", "enrich.sizes_median": "50", "enrich.sizes_p90": "90", "enrich.sizes_p99": "99",
		"enrich.sizes_stddev": strconv.FormatFloat(math.Sqrt(101*100/12.0), 'g', -1, 64), "enrich.rate_count": "3"} {
		if vals[id] != want {
			t.Errorf("%s = %q, want %q (all: %v)", id, vals[id], want, slices.Sorted(mapsKeys(vals)))
		}
	}
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
