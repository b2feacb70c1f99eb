package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/internal/binread"
	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/sink"
)

// startupTimeout bounds the abort of lingering transactions when a writer
// starts.
const startupTimeout = 2 * time.Minute

// describeRetryTime bounds the retries of DescribeTransactions at startup
// while the transaction coordinators are not ready.
const describeRetryTime = 15 * time.Second

// closeAbortTimeout bounds the abort of the open transaction at Close.
const closeAbortTimeout = 10 * time.Second

// TransactionalID returns the transactional id of a slot of a subtask's
// pool: `<prefix>-<subtask>-<slot>`.
func TransactionalID(prefix string, subtask, slot int) string {
	return prefix + "-" + strconv.Itoa(subtask) + "-" + strconv.Itoa(slot)
}

// transactionalWriter is the exactly-once writer of one subtask. Each
// checkpoint interval runs in one transaction under an id of the
// subtask's pool; at the barrier the transaction is flushed, handed over
// as a committable and left open for the committer, and the next interval
// takes another id. Every id has its own franz-go client, made on first
// use and, under transaction version 2, reused for every later
// transaction under that id (see the package documentation).
//
// The pool has max concurrent checkpoints + 1 ids, taken in turn. When the
// id whose turn it is still holds a transaction that is not committed (a
// checkpoint was aborted, so its transaction waits for the next completed
// checkpoint, whose notification runs on this very goroutine), the writer
// does not wait: it takes an overflow id, `<prefix>-<subtask>-<n>` with n
// past the pool, and gives it back once its transaction is committed. The
// pool thus grows by what is outstanding, never with the checkpoint count,
// up to the pool limit. The number of ids used is in the writer's state,
// so that a restore aborts every one of them.
type transactionalWriter[T any] struct {
	s           *Sink[T]
	client      *kafkaclient.Config // s.cfg.client with the job's logger
	subtask     int
	parallelism int
	log         *slog.Logger
	ctx         context.Context
	cancel      context.CancelFunc

	slots []*slot  // by slot number: the pool, then overflow ids
	next  int      // the pool slot whose turn is next
	cur   *slot    // the interval's open transaction; nil until its first record
	res   *results // the outcome of cur's records
	tv    int8     // transaction version, learnt with the first transaction
	// endOfInput: Flush(true) was called; the final checkpoint follows.
	// afterFinal: a checkpoint was pre-committed after that.
	endOfInput, afterFinal bool
	closing                sync.WaitGroup
	closed                 bool

	// Lingering lists the transactions aborted at startup (for tests and
	// logs): transactional id, producer id and epoch before the abort.
	lingering []DescribedID
	// checked lists the ids described at startup (for tests).
	checked []string
}

// DescribedID is the broker's view of a transactional id.
type DescribedID struct {
	TransactionalID string
	State           string
	ProducerID      int64
	ProducerEpoch   int16
}

var (
	_ sink.PrecommittingWriter[int] = (*transactionalWriter[int])(nil)
	_ sink.StatefulWriter[int]      = (*transactionalWriter[int])(nil)
)

func newTransactionalWriter[T any](s *Sink[T], wc sink.WriterContext) (*transactionalWriter[T], error) {
	// Every blocking call of the writer (InitProducerId, the abort of
	// lingering transactions, waits for room in the buffer, flushes) ends
	// when the task's context does: a broker that is down must not hold a
	// cancellation or a failover.
	ctx, cancel := context.WithCancel(wc.Ctx())
	client := s.cfg.client.WithJobLogger(wc.Logger)
	w := &transactionalWriter[T]{
		s: s, client: client, subtask: wc.Subtask, parallelism: wc.Parallelism,
		log:    client.Log().With("sink", "kafka", "subtask", wc.Subtask, "transactional_id_prefix", s.cfg.prefix),
		ctx:    ctx,
		cancel: cancel,
	}
	for range s.cfg.poolSize {
		w.addSlot()
	}
	if err := w.abortLingering(wc); err != nil {
		w.Close()
		return nil, fmt.Errorf("kafka sink subtask %d: abort lingering transactions: %w", wc.Subtask, err)
	}
	return w, nil
}

