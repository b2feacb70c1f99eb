package kafka_test

import (
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/source/kafka"
)

// Click is a record of the examples.
type Click struct {
	User string `json:"user"`
	TS   int64  `json:"ts"` // unix milliseconds
}

// The source's options: what to read, where to start, what to do with a
// record the decoder refuses. The job's watermark strategy, given to
// FromSource, runs per partition. (Compiled, not run: it needs a broker.)
func Example_options() {
	seeds := []string{"localhost:9092"}
	env := sluice.NewEnvironment()

	// [start pattern]
	// Every topic whose name matches, those created later included (looked
	// for every 5 minutes: PartitionDiscoveryInterval), from the earliest
	// offsets when the job first starts; a restored job goes on from the
	// offsets of its checkpoint.
	src, err := kafka.NewSource(seeds, kafka.TopicPattern(regexp.MustCompile(`^clicks-.*`)),
		kafka.ValueDecoder(codec.JSON[Click]{}),
		kafka.StartFrom(kafka.Committed(kafka.Earliest())), // the group's offsets, else the earliest
		kafka.GroupID("clicks-job"),                        // offsets committed back for lag monitoring
		kafka.OnBadRecord(kafka.DeadLetterTopic("clicks-dlq")))
	// [end pattern]
	if err != nil {
		panic(err)
	}

	// [start watermarks]
	// Applied per partition, as Flink's KafkaSource does: a partition
	// silent for a minute no longer holds the watermark back.
	clicks := sluice.FromSource(env, src,
		sluice.ForBoundedOutOfOrderness[Click](5*time.Second).
			WithTimestampAssigner(func(c Click, _ int64) int64 { return c.TS }).
			WithIdleness(time.Minute),
		"clicks", sluice.UID("clicks"))
	// [end watermarks]
	_ = clicks

	// [start start-offsets]
	_ = kafka.StartFrom(kafka.Latest())                                   // only what arrives from now on
	_ = kafka.StartFrom(kafka.Timestamp(time.Now().Add(-24 * time.Hour))) // from a day ago
	_ = kafka.StartFrom(kafka.Offsets(map[string]map[int32]int64{"clicks": {0: 42}}, kafka.Earliest()))
	_ = kafka.Bounded()                           // stop at the offsets that were latest at the first start
	_ = kafka.OnBadRecord(kafka.SkipBadRecords()) // or FailOnBadRecord, the default
	// [end start-offsets]

	// [start keeps-nothing]
	// A decoder of one's own that copies what it keeps lets the source
	// reuse the records' memory (ValueDecoder's need not say it).
	users, err := kafka.NewSource(seeds, kafka.Topics("clicks"),
		func(r *kgo.Record) (Click, error) {
			return Click{User: string(r.Key), TS: r.Timestamp.UnixMilli()}, nil
		},
		kafka.DecoderKeepsNothing()) // string(r.Key) is a copy
	// [end keeps-nothing]
	if err != nil {
		panic(err)
	}
	_ = users
}
