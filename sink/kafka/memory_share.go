package kafka

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/memory"
)

// DefaultMemoryFraction is taskmanager.memory.kafka.sink.fraction (no
// Flink equivalent): the part of the process's memory past the overhead
// that the Kafka sinks' producers of the process buffer. 0.02 of the
// default 256 MiB budget is 4.5 MiB: 1.1 MiB for each of the four
// clients of an exactly-once sink of parallelism 2 (a pool of two
// transactional ids per subtask), in batches of up to 280 KiB. 0.05
// kept twice that in records waiting for the broker's
// acknowledgement, which with the source's share held the
// exactly-once Kafka job's live heap above half of the default Go
// limit (memory.DefaultGoLimit), for no throughput (issue 32).
const DefaultMemoryFraction = 0.02

// memoryShare is the producers' share of the process's memory budget,
// declared to the memory model by importing this package.
var memoryShare = memory.RegisterShare("kafka.sink", "The Kafka sink producers' buffers.", DefaultMemoryFraction)

// producerBuffers is how one Kafka producer is sized.
type producerBuffers struct {
	// MaxBufferedBytes and MaxBufferedRecords are franz-go's: key and
	// value bytes, and records, buffered before Produce blocks.
	MaxBufferedBytes   int64
	MaxBufferedRecords int
	// BatchMaxBytes is franz-go's ProducerBatchMaxBytes (Kafka's
	// batch.size is the nearest).
	BatchMaxBytes int32
}

// producerShare sizes each of producers producers alive sharing the
// sink's share of b (a sink's subtasks times the transactional ids each
// keeps a client for).
func producerShare(b memory.Budget, producers int) producerBuffers {
	s := memory.Share(memoryShare.Of(b), producers, 256<<10)
	return producerBuffers{
		MaxBufferedBytes:   s,
		MaxBufferedRecords: int(max(s/kafkaclient.RecordOverhead, 256)),
		BatchMaxBytes:      int32(min(max(s/4, 16<<10), 1000012)),
	}
}

// producerOpts are the franz-go buffer options of one of producers
// producers alive sharing the process's memory budget for Kafka sinks
// (taskmanager.memory.kafka.sink.fraction): MaxBufferedRecords,
// MaxBufferedBytes, ProducerBatchMaxBytes. The user's ClientOptions come
// after them and win.
func producerOpts(producers int) []kgo.Opt {
	p := producerShare(memory.Current(), producers)
	return []kgo.Opt{kgo.MaxBufferedRecords(p.MaxBufferedRecords), kgo.MaxBufferedBytes(int(p.MaxBufferedBytes)),
		kgo.ProducerBatchMaxBytes(p.BatchMaxBytes)}
}
