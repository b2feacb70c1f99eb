package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/sink"
)

// DeliveryGuarantee is what a Kafka sink promises about its records after a
// failure, as Flink's DeliveryGuarantee.
type DeliveryGuarantee int

const (
	// DeliveryNone flushes nothing at checkpoints: records in flight at a
	// failure may be lost, and replayed records are written again.
	DeliveryNone DeliveryGuarantee = iota
	// AtLeastOnce flushes at every checkpoint barrier and checks the
	// result of every record: nothing is lost, replays may duplicate.
	AtLeastOnce
	// ExactlyOnce writes each checkpoint interval into one Kafka
	// transaction that commits when the checkpoint completes.
	ExactlyOnce
)

func (g DeliveryGuarantee) String() string {
	switch g {
	case DeliveryNone:
		return "none"
	case AtLeastOnce:
		return "at-least-once"
	case ExactlyOnce:
		return "exactly-once"
	}
	return fmt.Sprintf("DeliveryGuarantee(%d)", int(g))
}

// Defaults, as Flink's KafkaSink.
const (
	// DefaultTransactionTimeout is the transaction timeout of an
	// exactly-once sink (transaction.timeout.ms): 15 minutes, the
	// broker's default transaction.max.timeout.ms, so that a broker with
	// default settings accepts it. Flink's KafkaSink defaults to 1 hour,
	// which such a broker refuses (InitProducerId fails with
	// INVALID_TRANSACTION_TIMEOUT); set TransactionTimeout, and raise the
	// broker's limit, when the checkpoint settings need more (see
	// ValidateCheckpointing).
	DefaultTransactionTimeout = 15 * time.Minute
	// DefaultMaxConcurrentCheckpoints sizes the transactional id pool
	// (pool = max concurrent checkpoints + 1), as Flink's default of one
	// concurrent checkpoint.
	DefaultMaxConcurrentCheckpoints = 1
	// DefaultTransactionalIDPoolLimit bounds how far a subtask's pool of
	// transactional ids grows with overflow ids while transactions of
	// aborted checkpoints wait for their commit.
	DefaultTransactionalIDPoolLimit = 64
)

// Serializer turns a value into the Kafka record to write: topic, key,
// value, headers, and optionally partition and timestamp. A record
// without a timestamp gets the value's event timestamp when it has one
// (else the time of writing, as franz-go does). With an error it may
// return the part of the record it made (topic, key): the DeadLetterTopic
// policy writes that part. A serializer that panics or returns no record
// fails as one that returns an error; the sink's SerializerErrorPolicy
// says what then happens (default FailOnSerializerError).
type Serializer[T any] func(v T) (*kgo.Record, error)

// ValueSerializer writes every value to topic, encoded by c, without a key.
// The record and its value are one allocation (NewRecord).
func ValueSerializer[T any](topic string, c codec.Codec[T]) Serializer[T] {
	return func(v T) (*kgo.Record, error) {
		sp := serializerScratch.Get().(*[]byte)
		defer putScratch(sp)
		b, err := c.Append((*sp)[:0], v)
		if err != nil {
			return &kgo.Record{Topic: topic}, fmt.Errorf("encode value for topic %s: %w", topic, err)
		}
		*sp = b
		return encodedRecord(topic, nil, b), nil
	}
}

// KeyValueSerializer writes every value to topic with the key key(v)
// encoded by kc and the value encoded by vc. The default partitioner then
// sends equal keys to the same partition. The record, its key and its
// value are one allocation (NewRecord).
func KeyValueSerializer[T, K any](topic string, key func(T) K, kc codec.Codec[K], vc codec.Codec[T]) Serializer[T] {
	return func(v T) (*kgo.Record, error) {
		sp := serializerScratch.Get().(*[]byte)
		defer putScratch(sp)
		k, err := kc.Append((*sp)[:0], key(v))
		if err != nil {
			return &kgo.Record{Topic: topic}, fmt.Errorf("encode key for topic %s: %w", topic, err)
		}
		*sp = k
		kl := len(k)
		b, err := vc.Append(k, v)
		if err != nil {
			return encodedRecord(topic, k, nil), fmt.Errorf("encode value for topic %s: %w", topic, err)
		}
		*sp = b
		return encodedRecord(topic, b[:kl], b[kl:]), nil
	}
}

