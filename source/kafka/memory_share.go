package kafka

import (
	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/memory"
)

// DefaultMemoryFraction is taskmanager.memory.kafka.source.fraction (no
// Flink equivalent: Flink's Kafka clients live on the task heap,
// unaccounted): the part of the process's memory past the overhead that
// the Kafka source readers of the process hold in records fetched ahead
// of the tasks. 0.02 of the default 256 MiB budget is 4.5 MiB: two
// readers each hold 1.1 MiB of records, a few milliseconds of input at
// hundreds of thousands of records per second, which is all a task
// needs ahead of it, and fetch 72 KiB at a time, 36 KiB a partition
// (a 32nd and 64th of that, above the floors of readerShare). 0.1 held
// five times that and with the collector's headroom was a third of the
// exactly-once Kafka job's resident memory; 0.05 kept the job's live
// heap at 20-30 MiB, above half of the default Go limit
// (memory.DefaultGoLimit), for no throughput either (issue 32: 0.02
// gave the same records per CPU second).
const DefaultMemoryFraction = 0.02

// memoryShare is the readers' share of the process's memory budget,
// declared to the memory model by importing this package.
var memoryShare = memory.RegisterShare("kafka.source", "The Kafka source readers' fetched records.", DefaultMemoryFraction)

// readerBuffers is how one Kafka source reader is sized.
type readerBuffers struct {
	// FetchMaxBytes and FetchMaxPartitionBytes are franz-go's (Kafka's
	// fetch.max.bytes and max.partition.fetch.bytes): compressed bytes per
	// fetch and per partition of a fetch.
	FetchMaxBytes, FetchMaxPartitionBytes int32
	// MaxBufferedBytes and MaxBufferedRecords bound the fetched records
	// the reader holds before the task takes them (key, value and
	// kafkaclient.RecordOverhead each): past either it fetches no more.
	MaxBufferedBytes   int64
	MaxBufferedRecords int
}

// readerShare sizes each of readers readers sharing the source's share
// of b: half of a reader's share is records held, the rest what the
// client fetches ahead and decompresses. The fetch sizes bound
// compressed bytes, and a batch of small similar records decompresses to
// many times its size (and each record costs RecordOverhead more), so a
// fetch is a 32nd of the share, a partition's part of it a 64th; but at
// least 64 KiB and 32 KiB, so that a small share does not ask a broker
// far away for small fetches (a fetch a round trip: 6.4 MB/s of
// compressed records at 10 ms). The floors were 128 and 64 KiB: a fetch
// of small similar records (the exactly-once Kafka job's) decompresses
// to ten times that and its franz-go records to more, and the fetches
// each reader's client holds were a third of the job's live heap under
// the default Go limit; halved, the job collected 15% less often (issue
// 32).
func readerShare(b memory.Budget, readers int) readerBuffers {
	s := memory.Share(memoryShare.Of(b), readers, 1<<20)
	return readerBuffers{
		FetchMaxBytes:          int32(min(max(s/32, 64<<10), 50<<20)),
		FetchMaxPartitionBytes: int32(min(max(s/64, 32<<10), 1<<20)),
		MaxBufferedBytes:       s / 2,
		MaxBufferedRecords:     int(max(s/2/kafkaclient.RecordOverhead, 1024)),
	}
}