// addSlot adds the next slot to the writer and the sink's pool.
func (w *transactionalWriter[T]) addSlot() *slot {
	n := len(w.slots)
	sl := &slot{id: TransactionalID(w.s.cfg.prefix, w.subtask, n), index: n}
	w.slots = append(w.slots, sl)
	w.s.pool.register(sl)
	return sl
}

// writerState is what an exactly-once writer stores in every checkpoint:
// its subtask and the number of ids it has used (its pool size, or more
// when it took overflow ids), so that a restore aborts them all.
func encodeWriterState(subtask, ids int) []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(subtask))
	return binary.AppendUvarint(b, uint64(ids))
}

func decodeWriterState(b []byte) (subtask, ids int, err error) {
	d := binread.New(b)
	if v := d.Byte(); d.Err() == nil && v != 1 {
		return 0, 0, fmt.Errorf("writer state version %d, want 1", v)
	}
	subtask, ids = int(d.Uvarint()), int(d.Uvarint())
	if err := d.Err(); err != nil {
		return subtask, ids, err
	}
	if d.Len() != 0 {
		return subtask, ids, fmt.Errorf("%d trailing bytes", d.Len())
	}
	return subtask, ids, nil
}

// SnapshotState stores the number of ids used.
func (w *transactionalWriter[T]) SnapshotState(int64) ([][]byte, error) {
	return [][]byte{encodeWriterState(w.subtask, max(w.s.cfg.poolSize, len(w.slots)))}, nil
}

