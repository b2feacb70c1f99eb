package metrics_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/metrics/report"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
)

// fakeWriter reports fixed figures as a Kafka sink's writer does.
type fakeWriter struct{ m kafkasink.SinkMetrics }

func (f fakeWriter) Report(emit func(report.Sample)) { kafkasink.ReportSinkMetrics(f.m, emit) }

// A Kafka sink writer's figures are exported for its subtask.
func TestKafkaSinkMetrics(t *testing.T) {
	counts := make([]uint64, len(kafkasink.CommitLatencyBuckets)+1)
	counts[2], counts[len(counts)-1] = 3, 1 // three within 5 ms, one slower than every bucket
	reg := registryOf(connectorJob{name: "job", vertex: "out", operator: "out", reporters: []report.Reporter{fakeWriter{kafkasink.SinkMetrics{
		TransactionsCommitted: 4, TransactionsAborted: 2, CommitLatencyCounts: counts, CommitLatencySum: 12 * time.Second,
		TransactionsLost: 1, RecordsSkipped: 7, RecordsDeadLettered: 5,
	}}}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				got[mf.GetName()] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				got[mf.GetName()+"_count"] = float64(h.GetSampleCount())
				got[mf.GetName()+"_sum"] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					if b.GetUpperBound() == 0.005 {
						got[mf.GetName()+"_le_0.005"] = float64(b.GetCumulativeCount())
					}
				}
			}
		}
	}
	want := map[string]float64{
		"sluice_kafka_sink_transactionsCommitted":          4,
		"sluice_kafka_sink_transactionsAborted":            2,
		"sluice_kafka_sink_transactionsLost":               1,
		"sluice_kafka_sink_recordsSkipped":                 7,
		"sluice_kafka_sink_recordsDeadLettered":            5,
		"sluice_kafka_sink_commitLatency_seconds_count":    4,
		"sluice_kafka_sink_commitLatency_seconds_sum":      12,
		"sluice_kafka_sink_commitLatency_seconds_le_0.005": 3,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	checkValues(t, gather(t, reg), wantValue{"sluice_kafka_sink_transactionsCommitted",
		map[string]string{"job_name": "job", "vertex": "out", "subtask": "0", "operator": "out"}, 4})
}
