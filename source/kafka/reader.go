package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/source"
)

// setupTimeout bounds the metadata and offset look-ups a reader makes when
// it starts or discovers partitions.
const setupTimeout = time.Minute

// closeFlushTimeout bounds the wait for dead-letter copies at Close.
const closeFlushTimeout = 5 * time.Second

// boundedCheckInterval is how often a bounded reader whose partitions are
// quiet checks whether only aborted records and markers separate it from
// its stopping offsets (franz-go does not surface fetches without records).
const boundedCheckInterval = time.Second

type topicPartition struct {
	topic     string
	partition int32
}

// splitID names the partition as a split, as Flink's KafkaPartitionSplit
// does: topic-partition.
func (tp topicPartition) splitID() string { return tp.topic + "-" + strconv.Itoa(int(tp.partition)) }

// partition is the reader's state of one assigned partition. next is
// written on the task goroutine only; the atomics are read by Metrics.
type partition struct {
	tp        topicPartition
	stop      int64 // NoStoppingOffset or exclusive end
	finished  bool
	done      atomic.Bool // finished, for the goroutines
	next      atomic.Int64
	hwm       atomic.Int64
	lso       atomic.Int64
	committed atomic.Int64
	// index is the partition's place in the reader's outputs (task
	// goroutine only).
	index int
	// The fetched records not yet handed out (task goroutine only): a
	// queue of segments from segHead on, one per fetch, nbuf records in
	// all.
	segs    []segment
	segHead int
	nbuf    int
	// Bad records: skipped by the policy (dead-lettered ones included),
	// and those whose dead-letter copy was acknowledged.
	skipped      atomic.Int64
	deadLettered atomic.Int64
}

// segment is one partition's records of one fetch, not yet handed out.
type segment struct {
	recs  []*kgo.Record
	fetch *fetchRef
}

// fetchRef tracks one fetch while its records are handed out (task
// goroutine only): left is the number of its segments still queued; the
// fetch's slot is given back when the last one is empty.
type fetchRef struct {
	left        int
	slot        bool
	bytes, recs int64 // what the fetch holds of the reader's bound
}

// item is what the background goroutines hand the task goroutine.
type item struct {
	parts    []fetched
	slot     bool  // the item holds one of r.slots until its records are handed out
	bytes    int64 // its records' memory, held with the slot
	recs     int64
	newParts []SplitState
	advance  *SplitState // a bounded partition may move to Offset: nothing visible before it
	err      error
	// held: the item was taken from a large fetch whose rest franz-go
	// holds; the task goroutine signals r.tail when the records it has
	// queued fall to tailAt.
	held   bool
	tailAt int
}

// fetched is one partition's part of a fetch: its records and end offsets.
type fetched struct {
	tp       topicPartition
	hwm, lso int64
	records  []*kgo.Record
}

// Reader reads the partitions assigned to one subtask, handing out the
// fetched records of its partitions in turn, up to partitionBatch records
// of one partition before the next. Its methods other than Metrics,
// SkippedRecords, DeadLetteredRecords and Report run on the task
// goroutine.
//
// This file holds its state and life cycle; fetch.go the fetching and
// the per-partition queues of fetched records; handout.go the hand-out
// (PollNext: round robin, decoding, bad records, watermarks, the end of
// a bounded input); offsets.go where partitions start, the discovery of
// new ones, the snapshot of next offsets and their commit to the group.
type Reader[T any] struct {
	cfg         *config
	client      *kafkaclient.Config // cfg.client with the job's logger
	decode      Decoder[T]
	subtask     int
	parallelism int
	log         *slog.Logger

	admCl    *kgo.Client
	adm      *kadm.Client
	consumer *kgo.Client // nil until the reader has a partition to consume
	dlq      *kgo.Client
	dlqErr   atomic.Pointer[error]

	mu    sync.Mutex // guards parts (the map, not the partitions) for Metrics
	parts map[topicPartition]*partition
	order []*partition

	items chan item
	slots chan struct{} // one per fetch with records not yet all handed out
	avail chan struct{}
	// The memory bound: the fetched records held (key, value and
	// kafkaclient.RecordOverhead each) and their number, added by the fetch
	// goroutine, taken off on the task goroutine when a fetch's records
	// are all handed out; past maxBytes or maxRecords the fetch goroutine
	// waits for room.
	buf       bufferLimits
	heldBytes atomic.Int64
	heldRecs  atomic.Int64
	room      chan struct{}
	// The tail of a large fetch (see poll): tail is signalled to the
	// fetch goroutine when the records queued (buffered) fall to
	// tailMark while tailPending (task goroutine only).
	tail        chan struct{}
	tailPending bool
	tailMark    int
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	// Round robin over the partitions with buffered records (task
	// goroutine only): turn has the turn for turnLeft more records, and
	// the search for the next one starts at order[rr].
	buffered int
	turn     *partition
	turnLeft int
	rr       int

	// out is the output PollNext was given, outs the same when it makes
	// split outputs; outputs[p.index] is where partition p's records go
	// (task goroutine only).
	out     source.Output[T]
	outs    source.ReaderOutput[T]
	outputs []source.Output[T]
	// yield, when out is a source.Yielder, ends a poll early.
	yield source.Yielder

	skipped      atomic.Int64
	deadLettered atomic.Int64
	snapshots    map[int64][]SplitState
	committing   atomic.Bool
	idle         bool
	ended        bool
	closed       bool
}

