// Package kafka reads Kafka topics as a job's input, exactly once with
// the job's checkpoints (Flink's KafkaSource):
//
//	src, err := kafka.NewSource(seeds, kafka.Topics("clicks"), kafka.ValueDecoder(codec.JSON[Click]{}))
//	clicks := sluice.FromSource(env, src,
//		sluice.ForBoundedOutOfOrderness[Click](5*time.Second).
//			WithTimestampAssigner(func(c Click, _ int64) int64 { return c.TS }).
//			WithIdleness(time.Minute),
//		"clicks", sluice.UID("clicks"))
//
// The source reads read_committed, from the earliest offsets on the job's
// first start (StartFrom: Latest, Committed, Timestamp, Offsets) and from
// its checkpoint's offsets after that; the offsets live in the job's
// checkpoints, not in a consumer group (GroupID commits them to one for
// lag monitoring). The watermark strategy given to FromSource runs per
// partition, with its idleness. TopicPattern subscribes to the topics a
// regular expression matches, new ones included
// (PartitionDiscoveryInterval). A record the decoder refuses fails the
// job naming topic, partition and offset (FailOnBadRecord), or is skipped
// (SkipBadRecords) or copied to a dead-letter topic (DeadLetterTopic).
// Bounded stops at the offsets that were the latest at the first start.
// A decoder may keep the record it is given, or its bytes, unless it
// says it keeps nothing (DecoderKeepsNothing; ValueDecoder's keep
// nothing): then the source reuses the memory of the records and
// decompressed batches it has decoded (see Decoder).
// The examples: ExampleNewSource runs a job on an embedded broker,
// Example_options shows the options; docs/kafka.md is the guide.
//
// # How it works
//
// The package owns the subscription (topics by list or pattern), the
// deterministic assignment of partitions (splits) to subtasks and the
// discovery of new ones, the starting and stopping offsets, the reader
// that consumes its partitions directly (no consumer-group rebalancing)
// and hands out their records in turn, a bounded batch per partition
// (recycling each into its client's pool once decoded when the decoder
// keeps nothing of it: record_pool.go),
// each to its partition's split output (so that the job's watermark
// strategy runs per partition, see source.ReaderOutput), its snapshot
// (next offset per partition) and restore, the commit of offsets back to
// a group for lag monitoring, and the policies for records that cannot be
// decoded (the decoder refuses them or panics). Its reader reports its
// figures to the metrics collector (metrics_report.go, through
// metrics/report) and its split states are decoded for inspect
// (inspect.go, through inspect/decode); the client configuration it
// shares with the Kafka sink is internal/kafkaclient's.
package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/source"
)

// DefaultPartitionDiscoveryInterval is how often an unbounded source looks
// for new partitions (Flink's partition.discovery.interval.ms default since
// FLIP-288: 5 minutes).
const DefaultPartitionDiscoveryInterval = 5 * time.Minute

// Decoder turns a Kafka record into a value. An error makes the record a
// bad record, handled by the source's BadRecordPolicy; so does a panic,
// which the reader recovers (the error wraps ErrDecoderPanic and names
// the panic value). An error with a method Temporary() bool that returns
// true (a Schema Registry that cannot be reached) is not the record's
// fault: it fails the reader under every policy, and the restart reads
// the record again.
//
// What a decoder may keep of the record: by default anything. The value
// it returns may hold r itself, or r.Key, r.Value or a header's value
// (say a []byte decoder returning r.Value as it is), and the source
// never reuses them. A decoder that keeps nothing of r past its return
// (it copies what it keeps: string(r.Key), a codec's Decode, which must
// not retain its input) lets the source reuse the memory of the records
// and of the decompressed batches their bytes point into, for the
// records of later fetches: fewer allocations, fewer collections.
// ValueDecoder's decoders keep nothing (codec.Codec's Decode must not
// retain its input) and the source knows them; a decoder of one's own
// says so with the option DecoderKeepsNothing. A decoder that says so
// and keeps the record or its bytes anyway sees them overwritten by
// other records. The records the decoder refuses or panics on (and their
// dead-letter copies and errors) are never reused, whatever the
// decoder.
type Decoder[T any] func(r *kgo.Record) (T, error)

