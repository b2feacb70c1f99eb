package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkBounded runs beside a bounded reader. franz-go hands over no fetch
// whose records were all filtered out (aborted transactions under
// read_committed), so a partition whose last records before its stopping
// offset are aborted would never seem to reach it. Every interval, for a
// partition that has not moved since the previous look, it fetches
// read_committed from the partition's position and, when nothing visible
// lies before the stopping offset, tells the task goroutine to move there.
func (r *Reader[T]) checkBounded() {
	t := time.NewTicker(boundedCheckInterval)
	defer t.Stop()
	seen := map[topicPartition]int64{}
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		parts := append([]*partition(nil), r.order...)
		r.mu.Unlock()
		for _, p := range parts {
			if p.done.Load() {
				continue
			}
			next := p.next.Load()
			if last, ok := seen[p.tp]; !ok || last != next {
				seen[p.tp] = next
				continue
			}
			ctx, cancel := context.WithTimeout(r.ctx, setupTimeout)
			to, err := r.visibleFrom(ctx, p.tp, next, p.stop)
			cancel()
			if err != nil {
				if r.ctx.Err() == nil {
					r.log.Debug("kafka source: bounded check failed", "topic", p.tp.topic, "partition", p.tp.partition, "err", err)
				}
				continue
			}
			if to > next {
				st := SplitState{Topic: p.tp.topic, Partition: p.tp.partition, Offset: to, StoppingOffset: p.stop}
				if !r.deliver(item{advance: &st}) {
					return
				}
			}
		}
	}
}

// visibleFrom fetches tp read_committed from offset from and returns the
// offset up to which (at most stop) nothing visible but control records
// lies; from itself when a visible record comes first.
func (r *Reader[T]) visibleFrom(ctx context.Context, tp topicPartition, from, stop int64) (int64, error) {
	meta, err := r.adm.Metadata(ctx, tp.topic)
	if err != nil {
		return from, err
	}
	td, ok := meta.Topics[tp.topic]
	if !ok || td.Err != nil {
		return from, fmt.Errorf("metadata of %s: %v", tp.topic, td.Err)
	}
	pd, ok := td.Partitions[tp.partition]
	if !ok || pd.Err != nil {
		return from, fmt.Errorf("metadata of %s/%d: %v", tp.topic, tp.partition, pd.Err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.IsolationLevel = 1
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = tp.topic
	rt.TopicID = td.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = tp.partition
	rp.FetchOffset = from
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.admCl.Broker(int(pd.Leader)))
	if err != nil {
		return from, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return from, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return from, fmt.Errorf("fetch %s/%d: unexpected response shape", tp.topic, tp.partition)
	}
	part := &resp.Topics[0].Partitions[0]
	fp, nextOffset := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		KeepControlRecords: true,
		Offset:             from,
		IsolationLevel:     kgo.ReadCommitted(),
		Topic:              tp.topic,
		Partition:          tp.partition,
	}, part, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		return from, fp.Err
	}
	to := min(nextOffset, stop)
	for _, rec := range fp.Records {
		if !rec.Attrs.IsControl() && rec.Offset < to {
			return from, nil // franz-go delivers it
		}
	}
	if part.LastStableOffset >= 0 && to > part.LastStableOffset {
		to = part.LastStableOffset
	}
	return max(to, from), nil
}