// abortLingering aborts, before the writer writes anything, the open
// transactions under every id this subtask answers for: every id used by
// every subtask index i with i mod parallelism == subtask, for the current
// parallelism and every restored one (the runtime hands the committables
// of old subtask i to new subtask i mod parallelism and commits them
// before it makes the writer, so nothing committable is aborted). The
// number of ids of old subtask i is the larger of the pool size and what
// its writer state recorded. A listing of the open transactions under the
// prefix catches ids outside those ranges (an overflow id taken after the
// restored checkpoint, a parallelism not recorded). Aborting is
// InitProducerId under the id: it bumps the epoch, which fences a writer
// still alive and aborts its open transaction; the client that did it is
// kept as the slot's client when the id is one of this writer's.
func (w *transactionalWriter[T]) abortLingering(wc sink.WriterContext) error {
	ctx, cancel := context.WithTimeout(w.ctx, startupTimeout)
	defer cancel()
	used := map[int]int{} // old subtask -> ids it recorded
	for _, b := range wc.RestoredState {
		if st, n, err := decodeWriterState(b); err == nil {
			used[st] = max(used[st], n)
		} else {
			w.log.Warn("kafka sink: ignoring undecodable writer state", "err", err)
		}
	}
	maxPar := wc.Parallelism
	for _, p := range wc.RestoredParallelisms {
		maxPar = max(maxPar, p)
	}
	for st := range used {
		maxPar = max(maxPar, st+1)
	}
	var ids []string
	mine := map[string]bool{}
	for i := wc.Subtask; i < maxPar; i += wc.Parallelism {
		for slot := range max(w.s.cfg.poolSize, used[i]) {
			id := TransactionalID(w.s.cfg.prefix, i, slot)
			ids = append(ids, id)
			mine[id] = true
		}
	}
	w.checked = ids
	adminCl, err := w.client.NewClient("sink-admin")
	if err != nil {
		return fmt.Errorf("new admin client: %w", err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)

	described, err := describeRetrying(ctx, adm, ids)
	if err != nil {
		// Ids left undescribed are fenced below, which aborts whatever
		// they hold.
		w.log.Warn("kafka sink: cannot describe every transactional id; fencing those not described", "err", err)
	}
	var toAbort []DescribedID
	for _, id := range ids {
		d, ok := described[id]
		switch {
		case ok && d.Err == nil:
			if d.State == "Ongoing" {
				toAbort = append(toAbort, DescribedID{id, d.State, d.ProducerID, d.ProducerEpoch})
			}
		case ok && errors.Is(d.Err, kerr.TransactionalIDNotFound):
		default:
			// Not described (a coordinator still loading...): fence it
			// anyway; fencing an id without a transaction only bumps its
			// epoch.
			toAbort = append(toAbort, DescribedID{TransactionalID: id, State: "unknown", ProducerID: -1, ProducerEpoch: -1})
		}
	}

	// The safety net: every open transaction under the prefix that maps to
	// this subtask.
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil && len(listed) == 0 {
		w.log.Warn("kafka sink: cannot list open transactions, relying on the pool ids alone", "err", err)
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(w.s.cfg.prefix) + `-(\d+)-(\d+)$`)
	for id, l := range listed {
		m := re.FindStringSubmatch(id)
		if m == nil || mine[id] {
			continue
		}
		i, err := strconv.Atoi(m[1])
		if err != nil || i%wc.Parallelism != wc.Subtask {
			continue
		}
		toAbort = append(toAbort, DescribedID{id, l.State, l.ProducerID, -1})
	}

	for _, d := range toAbort {
		cl, err := w.fence(ctx, d.TransactionalID)
		if err != nil {
			return err
		}
		if sl := w.slotOf(d.TransactionalID); sl != nil && sl.cl == nil {
			w.s.pool.setClient(sl, cl)
		} else {
			cl.Close()
		}
		w.s.cfg.stats.of(w.subtask).abort()
		w.log.Info("kafka sink: aborted a lingering transaction", "transactional_id", d.TransactionalID,
			"producer_id", d.ProducerID, "epoch", d.ProducerEpoch, "state", d.State)
		w.lingering = append(w.lingering, d)
	}
	return nil
}

// slotOf returns the writer's slot under id, or nil.
func (w *transactionalWriter[T]) slotOf(id string) *slot {
	for _, sl := range w.slots {
		if sl.id == id {
			return sl
		}
	}
	return nil
}

// fence initialises a producer under id and returns its client: the
// broker bumps the id's epoch and aborts its open transaction.
func (w *transactionalWriter[T]) fence(ctx context.Context, id string) (*kgo.Client, error) {
	cl, err := w.newProducer(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("abort the transaction of transactional id %s: %w", id, err)
	}
	return cl, nil
}

// transactionalProducerOpts are the options of a transactional client
// that come before the user's: the memory budget's share for each of
// producers, and no linger (Kafka's linger.ms 0, the Java client's
// default before Kafka 4.0, which Flink's KafkaSink keeps). franz-go's
// default lingers 10 ms, which a transactional sink pays at every
// checkpoint: the pre-commit flush, on the checkpoint's critical path,
// sends the batches still lingering and waits for them, where without
// linger the records written before the barrier are mostly acknowledged
// already (bench/kafka at 20 K records/s, docs/performance.md: the
// synchronous part's median 4.3-4.6 ms with the 10 ms linger, 0.1-1.8 ms
// without in most runs).
// With one produce request in flight per broker (idempotence), records
// buffered while one is in flight still go out together in the next.
func transactionalProducerOpts(producers int) []kgo.Opt {
	return append(producerOpts(producers), kgo.ProducerLinger(0))
}

// newProducer makes a transactional client under id and initialises its
// producer (InitProducerId), retrying what Kafka calls retriable (the
// transaction coordinator moving or loading, a broker restarting,
// CONCURRENT_TRANSACTIONS while the id's last transaction completes) for
// up to the transaction timeout.
func (w *transactionalWriter[T]) newProducer(ctx context.Context, id string) (*kgo.Client, error) {
	// Sized by the memory budget: a share for each of the clients the
	// sink's subtasks keep alive (the pool), before the user's options.
	opts := append(transactionalProducerOpts(w.parallelism*w.s.cfg.poolSize),
		w.client.OptsFor("sink-transactional-producer", kgo.TransactionalID(id), kgo.TransactionTimeout(w.s.cfg.txnTimeout))...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("new client for transactional id %s: %w", id, err)
	}
	// A failed InitProducerId that franz-go may retry leaves the client
	// without a producer id, so that the next ProducerID asks again.
	err = w.retry("InitProducerId for transactional id "+id, cl, int16(kmsg.InitProducerID)).Do(ctx, func(ctx context.Context) error {
		_, _, err := cl.ProducerID(ctx)
		return err
	})
	if err != nil {
		cl.Close()
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			return nil, fmt.Errorf("init producer for transactional id %s: the broker refuses transaction.timeout.ms %d "+
				"(it exceeds the broker's transaction.max.timeout.ms, 15 min by default): lower the sink's TransactionTimeout or raise the broker's limit: %w",
				id, w.s.cfg.txnTimeout.Milliseconds(), err)
		}
		return nil, err // the call, the broker, the attempts
	}
	return cl, nil
}