// putScratch gives an encoding buffer back to serializerScratch, unless
// one large value grew it past scratchMax.
func putScratch(sp *[]byte) {
	if cap(*sp) <= scratchMax {
		serializerScratch.Put(sp)
	}
}

// config is what the options set.
type config struct {
	stats *statsSet // the counters of each subtask's writer and committer
	// client is the seeds, the user's franz-go options, the logger and
	// the security settings, shared with the Kafka source.
	client          kafkaclient.Config
	guarantee       DeliveryGuarantee
	guaranteeSet    bool // Guarantee was given
	prefix          string
	maxConcurrent   int
	poolSize        int
	poolLimit       int
	txnTimeout      time.Duration
	txnTimeoutSet   bool // TransactionTimeout was given
	prefixDerived   bool // prefix is DefaultTransactionalIDPrefix's
	ignoreLost      bool // IgnoreFailuresAfterTransactionTimeout
	serPolicy       SerializerErrorPolicy
	commitBackoff   time.Duration
	commitBackoffMx time.Duration
}

func newConfig(seeds []string, opts []Option) config {
	cfg := config{
		stats:           &statsSet{},
		client:          kafkaclient.Config{Seeds: seeds},
		maxConcurrent:   DefaultMaxConcurrentCheckpoints,
		txnTimeout:      DefaultTransactionTimeout,
		poolLimit:       DefaultTransactionalIDPoolLimit,
		commitBackoff:   100 * time.Millisecond,
		commitBackoffMx: 5 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.client.Logger = cfg.client.Log()
	if cfg.commitBackoff <= 0 {
		cfg.commitBackoff = 100 * time.Millisecond
	}
	cfg.commitBackoffMx = max(cfg.commitBackoffMx, cfg.commitBackoff)
	return cfg
}

// Option configures a Sink.
type Option func(*config)

// Guarantee sets the delivery guarantee. Without it the guarantee follows
// the job's checkpointing (sink.JobAware): ExactlyOnce with exactly-once
// checkpoints, AtLeastOnce with at-least-once checkpoints, DeliveryNone
// without checkpointing (and for a sink used outside a job). Given, it
// must fit the job: ExactlyOnce needs exactly-once checkpoints.
func Guarantee(g DeliveryGuarantee) Option {
	return func(c *config) { c.guarantee, c.guaranteeSet = g, true }
}

// TransactionalIDPrefix sets the prefix of the transactional ids of an
// exactly-once sink. Without it the prefix is derived from the job id
// and the sink's uid (DefaultTransactionalIDPrefix), stable across the
// job's runs and unique within the job. Two exactly-once sinks writing
// with one prefix abort each other's transactions: two sinks of a job
// with the same prefix are refused before it starts, and two jobs must
// never share one.
func TransactionalIDPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// DefaultTransactionalIDPrefix is the prefix of an exactly-once sink
// given none: <job id>-<sink uid>, white space replaced by '_'.
func DefaultTransactionalIDPrefix(jobID, uid string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, jobID+"-"+uid)
}

// MaxConcurrentCheckpoints sizes the pool of transactional ids per
// subtask to n+1 (default 1, so 2 ids). Set it to the job's
// max-concurrent-checkpoints.
func MaxConcurrentCheckpoints(n int) Option { return func(c *config) { c.maxConcurrent = n } }

// TransactionalIDPoolSize overrides the pool size (default max concurrent
// checkpoints + 1): the ids a subtask's writer takes in turn.
func TransactionalIDPoolSize(n int) Option { return func(c *config) { c.poolSize = n } }

