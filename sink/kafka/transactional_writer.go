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

	"github.com/sluicehq/sluice/sink"
)

// startupTimeout bounds the abort of lingering transactions when a writer
// starts.
const startupTimeout = 2 * time.Minute

// closeAbortTimeout bounds the abort of the open transaction at Close.
const closeAbortTimeout = 10 * time.Second

// TransactionalID returns the transactional id of a slot of a subtask's
// pool: `<prefix>-<subtask>-<slot>`.
func TransactionalID(prefix string, subtask, slot int) string {
	return prefix + "-" + strconv.Itoa(subtask) + "-" + strconv.Itoa(slot)
}

// transactionalWriter is the exactly-once writer of one subtask. Each
// checkpoint interval runs in one transaction, produced by a franz-go
// client made for it under the interval's id of the pool; at the barrier
// the transaction is flushed, handed over as a committable and left open
// for the committer; the client is closed without ending it.
type transactionalWriter[T any] struct {
	s           *Sink[T]
	subtask     int
	parallelism int
	log         *slog.Logger
	ctx         context.Context
	cancel      context.CancelFunc

	slot    int            // slot of the current interval
	cur     *txn           // the interval's open transaction; nil until its first record
	pending []*Committable // by slot: handed over, not known to be committed
	tv      int8           // transaction version, learnt with the first transaction
	closing sync.WaitGroup // clients closing in the background
	closed  bool

	// Lingering lists the transactions aborted at startup (for tests and
	// logs): transactional id, producer id and epoch before the abort.
	lingering []DescribedID
}

// txn is one open transaction.
type txn struct {
	id  string
	cl  *kgo.Client
	res *results
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
	ctx, cancel := context.WithCancel(context.Background())
	w := &transactionalWriter[T]{
		s: s, subtask: wc.Subtask, parallelism: wc.Parallelism,
		log:     s.cfg.logger.With("sink", "kafka", "subtask", wc.Subtask, "transactional_id_prefix", s.cfg.prefix),
		ctx:     ctx,
		cancel:  cancel,
		pending: make([]*Committable, s.cfg.poolSize),
	}
	if err := w.abortLingering(wc); err != nil {
		cancel()
		return nil, fmt.Errorf("kafka sink subtask %d: abort lingering transactions: %w", wc.Subtask, err)
	}
	return w, nil
}

// writerState is what an exactly-once writer stores in every checkpoint:
// its pool size, so that a restore with a smaller pool still aborts the
// ids of the larger one.
func encodeWriterState(subtask, poolSize int) []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, uint64(subtask))
	return binary.AppendUvarint(b, uint64(poolSize))
}

func decodeWriterState(b []byte) (subtask, poolSize int, err error) {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != 1 {
		return 0, 0, fmt.Errorf("writer state version %d, want 1", v)
	}
	subtask, poolSize = int(d.uvarint()), int(d.uvarint())
	return subtask, poolSize, d.err
}

// SnapshotState stores the pool size.
func (w *transactionalWriter[T]) SnapshotState(int64) ([][]byte, error) {
	return [][]byte{encodeWriterState(w.subtask, w.s.cfg.poolSize)}, nil
}

// abortLingering aborts, before the writer writes anything, the open
// transactions under every id this subtask answers for: every slot of
// every subtask index i with i mod parallelism == subtask, for the current
// parallelism and every restored one (the runtime hands the committables
// of old subtask i to new subtask i mod parallelism and commits them
// before it makes the writer, so nothing committable is aborted). A
// listing of the open transactions under the prefix catches ids outside
// those ranges (a pool that was larger, a parallelism not recorded).
// Aborting is InitProducerId under the id: it bumps the epoch, which
// fences a writer still alive and aborts its open transaction.
func (w *transactionalWriter[T]) abortLingering(wc sink.WriterContext) error {
	ctx, cancel := context.WithTimeout(w.ctx, startupTimeout)
	defer cancel()
	pool := w.s.cfg.poolSize
	for _, b := range wc.RestoredState {
		if _, p, err := decodeWriterState(b); err == nil && p > pool {
			pool = p
		} else if err != nil {
			w.log.Warn("kafka sink: ignoring undecodable writer state", "err", err)
		}
	}
	maxPar := wc.Parallelism
	for _, p := range wc.RestoredParallelisms {
		maxPar = max(maxPar, p)
	}
	var ids []string
	mine := map[string]bool{}
	for i := wc.Subtask; i < maxPar; i += wc.Parallelism {
		for slot := range pool {
			id := TransactionalID(w.s.cfg.prefix, i, slot)
			ids = append(ids, id)
			mine[id] = true
		}
	}
	adminCl, err := kgo.NewClient(w.s.cfg.kgoOpts()...)
	if err != nil {
		return fmt.Errorf("new admin client: %w", err)
	}
	defer adminCl.Close()
	adm := kadm.NewClient(adminCl)

	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		return fmt.Errorf("describe transactional ids %v: %w", ids, err)
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
		if err := w.fence(ctx, d.TransactionalID); err != nil {
			return err
		}
		w.log.Info("kafka sink: aborted a lingering transaction", "transactional_id", d.TransactionalID,
			"producer_id", d.ProducerID, "epoch", d.ProducerEpoch, "state", d.State)
		w.lingering = append(w.lingering, d)
	}
	return nil
}

