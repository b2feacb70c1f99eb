package kafka

import "errors"

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
