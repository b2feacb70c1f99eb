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
// one franz-go holds and the one waiting here for a slot).
func (r *Reader[T]) fetch() {
	for {
		if !r.awaitRoom() {
			return
		}
		fs := r.consumer.PollFetches(r.ctx)
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
		if len(it.parts) == 0 {
			continue
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
	if a := it.advance; a != nil {
		if p := r.parts[topicPartition{a.Topic, a.Partition}]; p != nil && !p.finished && p.next.Load() < a.Offset {
			p.next.Store(a.Offset)
			r.maybeFinish(p)
		}
	}
	return nil
}
