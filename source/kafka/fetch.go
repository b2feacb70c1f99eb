package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkaclient"
)

// fetch polls the consumer and hands the fetches to the task goroutine.
// A fetch with records takes one of the reader's slots, given back when
// all its records are handed out: with every slot taken the polling
// stops, so memory stays bounded by MaxBufferedFetches fetches (plus the
// one franz-go holds and the one waiting here for a slot). Of a large
// fetch it takes all but the last record and the rest only when the
// task nears the end of what it holds (see poll).
func (r *Reader[T]) fetch() {
	holding := false
	for {
		if holding {
			if !r.awaitTail() {
				return
			}
		} else if !r.awaitRoom() {
			return
		}
		fs, hold := r.poll()
		if r.ctx.Err() != nil {
			return
		}
		var it item
		var errs []error
		fs.EachError(func(t string, p int32, err error) {
			var loss *kgo.ErrDataLoss
			switch {
			case errors.Is(err, context.Canceled), errors.Is(err, kgo.ErrClientClosed):
			case errors.As(err, &loss):
				r.log.Warn("kafka source: offsets lost (retention or truncation), resuming at the new offset",
					"topic", t, "partition", p, "err", err)
			case kafkaclient.Retriable(err):
				// A leader moving, a broker restarting: franz-go
				// fetches again by itself.
				r.log.Debug("kafka source: fetch failed, franz-go retries", "topic", t, "partition", p, "err", err)
			default:
				errs = append(errs, fmt.Errorf("fetch topic %s partition %d: %w", t, p, err))
			}
		})
		if len(errs) > 0 {
			r.deliver(item{err: errors.Join(errs...)})
			return
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			it.parts = append(it.parts, fetched{topicPartition{p.Topic, p.Partition}, p.HighWatermark, p.LastStableOffset, p.Records})
			it.slot = it.slot || len(p.Records) > 0
			for _, rec := range p.Records {
				it.bytes += int64(len(rec.Key) + len(rec.Value) + kafkaclient.RecordOverhead)
			}
			it.recs += int64(len(p.Records))
		})
		holding = hold && it.recs > 0
		if len(it.parts) == 0 {
			continue
		}
		if holding {
			it.held, it.tailAt = true, r.tailAt(it)
		}
		if it.slot {
			select {
			case r.slots <- struct{}{}:
			case <-r.ctx.Done():
				return
			}
			r.heldBytes.Add(it.bytes)
			r.heldRecs.Add(it.recs)
		}
		if !r.deliver(it) {
			return
		}
	}
}

// poll takes the consumer's next fetched records, waiting for a fetch
// when none is buffered. franz-go's consumer fetches from a broker again
// only once every record of the fetch it buffered is taken, and decodes
// the fetch as soon as it arrives: a reader that took a large fetch
// whole would hold it and the next one, decoded, while it hands out the
// first (the exactly-once Kafka job's fetches are one batch of up to
// 8 300 records, up to 2.3 MB of franz-go's records and decompressed
// bytes: two a reader were most of the job's live heap that was the
// source's). So of a fetch larger than the reader's tail mark
// (bufferLimits.tailBytes, tailRecs) poll takes all records but the last
// and, when that one is of the take's largest partition (leftLargest),
// reports hold: the reader takes the last record when the records it
// holds have fallen to the tail mark (awaitTail), and the next fetch's
// round trip and decoding overlap the hand-out of that tail. A small
// fetch (low rates, where latency matters) is taken
// whole at once, as franz-go hands it over. Nothing is skipped or read
// twice: franz-go hands out the records left in order, and the offsets
// a checkpoint stores are those of the records handed out.
func (r *Reader[T]) poll() (fs kgo.Fetches, hold bool) {
	cl := r.consumer
	fs = cl.PollRecords(r.ctx, 1)
	if r.ctx.Err() != nil {
		return fs, false
	}
	n := cl.BufferedFetchRecords()
	if n == 0 {
		return fs, false
	}
	if n < 2 || (cl.BufferedFetchBytes()+n*kafkaclient.RecordOverhead <= r.buf.tailBytes && n <= int64(r.buf.tailRecs)) {
		return append(fs, buffered(cl, 0)...), false
	}
	fs = append(fs, buffered(cl, int(n-1))...)
	if cl.BufferedFetchRecords() == 0 || !leftLargest(fs) {
		return append(fs, buffered(cl, 0)...), false
	}
	return fs, true
}

