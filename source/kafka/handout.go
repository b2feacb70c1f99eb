package kafka

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/source"
)

// PollNext emits up to a few dozen records from the buffered fetches,
// fewer when the task asks for its goroutine back (source.Yielder: a
// checkpoint's trigger waits for one record, not the batch). It never
// waits for the network: with nothing buffered it returns
// NothingAvailable, and Available fires when a fetch arrives.
//
// Each partition's records go to the partition's own output when out is a
// source.ReaderOutput (in a running job it is): the job's watermark
// strategy then runs per partition, as in Flink's Kafka source.
func (r *Reader[T]) PollNext(out source.Output[T]) (source.Status, error) {
	if out != r.out {
		r.bind(out)
	}
	return r.pollNext(out)
}

// bind makes out the reader's output and gives every partition not
// finished its split output.
func (r *Reader[T]) bind(out source.Output[T]) {
	r.out = out
	r.outs, _ = out.(source.ReaderOutput[T])
	r.yield, _ = out.(source.Yielder)
	for _, p := range r.order {
		if !p.finished {
			r.outputs[p.index] = r.splitOutput(p)
		}
	}
}

// splitOutput is p's output: its own split output from the reader's
// output when that is a ReaderOutput, else the reader's output; nil
// before the first PollNext.
func (r *Reader[T]) splitOutput(p *partition) source.Output[T] {
	if r.outs == nil {
		return r.out
	}
	return r.outs.CreateOutputForSplit(p.tp.splitID())
}

func (r *Reader[T]) pollNext(out source.Output[T]) (source.Status, error) {
	if r.ended {
		return source.EndOfInput, nil
	}
	if p := r.dlqErr.Load(); p != nil {
		return source.NothingAvailable, *p
	}
	// Fetches that arrived join the round robin at once, so a partition
	// whose records came in a later fetch need not wait for an earlier
	// fetch of another partition to be handed out.
	if _, err := r.takeItems(); err != nil {
		return source.NothingAvailable, err
	}
	for emitted := 0; emitted < r.cfg.perPoll; {
		p := r.nextTurn()
		if p == nil {
			took, err := r.takeItems()
			if err != nil {
				return source.NothingAvailable, err
			}
			if took {
				continue
			}
			if r.cfg.bounded && r.allFinished() {
				// The dead-letter copies are acknowledged before the end:
				// a job without checkpoints has no snapshot to wait for
				// them.
				if err := r.flushDeadLetters(r.ctx); err != nil {
					return source.NothingAvailable, err
				}
				r.ended = true
				return source.EndOfInput, nil
			}
			if len(r.order) == 0 && !r.idle {
				r.idle = true
				if err := out.MarkIdle(); err != nil {
					return source.NothingAvailable, err
				}
			}
			return source.NothingAvailable, nil
		}
		ok, err := r.emit(p, r.pop(p))
		if err != nil {
			return source.NothingAvailable, err
		}
		if ok {
			if emitted++; r.yield != nil && r.yield.ShouldYield() {
				break
			}
		}
	}
	return source.MoreAvailable, nil
}

// nextTurn returns the partition that hands out the next record: the
// partition whose turn it is keeps it for up to partitionBatch records
// while it has buffered ones, then the next partition in r.order with
// buffered records takes over. Nil when nothing is buffered.
func (r *Reader[T]) nextTurn() *partition {
	if r.buffered == 0 {
		return nil
	}
	if r.turnLeft > 0 && r.turn.nbuf > 0 {
		r.turnLeft--
		return r.turn
	}
	n := len(r.order)
	for i := range n {
		j := (r.rr + i) % n
		if p := r.order[j]; p.nbuf > 0 {
			r.turn, r.turnLeft, r.rr = p, r.cfg.partitionBatch-1, (j+1)%n
			return p
		}
	}
	return nil // not reached: buffered counts the records of r.order's partitions
}

