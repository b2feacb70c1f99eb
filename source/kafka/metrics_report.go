package kafka

import (
	"strconv"

	"github.com/sluicehq/sluice/metrics/report"
)

// The families a reader reports to the metrics collector (package
// metrics, through package report): Flink's KafkaSourceReader metrics per
// partition, and the counters of bad records (Flink's counterpart of the
// first is a source's numRecordsInErrors). The collector puts job_name,
// vertex and subtask before the labels given here.
var (
	partitionLabels = []string{"topic", "partition"}

	famCurrentOffset   = partitionFamily(report.Gauge, "currentOffset", "Offset of the next record the reader emits.")
	famCommittedOffset = partitionFamily(report.Gauge, "committedOffset", "Offset last committed to the consumer group on a completed checkpoint.")
	famHighWatermark   = partitionFamily(report.Gauge, "highWatermark", "The partition's high watermark as of the last fetch.")
	famRecordsLag      = partitionFamily(report.Gauge, "recordsLag", "Records the reader is behind the end of the partition it can read.")
	famPendingRecords  = &report.Family{Scope: report.Subtask, Name: "kafka_source_pendingRecords", Kind: report.Gauge,
		Help: "Records the reader is behind over all its partitions."}
	famBadRecordsSkipped = partitionFamily(report.Counter, "numBadRecordsSkipped",
		"Undecodable records (the decoder refused or panicked on them) the bad-record policy skipped instead of emitting, dead-lettered ones included.")
	famBadRecordsDeadLettered = partitionFamily(report.Counter, "numBadRecordsDeadLettered",
		"Skipped undecodable records whose copy the dead-letter topic acknowledged.")
)

func partitionFamily(k report.Kind, name, help string) *report.Family {
	return &report.Family{Scope: report.Subtask, Name: "kafka_source_" + name, Help: help, Kind: k, Labels: partitionLabels}
}

func init() {
	report.Register(famCurrentOffset, famCommittedOffset, famHighWatermark, famRecordsLag, famPendingRecords,
		famBadRecordsSkipped, famBadRecordsDeadLettered)
}

// Report sends the reader's figures to the metrics collector (it
// implements report.Reporter, so metrics.InstrumentSource reports it). It
// may be called from any goroutine.
func (r *Reader[T]) Report(emit func(report.Sample)) { ReportPartitions(r.Metrics(), emit) }

// ReportPartitions reports the figures of a reader's partitions as Report
// does: the offsets and the bad-record counters of every partition, the
// committed offset, high watermark and lag where known, and the lag over
// the partitions whose lag is known. A wrapper of a reader (or a test)
// reports through it.
func ReportPartitions(parts []PartitionMetrics, emit func(report.Sample)) {
	var pending int64
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
			known = true
		}
	}
	if known {
		emit(report.Sample{Family: famPendingRecords, Value: float64(pending)})
	}
}