// ValueDecoder decodes the record's value with c. Its decoder keeps
// nothing of the record (a codec must not retain what it decodes), so
// the source reuses the memory of the records it has decoded (see
// Decoder).
//
// It is never inlined: NewSource knows its decoders by their code (see
// keepsNothing), which inlining would copy into the caller.
//
//go:noinline
func ValueDecoder[T any](c codec.Codec[T]) Decoder[T] {
	return func(r *kgo.Record) (T, error) { return c.Decode(r.Value) }
}

// keepsNothing reports whether decode is one of ValueDecoder's, whose
// codec does not retain the bytes it decodes: the decoders of a Go
// function literal share its code, which reflect gives as the func
// value's pointer.
func keepsNothing[T any](decode Decoder[T]) bool {
	return reflect.ValueOf(decode).Pointer() == reflect.ValueOf(ValueDecoder[T](nil)).Pointer()
}

// Subscription says which topics the source reads.
type Subscription struct {
	topics  []string
	pattern *regexp.Regexp
}

// Topics subscribes to the named topics.
func Topics(names ...string) Subscription { return Subscription{topics: names} }

// TopicPattern subscribes to every topic whose whole name matches re
// (internal topics excluded); topics created later are found by partition
// discovery.
func TopicPattern(re *regexp.Regexp) Subscription { return Subscription{pattern: re} }

func (s Subscription) String() string {
	if s.pattern != nil {
		return fmt.Sprintf("pattern %s", s.pattern)
	}
	return fmt.Sprintf("topics %v", s.topics)
}

func (s Subscription) matches(topic string) bool {
	if s.pattern != nil {
		loc := s.pattern.FindStringIndex(topic)
		return loc != nil && loc[0] == 0 && loc[1] == len(topic)
	}
	for _, t := range s.topics {
		if t == topic {
			return true
		}
	}
	return false
}

// startKind is how StartingOffsets finds the first offset.
type startKind int

const (
	startEarliest startKind = iota
	startLatest
	startCommitted
	startTimestamp
	startSpecific
)

// StartingOffsets says where a source without restored state starts.
type StartingOffsets struct {
	kind     startKind
	millis   int64
	offsets  map[string]map[int32]int64
	fallback *StartingOffsets // for committed and specific offsets
}

// Earliest starts at the log start offset of every partition (the
// default).
func Earliest() StartingOffsets { return StartingOffsets{kind: startEarliest} }

// Latest starts at the end of every partition, as it is when the reader
// starts (the last stable offset under read_committed).
func Latest() StartingOffsets { return StartingOffsets{kind: startLatest} }

// Committed starts at the offsets committed for the source's group
// (GroupID is required), and where the group has none, at fallback
// (Earliest or Latest, or Timestamp).
func Committed(fallback StartingOffsets) StartingOffsets {
	return StartingOffsets{kind: startCommitted, fallback: &fallback}
}

// Timestamp starts at the first record whose timestamp is at or after t
// (the end of a partition that has none).
func Timestamp(t time.Time) StartingOffsets {
	return StartingOffsets{kind: startTimestamp, millis: t.UnixMilli()}
}

// Offsets starts at the given offset per topic and partition, and at
// fallback for partitions it does not name.
func Offsets(offsets map[string]map[int32]int64, fallback StartingOffsets) StartingOffsets {
	return StartingOffsets{kind: startSpecific, offsets: offsets, fallback: &fallback}
}

func (s StartingOffsets) String() string {
	switch s.kind {
	case startEarliest:
		return "earliest"
	case startLatest:
		return "latest"
	case startCommitted:
		return "committed (else " + s.fallback.String() + ")"
	case startTimestamp:
		return fmt.Sprintf("timestamp %d", s.millis)
	case startSpecific:
		return "specific offsets (else " + s.fallback.String() + ")"
	}
	return "unknown"
}

// BadRecordPolicy says what a reader does with a record its decoder
// refuses or panics on.
type BadRecordPolicy struct {
	skip            bool
	deadLetterTopic string
}

