// Package kafka writes a job's output to Kafka, exactly once when the
// job's checkpoints are (Flink's KafkaSink):
//
//	snk, err := kafka.NewSink(seeds, kafka.ValueSerializer("clicks-per-minute", codec.JSON[UserMinute]{}))
//	sluice.SinkTo(perMinute, snk, sluice.UID("per-minute-out"))
//
// With exactly-once checkpoints (the default mode) each subtask writes a
// checkpoint interval's records into one Kafka transaction that commits
// when the checkpoint completes, so a read_committed consumer sees every
// record once whatever failures the job recovers from. Nothing to set:
// the guarantee follows the checkpointing mode, and the transactional id
// prefix is <job id>-<sink uid>. Guarantee, TransactionalIDPrefix,
// TransactionTimeout (15 min; the broker's transaction.max.timeout.ms
// must allow it) and ClientOptions change them; KeyValueSerializer writes
// keys; OnSerializerError says what to do with a record the serializer
// refuses. ExampleNewSink runs a job on an embedded broker; docs/kafka.md
// and docs/exactly-once.md are the guides.
//
// # How it works
//
// The package owns the writers for the delivery guarantees none,
// at-least-once and exactly-once, the exactly-once committer that
// finishes transactions from their committables (a raw EndTxn with the
// stored producer id and epoch), the bounded pool of transactional ids
// per subtask, and the abort of lingering transactions at startup.
//
// The sink settles its defaults from the job it is part of (BindJob, see
// sink.JobAware): without Guarantee its delivery guarantee follows the
// job's checkpointing (exactly-once checkpoints: ExactlyOnce;
// at-least-once: AtLeastOnce; none: DeliveryNone), without
// TransactionalIDPrefix an exactly-once sink's prefix is <job id>-<uid>,
// and it claims that prefix, so that two sinks of one job sharing one are
// refused before the job starts.
//
// Exactly-once is two-phase commit. Between two checkpoint barriers a
// writer produces into one Kafka transaction under a transactional id of
// its pool, `<prefix>-<subtask>-<slot>`. At barrier n (PrepareCommit) it
// flushes, checks the result of every record (those franz-go refused
// before buffering them included), and hands over a committable
// that names the transaction: transactional id, producer id, epoch,
// transaction version, checkpoint and the last offset written per
// partition. It never ends the transaction itself. The next interval
// writes under the next slot. When checkpoint n completes, the Committer
// commits the transaction. Under transaction version 2 (KIP-890, Kafka 4's
// default) it does so through the slot's own franz-go client, whose
// EndTxn bumps the epoch, and the slot keeps that client for its next
// transaction: InitProducerId runs once per id, not once per transaction.
// Under version 1 the epoch would stay, and two transactions could not be
// told apart by their committables, so each transaction gets a new
// producer (InitProducerId, which bumps the epoch). A transaction restored
// from a checkpoint (its writer is gone), or one of version 1, is resumed
// with an EndTxn request sent through a client that never initialised a
// producer for that id, so nothing can fence it by accident.
//
// A writer never waits for a commit. When the slot whose turn it is still
// holds an uncommitted transaction (an aborted checkpoint's, which
// commits with the next completed checkpoint, whose notification runs on
// the writer's own task goroutine), it takes an overflow id past the pool
// and returns it once committed: the ids grow by what is outstanding,
// never with the checkpoint count, and the writer's state records how many
// were used so that a restore aborts them all.
//
// Re-committing a transaction that is already committed succeeds: the
// broker answers a retry of the EndTxn that completed it with success, and
// when the id has moved on since (a later transaction, an abort at
// startup) the committer reads the transaction's control marker in the
// output partition to tell committed from aborted. An aborted one is data
// loss. One the broker aborted because its transaction timeout expired
// (EndTxn answers INVALID_TXN_STATE under transaction version 2) fails
// with a *TransactionLostError, which tells the runtime not to restart:
// every restore would meet the same abort. With
// IgnoreFailuresAfterTransactionTimeout the committer logs and counts it
// and goes on instead. One proven aborted otherwise (fenced) fails with
// ErrDataLoss, also without a restart. Both name the id and the
// checkpoint. ValidateCheckpointing
// refuses, before the job starts, a transaction timeout shorter than the
// longest a transaction may wait for its commit under the checkpoint and
// restart settings.
//
// Every blocking call of the writers and committers (flushes, waits for
// room in a producer's buffer, InitProducerId, EndTxn, the abort of
// lingering transactions) gives up when the task's context
// (sink.WriterContext.Context, and the context handed to Commit) is done,
// so that a cancellation or failover does not wait for a broker that is
// down.
//
// A record the serializer refuses (an error, a panic, no record) is
// handled by the sink's SerializerErrorPolicy: fail (default), skip, or a
// copy to a dead-letter topic, written in the checkpoint's transaction
// for exactly-once.
//
// The sink reports its figures to the metrics collector
// (metrics_report.go, through metrics/report), its committables are
// decoded for inspect (inspect.go, through inspect/decode), and the
// client configuration it shares with the Kafka source is
// internal/kafkaclient's.
package kafka