// TransactionalIDPoolLimit bounds the ids of a subtask (default 64). When
// the id whose turn it is still holds an uncommitted transaction (a
// checkpoint was aborted: its transaction commits with the next completed
// checkpoint), the writer takes an overflow id past the pool rather than
// wait, and gives it back once committed; past the limit Write fails with
// ErrPoolExhausted.
func TransactionalIDPoolLimit(n int) Option { return func(c *config) { c.poolLimit = n } }

// TransactionTimeout sets the Kafka transaction timeout
// (transaction.timeout.ms, default 15 min). It must cover the longest a
// transaction may wait for its commit (see ValidateCheckpointing), and not
// exceed the broker's transaction.max.timeout.ms (default 15 min).
func TransactionTimeout(d time.Duration) Option {
	return func(c *config) { c.txnTimeout, c.txnTimeoutSet = d, true }
}

// IgnoreFailuresAfterTransactionTimeout makes the committer go on when the
// broker aborted a transaction of a completed checkpoint because its
// timeout expired (as Flink's
// FlinkKafkaProducer.ignoreFailuresAfterTransactionTimeout): the loss is
// logged at Error level, naming the transaction, the checkpoint and what
// was lost, and counted in SinkMetrics.TransactionsLost, instead of
// failing the job with a TransactionLostError. Its records are lost
// either way; use it when a job must keep running after a long outage.
func IgnoreFailuresAfterTransactionTimeout() Option { return func(c *config) { c.ignoreLost = true } }

// SerializerErrorPolicy says what a writer does with a record its
// serializer refuses (an error, a panic, or no record): a poison pill on
// the way out.
type SerializerErrorPolicy struct {
	kind  policyKind
	topic string // the dead-letter topic
}

type policyKind uint8

const (
	policyFail policyKind = iota
	policySkip
	policyDeadLetter
)

func (p SerializerErrorPolicy) String() string {
	switch p.kind {
	case policySkip:
		return "skip"
	case policyDeadLetter:
		return "dead-letter topic " + p.topic
	}
	return "fail"
}

// FailOnSerializerError fails the writer with ErrSerialize, naming the
// subtask and the record's value (the default). The job restarts as its
// restart strategy says, and meets the record again.
func FailOnSerializerError() SerializerErrorPolicy { return SerializerErrorPolicy{} }

// SkipSerializerErrors logs the record (Warn), counts it
// (SinkMetrics.RecordsSkipped) and goes on without it.
func SkipSerializerErrors() SerializerErrorPolicy { return SerializerErrorPolicy{kind: policySkip} }

// DeadLetterTopic writes, instead of the record, a copy to topic and goes
// on, counting it (SinkMetrics.RecordsDeadLettered). The copy carries the
// key and value the serializer made when it got that far (its
// HeaderValueFormat header says "serialized"), else the value printed
// with fmt's %v ("fmt"), and headers naming the error, the intended topic
// and the subtask. It is written as the sink's records are: inside the
// interval's transaction for exactly-once (it commits with the
// checkpoint), flushed at every barrier for at-least-once.
func DeadLetterTopic(topic string) SerializerErrorPolicy {
	return SerializerErrorPolicy{kind: policyDeadLetter, topic: topic}
}

// OnSerializerError sets the policy for records the serializer refuses
// (default FailOnSerializerError).
func OnSerializerError(p SerializerErrorPolicy) Option { return func(c *config) { c.serPolicy = p } }

// CommitRetryBackoff sets the first and the largest wait between retries
// of a commit that failed with a retriable error (default 100 ms and 5 s).
func CommitRetryBackoff(first, max time.Duration) Option {
	return func(c *config) { c.commitBackoff, c.commitBackoffMx = first, max }
}

