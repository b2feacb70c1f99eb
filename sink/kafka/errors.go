package kafka

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrDataLoss is returned (wrapped) by Commit when a transaction of a
// completed checkpoint can no longer be committed: the broker aborted it
// (its transaction timeout expired before the commit) or something fenced
// it. The error names the transactional id and the checkpoint; the records
// of that transaction are lost.
var ErrDataLoss = errors.New("kafka sink: DATA LOSS: a transaction of a completed checkpoint was aborted and cannot be committed")

// ErrPoolExhausted is returned (wrapped) by Write when every transactional
// id of the subtask, up to TransactionalIDPoolLimit, holds a transaction
// that is not committed: checkpoints keep failing, or their commits do not
// happen.
var ErrPoolExhausted = errors.New("kafka sink: transactional id pool exhausted")

// ErrCommitFailed is returned (wrapped) by Commit when a commit kept
// failing with retriable errors until its context ended, or failed with an
// error that retrying cannot mend.
var ErrCommitFailed = errors.New("kafka sink: commit failed")

// ErrBadCommittable is returned (wrapped) when a committable cannot be
// decoded.
var ErrBadCommittable = errors.New("kafka sink: undecodable committable")

// ErrProduce is returned (wrapped) when a record could not be written.
var ErrProduce = errors.New("kafka sink: produce failed")

// ErrSerialize is returned (wrapped) by Write when the serializer refuses
// a record (an error, a panic or no record) under FailOnSerializerError.
// The error names the subtask and the record's value.
var ErrSerialize = errors.New("kafka sink: cannot serialize record")

// TransactionLostError is returned by Commit when the broker aborted a
// transaction of a completed checkpoint because its transaction timeout
// expired before the commit: EndTxn(commit) is refused (Kafka 4 with
// transaction version 2 answers INVALID_TXN_STATE) and the transaction's
// abort marker or its coordinator's state proves the abort. Its records
// are lost, and no restart can bring them back: restoring the checkpoint
// would only meet the same abort again. SuppressRestarts tells the
// runtime to fail the job for good instead of restarting it. It wraps
// ErrDataLoss and the broker's answer.
//
// With IgnoreFailuresAfterTransactionTimeout the committer logs the loss,
// counts it (SinkMetrics.TransactionsLost) and goes on instead.
type TransactionLostError struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	CheckpointID    int64
	// Records is the number of records the transaction wrote, or -1 when
	// the committable does not say (one written before it was recorded).
	Records int64
	// Partitions are the partitions the transaction wrote, with the
	// offset of its last record in each.
	Partitions []PartitionOffset
	// TransactionTimeout is the sink's transaction.timeout.ms, when known
	// (0 otherwise).
	TransactionTimeout time.Duration
	// BrokerAnswer is the error EndTxn(commit) got.
	BrokerAnswer error
	// Evidence says how the abort was proven: where the abort marker is,
	// or the coordinator's state of the id.
	Evidence string
}

func (e *TransactionLostError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kafka sink: DATA LOSS: the broker aborted transaction %s (producer id %d, epoch %d) of completed checkpoint %d",
		e.TransactionalID, e.ProducerID, e.ProducerEpoch, e.CheckpointID)
	if e.TransactionTimeout > 0 {
		fmt.Fprintf(&b, " because it outlived its transaction timeout (transaction.timeout.ms %d)", e.TransactionTimeout.Milliseconds())
	} else {
		b.WriteString(" because it outlived its transaction timeout")
	}
	b.WriteString(": lost ")
	if e.Records >= 0 {
		fmt.Fprintf(&b, "%d records", e.Records)
	} else {
		b.WriteString("its records")
	}
	fmt.Fprintf(&b, " in %s", describePartitions(e.Partitions))
	fmt.Fprintf(&b, " (the broker answered %v; %s). Restarting cannot recover them: the job fails without restarts "+
		"(raise the sink's TransactionTimeout and the broker's transaction.max.timeout.ms, or use IgnoreFailuresAfterTransactionTimeout to go on)",
		e.BrokerAnswer, e.Evidence)
	return b.String()
}

// Unwrap returns ErrDataLoss and the broker's answer.
func (e *TransactionLostError) Unwrap() []error {
	if e.BrokerAnswer == nil {
		return []error{ErrDataLoss}
	}
	return []error{ErrDataLoss, e.BrokerAnswer}
}

// SuppressRestarts returns true: the runtime fails the job for good.
func (e *TransactionLostError) SuppressRestarts() bool { return true }

// describePartitions lists partitions as topic/partition, at most a few.
func describePartitions(ps []PartitionOffset) string {
	if len(ps) == 0 {
		return "unknown partitions"
	}
	const most = 8
	parts := make([]string, 0, min(len(ps), most))
	for i, p := range ps {
		if i == most {
			break
		}
		parts = append(parts, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
	}
	s := strings.Join(parts, ", ")
	if len(ps) > most {
		s += fmt.Sprintf(" and %d more", len(ps)-most)
	}
	if len(ps) == 1 {
		return "partition " + s
	}
	return fmt.Sprintf("%d partitions %s", len(ps), s)
}

// permanentError is a proven loss no restart can mend (the transaction is
// aborted on the broker: every restore would find it so): the runtime
// fails the job once instead of restarting it for ever.
type permanentError struct{ err error }

func permanent(err error) error { return &permanentError{err: err} }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// SuppressRestarts tells the runtime not to restart the job.
func (e *permanentError) SuppressRestarts() bool { return true }
