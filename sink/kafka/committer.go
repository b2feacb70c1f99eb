package kafka

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/sink"
)

// DefaultCommitTimeout bounds one Commit call of a committer that does
// not know the transaction timeout (NewCommitter without
// TransactionTimeout); a sink's committer retries for up to the sink's
// transaction timeout, past which the broker aborts the transaction
// anyway. The job then fails (its restore commits again).
const DefaultCommitTimeout = time.Minute

// markerScanTimeout bounds the search for a transaction's control marker.
const markerScanTimeout = 30 * time.Second

// Committer commits the transactions that exactly-once writers pre-commit.
// A transaction of transaction version 2 whose writer is alive in this
// process is ended through the writer's own client for its id (an
// EndTransaction, which keeps that client in step for its next
// transaction). Any other (version 1, restored from a checkpoint, or its
// client failed) is resumed from its committable with a raw EndTxn
// request through a client that never initialises a producer, so it
// cannot fence the transaction it commits. It is safe for use by several
// goroutines.
type Committer struct {
	cfg   *config
	stats *sinkStats          // its subtask's counters
	kcfg  *kafkaclient.Config // cfg.client with the job's logger
	pool  *slotPool
	log   *slog.Logger
	bg    sync.WaitGroup // clients of closed writers being closed

	// txnTimeout is the writers' transaction timeout, for errors (0 when
	// not known: a committer of NewCommitter without TransactionTimeout).
	txnTimeout time.Duration

	mu     sync.Mutex
	cl     *kgo.Client // EndTxn at the newest version both sides support
	clV1   *kgo.Client // EndTxn pinned to v4 and below, for transaction version 1
	closed bool

	verified, unverifiable int
}

var _ sink.Committer = (*Committer)(nil)

// newCommitter makes the committer of subtask of cfg's sink, logging to
// jobLog unless the sink has a Logger of its own.
func newCommitter(cfg *config, subtask int, pool *slotPool, jobLog *slog.Logger) *Committer {
	client := cfg.client.WithJobLogger(jobLog)
	return &Committer{cfg: cfg, stats: cfg.stats.of(subtask), kcfg: client, pool: pool, log: client.Log().With("sink", "kafka", "role", "committer"), txnTimeout: cfg.txnTimeout}
}

// NewCommitter returns a committer of exactly-once transactions on the
// cluster at seeds, for use outside a job (tools, tests, a process that
// finishes the transactions of another): it shares nothing with any
// writer. Of the options, ClientOptions, Logger, CommitRetryBackoff,
// IgnoreFailuresAfterTransactionTimeout and TransactionTimeout (named in
// errors only) apply.
func NewCommitter(seeds []string, opts ...Option) (*Committer, error) {
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no seed brokers: %w", ErrInvalidConfig)
	}
	cfg := newConfig(seeds, opts)
	cfg.guarantee = ExactlyOnce
	c := newCommitter(&cfg, 0, newSlotPool(), nil)
	if !cfg.txnTimeoutSet {
		c.txnTimeout = 0
	}
	return c, nil
}

// Stats returns how many re-commits the broker refused because the id had
// moved on and a control marker proved committed (verified), and how many
// nothing could prove either way (unverifiable, logged as possible data
// loss).
func (c *Committer) Stats() (verified, unverifiable int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verified, c.unverifiable
}