// retry is the Retry of one of the writer's Kafka calls through cl: for up
// to the transaction timeout (a transaction cannot outlive it anyway).
func (w *transactionalWriter[T]) retry(call string, cl *kgo.Client, key int16) kafkaclient.Retry {
	return kafkaclient.Retry{Call: call, Client: cl, Key: key, Budget: w.s.cfg.txnTimeout,
		BudgetName: "the sink's transaction timeout", Log: w.log}
}

// Write writes v into the interval's transaction, beginning it on the
// first record; a record the serializer refuses is handled as the
// SerializerErrorPolicy says (a dead-letter copy goes into the same
// transaction). It fails with the first error of an earlier record.
func (w *transactionalWriter[T]) Write(v T, ts int64) error {
	if w.cur != nil {
		if err := w.recordsFailed(); err != nil {
			return err
		}
	}
	// Serialize first: a skipped record must not begin a transaction.
	r, err := w.s.record(v, ts, w.subtask, w.log)
	if err != nil || r == nil {
		return err
	}
	if w.cur == nil {
		if err := w.begin(); err != nil {
			return err
		}
	}
	w.res.produce(w.ctx, w.cur.cl, r)
	return nil
}

// begin opens the interval's transaction on a free slot. It never waits
// for a commit: a slot still pending is passed over.
func (w *transactionalWriter[T]) begin() error {
	if w.closed {
		return fmt.Errorf("kafka sink subtask %d: write after close: %w", w.subtask, sink.ErrClosed)
	}
	if w.afterFinal {
		// The runtime finishes a bounded job with an aligned checkpoint
		// after the end of input: nothing comes after it, and nothing
		// would commit what did.
		w.log.Error("kafka sink: a record arrived after the end of input and the final checkpoint; no checkpoint will commit it")
	}
	sl, err := w.takeSlot()
	if err != nil {
		return err
	}
	if sl.cl == nil || sl.stale {
		// First use of the id, or its client is out of step (its last
		// transaction was ended by another client): initialise a
		// producer. The id's last transaction is committed, so this
		// only bumps the epoch.
		cl, err := w.newProducer(w.ctx, sl.id)
		if err != nil {
			w.s.pool.release(sl)
			return fmt.Errorf("kafka sink subtask %d: %w", w.subtask, err)
		}
		if old := w.s.pool.setClient(sl, cl); old != nil {
			w.closing.Go(old.Close)
		}
	}
	if w.tv == 0 {
		err := w.retry("ApiVersions (the transaction version)", sl.cl, int16(kmsg.ApiVersions)).Do(w.ctx, func(ctx context.Context) (err error) {
			w.tv, err = transactionVersion(ctx, sl.cl)
			return err
		})
		if err != nil {
			w.s.pool.release(sl)
			return fmt.Errorf("kafka sink subtask %d: %w", w.subtask, err)
		}
	}
	if err := sl.cl.BeginTransaction(); err != nil {
		w.s.pool.invalidate(sl) // its client is replaced at the slot's next turn
		w.s.pool.release(sl)
		return fmt.Errorf("kafka sink subtask %d: begin transaction under %s: %w", w.subtask, sl.id, err)
	}
	w.cur, w.res = sl, newResults()
	return nil
}

