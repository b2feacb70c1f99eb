package kafka

import (
	"strconv"

	"github.com/sluicehq/sluice/metrics/report"
)

// The families a reader reports with its task's metrics (the runtime
// reads every reader that implements report.Reporter: the REST API and
// the metrics collector, which puts job_name, vertex, subtask and
// operator before the labels given here). They are Flink's KafkaSource
// metrics, the records lag first: the Kafka consumer's records-lag-max
// (KafkaSourceReader.KafkaConsumer.records-lag-max), the source's
// pendingRecords, per partition currentOffset and committedOffset
// (KafkaSourceReader.topic.<topic>.partition.<partition>.*), and the
// partition's own records-lag; then the partition's high watermark and
// the counters of bad records (Flink's counterpart of those is a
// source's numRecordsInErrors).
var (
	partitionLabels = []string{"topic", "partition"}

	famRecordsLagMax = &report.Family{Name: "kafka_source_records_lag_max", Kind: report.Gauge,
		Flink: "KafkaSourceReader.KafkaConsumer.records-lag-max",
		Help:  "Records the reader is behind the end it can read, in the partition where it is the most behind."}
	famPendingRecords = &report.Family{Name: "kafka_source_pendingRecords", Kind: report.Gauge, Flink: "pendingRecords",
		Help: "Records the reader is behind over all its partitions."}
	famCurrentOffset   = partitionFamily(report.Gauge, "currentOffset", "currentOffset", "Offset of the next record the reader emits.")
	famCommittedOffset = partitionFamily(report.Gauge, "committedOffset", "committedOffset", "Offset last committed to the consumer group on a completed checkpoint.")
	famRecordsLag      = partitionFamily(report.Gauge, "recordsLag", "records-lag", "Records the reader is behind the end of the partition it can read.")
	famHighWatermark   = partitionFamily(report.Gauge, "highWatermark", "highWatermark", "The partition's high watermark as of the last fetch.")

	famBadRecordsSkipped = partitionFamily(report.Counter, "numBadRecordsSkipped", "numBadRecordsSkipped",
		"Undecodable records (the decoder refused or panicked on them) the bad-record policy skipped instead of emitting, dead-lettered ones included.")
	famBadRecordsDeadLettered = partitionFamily(report.Counter, "numBadRecordsDeadLettered", "numBadRecordsDeadLettered",
		"Skipped undecodable records whose copy the dead-letter topic acknowledged.")
)

func partitionFamily(k report.Kind, name, flink, help string) *report.Family {
	return &report.Family{Name: "kafka_source_" + name, Help: help, Kind: k, Labels: partitionLabels,
		Flink: "KafkaSourceReader.topic.{topic}.partition.{partition}." + flink}
}

func init() {
	report.Register(famRecordsLagMax, famPendingRecords, famCurrentOffset, famCommittedOffset, famRecordsLag, famHighWatermark,
		famBadRecordsSkipped, famBadRecordsDeadLettered)
}

// Report sends the reader's figures (it implements report.Reporter: the
// runtime reads it with the task's metrics). It may be called from any
// goroutine.
func (r *Reader[T]) Report(emit func(report.Sample)) { ReportPartitions(r.Metrics(), emit) }

// ReportPartitions reports the figures of a reader's partitions as Report
// does: the offsets and the bad-record counters of every partition, the
// committed offset, high watermark and lag where known, and the largest
// and the sum of the lags that are known. A wrapper of a reader (or a
// test) reports through it.
func ReportPartitions(parts []PartitionMetrics, emit func(report.Sample)) {
	var pending, most int64
	known := false
	for _, p := range parts {
		labels := []string{p.Topic, strconv.Itoa(int(p.Partition))}
		put := func(f *report.Family, v int64) {
			emit(report.Sample{Family: f, LabelValues: labels, Value: float64(v)})
		}
		put(famCurrentOffset, p.CurrentOffset)
		put(famBadRecordsSkipped, p.SkippedRecords)
		put(famBadRecordsDeadLettered, p.DeadLetteredRecords)
		if p.CommittedOffset >= 0 {
			put(famCommittedOffset, p.CommittedOffset)
		}
		if p.HighWatermark >= 0 {
			put(famHighWatermark, p.HighWatermark)
		}
		if p.Lag >= 0 {
			put(famRecordsLag, p.Lag)
			pending += p.Lag
			most = max(most, p.Lag)
			known = true
		}
	}
	if known {
		emit(report.Sample{Family: famRecordsLagMax, Value: float64(most)})
		emit(report.Sample{Family: famPendingRecords, Value: float64(pending)})
	}
}