// ClientOptions passes options to every franz-go client the sink makes
// (SASL, TLS, client id, producer batching...). The sink sets the seed
// brokers, and for exactly-once the transactional id and timeout, after
// them.
func ClientOptions(opts ...kgo.Opt) Option {
	return func(c *config) { c.client.Options = append(c.client.Options, opts...) }
}

// Logger sets the logger of the sink and of the franz-go clients it makes
// (default: the job's logger, sluice.WithLogger; slog.Default() outside
// a job).
func Logger(l *slog.Logger) Option { return func(c *config) { c.client.Logger = l } }

// ErrInvalidConfig is returned (wrapped) by NewSink for a configuration it
// refuses.
var ErrInvalidConfig = errors.New("kafka sink: invalid configuration")

// ErrTransactionTimeoutTooSmall is returned (wrapped) by
// ValidateCheckpointing when the transaction timeout cannot cover the
// longest a transaction may wait for its commit.
var ErrTransactionTimeoutTooSmall = errors.New("kafka sink: transaction timeout too small for the checkpoint and restart settings")

// Sink writes records of type T to Kafka. It is a sink.TwoPhaseCommitSink
// whatever its guarantee: with DeliveryNone its writers pre-commit
// nothing, with AtLeastOnce they flush at every barrier and hand over no
// committables, with ExactlyOnce they hand over one transaction per
// checkpoint interval.
type Sink[T any] struct {
	cfg  config
	ser  Serializer[T]
	pool *slotPool
	// boundUID is the uid of the sink operator BindJob was called for.
	boundUID *string
}

var (
	_ sink.TwoPhaseCommitSink[int] = (*Sink[int])(nil)
	_ sink.JobAware                = (*Sink[int])(nil)
)

// NewSink returns a Kafka sink writing to the cluster at seeds the records
// ser makes.
func NewSink[T any](seeds []string, ser Serializer[T], opts ...Option) (*Sink[T], error) {
	cfg := newConfig(seeds, opts)
	if err := cfg.client.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrInvalidConfig)
	}
	if ser == nil {
		return nil, fmt.Errorf("no serializer: %w", ErrInvalidConfig)
	}
	switch cfg.guarantee {
	case DeliveryNone, AtLeastOnce:
	case ExactlyOnce:
		if err := cfg.checkExactlyOnce(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown delivery guarantee %v: %w", cfg.guarantee, ErrInvalidConfig)
	}
	if p := cfg.serPolicy; p.kind == policyDeadLetter && (p.topic == "" || strings.TrimSpace(p.topic) != p.topic) {
		return nil, fmt.Errorf("dead-letter topic %q: want a topic name without white space: %w", p.topic, ErrInvalidConfig)
	}
	return &Sink[T]{cfg: cfg, ser: ser, pool: newSlotPool()}, nil
}

// checkExactlyOnce refuses the settings an exactly-once sink cannot work
// with and sizes the pool. The prefix may still be empty: BindJob
// derives it.
func (c *config) checkExactlyOnce() error {
	if strings.IndexFunc(c.prefix, unicode.IsSpace) >= 0 {
		return fmt.Errorf("transactional id prefix %q contains white space: %w", c.prefix, ErrInvalidConfig)
	}
	if c.maxConcurrent < 1 {
		return fmt.Errorf("max concurrent checkpoints %d, want >= 1: %w", c.maxConcurrent, ErrInvalidConfig)
	}
	if c.poolSize == 0 {
		c.poolSize = c.maxConcurrent + 1
	}
	if c.poolSize < 2 {
		return fmt.Errorf("transactional id pool size %d, want >= 2: %w", c.poolSize, ErrInvalidConfig)
	}
	if c.poolLimit < c.poolSize {
		return fmt.Errorf("transactional id pool limit %d is below the pool size %d: %w", c.poolLimit, c.poolSize, ErrInvalidConfig)
	}
	if c.txnTimeout <= 0 || c.txnTimeout%time.Millisecond != 0 {
		return fmt.Errorf("transaction timeout %v, want a positive whole number of milliseconds: %w", c.txnTimeout, ErrInvalidConfig)
	}
	return nil
}

