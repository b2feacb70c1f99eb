package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
)

// poisonPill is a record the test decoder panics on.
type poisonPill struct {
	partition int32
	offset    int64
	value     string
}

// A job whose decoder panics on some records, with 2 source subtasks over
// 2 partitions: under the default policy the job fails naming a poison
// record and the panic; under the skip policy it finishes with every good
// record; under the dead-letter policy it finishes with every good record
// and the dead-letter topic holds each poison record once, with its own
// headers, its origin and the panic in sluice.error.
func TestJobDecoderPanicBadRecords(t *testing.T) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	topic := createTopic(ctx, t, adm, 2)
	p := newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var (
		good  []int64
		pills []poisonPill
	)
	for part := int32(0); part < 2; part++ {
		var recs []*kgo.Record
		for i := range 40 {
			if i%10 == 3 {
				v := fmt.Sprintf("poison %d/%d", part, i)
				pills = append(pills, poisonPill{part, int64(i), v})
				recs = append(recs, &kgo.Record{Topic: topic, Partition: part, Key: []byte("k"), Value: []byte(v),
					Headers: []kgo.RecordHeader{{Key: "trace-id", Value: []byte(v)}}})
				continue
			}
			n := int64(part)*1000 + int64(i)
			good = append(good, n)
			b, _ := codec.Int[int64]{}.Append(nil, n)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: part, Value: b})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	decode := func(r *kgo.Record) (int64, error) {
		if v := string(r.Value); strings.HasPrefix(v, "poison") {
			panic("cannot digest " + v)
		}
		return codec.Int[int64]{}.Decode(r.Value)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := func(policy ...kafkasource.Option) ([]int64, error) {
		env := sluice.NewEnvironment(sluice.WithLogger(quiet), sluice.WithParallelism(2), sluice.WithRestartStrategy(sluice.NoRestart()))
		src, err := kafkasource.NewSource(brokers(t), kafkasource.Topics(topic), decode,
			append(policy, kafkasource.Bounded(), kafkasource.Logger(quiet))...)
		if err != nil {
			t.Fatal(err)
		}
		out := sink.NewCollect[int64]()
		sluice.SinkTo(sluice.FromSource(env, src, sluice.NoWatermarks[int64](), "kafka"), out)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err = env.Execute(ctx)
		got := out.Values()
		slices.Sort(got)
		return got, err
	}

	t.Run("fail", func(t *testing.T) {
		_, err := run()
		if !errors.Is(err, kafkasource.ErrBadRecord) || !errors.Is(err, kafkasource.ErrDecoderPanic) {
			t.Fatalf("job error %v, want ErrBadRecord and ErrDecoderPanic", err)
		}
		named := false
		for _, pp := range pills {
			named = named || (strings.Contains(err.Error(), fmt.Sprintf("topic %s partition %d offset %d", topic, pp.partition, pp.offset)) &&
				strings.Contains(err.Error(), "cannot digest "+pp.value))
		}
		if !named {
			t.Fatalf("job error %v names no poison record with its panic (%v)", err, pills)
		}
	})
	t.Run("skip", func(t *testing.T) {
		got, err := run(kafkasource.OnBadRecord(kafkasource.SkipBadRecords()))
		if err != nil || !slices.Equal(got, good) {
			t.Fatalf("job with the skip policy: %v, %v; want %v, nil", got, err, good)
		}
	})
	t.Run("dead-letter", func(t *testing.T) {
		dlq := createTopic(ctx, t, adm, 1)
		got, err := run(kafkasource.OnBadRecord(kafkasource.DeadLetterTopic(dlq)))
		if err != nil || !slices.Equal(got, good) {
			t.Fatalf("job with a dead-letter topic: %v, %v; want %v, nil", got, err, good)
		}
		// The job ended: its copies are acknowledged, so the topic's end
		// says how many there are to read.
		ends, err := adm.ListEndOffsets(ctx, dlq)
		if err != nil {
			t.Fatal(err)
		}
		end, _ := ends.Lookup(dlq, 0)
		if end.Offset != int64(len(pills)) {
			t.Fatalf("dead-letter topic holds %d records, want the %d poison records", end.Offset, len(pills))
		}
		cl := newClient(t, kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var recs []*kgo.Record
		for len(recs) < len(pills) {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d dead-letter records: %v", len(recs), len(pills), ctx.Err())
			}
			recs = append(recs, fs.Records()...)
		}
		seen := map[poisonPill]bool{}
		for _, r := range recs {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			part, _ := strconv.Atoi(h[kafkasource.HeaderSourcePartition])
			off, _ := strconv.ParseInt(h[kafkasource.HeaderSourceOffset], 10, 64)
			pp := poisonPill{int32(part), off, string(r.Value)}
			if !slices.Contains(pills, pp) || seen[pp] || string(r.Key) != "k" || h["trace-id"] != pp.value ||
				h[kafkasource.HeaderSourceTopic] != topic ||
				!strings.Contains(h[kafkasource.HeaderError], "decoder panicked") ||
				!strings.Contains(h[kafkasource.HeaderError], "cannot digest "+pp.value) {
				t.Errorf("dead-letter record %q=%q with headers %v: want each poison record once, with its key, its own header, its origin and the panic in %s",
					r.Key, r.Value, h, kafkasource.HeaderError)
			}
			seen[pp] = true
		}
	})
}
