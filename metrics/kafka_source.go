package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/kafka"
)

// The Kafka source's counters of bad records (records its decoder refused
// or panicked on), per partition: those the bad-record policy skipped,
// dead-lettered ones included, and those whose dead-letter copy was
// acknowledged. Flink's counterpart of the first is a source's
// numRecordsInErrors.
var (
	descBadRecordsSkipped      = kafkaDesc("numBadRecordsSkipped", "Undecodable records (the decoder refused or panicked on them) the bad-record policy skipped instead of emitting, dead-lettered ones included.", partitionLabels)
	descBadRecordsDeadLettered = kafkaDesc("numBadRecordsDeadLettered", "Skipped undecodable records whose copy the dead-letter topic acknowledged.", partitionLabels)
)

// The collector describes its metrics from allDescs; the bad-record
// counters join them here, beside the code that reports them.
func init() {
	allDescs = append(allDescs, descBadRecordsSkipped, descBadRecordsDeadLettered)
}

// KafkaReader is a source reader that reports its partitions: the Kafka
// source's *kafka.Reader implements it.
type KafkaReader interface {
	Metrics() []kafka.PartitionMetrics
}

// InstrumentSource returns src with every reader it makes reported by the
// collector under job, vertex and the reader's subtask, when the reader
// implements KafkaReader (a Kafka source's readers do); other readers pass
// through unreported. A reader made for a restarted attempt replaces the
// one before it.
//
//	src, _ := kafka.NewSource(...)
//	stream := sluice.FromSource(env, metrics.InstrumentSource(c, "orders", "kafka", src), ws, "kafka")
func InstrumentSource[T any](c *Collector, job, vertex string, src source.Source[T]) source.Source[T] {
	return &instrumentedSource[T]{Source: src, c: c, job: job, vertex: vertex}
}

type instrumentedSource[T any] struct {
	source.Source[T]
	c           *Collector
	job, vertex string
}

func (s *instrumentedSource[T]) NewReader(ctx source.ReaderContext) (source.Reader[T], error) {
	r, err := s.Source.NewReader(ctx)
	if err != nil {
		return nil, err
	}
	if kr, ok := r.(KafkaReader); ok {
		s.c.AddKafkaReader(s.job, s.vertex, ctx.Subtask, kr)
	}
	return r, nil
}

// AddKafkaReader reports the partitions of r under job, vertex and
// subtask, replacing the reader registered there before.
func (c *Collector) AddKafkaReader(job, vertex string, subtask int, r KafkaReader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entry(job).kafka[readerKey{vertex, subtask}] = r
}

func collectKafka(ch chan<- prometheus.Metric, job string, readers map[readerKey]KafkaReader) {
	for k, r := range readers {
		sub := strconv.Itoa(k.subtask)
		var pending int64
		known := false
		for _, p := range r.Metrics() {
			labels := []string{job, k.vertex, sub, p.Topic, strconv.Itoa(int(p.Partition))}
			g := func(d *prometheus.Desc, v int64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
			}
			g(descCurrentOffset, p.CurrentOffset)
			ch <- prometheus.MustNewConstMetric(descBadRecordsSkipped, prometheus.CounterValue, float64(p.SkippedRecords), labels...)
			ch <- prometheus.MustNewConstMetric(descBadRecordsDeadLettered, prometheus.CounterValue, float64(p.DeadLetteredRecords), labels...)
			if p.CommittedOffset >= 0 {
				g(descCommittedOffset, p.CommittedOffset)
			}
			if p.HighWatermark >= 0 {
				g(descHighWatermark, p.HighWatermark)
			}
			if p.Lag >= 0 {
				g(descRecordsLag, p.Lag)
				pending += p.Lag
				known = true
			}
		}
		if known {
			ch <- prometheus.MustNewConstMetric(descPendingRecords, prometheus.GaugeValue, float64(pending), job, k.vertex, sub)
		}
	}
}