// Commit commits the transactions the committables name, in order. A
// committable already committed succeeds again. It retries what Kafka
// calls retriable (the transaction coordinator moving or loading, a
// broker restarting, CONCURRENT_TRANSACTIONS) with backoff for up to the
// sink's transaction timeout (DefaultCommitTimeout when not known; or
// ctx's deadline, or until ctx is done: the task's context, cancelled at
// a cancellation or failover), then fails with ErrCommitFailed, naming
// the broker, the attempts and what was retried. A transaction the broker
// aborted because its timeout expired fails with a *TransactionLostError
// (terminal: SuppressRestarts), or, under
// IgnoreFailuresAfterTransactionTimeout, is logged, counted and passed
// over; one proven aborted otherwise (fenced) fails with ErrDataLoss,
// terminal too (a restart would find it aborted again). The errors
// name the transactional id and the checkpoint. Only an exactly-once
// writer makes committables, but a sink that is not exactly-once commits
// those it is given too: restored from a checkpoint taken while it was
// (the job's checkpointing mode changed, and with it the default
// guarantee), their transactions are prepared and must not be left open.
func (c *Committer) Commit(ctx context.Context, checkpointID int64, committables [][]byte) error {
	if len(committables) == 0 {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(c.txnTimeout, DefaultCommitTimeout))
		defer cancel()
	}
	for _, b := range committables {
		cm, err := DecodeCommittable(b)
		if err != nil {
			return fmt.Errorf("kafka sink: commit for checkpoint %d: %w", checkpointID, err)
		}
		if c.pool.committed(cm) {
			continue
		}
		start := time.Now()
		// Transaction version 2 commits through the writer's client: its
		// EndTxn bumps the epoch, so the client can begin the id's next
		// transaction at once, and that transaction's committable names it
		// alone. Under version 1 the epoch stays: the writer initialises a
		// new producer per transaction (which bumps it), and the commit
		// goes the raw way.
		if sl := c.pool.takeForCommit(cm); sl != nil {
			err := sl.cl.EndTransaction(ctx, kgo.TryCommit)
			if err == nil {
				pid, epoch, perr := sl.cl.ProducerID(ctx)
				if perr == nil && endedByOneEndTxn(cm, pid, epoch) {
					c.closeLater(c.pool.markCommitted(cm, sl, true))
					c.stats.commit(time.Since(start))
					c.log.Debug("kafka sink: committed", "transactional_id", cm.TransactionalID, "checkpoint", cm.CheckpointID,
						"producer_id", cm.ProducerID, "epoch", cm.ProducerEpoch)
					continue
				}
				// No epoch bump: no EndTxn v5 went out. More than one:
				// the client re-initialised its producer first (which
				// aborts the transaction) and committed an empty one.
				// Make sure below.
				err = fmt.Errorf("the producer is at producer id %d epoch %d after EndTransaction (%v), not one bump past the transaction's", pid, epoch, perr)
			}
			// The outcome may be unknown: the writer's client is not
			// reused, and the transaction is resumed from its
			// committable below (a commit that went through succeeds
			// again).
			c.closeLater(c.pool.commitFailed(sl))
			level := slog.LevelInfo
			if kafkaclient.Retriable(err) {
				level = slog.LevelDebug // a failover: the raw EndTxn's retries report it
			}
			c.log.Log(ctx, level, "kafka sink: commit through the writer's client failed, resuming from the committable",
				"transactional_id", cm.TransactionalID, "checkpoint", cm.CheckpointID, "cause", kafkaclient.Cause(err), "err", err)
		}
		if err := c.commitOne(ctx, cm); err != nil {
			var lost *TransactionLostError
			if !c.cfg.ignoreLost || !errors.As(err, &lost) {
				return err
			}
			// Passed over as configured: the id is free again (its
			// client, if any, is replaced before its next transaction),
			// and a re-commit in this process does not count it twice.
			c.stats.lose()
			c.log.Error("kafka sink: DATA LOSS: the broker aborted a transaction of a completed checkpoint because its transaction timeout expired; "+
				"going on as configured (IgnoreFailuresAfterTransactionTimeout)",
				"transactional_id", lost.TransactionalID, "producer_id", lost.ProducerID, "epoch", lost.ProducerEpoch,
				"checkpoint", lost.CheckpointID, "records", lost.Records, "partitions", describePartitions(lost.Partitions),
				"transaction_timeout", lost.TransactionTimeout, "broker_answer", fmt.Sprint(lost.BrokerAnswer), "evidence", lost.Evidence)
			c.closeLater(c.pool.markCommitted(cm, nil, false))
			continue
		}
		c.stats.commit(time.Since(start))
		c.closeLater(c.pool.markCommitted(cm, nil, false))
	}
	return nil
}

// endedByOneEndTxn reports whether a writer's client at producer id pid
// and epoch after EndTransaction ended cm with exactly one EndTxn
// (transaction version 2 bumps the epoch once per EndTxn, or gives a new
// producer id at epoch 0 when the epoch is exhausted). Anything else is
// not proof of the commit: no EndTxn went out (the same epoch), or
// franz-go re-initialised the producer before it (InitProducerId bumps
// the epoch and aborts the open transaction; the EndTxn then commits an
// empty one), and the commit is verified from the committable instead.
func endedByOneEndTxn(cm Committable, pid int64, epoch int16) bool {
	if pid == cm.ProducerID {
		return epoch == cm.ProducerEpoch+1
	}
	return epoch == 0
}

// closeLater closes cl (when not nil) off the caller's goroutine; Close
// waits for it.
func (c *Committer) closeLater(cl *kgo.Client) {
	if cl != nil {
		c.bg.Go(cl.Close)
	}
}