// ErrGuaranteeConflict is returned (wrapped) by BindJob when an explicit
// Guarantee contradicts the job's checkpointing.
var ErrGuaranteeConflict = errors.New("kafka sink: delivery guarantee does not fit the job's checkpointing")

// BindJob settles the sink's defaults from the job it is part of (the
// job calls it before it starts, see sink.JobAware): without Guarantee,
// the guarantee follows the job's checkpointing; an exactly-once sink
// without TransactionalIDPrefix gets DefaultTransactionalIDPrefix(job
// id, uid). An explicit ExactlyOnce without exactly-once checkpoints is
// refused (ErrGuaranteeConflict): without checkpoints nothing would
// commit, and with at-least-once checkpoints records replayed after a
// restore would be written twice. What it settled is logged once, at
// Info. An exactly-once sink claims its prefix: two such sinks of one
// job with the same prefix are refused before the job starts.
func (s *Sink[T]) BindJob(job sink.JobInfo) ([]sink.Exclusive, error) {
	c := &s.cfg
	if s.boundUID != nil && *s.boundUID != job.UID {
		return nil, fmt.Errorf("one kafka sink is given to two SinkTo calls (uids %q and %q): make one NewSink per SinkTo: %w",
			*s.boundUID, job.UID, ErrInvalidConfig)
	}
	uid := job.UID
	s.boundUID = &uid
	origin := "Guarantee option"
	if !c.guaranteeSet {
		origin = "the job's " + job.Checkpointing.String()
		switch job.Checkpointing {
		case sink.ExactlyOnceCheckpoints:
			c.guarantee = ExactlyOnce
		case sink.AtLeastOnceCheckpoints:
			c.guarantee = AtLeastOnce
		default:
			c.guarantee = DeliveryNone
		}
	} else if c.guarantee == ExactlyOnce && job.Checkpointing != sink.ExactlyOnceCheckpoints {
		how := "turn checkpointing on (sluice.WithCheckpointing, execution.checkpointing.interval)"
		if job.Checkpointing == sink.AtLeastOnceCheckpoints {
			how = "set the checkpointing mode to exactly-once (sluice.WithCheckpointingMode(sluice.ExactlyOnce), execution.checkpointing.mode: EXACTLY_ONCE)"
		}
		return nil, fmt.Errorf("the Guarantee(ExactlyOnce) option with %s cannot keep its promise: %s, or leave Guarantee out (it then follows the job's checkpointing): %w",
			job.Checkpointing, how, ErrGuaranteeConflict)
	}
	attrs := []any{"sink", job.Name, "uid", job.UID, "guarantee", c.guarantee.String(), "from", origin}
	if c.guarantee == ExactlyOnce {
		prefixFrom := "TransactionalIDPrefix option"
		if c.prefix == "" || c.prefixDerived {
			c.prefix, c.prefixDerived = DefaultTransactionalIDPrefix(job.JobID, job.UID), true
			prefixFrom = "job id and sink uid"
		}
		if err := c.checkExactlyOnce(); err != nil {
			return nil, err
		}
		attrs = append(attrs, "transactional_id_prefix", c.prefix, "prefix_from", prefixFrom)
	}
	log := job.Logger
	if log == nil {
		log = c.client.Log()
	}
	log.Info("kafka sink: delivery guarantee", attrs...)
	if c.guarantee != ExactlyOnce {
		return nil, nil
	}
	return []sink.Exclusive{{
		What: fmt.Sprintf("Kafka transactional id prefix %q", c.prefix),
		Why: "exactly-once sinks that share a prefix abort each other's transactions (PRODUCER_FENCED); give each its own " +
			"TransactionalIDPrefix, or none: the default is derived from the job id and the sink's uid",
	}}, nil
}