// emit handles one fetched record of p: it advances the partition's
// position and emits the decoded value; it reports whether a value was
// emitted.
//
// A record decoded and emitted, or skipped without being decoded, is
// recycled (see recycle); one the decoder refused or panicked on is not:
// its error, its dead-letter copy or the decoder's value may hold its
// bytes.
func (r *Reader[T]) emit(p *partition, rec *kgo.Record) (bool, error) {
	offset := rec.Offset
	if p.finished || offset < p.next.Load() {
		r.recycle(rec)
		return false, nil
	}
	if p.stop >= 0 && offset >= p.stop {
		r.recycle(rec)
		p.next.Store(p.stop)
		r.maybeFinish(p)
		return false, nil
	}
	if rec.Attrs.IsControl() {
		r.recycle(rec)
		p.next.Store(offset + 1)
		r.maybeFinish(p)
		return false, nil
	}
	v, err := r.decodeRecord(rec)
	if err != nil {
		if temporary(err) {
			return false, fmt.Errorf("kafka source subtask %d: topic %s partition %d offset %d: the decoder failed for a reason that is not the record's (the record is read again after the restart): %w",
				r.subtask, rec.Topic, rec.Partition, offset, err)
		}
		return false, r.badRecord(p, rec, err)
	}
	ts := rec.Timestamp.UnixMilli()
	r.recycle(rec)
	if err := r.outputs[p.index].Collect(v, ts); err != nil {
		return false, err
	}
	p.next.Store(offset + 1)
	r.maybeFinish(p)
	return true, nil
}

// recycle hands rec's memory back to the client's pool when the decoder
// keeps nothing of the records (config.reuse): the record and the bytes
// of its batch are reused for a later fetch's records once every record
// of the batch is recycled. rec must not be used after.
func (r *Reader[T]) recycle(rec *kgo.Record) {
	if r.cfg.reuse {
		rec.Recycle()
	}
}

// temporary says whether a decoder error says of itself that it is
// temporary (a method Temporary() bool returning true, as the Schema
// Registry formats' errors do when the registry cannot be reached): not
// the record's fault, so it fails the reader whatever the bad-record
// policy, and the restart reads the record again instead of skipping it.
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// decodeRecord runs the decoder; a panic in it becomes an error, so that
// the record goes through the bad-record policy like one the decoder
// refused.
func (r *Reader[T]) decodeRecord(rec *kgo.Record) (v T, err error) {
	defer func() {
		if x := recover(); x != nil {
			err = &decoderPanic{value: x, stack: debug.Stack()}
		}
	}()
	return r.decode(rec)
}

// badRecord applies the bad-record policy to rec, which the decoder
// refused (or panicked on) with cause: under FailOnBadRecord it returns
// the error that fails the reader, else it skips the record (copying it
// to the dead-letter topic if there is one) and returns nil.
func (r *Reader[T]) badRecord(p *partition, rec *kgo.Record, cause error) error {
	attrs := []any{"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", cause}
	var dp *decoderPanic
	panicked := errors.As(cause, &dp)
	if panicked {
		attrs = append(attrs, "stack", string(dp.stack))
	}
	if !r.cfg.policy.skip {
		if panicked {
			r.log.Error("kafka source: the decoder panicked", attrs...)
		}
		return fmt.Errorf("kafka source subtask %d: topic %s partition %d offset %d: %w: %w",
			r.subtask, rec.Topic, rec.Partition, rec.Offset, cause, ErrBadRecord)
	}
	r.skipped.Add(1)
	p.skipped.Add(1)
	if r.cfg.policy.deadLetterTopic != "" {
		if err := r.deadLetter(p, rec, cause); err != nil {
			return err
		}
		if panicked {
			r.log.Warn("kafka source: the decoder panicked; the record goes to the dead-letter topic",
				append(attrs, "dead_letter_topic", r.cfg.policy.deadLetterTopic)...)
		}
	} else {
		r.log.Warn("kafka source: skipped an undecodable record", attrs...)
	}
	p.next.Store(rec.Offset + 1)
	r.maybeFinish(p)
	return nil
}

// maybeFinish ends a bounded partition that reached its stopping offset.
func (r *Reader[T]) maybeFinish(p *partition) {
	if p.finished || p.stop < 0 || p.next.Load() < p.stop {
		return
	}
	p.finished = true
	p.done.Store(true)
	if r.outs != nil {
		r.outs.ReleaseOutputForSplit(p.tp.splitID())
	}
	r.dropBuffered(p)
	if r.consumer != nil {
		r.consumer.RemoveConsumePartitions(map[string][]int32{p.tp.topic: {p.tp.partition}})
	}
	r.log.Info("kafka source: partition reached its stopping offset", "topic", p.tp.topic,
		"partition", p.tp.partition, "stopping_offset", p.stop)
}

func (r *Reader[T]) allFinished() bool {
	for _, p := range r.order {
		if !p.finished {
			return false
		}
	}
	return true
}