// commitOne sends EndTxn(commit) until the broker answers, retrying
// what Kafka calls retriable (the coordinator moving or loading, a broker
// restarting, CONCURRENT_TRANSACTIONS) until ctx ends.
func (c *Committer) commitOne(ctx context.Context, cm Committable) error {
	cl, err := c.client(cm.TransactionVersion)
	if err != nil {
		return fmt.Errorf("kafka sink: commit %v: %w: %w", cm, err, ErrCommitFailed)
	}
	err = kafkaclient.Retry{
		Call:   "EndTxn(commit) of transactional id " + cm.TransactionalID,
		Client: cl, Key: int16(kmsg.EndTxn), Log: c.log,
		Backoff: c.cfg.commitBackoff, MaxBackoff: c.cfg.commitBackoffMx,
	}.Do(ctx, func(ctx context.Context) error { return c.endTxn(ctx, cl, cm) })
	switch {
	case err == nil:
		c.log.Debug("kafka sink: committed", "transactional_id", cm.TransactionalID, "checkpoint", cm.CheckpointID,
			"producer_id", cm.ProducerID, "epoch", cm.ProducerEpoch)
		return nil
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch),
		errors.Is(err, kerr.InvalidProducerIDMapping), errors.Is(err, kerr.InvalidTxnState),
		errors.Is(err, kerr.TransactionalIDNotFound):
		var ke *kerr.Error
		errors.As(err, &ke)
		return c.resolve(ctx, cm, ke)
	}
	return fmt.Errorf("kafka sink: commit %v: %w: %w", cm, err, ErrCommitFailed)
}

// endTxn sends one EndTxn(commit) of cm through cl.
func (c *Committer) endTxn(ctx context.Context, cl *kgo.Client, cm Committable) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = cm.TransactionalID
	req.ProducerID = cm.ProducerID
	req.ProducerEpoch = cm.ProducerEpoch
	req.Commit = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// client returns the client for EndTxn of transaction version tv: version
// 2 transactions end with EndTxn v5+, version 1 ones with v4 and below, as
// the producer that wrote them would.
func (c *Committer) client(tv int8) (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("kafka sink committer: %w", kgo.ErrClientClosed)
	}
	p := &c.cl
	var extra []kgo.Opt
	if tv < 2 {
		p = &c.clV1
		v := kversion.Stable()
		v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
		extra = append(extra, kgo.MaxVersions(v))
	}
	if *p == nil {
		cl, err := c.kcfg.NewClient("sink-committer", extra...)
		if err != nil {
			return nil, fmt.Errorf("kafka sink committer: new client: %w", err)
		}
		*p = cl
	}
	return *p, nil
}

// resolve decides, after the broker refused a commit because the id is no
// longer at the committable's producer id and epoch in an open
// transaction, whether the transaction was committed (a re-commit after
// the id moved on: success) or aborted (data loss). The proof is the
// transaction's control marker, the first control record of its producer
// id after its last record in a partition it wrote. Without a marker (the
// log was deleted) the broker's state of the id decides when it shows the
// transaction's own completion; otherwise the commit is logged as
// unverifiable and counted, and Commit goes on.
func (c *Committer) resolve(ctx context.Context, cm Committable, cause error) error {
	verdict, where, err := c.findMarker(ctx, cm)
	if err != nil {
		c.log.Warn("kafka sink: cannot read the transaction's control marker", "transactional_id", cm.TransactionalID,
			"checkpoint", cm.CheckpointID, "err", err)
	}
	switch verdict {
	case markerCommit:
		c.mu.Lock()
		c.verified++
		c.mu.Unlock()
		c.log.Info("kafka sink: transaction already committed", "transactional_id", cm.TransactionalID,
			"checkpoint", cm.CheckpointID, "producer_id", cm.ProducerID, "epoch", cm.ProducerEpoch,
			"broker_answer", cause.Error(), "marker", where)
		return nil
	case markerAbort:
		if timedOut(cause) {
			return c.lost(cm, cause, "its abort marker is at "+where)
		}
		return permanent(fmt.Errorf("kafka sink: commit %v: the broker answered %w and the transaction's abort marker is at %s: %w",
			cm, cause, where, ErrDataLoss))
	}
	// No marker: ask the coordinator.
	var d DescribedID
	cl, derr := c.client(2)
	if derr == nil {
		d, derr = describeID(ctx, kadm.NewClient(cl), cm.TransactionalID)
	}
	if derr == nil && d.ProducerID == cm.ProducerID {
		switch {
		case d.State == "CompleteAbort" && (d.ProducerEpoch == cm.ProducerEpoch || d.ProducerEpoch == cm.ProducerEpoch+1):
			if timedOut(cause) {
				return c.lost(cm, cause, fmt.Sprintf("its coordinator shows the id aborted at epoch %d", d.ProducerEpoch))
			}
			return permanent(fmt.Errorf("kafka sink: commit %v: the broker answered %w and shows the id aborted at epoch %d: %w",
				cm, cause, d.ProducerEpoch, ErrDataLoss))
		case d.State == "CompleteCommit" && (d.ProducerEpoch == cm.ProducerEpoch || d.ProducerEpoch == cm.ProducerEpoch+1):
			c.log.Info("kafka sink: transaction already committed", "transactional_id", cm.TransactionalID,
				"checkpoint", cm.CheckpointID, "broker_answer", cause.Error())
			return nil
		}
	}
	c.mu.Lock()
	c.unverifiable++
	c.mu.Unlock()
	c.log.Error("kafka sink: POSSIBLE DATA LOSS: cannot tell whether a transaction of a completed checkpoint was committed; "+
		"its id has moved on and its control marker is gone",
		"transactional_id", cm.TransactionalID, "checkpoint", cm.CheckpointID, "producer_id", cm.ProducerID,
		"epoch", cm.ProducerEpoch, "broker_answer", cause.Error(), "broker_state", fmt.Sprintf("%+v", d), "describe_err", derr)
	return nil
}