// FailOnBadRecord fails the reader with an error naming the topic,
// partition and offset of the record (the default).
func FailOnBadRecord() BadRecordPolicy { return BadRecordPolicy{} }

// SkipBadRecords counts the record (Reader.SkippedRecords, and the
// partition's PartitionMetrics.SkippedRecords) and goes on.
func SkipBadRecords() BadRecordPolicy { return BadRecordPolicy{skip: true} }

// DeadLetterTopic writes the record as it is (key, value, headers, plus
// headers naming its origin and the error) to topic and goes on. The copy
// is acknowledged before the checkpoint that covers the record: at least
// once.
func DeadLetterTopic(topic string) BadRecordPolicy {
	return BadRecordPolicy{skip: true, deadLetterTopic: topic}
}

type config struct {
	// client is the seeds, the user's franz-go options, the logger and
	// the security settings, shared with the Kafka sink.
	client     kafkaclient.Config
	sub        Subscription
	start      StartingOffsets
	bounded    bool
	group      string
	readUncomm bool
	discovery  time.Duration
	policy     BadRecordPolicy
	maxBatches int
	// maxBytes and maxRecords bound the records a reader holds (0: from
	// the process's memory budget).
	maxBytes   int64
	maxRecords int
	perPoll    int
	// partitionBatch is how many records a partition hands out in its
	// turn before the reader's next partition with buffered records.
	partitionBatch int
	// partitionWatermarks is the deprecated PartitionWatermarks' settings,
	// refused by NewSource.
	partitionWatermarks *[2]time.Duration
	// reuse says that the decoder keeps nothing of the records
	// (DecoderKeepsNothing, or one of ValueDecoder's): the reader's
	// client pools the records and decompressed batches, and the reader
	// recycles each record it has decoded.
	reuse bool
}

// Option configures a Source.
type Option func(*config)

// StartFrom sets where a source without restored state starts (default
// Earliest).
func StartFrom(s StartingOffsets) Option { return func(c *config) { c.start = s } }

// Bounded makes the source bounded: each partition is read up to the end
// offset it had when the job first started (the last stable offset under
// read_committed), then the reader ends. Bounded sources discover no new
// partitions.
func Bounded() Option { return func(c *config) { c.bounded = true } }

// GroupID sets the consumer group whose committed offsets Committed starts
// from, and to which the offsets of every completed checkpoint are
// committed for lag monitoring. The source never joins the group.
func GroupID(id string) Option { return func(c *config) { c.group = id } }

// ReadUncommitted reads records of open and aborted transactions too
// (default: read_committed).
func ReadUncommitted() Option { return func(c *config) { c.readUncomm = true } }

// PartitionDiscoveryInterval sets how often the source looks for new
// partitions and topics (default 5 min); 0 or less disables discovery.
func PartitionDiscoveryInterval(d time.Duration) Option { return func(c *config) { c.discovery = d } }

// OnBadRecord sets the policy for records the decoder refuses (default
// FailOnBadRecord).
func OnBadRecord(p BadRecordPolicy) Option { return func(c *config) { c.policy = p } }

// ClientOptions passes options to the franz-go clients the source makes
// (SASL, TLS, client id, fetch sizes...). The source sets the seed brokers,
// the partitions to consume and the isolation level after them; do not pass
// group or topic consuming options.
func ClientOptions(opts ...kgo.Opt) Option {
	return func(c *config) { c.client.Options = append(c.client.Options, opts...) }
}

// Logger sets the logger of the source and of the franz-go clients it
// makes (default: the job's logger, sluice.WithLogger; slog.Default()
// outside a job).
func Logger(l *slog.Logger) Option { return func(c *config) { c.client.Logger = l } }

// DecoderKeepsNothing declares that the source's decoder keeps nothing
// of the records it is given past its return: not the *kgo.Record, not
// its Key, Value or header values, in the value it returns or anywhere
// else (see Decoder). The source then reuses the memory of the fetched
// records and of the decompressed batches their bytes point into once
// it has decoded and emitted them, for the records of later fetches
// (franz-go's kgo.WithPools, the records recycled): fewer allocations and
// collections. ValueDecoder's decoders need not say it. A decoder that
// keeps them anyway sees them overwritten by other records; without
// this option the source reuses nothing, which is right for any decoder.
func DecoderKeepsNothing() Option { return func(c *config) { c.reuse = true } }