var (
	_ source.CheckpointedReader[int] = (*Reader[int])(nil)
	_ source.CheckpointListener      = (*Reader[int])(nil)
)

func newReader[T any](s *Source[T], rc source.ReaderContext) (*Reader[T], error) {
	if rc.Parallelism < 1 || rc.Subtask < 0 || rc.Subtask >= rc.Parallelism {
		return nil, fmt.Errorf("kafka source: subtask %d of parallelism %d: %w", rc.Subtask, rc.Parallelism, ErrInvalidConfig)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reader[T]{
		cfg: &s.cfg, decode: s.decode, subtask: rc.Subtask, parallelism: rc.Parallelism,
		buf:       s.cfg.bufferLimits(rc.Parallelism),
		room:      make(chan struct{}, 1),
		tail:      make(chan struct{}, 1),
		client:    s.cfg.client.WithJobLogger(rc.Logger),
		parts:     map[topicPartition]*partition{},
		items:     make(chan item, s.cfg.maxBatches),
		slots:     make(chan struct{}, s.cfg.maxBatches),
		avail:     make(chan struct{}, 1),
		ctx:       ctx,
		cancel:    cancel,
		snapshots: map[int64][]SplitState{},
	}
	r.log = r.client.Log().With("source", "kafka", "subtask", rc.Subtask)
	if err := r.start(rc); err != nil {
		r.Close()
		return nil, fmt.Errorf("kafka source subtask %d (%v): %w", rc.Subtask, s.cfg.sub, err)
	}
	return r, nil
}

// start assigns the partitions, resolves their offsets and starts the
// background goroutines.
func (r *Reader[T]) start(rc source.ReaderContext) error {
	var err error
	if r.admCl, err = r.client.NewClient("source-admin"); err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	r.adm = kadm.NewClient(r.admCl)
	ctx, cancel := context.WithTimeout(r.ctx, setupTimeout)
	defer cancel()

	owned, err := r.listOwned(ctx)
	if err != nil {
		return err
	}
	var splits []SplitState
	if rc.Restored {
		restored := map[topicPartition]SplitState{}
		for _, b := range rc.RestoredState {
			st, err := DecodeSplitState(b)
			if err != nil {
				return err
			}
			if OwnerOf(st.Topic, st.Partition, r.parallelism) == r.subtask && r.cfg.sub.matches(st.Topic) {
				restored[topicPartition{st.Topic, st.Partition}] = st
			}
		}
		var fresh []topicPartition
		for _, tp := range owned {
			if st, ok := restored[tp]; ok {
				splits = append(splits, st)
				delete(restored, tp)
			} else {
				fresh = append(fresh, tp) // new since the checkpoint: from the earliest offset
			}
		}
		for _, st := range restored {
			r.log.Warn("kafka source: restored partition no longer listed by the broker; reading it anyway",
				"topic", st.Topic, "partition", st.Partition, "offset", st.Offset)
			splits = append(splits, st)
		}
		more, err := r.resolve(ctx, fresh, Earliest(), false)
		if err != nil {
			return err
		}
		splits = append(splits, more...)
	} else {
		if splits, err = r.resolve(ctx, owned, r.cfg.start, r.cfg.bounded); err != nil {
			return err
		}
	}
	r.addPartitions(splits)
	if !r.cfg.bounded && r.cfg.discovery > 0 {
		known := map[topicPartition]bool{}
		for _, st := range splits {
			known[topicPartition{st.Topic, st.Partition}] = true
		}
		r.wg.Go(func() { r.discover(known) })
	}
	if r.cfg.bounded {
		r.wg.Go(r.checkBounded)
	}
	return nil
}

// Available fires when a fetch (or discovered partitions, or an error)
// arrives after PollNext returned NothingAvailable.
func (r *Reader[T]) Available() <-chan struct{} { return r.avail }

// Close stops the background goroutines and closes the clients. Dead-letter
// copies still on their way get a few seconds to be acknowledged.
func (r *Reader[T]) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.dlq != nil {
		ctx, cancel := context.WithTimeout(r.ctx, closeFlushTimeout)
		if err := r.flushDeadLetters(ctx); err != nil {
			r.log.Warn("kafka source: dead-letter records may be lost at close", "err", err)
		}
		cancel()
	}
	r.cancel()
	r.wg.Wait()
	for _, cl := range []*kgo.Client{r.consumer, r.dlq, r.admCl} {
		if cl != nil {
			cl.Close()
		}
	}
	return nil
}