// Guarantee returns the sink's delivery guarantee: the one given, or
// once the job bound it (BindJob) the one of the job's checkpointing.
func (s *Sink[T]) Guarantee() DeliveryGuarantee { return s.cfg.guarantee }

// TransactionalIDPrefix returns the prefix of the sink's transactional
// ids: the one given, or once the job bound it the derived one ("" for a
// sink that is not exactly-once).
func (s *Sink[T]) TransactionalIDPrefix() string {
	if s.cfg.guarantee != ExactlyOnce {
		return ""
	}
	return s.cfg.prefix
}

// PoolSize returns the number of transactional ids per subtask (0 unless
// exactly-once).
func (s *Sink[T]) PoolSize() int { return s.cfg.poolSize }

// ValidateCheckpointing refuses a transaction timeout that cannot cover
// the longest a transaction may wait for its commit (t.MaxCommitWait): a
// transaction opens at one barrier and commits when the next checkpoint
// completes, which may take the interval plus the checkpoint timeout,
// plus, for every checkpoint that may fail in a row
// (tolerable-failed-checkpoints), another timeout and min pause, plus the
// restart delay when the job fails after the checkpoint completed and the
// restarted job commits it. Past its timeout the broker aborts it and its
// records are lost. The error names every term under its Flink key. The
// runtime calls it when it builds the job. It returns nil for a sink that
// is not exactly-once.
func (s *Sink[T]) ValidateCheckpointing(t sink.CheckpointTiming) error {
	if s.cfg.guarantee != ExactlyOnce {
		return nil
	}
	if t.Interval <= 0 {
		return fmt.Errorf("exactly-once Kafka sink needs checkpointing enabled (execution.checkpointing.interval %v): %w",
			t.Interval, ErrInvalidConfig)
	}
	if need := t.MaxCommitWait(); s.cfg.txnTimeout < need {
		return fmt.Errorf("the sink's transaction.timeout.ms %d (%v) is shorter than the longest a transaction may wait for its commit, %v = %v: "+
			"raise the sink's TransactionTimeout (and the broker's transaction.max.timeout.ms, 15 min by default), "+
			"or lower the checkpoint interval, timeout, tolerable failed checkpoints, min pause or restart delay: %w",
			s.cfg.txnTimeout.Milliseconds(), s.cfg.txnTimeout, need, t, ErrTransactionTimeoutTooSmall)
	}
	return nil
}

// NewWriter makes the writer of one subtask. An exactly-once writer first
// aborts the transactions lingering under its ids (and under the ids of
// subtask indexes of earlier parallelisms that map to it), so that
// read_committed consumers are not held back by a crashed run.
func (s *Sink[T]) NewWriter(ctx sink.WriterContext) (sink.Writer[T], error) {
	if ctx.Parallelism < 1 || ctx.Subtask < 0 || ctx.Subtask >= ctx.Parallelism {
		return nil, fmt.Errorf("kafka sink: subtask %d of parallelism %d: %w", ctx.Subtask, ctx.Parallelism, sink.ErrInvalidWriterContext)
	}
	if s.cfg.guarantee == ExactlyOnce {
		if s.cfg.prefix == "" {
			return nil, fmt.Errorf("kafka sink subtask %d: exactly-once without a transactional id prefix: give TransactionalIDPrefix, "+
				"or run the sink in a job (sluice.SinkTo), which derives one from the job id and the sink's uid: %w", ctx.Subtask, ErrInvalidConfig)
		}
		return newTransactionalWriter(s, ctx)
	}
	return newWriter(s, ctx)
}

// NewCommitter makes the committer of one subtask. It commits nothing
// unless the sink is exactly-once.
func (s *Sink[T]) NewCommitter(ctx sink.WriterContext) (sink.Committer, error) {
	return newCommitter(&s.cfg, ctx.Subtask, s.pool, ctx.Logger), nil
}