// fence initialises a producer under id and closes it: the broker bumps
// the id's epoch and aborts its open transaction.
func (w *transactionalWriter[T]) fence(ctx context.Context, id string) error {
	cl, err := kgo.NewClient(w.s.cfg.kgoOpts(kgo.TransactionalID(id), kgo.TransactionTimeout(w.s.cfg.txnTimeout))...)
	if err != nil {
		return fmt.Errorf("new client for transactional id %s: %w", id, err)
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("abort the transaction of transactional id %s (init producer id): %w", id, err)
	}
	return nil
}

// Write writes v into the interval's transaction, beginning it on the
// first record. It fails with the first error of an earlier record.
func (w *transactionalWriter[T]) Write(v T, ts int64) error {
	if w.cur == nil {
		if err := w.begin(); err != nil {
			return err
		}
	}
	if err := w.cur.res.err(); err != nil {
		return fmt.Errorf("transactional id %s: %w", w.cur.id, err)
	}
	r, err := w.s.record(v, ts)
	if err != nil {
		return err
	}
	w.cur.cl.Produce(w.ctx, r, w.cur.res.promise)
	return nil
}

// begin opens the transaction of the current slot.
func (w *transactionalWriter[T]) begin() error {
	if w.closed {
		return fmt.Errorf("kafka sink subtask %d: write after close: %w", w.subtask, sink.ErrClosed)
	}
	if err := w.awaitSlot(w.slot); err != nil {
		return err
	}
	id := TransactionalID(w.s.cfg.prefix, w.subtask, w.slot)
	cl, err := kgo.NewClient(w.s.cfg.kgoOpts(kgo.TransactionalID(id), kgo.TransactionTimeout(w.s.cfg.txnTimeout))...)
	if err != nil {
		return fmt.Errorf("kafka sink subtask %d: new client for transactional id %s: %w", w.subtask, id, err)
	}
	// Initialise the producer now: the transaction that last used the id
	// is committed (awaitSlot), so this only bumps the epoch.
	if _, _, err := cl.ProducerID(w.ctx); err != nil {
		cl.Close()
		return fmt.Errorf("kafka sink subtask %d: init producer for transactional id %s: %w", w.subtask, id, err)
	}
	if w.tv == 0 {
		if w.tv, err = transactionVersion(w.ctx, cl); err != nil {
			cl.Close()
			return fmt.Errorf("kafka sink subtask %d: %w", w.subtask, err)
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return fmt.Errorf("kafka sink subtask %d: begin transaction under %s: %w", w.subtask, id, err)
	}
	w.cur = &txn{id: id, cl: cl, res: newResults()}
	return nil
}

// awaitSlot returns once the transaction that last used slot is committed
// (or otherwise finished): the committer of this process says so, or the
// broker does. It waits up to the pool wait timeout.
func (w *transactionalWriter[T]) awaitSlot(slot int) error {
	c := w.pending[slot]
	if c == nil {
		return nil
	}
	deadline := time.Now().Add(w.s.cfg.poolWait)
	var adm *kadm.Client
	for {
		changed := w.s.registry.changed()
		if w.s.registry.committed(*c) {
			w.pending[slot] = nil
			return nil
		}
		if adm == nil {
			cl, err := kgo.NewClient(w.s.cfg.kgoOpts()...)
			if err != nil {
				return fmt.Errorf("kafka sink subtask %d: new admin client: %w", w.subtask, err)
			}
			defer cl.Close()
			adm = kadm.NewClient(cl)
		}
		d, err := describeID(w.ctx, adm, c.TransactionalID)
		if err == nil && finished(*c, d) {
			w.pending[slot] = nil
			return nil
		}
		if !time.Now().Before(deadline) {
			state := fmt.Sprintf("%s at producer id %d epoch %d", d.State, d.ProducerID, d.ProducerEpoch)
			if err != nil {
				state = err.Error()
			}
			return fmt.Errorf("kafka sink subtask %d: transactional id %s still holds the uncommitted transaction of checkpoint %d (%s) after %v; "+
				"a checkpoint was aborted or its commit is late: raise MaxConcurrentCheckpoints or TransactionalIDPoolSize: %w",
				w.subtask, c.TransactionalID, c.CheckpointID, state, w.s.cfg.poolWait, ErrPoolExhausted)
		}
		t := time.NewTimer(min(200*time.Millisecond, time.Until(deadline)))
		select {
		case <-changed:
		case <-t.C:
		case <-w.ctx.Done():
			t.Stop()
			return w.ctx.Err()
		}
		t.Stop()
	}
}

// finished reports whether the broker's view d of c's id shows c's
// transaction finished: the id moved to another producer or a later epoch,
// or is at c's epoch in a final state.
func finished(c Committable, d DescribedID) bool {
	if d.State == "" { // the id is unknown to the broker
		return true
	}
	if d.ProducerID != c.ProducerID || d.ProducerEpoch > c.ProducerEpoch {
		return true
	}
	switch d.State {
	case "CompleteCommit", "CompleteAbort", "Empty":
		return true
	}
	return false
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
		return 0, fmt.Errorf("learn the transaction version (ApiVersions): %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, fmt.Errorf("learn the transaction version (ApiVersions): %w", err)
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

// Flush waits until every record of the open transaction is acknowledged;
// it does not commit (the runtime takes a final checkpoint for that).
func (w *transactionalWriter[T]) Flush(bool) error {
	if w.cur == nil {
		return nil
	}
	if err := w.cur.cl.Flush(w.ctx); err != nil {
		return fmt.Errorf("kafka sink subtask %d: flush transaction %s: %w", w.subtask, w.cur.id, err)
	}
	if err := w.cur.res.err(); err != nil {
		return fmt.Errorf("kafka sink subtask %d, transactional id %s: %w", w.subtask, w.cur.id, err)
	}
	return nil
}

// PrepareCommit closes the interval at barrier checkpointID: it flushes
// the transaction, checks every record, and returns its committable; the
// transaction stays open for the committer. An interval without records
// has no transaction and no committable, and its slot stays in use.
func (w *transactionalWriter[T]) PrepareCommit(checkpointID int64) ([][]byte, error) {
	if w.cur == nil {
		return nil, nil
	}
	if err := w.Flush(false); err != nil {
		return nil, fmt.Errorf("pre-commit for checkpoint %d: %w", checkpointID, err)
	}
	t := w.cur
	pid, epoch, err := t.cl.ProducerID(w.ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka sink subtask %d: pre-commit for checkpoint %d: producer id of %s: %w", w.subtask, checkpointID, t.id, err)
	}
	c := Committable{
		TransactionalID:    t.id,
		ProducerID:         pid,
		ProducerEpoch:      epoch,
		TransactionVersion: w.tv,
		CheckpointID:       checkpointID,
		LastOffsets:        t.res.lastOffsets(),
	}
	w.cur = nil
	// Close without ending the transaction: franz-go's Close sends no
	// EndTxn. It may take a moment (a last client-metrics push), so it
	// runs off the task goroutine.
	w.closing.Go(t.cl.Close)
	w.pending[w.slot] = &c
	w.slot = (w.slot + 1) % len(w.pending)
	w.log.Debug("kafka sink: pre-committed", "checkpoint", checkpointID, "transactional_id", c.TransactionalID,
		"producer_id", pid, "epoch", epoch, "partitions", len(c.LastOffsets))
	return [][]byte{c.Encode()}, nil
}

// Close aborts the open transaction of the current interval (its records
// belong to no checkpoint) and closes the clients. Transactions already
// handed over stay open for the committer.
func (w *transactionalWriter[T]) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if t := w.cur; t != nil {
		w.cur = nil
		ctx, cancel := context.WithTimeout(context.Background(), closeAbortTimeout)
		err := t.cl.AbortBufferedRecords(ctx)
		if err == nil {
			err = t.cl.EndTransaction(ctx, kgo.TryAbort)
		}
		cancel()
		if err != nil {
			w.log.Warn("kafka sink: could not abort the open transaction at close; the next start aborts it",
				"transactional_id", t.id, "err", err)
		}
		t.cl.Close()
	}
	w.cancel()
	w.closing.Wait()
	return nil
}
