package kafka

// PartitionMetrics is a reader's view of one assigned partition, for lag
// monitoring (Prometheus gauges later): the figures Flink's Kafka source
// reports as currentOffset, committedOffset and records-lag.
type PartitionMetrics struct {
	Topic     string
	Partition int32
	// CurrentOffset is the offset of the next record the reader emits.
	CurrentOffset int64
	// CommittedOffset is the offset last committed to the group on a
	// completed checkpoint, -1 if none.
	CommittedOffset int64
	// HighWatermark and LastStableOffset are the partition's end offsets
	// as of the last fetch, -1 before the first.
	HighWatermark    int64
	LastStableOffset int64
	// Lag is the number of offsets the reader is behind the end it can
	// read (the last stable offset under read_committed, else the high
	// watermark), -1 while unknown.
	Lag int64
	// Finished is true once a bounded reader reached the partition's
	// stopping offset.
	Finished bool
	// SkippedRecords counts the partition's records the bad-record policy
	// skipped (the decoder refused or panicked on them), dead-lettered
	// ones included.
	SkippedRecords int64
	// DeadLetteredRecords counts the skipped records whose copy the
	// dead-letter topic acknowledged.
	DeadLetteredRecords int64
}

// Metrics returns the figures of every assigned partition. It may be
// called from any goroutine.
func (r *Reader[T]) Metrics() []PartitionMetrics {
	r.mu.Lock()
	parts := append([]*partition(nil), r.order...)
	r.mu.Unlock()
	out := make([]PartitionMetrics, 0, len(parts))
	for _, p := range parts {
		m := PartitionMetrics{
			Topic: p.tp.topic, Partition: p.tp.partition,
			CurrentOffset: p.next.Load(), CommittedOffset: p.committed.Load(),
			HighWatermark: p.hwm.Load(), LastStableOffset: p.lso.Load(),
			Lag: -1, Finished: p.done.Load(),
			SkippedRecords: p.skipped.Load(), DeadLetteredRecords: p.deadLettered.Load(),
		}
		end := m.LastStableOffset
		if r.cfg.readUncomm {
			end = m.HighWatermark
		}
		if end >= 0 {
			m.Lag = max(end-m.CurrentOffset, 0)
		}
		out = append(out, m)
	}
	return out
}

// SkippedRecords returns how many undecodable records the reader skipped
// (or sent to the dead-letter topic). It may be called from any goroutine.
func (r *Reader[T]) SkippedRecords() int64 { return r.skipped.Load() }

// DeadLetteredRecords returns how many skipped records the dead-letter
// topic acknowledged. It may be called from any goroutine.
func (r *Reader[T]) DeadLetteredRecords() int64 { return r.deadLettered.Load() }
