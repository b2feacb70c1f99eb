package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/sink"
)

// results tracks the outcome of every record produced through one client
// (or one transaction): franz-go reports them in promises, on its own
// goroutines, and Flush does not return them.
type results struct {
	sent     atomic.Int64 // records handed to Produce (produce)
	mu       sync.Mutex
	failed   int64
	acked    int64
	firstErr error
	last     map[topicPartition]int64 // highest acknowledged offset
	settled  chan struct{}            // closed when failed+acked reaches sent (settle)
	// onAck is promise as a func value, made once: a method value
	// passed to every Produce would be a heap allocation per record.
	onAck func(*kgo.Record, error)
}

type topicPartition struct {
	topic     string
	partition int32
}

func newResults() *results {
	r := &results{last: map[topicPartition]int64{}}
	r.onAck = r.promise
	return r
}

// produce hands rec to cl with r's promise, counting it for settle.
func (r *results) produce(ctx context.Context, cl *kgo.Client, rec *kgo.Record) {
	r.sent.Add(1)
	cl.Produce(ctx, rec, r.onAck)
}

// settle waits until the promise of every record handed to produce has
// been called, or ctx is done. franz-go's Flush waits for the records it
// buffered, but a record it refuses before buffering it (larger than the
// buffer, the client closing) has its promise called later, on a
// goroutine of its own: without this wait, a checkpoint could complete
// without such a record and nothing would fail. Records are not produced
// meanwhile.
func (r *results) settle(ctx context.Context) error {
	r.mu.Lock()
	if r.acked+r.failed >= r.sent.Load() {
		r.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	r.settled = ch
	r.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the outcome of %d records: %w", r.sent.Load()-r.done(), ctx.Err())
	}
}

// done returns the number of records whose promise was called.
func (r *results) done() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked + r.failed
}

// promise is the franz-go promise of every record.
func (r *results) promise(rec *kgo.Record, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.signalSettled()
	if err != nil {
		r.failed++
		if r.firstErr == nil {
			r.firstErr = fmt.Errorf("write a record to topic %s partition %d: %w: %w", rec.Topic, rec.Partition, err, ErrProduce)
		}
		return
	}
	r.acked++
	tp := topicPartition{rec.Topic, rec.Partition}
	if o, ok := r.last[tp]; !ok || rec.Offset > o {
		r.last[tp] = rec.Offset
	}
}

// signalSettled closes the channel settle waits on once every record
// sent has its outcome. r.mu is held.
func (r *results) signalSettled() {
	if r.settled != nil && r.acked+r.failed >= r.sent.Load() {
		close(r.settled)
		r.settled = nil
	}
}

// err returns the first failure, with the count of failed records.
func (r *results) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.firstErr == nil {
		return nil
	}
	if r.failed > 1 {
		return fmt.Errorf("%d records failed, the first: %w", r.failed, r.firstErr)
	}
	return r.firstErr
}

// records returns the number of records acknowledged.
func (r *results) records() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

// lastOffsets returns the highest acknowledged offset per partition.
func (r *results) lastOffsets() []PartitionOffset {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]PartitionOffset, 0, len(r.last))
	for tp, o := range r.last {
		out = append(out, PartitionOffset{Topic: tp.topic, Partition: tp.partition, Offset: o})
	}
	return out
}

// writer is the writer of the guarantees none and at-least-once: one
// idempotent franz-go producer per subtask.
type writer[T any] struct {
	s       *Sink[T]
	subtask int
	log     *slog.Logger
	cl      *kgo.Client
	res     *results
	ctx     context.Context
	cancel  context.CancelFunc
}

var _ sink.PrecommittingWriter[int] = (*writer[int])(nil)

func newWriter[T any](s *Sink[T], wc sink.WriterContext) (*writer[T], error) {
	client := s.cfg.client.WithJobLogger(wc.Logger)
	cl, err := kgo.NewClient(append(producerOpts(wc.Parallelism), client.OptsFor("sink-producer")...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka sink subtask %d: new client: %w", wc.Subtask, err)
	}
	ctx, cancel := context.WithCancel(wc.Ctx())
	return &writer[T]{s: s, subtask: wc.Subtask, cl: cl, res: newResults(), ctx: ctx, cancel: cancel,
		log: client.Log().With("sink", "kafka", "subtask", wc.Subtask)}, nil
}

// Write hands the record to the producer (or, for a record the
// serializer refuses, does what the SerializerErrorPolicy says). It fails
// with the first error of an earlier record, so a failure stops the job
// soon after it happens. It gives up waiting for room in the producer's
// buffer when the writer context is done.
func (w *writer[T]) Write(v T, ts int64) error {
	if err := w.res.err(); err != nil {
		return err
	}
	r, err := w.s.record(v, ts, w.subtask, w.log)
	if err != nil || r == nil {
		return err
	}
	w.res.produce(w.ctx, w.cl, r)
	return nil
}

// Flush waits until every record written so far is acknowledged and
// fails if any was not, or when the writer context is done.
func (w *writer[T]) Flush(bool) error {
	if err := w.cl.Flush(w.ctx); err != nil {
		return fmt.Errorf("kafka sink subtask %d: flush: %w", w.subtask, err)
	}
	if err := w.res.settle(w.ctx); err != nil {
		return fmt.Errorf("kafka sink subtask %d: flush: %w", w.subtask, err)
	}
	return w.res.err()
}

// PrepareCommit flushes at the barrier for at-least-once (every record
// before the barrier acknowledged) and does nothing for none. Neither
// hands over committables.
func (w *writer[T]) PrepareCommit(checkpointID int64) ([][]byte, error) {
	if w.s.cfg.guarantee == AtLeastOnce {
		if err := w.Flush(false); err != nil {
			return nil, fmt.Errorf("at checkpoint %d: %w", checkpointID, err)
		}
	}
	return nil, w.res.err()
}

// Close closes the producer without flushing: on a clean finish the
// runtime has called Flush(true) before; on a failure, records still
// buffered are dropped (replay covers them for at-least-once).
func (w *writer[T]) Close() error {
	w.cancel()
	w.cl.Close()
	return nil
}
