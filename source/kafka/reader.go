package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

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
	// Watermarks (task goroutine only).
	maxTs      int64
	lastActive time.Time
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
	left int
	slot bool
}

// item is what the background goroutines hand the task goroutine.
type item struct {
	parts    []fetched
	slot     bool // the item holds one of r.slots until its records are handed out
	newParts []SplitState
	advance  *SplitState // a bounded partition may move to Offset: nothing visible before it
	err      error
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
// SkippedRecords and DeadLetteredRecords run on the task goroutine.
type Reader[T any] struct {
	cfg         *config
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

	items  chan item
	slots  chan struct{} // one per fetch with records not yet all handed out
	avail  chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Round robin over the partitions with buffered records (task
	// goroutine only): turn has the turn for turnLeft more records, and
	// the search for the next one starts at order[rr].
	buffered int
	turn     *partition
	turnLeft int
	rr       int

	skipped      atomic.Int64
	deadLettered atomic.Int64
	snapshots    map[int64][]SplitState
	committing   atomic.Bool
	idle         bool
	lastWm       int64
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
		log:       s.cfg.client.Log().With("source", "kafka", "subtask", rc.Subtask),
		parts:     map[topicPartition]*partition{},
		items:     make(chan item, s.cfg.maxBatches),
		slots:     make(chan struct{}, s.cfg.maxBatches),
		avail:     make(chan struct{}, 1),
		ctx:       ctx,
		cancel:    cancel,
		snapshots: map[int64][]SplitState{},
		lastWm:    math.MinInt64,
	}
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
	if r.admCl, err = kgo.NewClient(r.cfg.client.Opts()...); err != nil {
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
	if r.cfg.wmOn && r.cfg.wmIdle > 0 {
		r.wg.Go(r.tickIdleness)
	}
	return nil
}

// listOwned lists the subscribed partitions that this subtask reads.
func (r *Reader[T]) listOwned(ctx context.Context) ([]topicPartition, error) {
	var (
		tds kadm.TopicDetails
		err error
	)
	if r.cfg.sub.pattern != nil {
		tds, err = r.adm.ListTopics(ctx)
	} else {
		tds, err = r.adm.ListTopics(ctx, r.cfg.sub.topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var out []topicPartition
	for _, td := range tds.Sorted() {
		if !r.cfg.sub.matches(td.Topic) {
			continue
		}
		if td.Err != nil {
			return nil, fmt.Errorf("topic %s: %w", td.Topic, td.Err)
		}
		for _, pd := range td.Partitions.Sorted() {
			if OwnerOf(td.Topic, pd.Partition, r.parallelism) == r.subtask {
				out = append(out, topicPartition{td.Topic, pd.Partition})
			}
		}
	}
	return out, nil
}

// resolve finds the starting offset of each partition under start, and
// its stopping offset when bounded.
func (r *Reader[T]) resolve(ctx context.Context, tps []topicPartition, start StartingOffsets, bounded bool) ([]SplitState, error) {
	if len(tps) == 0 {
		return nil, nil
	}
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.topic) {
			topics = append(topics, tp.topic)
		}
	}
	lookup := func(what string, lo kadm.ListedOffsets, err error, tp topicPartition) (int64, error) {
		if err != nil {
			return 0, fmt.Errorf("list %s offsets: %w", what, err)
		}
		o, ok := lo.Lookup(tp.topic, tp.partition)
		if !ok {
			return 0, fmt.Errorf("list %s offsets: no answer for %s/%d", what, tp.topic, tp.partition)
		}
		if o.Err != nil {
			return 0, fmt.Errorf("list %s offset of %s/%d: %w", what, tp.topic, tp.partition, o.Err)
		}
		return o.Offset, nil
	}
	// The end: the last stable offset under read_committed.
	listEnd := func() (kadm.ListedOffsets, error) {
		if r.cfg.readUncomm {
			return r.adm.ListEndOffsets(ctx, topics...)
		}
		return r.adm.ListCommittedOffsets(ctx, topics...)
	}

	var committed kadm.OffsetResponses
	if start.kind == startCommitted {
		var err error
		if committed, err = r.adm.FetchOffsets(ctx, r.cfg.group); errors.Is(err, kerr.GroupIDNotFound) {
			committed, err = nil, nil // a group never committed: every partition falls back
		}
		if err != nil {
			return nil, fmt.Errorf("fetch committed offsets of group %s: %w", r.cfg.group, err)
		}
	}
	var (
		cache = map[string]kadm.ListedOffsets{}
		errs  = map[string]error{}
	)
	list := func(what string, fn func() (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		if lo, ok := cache[what]; ok || errs[what] != nil {
			return lo, errs[what]
		}
		lo, err := fn()
		cache[what], errs[what] = lo, err
		return lo, err
	}
	var offsetFor func(tp topicPartition, s StartingOffsets) (int64, error)
	offsetFor = func(tp topicPartition, s StartingOffsets) (int64, error) {
		switch s.kind {
		case startEarliest:
			lo, err := list("earliest", func() (kadm.ListedOffsets, error) { return r.adm.ListStartOffsets(ctx, topics...) })
			return lookup("start", lo, err, tp)
		case startLatest:
			lo, err := list("latest", listEnd)
			return lookup("end", lo, err, tp)
		case startTimestamp:
			lo, err := list("timestamp", func() (kadm.ListedOffsets, error) {
				return r.adm.ListOffsetsAfterMilli(ctx, s.millis, topics...)
			})
			return lookup("timestamp", lo, err, tp)
		case startCommitted:
			if o, ok := committed.Lookup(tp.topic, tp.partition); ok && o.Err == nil && o.At >= 0 {
				return o.At, nil
			} else if ok && o.Err != nil {
				return 0, fmt.Errorf("committed offset of %s/%d in group %s: %w", tp.topic, tp.partition, r.cfg.group, o.Err)
			}
			return offsetFor(tp, *s.fallback)
		case startSpecific:
			if o, ok := s.offsets[tp.topic][tp.partition]; ok {
				return o, nil
			}
			return offsetFor(tp, *s.fallback)
		}
		return 0, fmt.Errorf("unknown starting offsets %v", s)
	}
	out := make([]SplitState, 0, len(tps))
	for _, tp := range tps {
		off, err := offsetFor(tp, start)
		if err != nil {
			return nil, err
		}
		st := SplitState{Topic: tp.topic, Partition: tp.partition, Offset: off, StoppingOffset: NoStoppingOffset}
		if bounded {
			lo, err := list("latest", listEnd)
			if st.StoppingOffset, err = lookup("end", lo, err, tp); err != nil {
				return nil, err
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// addPartitions adds splits to the reader and starts consuming those not
// finished. Task goroutine (or start).
func (r *Reader[T]) addPartitions(splits []SplitState) {
	consume := map[string]map[int32]kgo.Offset{}
	r.mu.Lock()
	for _, st := range splits {
		tp := topicPartition{st.Topic, st.Partition}
		if _, ok := r.parts[tp]; ok {
			continue
		}
		p := &partition{tp: tp, stop: st.StoppingOffset}
		p.next.Store(st.Offset)
		p.hwm.Store(-1)
		p.lso.Store(-1)
		p.committed.Store(-1)
		p.maxTs, p.lastActive = math.MinInt64, time.Now()
		p.finished = p.stop >= 0 && st.Offset >= p.stop
		p.done.Store(p.finished)
		r.parts[tp] = p
		r.order = append(r.order, p)
		if !p.finished {
			if consume[tp.topic] == nil {
				consume[tp.topic] = map[int32]kgo.Offset{}
			}
			consume[tp.topic][tp.partition] = kgo.NewOffset().At(st.Offset)
		}
		r.log.Info("kafka source: assigned partition", "topic", st.Topic, "partition", st.Partition,
			"offset", st.Offset, "stopping_offset", st.StoppingOffset, "finished", p.finished)
	}
	slices.SortFunc(r.order, func(a, b *partition) int {
		if c := strings.Compare(a.tp.topic, b.tp.topic); c != 0 {
			return c
		}
		return int(a.tp.partition - b.tp.partition)
	})
	r.mu.Unlock()
	if len(consume) == 0 {
		return
	}
	if r.consumer != nil {
		r.consumer.AddConsumePartitions(consume)
		return
	}
	isolation := kgo.ReadCommitted()
	if r.cfg.readUncomm {
		isolation = kgo.ReadUncommitted()
	}
	cl, err := kgo.NewClient(r.cfg.client.Opts(
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(isolation),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		r.deliver(item{err: fmt.Errorf("new consumer: %w", err)})
		return
	}
	r.consumer = cl
	r.wg.Go(r.fetch)
}

// fetch polls the consumer and hands the fetches to the task goroutine.
// A fetch with records takes one of the reader's slots, given back when
// all its records are handed out: with every slot taken the polling
// stops, so memory stays bounded by MaxBufferedFetches fetches (plus the
// one franz-go holds and the one waiting here for a slot).
func (r *Reader[T]) fetch() {
	for {
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
		}
		if !r.deliver(it) {
			return
		}
	}
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

// discover lists the subscribed partitions at every interval and hands
// the new ones this subtask owns to the task goroutine, starting at their
// earliest offset.
func (r *Reader[T]) discover(known map[topicPartition]bool) {
	t := time.NewTicker(r.cfg.discovery)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(r.ctx, setupTimeout)
		owned, err := r.listOwned(ctx)
		var fresh []topicPartition
		for _, tp := range owned {
			if !known[tp] {
				fresh = append(fresh, tp)
			}
		}
		var splits []SplitState
		if err == nil {
			splits, err = r.resolve(ctx, fresh, Earliest(), false)
		}
		cancel()
		if err != nil {
			if r.ctx.Err() == nil {
				r.log.Warn("kafka source: partition discovery failed, trying again at the next interval", "err", err)
			}
			continue
		}
		if len(splits) == 0 {
			continue
		}
		for _, st := range splits {
			known[topicPartition{st.Topic, st.Partition}] = true
		}
		r.log.Info("kafka source: discovered partitions", "count", len(splits))
		if !r.deliver(item{newParts: splits}) {
			return
		}
	}
}

// PollNext emits up to a few dozen records from the buffered fetches. It
// never waits for the network: with nothing buffered it returns
// NothingAvailable, and Available fires when a fetch arrives.
func (r *Reader[T]) PollNext(out source.Output[T]) (source.Status, error) {
	st, err := r.pollNext(out)
	if err == nil && r.cfg.wmOn && st != source.EndOfInput {
		err = r.watermark(out)
	}
	return st, err
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
		ok, err := r.emit(p, r.pop(p), out)
		if err != nil {
			return source.NothingAvailable, err
		}
		if ok {
			emitted++
		}
	}
	return source.MoreAvailable, nil
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
			r.releaseSlot()
		}
	}
	return rec
}

// dropBuffered discards p's buffered records (p finished).
func (r *Reader[T]) dropBuffered(p *partition) {
	for p.nbuf > 0 {
		r.pop(p)
	}
}

func (r *Reader[T]) releaseSlot() {
	select {
	case <-r.slots:
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
		if p == nil {
			continue
		}
		p.hwm.Store(fp.hwm)
		p.lso.Store(fp.lso)
		if p.finished || len(fp.records) == 0 {
			continue
		}
		if f == nil {
			f = &fetchRef{slot: it.slot}
		}
		f.left++
		r.push(p, segment{recs: fp.records, fetch: f})
	}
	if it.slot && f == nil {
		r.releaseSlot()
	}
	if a := it.advance; a != nil {
		if p := r.parts[topicPartition{a.Topic, a.Partition}]; p != nil && !p.finished && p.next.Load() < a.Offset {
			p.next.Store(a.Offset)
			r.maybeFinish(p)
		}
	}
	return nil
}

// emit handles one fetched record of p: it advances the partition's
// position and emits the decoded value; it reports whether a value was
// emitted.
func (r *Reader[T]) emit(p *partition, rec *kgo.Record, out source.Output[T]) (bool, error) {
	if p.finished || rec.Offset < p.next.Load() {
		return false, nil
	}
	if p.stop >= 0 && rec.Offset >= p.stop {
		p.next.Store(p.stop)
		r.maybeFinish(p)
		return false, nil
	}
	if rec.Attrs.IsControl() {
		p.next.Store(rec.Offset + 1)
		r.maybeFinish(p)
		return false, nil
	}
	v, err := r.decodeRecord(rec)
	if err != nil {
		return false, r.badRecord(p, rec, err)
	}
	ts := rec.Timestamp.UnixMilli()
	if err := out.Collect(v, ts); err != nil {
		return false, err
	}
	if r.cfg.wmOn {
		p.maxTs = max(p.maxTs, ts)
		p.lastActive = time.Now()
	}
	r.idle = false
	p.next.Store(rec.Offset + 1)
	r.maybeFinish(p)
	return true, nil
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

// watermark emits the smallest partition watermark over the partitions
// that are neither finished nor idle, or marks the reader idle when all
// its unfinished partitions are idle.
func (r *Reader[T]) watermark(out source.Output[T]) error {
	now := time.Now()
	wm, active, open := int64(math.MaxInt64), 0, 0
	for _, p := range r.order {
		if p.finished {
			continue
		}
		open++
		if r.cfg.wmIdle > 0 && now.Sub(p.lastActive) >= r.cfg.wmIdle {
			continue
		}
		active++
		pw := int64(math.MinInt64)
		if p.maxTs != math.MinInt64 {
			pw = p.maxTs - r.cfg.wmDelay.Milliseconds() - 1
		}
		wm = min(wm, pw)
	}
	if active == 0 {
		if open > 0 && !r.idle {
			r.idle = true
			return out.MarkIdle()
		}
		return nil
	}
	r.idle = false
	if wm > r.lastWm {
		r.lastWm = wm
		return out.EmitWatermark(wm)
	}
	return nil
}

// tickIdleness wakes the task goroutine now and then, so that a partition
// going quiet is noticed while no fetch arrives.
func (r *Reader[T]) tickIdleness() {
	t := time.NewTicker(min(r.cfg.wmIdle/2, 200*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			select {
			case r.avail <- struct{}{}:
			default:
			}
		}
	}
}

// maybeFinish ends a bounded partition that reached its stopping offset.
func (r *Reader[T]) maybeFinish(p *partition) {
	if p.finished || p.stop < 0 || p.next.Load() < p.stop {
		return
	}
	p.finished = true
	p.done.Store(true)
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

// Available fires when a fetch (or discovered partitions, or an error)
// arrives after PollNext returned NothingAvailable.
func (r *Reader[T]) Available() <-chan struct{} { return r.avail }

// SnapshotState returns the next offset of every assigned partition, one
// entry each, so that a restore can give each partition to its owner
// under the new parallelism. Dead-letter copies of skipped records are
// acknowledged first.
func (r *Reader[T]) SnapshotState(checkpointID int64) ([][]byte, error) {
	if err := r.flushDeadLetters(r.ctx); err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(r.order))
	sts := make([]SplitState, 0, len(r.order))
	for _, p := range r.order {
		st := SplitState{Topic: p.tp.topic, Partition: p.tp.partition, Offset: p.next.Load(), StoppingOffset: p.stop}
		sts = append(sts, st)
		out = append(out, st.Encode())
	}
	if r.cfg.group != "" {
		r.snapshots[checkpointID] = sts
	}
	return out, nil
}

// NotifyCheckpointComplete commits the offsets of checkpoint id to the
// group, if one is set, in the background: they serve lag monitoring only,
// and a failed commit is logged.
func (r *Reader[T]) NotifyCheckpointComplete(id int64) error {
	sts, ok := r.snapshots[id]
	for cid := range r.snapshots {
		if cid <= id {
			delete(r.snapshots, cid)
		}
	}
	if !ok || r.cfg.group == "" || len(sts) == 0 || r.closed {
		return nil
	}
	if !r.committing.CompareAndSwap(false, true) {
		r.log.Debug("kafka source: an offset commit is still running, skipping the commit of checkpoint", "checkpoint", id)
		return nil
	}
	offsets := kadm.Offsets{}
	for _, st := range sts {
		offsets.Add(kadm.Offset{Topic: st.Topic, Partition: st.Partition, At: st.Offset, LeaderEpoch: -1})
	}
	r.wg.Go(func() {
		defer r.committing.Store(false)
		ctx, cancel := context.WithTimeout(r.ctx, setupTimeout)
		defer cancel()
		resp, err := r.adm.CommitOffsets(ctx, r.cfg.group, offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			if r.ctx.Err() == nil {
				r.log.Warn("kafka source: committing offsets to the group failed (lag monitoring only)",
					"group", r.cfg.group, "checkpoint", id, "err", err)
			}
			return
		}
		r.mu.Lock()
		for _, st := range sts {
			if p := r.parts[topicPartition{st.Topic, st.Partition}]; p != nil {
				p.committed.Store(st.Offset)
			}
		}
		r.mu.Unlock()
	})
	return nil
}

// NotifyCheckpointAborted forgets the offsets of checkpoint id.
func (r *Reader[T]) NotifyCheckpointAborted(id int64) error {
	delete(r.snapshots, id)
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