// PartitionWatermarks was the way to ask for watermarks per partition.
//
// Deprecated: the watermark strategy given to sluice.FromSource is
// applied per partition, as Flink's Kafka source does (timestamps from
// its assigner, else the Kafka record timestamp; a watermark and idleness
// per partition; the subtask's watermark the smallest of its active
// partitions). NewSource refuses this option with an error that gives
// the strategy to pass instead:
// sluice.ForBoundedOutOfOrderness[T](outOfOrderness).WithIdleness(idleTimeout).
func PartitionWatermarks(outOfOrderness, idleTimeout time.Duration) Option {
	return func(c *config) { c.partitionWatermarks = &[2]time.Duration{outOfOrderness, idleTimeout} }
}

// MaxBufferedFetches bounds the fetches with records a reader holds ahead
// of the task, waiting or being handed out (default 4). The records of the
// fetches held are handed out a few dozen per partition in turn, so a
// partition with a large backlog does not hold back the reader's others.
func MaxBufferedFetches(n int) Option { return func(c *config) { c.maxBatches = n } }

// MaxBufferedBytes bounds the memory of the fetched records a reader
// holds ahead of the task (their keys and values plus
// an overhead each): past it the reader fetches no more until the task
// has taken a fetch's records. Of a fetch larger than half of it (or
// than half of MaxBufferedRecords) whose last partition has the most
// records, the reader takes the last record, which lets the client fetch
// again, only when the records it holds have fallen to that half: the
// client does not fetch and decode the next fetch while the reader hands
// out most of a large one. Default: from the process's memory budget,
// taskmanager.memory.kafka.source.fraction (DefaultMemoryFraction)
// shared by the source's readers, which also sizes
// franz-go's FetchMaxBytes and FetchMaxPartitionBytes unless
// ClientOptions sets them.
func MaxBufferedBytes(n int64) Option { return func(c *config) { c.maxBytes = n } }

// MaxBufferedRecords bounds the number of fetched records a reader holds
// ahead of the task, as MaxBufferedBytes their memory. Default: from the
// memory budget.
func MaxBufferedRecords(n int) Option { return func(c *config) { c.maxRecords = n } }

// bufferLimits is how one of parallelism readers is bounded: the
// options, else its share of the process's memory budget.
type bufferLimits struct {
	maxBytes   int64
	maxRecords int
	// tailBytes and tailRecs are the tail mark (tailDivisor): a fetch
	// larger is taken but for its last record until the records the
	// reader holds fall to it (Reader.poll).
	tailBytes int64
	tailRecs  int
	// client are the fetch sizes of the share, before the user's
	// options.
	client []kgo.Opt
}

func (c *config) bufferLimits(parallelism int) bufferLimits {
	share := readerShare(memory.Current(), parallelism)
	l := bufferLimits{maxBytes: c.maxBytes, maxRecords: c.maxRecords,
		client: []kgo.Opt{kgo.FetchMaxBytes(share.FetchMaxBytes), kgo.FetchMaxPartitionBytes(share.FetchMaxPartitionBytes)}}
	if l.maxBytes <= 0 {
		l.maxBytes = share.MaxBufferedBytes
	}
	if l.maxRecords <= 0 {
		l.maxRecords = share.MaxBufferedRecords
	}
	l.tailBytes, l.tailRecs = l.maxBytes/tailDivisor, l.maxRecords/tailDivisor
	return l
}

// tailDivisor sets the tail mark, the part of a reader's bound
// (MaxBufferedBytes, MaxBufferedRecords) at which it takes the rest of a
// large fetch and so lets franz-go fetch the next (Reader.poll): the
// records the reader then holds are handed out while the next fetch
// makes its round trip and is decoded.
const tailDivisor = 2

// ErrInvalidConfig is returned (wrapped) by NewSource for a configuration it
// refuses.
var ErrInvalidConfig = errors.New("kafka source: invalid configuration")