// takeSlot returns the slot for the next transaction: the pool's next
// free slot in turn, else the first free overflow slot, else a new
// overflow slot up to the pool limit.
func (w *transactionalWriter[T]) takeSlot() (*slot, error) {
	base := w.s.cfg.poolSize
	for i := range base {
		n := (w.next + i) % base
		if w.s.pool.acquire(w.slots[n]) {
			w.next = (n + 1) % base
			return w.slots[n], nil
		}
	}
	for _, sl := range w.slots[base:] {
		if w.s.pool.acquire(sl) {
			return sl, nil
		}
	}
	if len(w.slots) >= w.s.cfg.poolLimit {
		oldest := w.slots[0]
		for _, sl := range w.slots {
			if sl.pending.CheckpointID < oldest.pending.CheckpointID {
				oldest = sl
			}
		}
		return nil, fmt.Errorf("kafka sink subtask %d: all %d transactional ids hold uncommitted transactions, the oldest %s of checkpoint %d; "+
			"checkpoints keep failing or their commits do not happen (raise TransactionalIDPoolLimit only if that is expected): %w",
			w.subtask, len(w.slots), oldest.id, oldest.pending.CheckpointID, ErrPoolExhausted)
	}
	sl := w.addSlot()
	w.s.pool.acquire(sl)
	w.log.Info("kafka sink: the next transactional id still holds an uncommitted transaction; taking an overflow id",
		"transactional_id", sl.id, "ids", len(w.slots))
	return sl, nil
}

