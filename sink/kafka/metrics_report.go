package kafka

import "github.com/sluicehq/sluice/metrics/report"

// The families a sink's writers report, each its subtask's figures (the
// runtime reads them with the task's metrics: the REST API and the
// metrics collector, which puts job_name, vertex, subtask and operator
// before them). Flink's KafkaSink has no counterpart: their Flink
// identifiers are under a group KafkaSink.
var (
	famTransactionsCommitted = sinkFamily(report.Counter, "transactionsCommitted", "Kafka transactions the sink committed.")
	famTransactionsAborted   = sinkFamily(report.Counter, "transactionsAborted", "Lingering Kafka transactions the sink aborted when its writers started.")
	famTransactionsLost      = sinkFamily(report.Counter, "transactionsLost",
		"Transactions of completed checkpoints the broker had aborted (transaction timeout) that the sink passed over (IgnoreFailuresAfterTransactionTimeout): their records are lost.")
	famRecordsSkipped      = sinkFamily(report.Counter, "recordsSkipped", "Records the serializer refused that the sink skipped.")
	famRecordsDeadLettered = sinkFamily(report.Counter, "recordsDeadLettered", "Records the serializer refused that the sink wrote to its dead-letter topic.")
	famCommitLatency       = sinkFamily(report.Histogram, "commitLatency_seconds", "Time from a commit request to the broker's answer.")
)

func sinkFamily(k report.Kind, name, help string) *report.Family {
	return &report.Family{Scope: report.Subtask, Name: "kafka_sink_" + name, Help: help, Kind: k, Flink: "KafkaSink." + name}
}

func init() {
	report.Register(famTransactionsCommitted, famTransactionsAborted, famTransactionsLost,
		famRecordsSkipped, famRecordsDeadLettered, famCommitLatency)
}

// Report sends the writer's subtask's figures (its committer's commits
// included): the runtime reads them with the task's metrics.
func (w *writer[T]) Report(emit func(report.Sample)) {
	ReportSinkMetrics(w.s.cfg.stats.of(w.subtask).snapshot(), emit)
}

// Report sends the writer's subtask's figures (its committer's commits
// included): the runtime reads them with the task's metrics.
func (w *transactionalWriter[T]) Report(emit func(report.Sample)) {
	ReportSinkMetrics(w.s.cfg.stats.of(w.subtask).snapshot(), emit)
}

// Report sends the sink's figures over all its subtasks.
//
// Deprecated: the runtime reports each subtask's figures from its
// writer, with no wiring (metrics.Collector.AddSink does nothing).
func (s *Sink[T]) Report(emit func(report.Sample)) { ReportSinkMetrics(s.Metrics(), emit) }

// ReportSinkMetrics reports m as a writer does: the counters, and the
// commit latency as a histogram over CommitLatencyBuckets. A wrapper of
// a sink (or a test) reports through it.
func ReportSinkMetrics(m SinkMetrics, emit func(report.Sample)) {
	for _, c := range []struct {
		f *report.Family
		v int64
	}{
		{famTransactionsCommitted, m.TransactionsCommitted},
		{famTransactionsAborted, m.TransactionsAborted},
		{famTransactionsLost, m.TransactionsLost},
		{famRecordsSkipped, m.RecordsSkipped},
		{famRecordsDeadLettered, m.RecordsDeadLettered},
	} {
		emit(report.Sample{Family: c.f, Value: float64(c.v)})
	}
	buckets := make(map[float64]uint64, len(CommitLatencyBuckets))
	var cum uint64
	for i, ub := range CommitLatencyBuckets {
		if i < len(m.CommitLatencyCounts) {
			cum += m.CommitLatencyCounts[i]
		}
		buckets[ub] = cum
	}
	if n := len(m.CommitLatencyCounts); n > len(CommitLatencyBuckets) {
		cum += m.CommitLatencyCounts[n-1]
	}
	emit(report.Sample{Family: famCommitLatency, Count: cum, Sum: m.CommitLatencySum.Seconds(), Buckets: buckets})
}