// ErrBadRecord is returned (wrapped) by PollNext when the decoder refuses
// (or panics on) a record under FailOnBadRecord; the error names topic,
// partition and offset, and the decoder's error or panic value.
var ErrBadRecord = errors.New("kafka source: undecodable record")

// ErrDecoderPanic is wrapped by the error of a record whose decoder
// panicked: the record is then a bad record like one the decoder refused
// (under FailOnBadRecord the error wraps ErrBadRecord too).
var ErrDecoderPanic = errors.New("kafka source: decoder panicked")

// decoderPanic is a recovered decoder panic: the panic value and the
// stack where it happened (for the log).
type decoderPanic struct {
	value any
	stack []byte
}

func (e *decoderPanic) Error() string { return fmt.Sprintf("decoder panicked: %v", e.value) }

// Unwrap gives ErrDecoderPanic, and the panic value when it is an error.
func (e *decoderPanic) Unwrap() []error {
	if err, ok := e.value.(error); ok {
		return []error{ErrDecoderPanic, err}
	}
	return []error{ErrDecoderPanic}
}

// ErrBadState is returned (wrapped) by NewReader when restored state cannot
// be decoded.
var ErrBadState = errors.New("kafka source: undecodable reader state")

// Source reads records of type T from Kafka.
type Source[T any] struct {
	cfg    config
	decode Decoder[T]
}

var _ source.Source[int] = (*Source[int])(nil)

// NewSource returns a source reading sub from the cluster at seeds,
// decoding records with decode.
func NewSource[T any](seeds []string, sub Subscription, decode Decoder[T], opts ...Option) (*Source[T], error) {
	cfg := config{
		client: kafkaclient.Config{Seeds: seeds}, sub: sub, start: Earliest(), discovery: DefaultPartitionDiscoveryInterval,
		maxBatches: 4, perPoll: 64, partitionBatch: 32,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.client.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrInvalidConfig)
	}
	switch {
	case decode == nil:
		return nil, fmt.Errorf("no decoder: %w", ErrInvalidConfig)
	case sub.pattern == nil && len(sub.topics) == 0:
		return nil, fmt.Errorf("no topics: %w", ErrInvalidConfig)
	case cfg.start.kind == startCommitted && cfg.group == "":
		return nil, fmt.Errorf("starting from committed offsets needs a GroupID: %w", ErrInvalidConfig)
	case cfg.maxBatches < 1:
		return nil, fmt.Errorf("max buffered fetches %d, want >= 1: %w", cfg.maxBatches, ErrInvalidConfig)
	case cfg.partitionWatermarks != nil:
		pw := cfg.partitionWatermarks
		strategy := fmt.Sprintf("sluice.ForBoundedOutOfOrderness[T](%v)", pw[0])
		if pw[1] > 0 {
			strategy += fmt.Sprintf(".WithIdleness(%v)", pw[1])
		}
		return nil, fmt.Errorf("PartitionWatermarks is no longer supported: the watermark strategy given to sluice.FromSource "+
			"is applied per partition (with its timestamp assigner, else the Kafka record timestamps); remove PartitionWatermarks "+
			"and pass %s (and WithTimestampAssigner for timestamps from the records) to FromSource: %w", strategy, ErrInvalidConfig)
	}
	for _, t := range sub.topics {
		if t == "" {
			return nil, fmt.Errorf("empty topic name: %w", ErrInvalidConfig)
		}
	}
	cfg.client.Logger = cfg.client.Log()
	cfg.reuse = cfg.reuse || keepsNothing(decode)
	return &Source[T]{cfg: cfg, decode: decode}, nil
}

// Bounded reports whether the source was made with Bounded().
func (s *Source[T]) Bounded() bool { return s.cfg.bounded }

// NewReader makes the reader of one subtask: it lists the subscribed
// partitions, keeps those assigned to the subtask, and resolves where each
// starts (restored offsets first) and, when bounded, stops.
func (s *Source[T]) NewReader(ctx source.ReaderContext) (source.Reader[T], error) {
	return newReader(s, ctx)
}