// buffered takes up to n of the records cl has buffered (all of them
// when n is 0) without waiting: franz-go's PollRecords returns at once
// with a nil context.
func buffered(cl *kgo.Client, n int) kgo.Fetches {
	//lint:ignore SA1012 PollRecords waits for a fetch unless its context is nil
	return cl.PollRecords(nil, n)
}

// leftLargest reports whether the record franz-go was left holding is
// most likely of the partition the take fs ends with (franz-go hands out
// a fetch's partitions in order, and the last one taken is the one cut
// short: unless it was taken to its high watermark, when the record left
// is of a partition after it) and that partition has at least as many
// records in fs as any other: the hand-out is round robin, so its last
// record would be handed out after the others' anyway, and holding the
// next back delays no partition. A small partition's record is not held
// back behind the others' records (TestReaderInterleavesPartitions).
func leftLargest(fs kgo.Fetches) bool {
	var last *kgo.FetchPartition
	var lastTopic string
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			for k := range t.Partitions {
				if p := &t.Partitions[k]; len(p.Records) > 0 {
					last, lastTopic = p, t.Topic
				}
			}
		}
	}
	if last == nil {
		return false
	}
	if end := last.Records[len(last.Records)-1].Offset + 1; end >= last.HighWatermark ||
		(last.LastStableOffset >= 0 && end >= last.LastStableOffset) {
		return false
	}
	counts := map[topicPartition]int{}
	for i := range fs {
		for j := range fs[i].Topics {
			t := &fs[i].Topics[j]
			for k := range t.Partitions {
				counts[topicPartition{t.Topic, t.Partitions[k].Partition}] += len(t.Partitions[k].Records)
			}
		}
	}
	mine := counts[topicPartition{lastTopic, last.Partition}]
	for _, c := range counts {
		if c > mine {
			return false
		}
	}
	return true
}

// tailAt is the tail mark in records for it, taken from a large fetch
// whose rest franz-go holds: the number of records queued in the reader
// at which the task goroutine asks for the rest, the records averaging
// its bytes.
func (r *Reader[T]) tailAt(it item) int {
	perRec := max(it.bytes/max(it.recs, 1), 1)
	return int(min(r.buf.tailBytes/perRec, int64(r.buf.tailRecs)))
}

