package kafka

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers a dead-letter copy carries besides the record's own.
const (
	HeaderSourceTopic     = "sluice.source.topic"
	HeaderSourcePartition = "sluice.source.partition"
	HeaderSourceOffset    = "sluice.source.offset"
	HeaderError           = "sluice.error"
)

// deadLetter writes a copy of rec, a record of p, to the dead-letter
// topic. The write is asynchronous; a failure fails the next PollNext, and
// SnapshotState waits for every copy, so each is acknowledged before a
// checkpoint covers its record. An acknowledged copy is counted.
func (r *Reader[T]) deadLetter(p *partition, rec *kgo.Record, cause error) error {
	if r.dlq == nil {
		cl, err := r.client.NewClient("dead-letter")
		if err != nil {
			return fmt.Errorf("kafka source subtask %d: dead-letter producer: %w", r.subtask, err)
		}
		r.dlq = cl
	}
	headers := append(append([]kgo.RecordHeader(nil), rec.Headers...),
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(rec.Topic)},
		kgo.RecordHeader{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		kgo.RecordHeader{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(cause.Error())},
	)
	cp := &kgo.Record{
		Topic: r.cfg.policy.deadLetterTopic, Key: rec.Key, Value: rec.Value,
		Headers: headers, Timestamp: rec.Timestamp,
	}
	topic, partition, offset := rec.Topic, rec.Partition, rec.Offset
	r.dlq.Produce(r.ctx, cp, func(_ *kgo.Record, err error) {
		if err == nil {
			p.deadLettered.Add(1)
			r.deadLettered.Add(1)
			return
		}
		if r.ctx.Err() == nil {
			e := fmt.Errorf("kafka source subtask %d: write the undecodable record of topic %s partition %d offset %d to dead-letter topic %s: %w",
				r.subtask, topic, partition, offset, r.cfg.policy.deadLetterTopic, err)
			r.dlqErr.CompareAndSwap(nil, &e)
		}
	})
	return nil
}

// flushDeadLetters waits until every dead-letter copy written so far is
// acknowledged, and fails if one was not.
func (r *Reader[T]) flushDeadLetters(ctx context.Context) error {
	if r.dlq == nil {
		return nil
	}
	if err := r.dlq.Flush(ctx); err != nil {
		return fmt.Errorf("kafka source subtask %d: flush dead-letter records: %w", r.subtask, err)
	}
	if p := r.dlqErr.Load(); p != nil {
		return *p
	}
	return nil
}