// describeRetrying describes ids, asking again for those whose
// coordinator is not ready (a fresh cluster creates its transaction state
// topic on first use) for up to describeRetryTime.
func describeRetrying(ctx context.Context, adm *kadm.Client, ids []string) (kadm.DescribedTransactions, error) {
	out := kadm.DescribedTransactions{}
	deadline := time.Now().Add(describeRetryTime)
	backoff := 100 * time.Millisecond
	missing := ids
	for {
		ds, err := adm.DescribeTransactions(ctx, missing...)
		for id, d := range ds {
			out[id] = d
		}
		missing = missing[:0:0]
		for _, id := range ids {
			d, ok := out[id]
			if ok && (d.Err == nil || errors.Is(d.Err, kerr.TransactionalIDNotFound)) {
				continue
			}
			missing = append(missing, id)
			if err == nil {
				err = d.Err
			}
		}
		if len(missing) == 0 {
			return out, nil
		}
		if err == nil {
			err = errors.New("no answer")
		}
		if !time.Now().Before(deadline) {
			return out, fmt.Errorf("describe transactional ids %v: %w", missing, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, fmt.Errorf("describe transactional ids %v: %w (%w)", missing, ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// describeID describes one transactional id; State is empty when the
// broker does not know it.
func describeID(ctx context.Context, adm *kadm.Client, id string) (DescribedID, error) {
	ds, err := adm.DescribeTransactions(ctx, id)
	d, ok := ds[id]
	if !ok {
		if err == nil {
			err = fmt.Errorf("no description of transactional id %s", id)
		}
		return DescribedID{}, fmt.Errorf("describe transactional id %s: %w", id, err)
	}
	if d.Err != nil {
		if errors.Is(d.Err, kerr.TransactionalIDNotFound) {
			return DescribedID{TransactionalID: id}, nil
		}
		return DescribedID{}, fmt.Errorf("describe transactional id %s: %w", id, d.Err)
	}
	return DescribedID{id, d.State, d.ProducerID, d.ProducerEpoch}, nil
}

// transactionVersion tells which transaction protocol franz-go runs with
// this cluster: 2 when the cluster's finalized transaction.version is 2 or
// more and the client may use produce v12, EndTxn v5 and TxnOffsetCommit
// v5 (KIP-890 part 2, as franz-go decides), else 1.
func transactionVersion(ctx context.Context, cl *kgo.Client) (int8, error) {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	var level int16
	if resp.FinalizedFeaturesEpoch != -1 {
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" {
				level = f.MaxVersionLevel
			}
		}
	}
	if level < 2 {
		return 1, nil
	}
	if v, ok := cl.OptValue(kgo.MaxVersions).(*kversion.Versions); ok && v != nil {
		for _, kv := range []struct {
			key int16
			min int16
		}{{int16(kmsg.Produce), 12}, {int16(kmsg.EndTxn), 5}, {int16(kmsg.TxnOffsetCommit), 5}} {
			if m, ok := v.LookupMaxKeyVersion(kv.key); !ok || m < kv.min {
				return 1, nil
			}
		}
	}
	return 2, nil
}

// Flush waits until every record of the open transaction is acknowledged,
// or the writer context is done; it does not commit (the runtime takes a
// final checkpoint for that).
func (w *transactionalWriter[T]) Flush(endOfInput bool) error {
	w.endOfInput = w.endOfInput || endOfInput
	if w.cur == nil {
		return nil
	}
	if err := w.cur.cl.Flush(w.ctx); err != nil {
		return fmt.Errorf("kafka sink subtask %d: flush transaction %s: %w", w.subtask, w.cur.id, err)
	}
	if err := w.res.settle(w.ctx); err != nil {
		return fmt.Errorf("kafka sink subtask %d: flush transaction %s: %w", w.subtask, w.cur.id, err)
	}
	return w.recordsFailed()
}

// recordsFailed returns the failure of the open transaction's records,
// if any, naming its transaction coordinator: franz-go produces and adds
// partitions to the transaction (AddPartitionsToTxn, version 1) by
// itself, retrying what it can; a record fails only when it could not,
// which aborts the transaction and fails the job over to its last
// checkpoint.
func (w *transactionalWriter[T]) recordsFailed() error {
	err := w.res.err()
	if err == nil {
		return nil
	}
	coordinator := kafkaclient.BrokerOf(w.cur.cl, int16(kmsg.AddPartitionsToTxn), err)
	if coordinator == "" {
		coordinator = kafkaclient.BrokerOf(w.cur.cl, int16(kmsg.InitProducerID), err)
	}
	if coordinator != "" {
		coordinator = ", transaction coordinator " + coordinator
	}
	return fmt.Errorf("kafka sink subtask %d, transactional id %s%s: %w", w.subtask, w.cur.id, coordinator, err)
}

// PrepareCommit closes the interval at barrier checkpointID: it flushes
// the transaction, checks every record, and returns its committable; the
// transaction stays open for the committer. An interval without records
// has no transaction and no committable.
func (w *transactionalWriter[T]) PrepareCommit(checkpointID int64) ([][]byte, error) {
	if w.cur == nil {
		w.afterFinal = w.endOfInput
		return nil, nil
	}
	if err := w.Flush(false); err != nil {
		return nil, err // the operator names the checkpoint
	}
	w.afterFinal = w.endOfInput
	sl := w.cur
	pid, epoch, err := sl.cl.ProducerID(w.ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka sink subtask %d: producer id of %s: %w", w.subtask, sl.id, err)
	}
	c := Committable{
		TransactionalID:    sl.id,
		ProducerID:         pid,
		ProducerEpoch:      epoch,
		TransactionVersion: w.tv,
		CheckpointID:       checkpointID,
		LastOffsets:        w.res.lastOffsets(),
		Records:            w.res.records(),
	}
	w.cur, w.res = nil, nil
	w.s.pool.precommitted(sl, c)
	w.log.Debug("kafka sink: pre-committed", "checkpoint", checkpointID, "transactional_id", c.TransactionalID,
		"producer_id", pid, "epoch", epoch, "partitions", len(c.LastOffsets))
	return [][]byte{c.Encode()}, nil
}

// Close aborts the open transaction of the current interval (its records
// belong to no checkpoint) and closes the clients. Transactions already
// handed over stay open for the committer, which commits them, or for
// the restore that commits them from their committables.
func (w *transactionalWriter[T]) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if sl := w.cur; sl != nil {
		w.cur = nil
		// After a cancellation (w.ctx done: a failover or a
		// cancellation, where nothing waits for the abort) it is not
		// tried: the next start aborts the transaction.
		var err error
		if w.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(w.ctx, closeAbortTimeout)
			err = sl.cl.AbortBufferedRecords(ctx)
			if err == nil {
				err = sl.cl.EndTransaction(ctx, kgo.TryAbort)
			}
			cancel()
		}
		switch {
		case w.ctx.Err() != nil:
			w.log.Debug("kafka sink: left the open transaction at a cancelled close; the next start aborts it",
				"transactional_id", sl.id)
		case err != nil:
			w.log.Warn("kafka sink: could not abort the open transaction at close; the next start aborts it",
				"transactional_id", sl.id, "cause", kafkaclient.Cause(err), "err", err)
		}
		w.s.pool.release(sl)
	}
	w.cancel()
	for _, cl := range w.s.pool.unregister(w.slots) {
		w.closing.Go(cl.Close)
	}
	w.closing.Wait()
	return nil
}
