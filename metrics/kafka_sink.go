package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	kafkasink "github.com/sluicehq/sluice/sink/kafka"
)

// KafkaSink is what the collector reads of a Kafka sink (*kafka.Sink[T]
// from sink/kafka is one): its transactions committed, aborted and lost,
// its commit latency, and the records its serializer refused.
type KafkaSink interface {
	Metrics() kafkasink.SinkMetrics
}

var (
	sinkLabels                = []string{"job_name", "vertex"}
	descTransactionsCommitted = prometheus.NewDesc(Prefix+"kafka_sink_transactionsCommitted", "Kafka transactions the sink committed.", sinkLabels, nil)
	descTransactionsAborted   = prometheus.NewDesc(Prefix+"kafka_sink_transactionsAborted", "Lingering Kafka transactions the sink aborted when its writers started.", sinkLabels, nil)
	descTransactionsLost      = prometheus.NewDesc(Prefix+"kafka_sink_transactionsLost", "Transactions of completed checkpoints the broker had aborted (transaction timeout) that the sink passed over (IgnoreFailuresAfterTransactionTimeout): their records are lost.", sinkLabels, nil)
	descRecordsSkipped        = prometheus.NewDesc(Prefix+"kafka_sink_recordsSkipped", "Records the serializer refused that the sink skipped.", sinkLabels, nil)
	descRecordsDeadLettered   = prometheus.NewDesc(Prefix+"kafka_sink_recordsDeadLettered", "Records the serializer refused that the sink wrote to its dead-letter topic.", sinkLabels, nil)
	descCommitLatency         = prometheus.NewDesc(Prefix+"kafka_sink_commitLatency_seconds", "Time from a commit request to the broker's answer.", sinkLabels, nil)
	kafkaSinkDescs            = []*prometheus.Desc{descTransactionsCommitted, descTransactionsAborted, descTransactionsLost,
		descRecordsSkipped, descRecordsDeadLettered, descCommitLatency}
)

// AddKafkaSink reports the transactions of s under job and the sink's
// vertex (operator) name, replacing the sink registered there before.
func (c *Collector) AddKafkaSink(job, vertex string, s KafkaSink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(job)
	if e.sinks == nil {
		e.sinks = map[string]KafkaSink{}
	}
	e.sinks[vertex] = s
}

func collectKafkaSinks(ch chan<- prometheus.Metric, job string, sinks map[string]KafkaSink) {
	for vertex, s := range sinks {
		m := s.Metrics()
		ch <- prometheus.MustNewConstMetric(descTransactionsCommitted, prometheus.CounterValue, float64(m.TransactionsCommitted), job, vertex)
		ch <- prometheus.MustNewConstMetric(descTransactionsAborted, prometheus.CounterValue, float64(m.TransactionsAborted), job, vertex)
		ch <- prometheus.MustNewConstMetric(descTransactionsLost, prometheus.CounterValue, float64(m.TransactionsLost), job, vertex)
		ch <- prometheus.MustNewConstMetric(descRecordsSkipped, prometheus.CounterValue, float64(m.RecordsSkipped), job, vertex)
		ch <- prometheus.MustNewConstMetric(descRecordsDeadLettered, prometheus.CounterValue, float64(m.RecordsDeadLettered), job, vertex)
		buckets := map[float64]uint64{}
		var cum uint64
		for i, ub := range kafkasink.CommitLatencyBuckets {
			if i < len(m.CommitLatencyCounts) {
				cum += m.CommitLatencyCounts[i]
			}
			buckets[ub] = cum
		}
		if n := len(m.CommitLatencyCounts); n > len(kafkasink.CommitLatencyBuckets) {
			cum += m.CommitLatencyCounts[n-1]
		}
		ch <- prometheus.MustNewConstHistogram(descCommitLatency, cum, m.CommitLatencySum.Seconds(), buckets, job, vertex)
	}
}