// timedOut reports whether the broker's answer to EndTxn(commit) is the
// one it gives for a transaction it aborted because its timeout expired:
// INVALID_TXN_STATE (Kafka 4.1, transaction version 2: the abort bumped
// the epoch and completed, and the commit is a "retry" of the other
// outcome). A fenced transaction is answered PRODUCER_FENCED instead.
func timedOut(cause error) bool { return errors.Is(cause, kerr.InvalidTxnState) }

// lost is the error for a transaction of a completed checkpoint that the
// broker aborted because it timed out.
func (c *Committer) lost(cm Committable, cause error, evidence string) *TransactionLostError {
	return &TransactionLostError{
		TransactionalID: cm.TransactionalID, ProducerID: cm.ProducerID, ProducerEpoch: cm.ProducerEpoch,
		CheckpointID: cm.CheckpointID, Records: cm.Records, Partitions: cm.LastOffsets,
		TransactionTimeout: c.txnTimeout, BrokerAnswer: cause, Evidence: evidence,
	}
}

type markerVerdict int

const (
	markerUnknown markerVerdict = iota
	markerCommit
	markerAbort
)

// findMarker reads the partitions cm wrote, read_uncommitted with control
// records kept, from the record after its last one, up to the end offset
// at the time of the call, for the first control record of cm's producer
// id: the transaction's COMMIT or ABORT marker.
func (c *Committer) findMarker(ctx context.Context, cm Committable) (markerVerdict, string, error) {
	ctx, cancel := context.WithTimeout(ctx, markerScanTimeout)
	defer cancel()
	cl, err := c.client(2)
	if err != nil {
		return markerUnknown, "", err
	}
	adm := kadm.NewClient(cl)
	var errs []error
	for i, po := range cm.LastOffsets {
		if i == 3 {
			break // markers are all-or-nothing: a few partitions suffice
		}
		v, where, err := c.scanPartition(ctx, adm, cm.ProducerID, po)
		if err != nil {
			errs = append(errs, err)
		}
		if v != markerUnknown {
			return v, where, nil
		}
	}
	return markerUnknown, "", errors.Join(errs...)
}

func (c *Committer) scanPartition(ctx context.Context, adm *kadm.Client, pid int64, po PartitionOffset) (markerVerdict, string, error) {
	ends, err := adm.ListEndOffsets(ctx, po.Topic)
	if err != nil {
		return markerUnknown, "", fmt.Errorf("end offset of %s/%d: %w", po.Topic, po.Partition, err)
	}
	end, ok := ends.Lookup(po.Topic, po.Partition)
	if !ok || end.Err != nil {
		return markerUnknown, "", fmt.Errorf("end offset of %s/%d: %v", po.Topic, po.Partition, end.Err)
	}
	from := po.Offset + 1
	if end.Offset <= from {
		return markerUnknown, "", nil
	}
	cl, err := c.kcfg.NewClient("sink-marker-reader",
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{po.Topic: {po.Partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return markerUnknown, "", err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return markerUnknown, "", fmt.Errorf("scan %s/%d from %d: %w", po.Topic, po.Partition, from, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err) })
		if ferr != nil {
			return markerUnknown, "", ferr
		}
		verdict, where, done := markerUnknown, "", false
		fs.EachRecord(func(r *kgo.Record) {
			if done || r.Offset < from {
				return
			}
			if r.Attrs.IsControl() && r.ProducerID == pid && len(r.Key) >= 4 {
				switch binary.BigEndian.Uint16(r.Key[2:4]) {
				case 0:
					verdict = markerAbort
				case 1:
					verdict = markerCommit
				default:
					return
				}
				where, done = fmt.Sprintf("%s/%d offset %d", r.Topic, r.Partition, r.Offset), true
				return
			}
			if r.Offset >= end.Offset-1 {
				done = true
			}
		})
		if done {
			return verdict, where, nil
		}
	}
}

// Close closes the committer's clients.
func (c *Committer) Close() error {
	c.mu.Lock()
	c.closed = true
	for _, cl := range []*kgo.Client{c.cl, c.clV1} {
		if cl != nil {
			cl.Close()
		}
	}
	c.cl, c.clV1 = nil, nil
	c.mu.Unlock()
	c.bg.Wait()
	return nil
}