// awaitTail waits until the task goroutine has handed out the records of
// the fetch poll held the rest of down to the tail mark; false when the
// reader is closing.
func (r *Reader[T]) awaitTail() bool {
	select {
	case <-r.tail:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// checkTail tells the fetch goroutine to take the rest of a large fetch
// once the records queued have fallen to the tail mark (task goroutine).
func (r *Reader[T]) checkTail() {
	if r.tailPending && r.buffered <= r.tailMark {
		r.tailPending = false
		select {
		case r.tail <- struct{}{}:
		default:
		}
	}
}

// awaitRoom waits while the records held reach the reader's bound;
// false when the reader is closing.
func (r *Reader[T]) awaitRoom() bool {
	for r.heldBytes.Load() >= r.buf.maxBytes || r.heldRecs.Load() >= int64(r.buf.maxRecords) {
		select {
		case <-r.room:
		case <-r.ctx.Done():
			return false
		}
	}
	return true
}

// deliver hands it to the task goroutine, blocking while the channel is
// full; false when the reader is closing.
func (r *Reader[T]) deliver(it item) bool {
	select {
	case r.items <- it:
	case <-r.ctx.Done():
		return false
	}
	select {
	case r.avail <- struct{}{}:
	default:
	}
	return true
}

// takeItems applies the items the background goroutines have delivered,
// without waiting; it reports whether there was any.
func (r *Reader[T]) takeItems() (bool, error) {
	// Bounded, in case the goroutines deliver as fast as this takes.
	for n := range 2 * cap(r.items) {
		select {
		case it := <-r.items:
			if err := r.apply(it); err != nil {
				return true, err
			}
		default:
			return n > 0, nil
		}
	}
	return true, nil
}

// push queues the records of one fetch for p.
func (r *Reader[T]) push(p *partition, s segment) {
	if p.segHead > 0 && len(p.segs) == cap(p.segs) {
		n := copy(p.segs, p.segs[p.segHead:])
		clear(p.segs[n:])
		p.segs, p.segHead = p.segs[:n], 0
	}
	p.segs = append(p.segs, s)
	p.nbuf += len(s.recs)
	r.buffered += len(s.recs)
}

// pop takes p's next buffered record (p.nbuf > 0); the last record of a
// fetch gives the fetch's slot back.
func (r *Reader[T]) pop(p *partition) *kgo.Record {
	s := &p.segs[p.segHead]
	rec := s.recs[0]
	s.recs[0] = nil
	s.recs = s.recs[1:]
	p.nbuf--
	r.buffered--
	if len(s.recs) == 0 {
		f := s.fetch
		*s = segment{}
		if p.segHead++; p.segHead == len(p.segs) {
			p.segs, p.segHead = p.segs[:0], 0
		}
		if f.left--; f.left == 0 && f.slot {
			r.release(f)
		}
	}
	if r.tailPending {
		r.checkTail()
	}
	return rec
}

// dropBuffered discards p's buffered records (p finished).
func (r *Reader[T]) dropBuffered(p *partition) {
	for p.nbuf > 0 {
		r.recycle(r.pop(p))
	}
}

func (r *Reader[T]) releaseSlot() {
	select {
	case <-r.slots:
	default:
	}
}

// release gives back the slot and the memory of a fetch whose records
// are all handed out.
func (r *Reader[T]) release(f *fetchRef) {
	r.heldBytes.Add(-f.bytes)
	r.heldRecs.Add(-f.recs)
	r.releaseSlot()
	select {
	case r.room <- struct{}{}:
	default:
	}
}

// apply takes one item from the background goroutines.
func (r *Reader[T]) apply(it item) error {
	if it.err != nil {
		return fmt.Errorf("kafka source subtask %d: %w", r.subtask, it.err)
	}
	if len(it.newParts) > 0 {
		r.addPartitions(it.newParts)
	}
	var f *fetchRef
	for _, fp := range it.parts {
		p := r.parts[fp.tp]
		if p == nil || p.finished {
			for _, rec := range fp.records {
				r.recycle(rec)
			}
		}
		if p == nil {
			continue
		}
		p.hwm.Store(fp.hwm)
		p.lso.Store(fp.lso)
		if p.finished || len(fp.records) == 0 {
			continue
		}
		if f == nil {
			f = &fetchRef{slot: it.slot, bytes: it.bytes, recs: it.recs}
		}
		f.left++
		r.push(p, segment{recs: fp.records, fetch: f})
	}
	if it.slot && f == nil {
		r.release(&fetchRef{bytes: it.bytes, recs: it.recs})
	}
	if it.held {
		r.tailPending, r.tailMark = true, it.tailAt
		r.checkTail()
	}
	if a := it.advance; a != nil {
		if p := r.parts[topicPartition{a.Topic, a.Partition}]; p != nil && !p.finished && p.next.Load() < a.Offset {
			p.next.Store(a.Offset)
			r.maybeFinish(p)
		}
	}
	return nil
}
