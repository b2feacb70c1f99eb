package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
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

// An undecodable input record in a running job: by default the job fails
// with an error naming topic, partition and offset; under the skip policy
// it is skipped and the job goes on; under the dead-letter policy it is
// copied, with headers naming its origin, to the dead-letter topic.
func TestJobUndecodableRecord(t *testing.T) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	topic := createTopic(ctx, t, adm, 1)
	p := newClient(t, kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := int64(1); i <= 5; i++ {
		b, _ := codec.Int[int64]{}.Append(nil, i)
		recs = append(recs, &kgo.Record{Value: b})
		if i == 2 {
			recs = append(recs, &kgo.Record{Key: []byte("bad"), Value: []byte("not a number")}) // offset 2
		}
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := func(policy ...kafkasource.Option) ([]int64, error) {
		env := sluice.NewEnvironment(sluice.WithLogger(quiet), sluice.WithRestartStrategy(sluice.NoRestart()))
		src, err := kafkasource.NewSource(brokers(t), kafkasource.Topics(topic), kafkasource.ValueDecoder[int64](codec.Int[int64]{}),
			append(policy, kafkasource.Bounded(), kafkasource.Logger(quiet))...)
		if err != nil {
			t.Fatal(err)
		}
		out := sink.NewCollect[int64]()
		sluice.SinkTo(sluice.FromSource(env, src, sluice.NoWatermarks[int64](), "kafka"), out)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err = env.Execute(ctx)
		return out.Values(), err
	}

	t.Run("fail", func(t *testing.T) {
		_, err := run()
		want := fmt.Sprintf("topic %s partition 0 offset 2", topic)
		if !errors.Is(err, kafkasource.ErrBadRecord) || !strings.Contains(err.Error(), want) {
			t.Fatalf("job error %v, want ErrBadRecord naming %q", err, want)
		}
	})
	t.Run("skip", func(t *testing.T) {
		got, err := run(kafkasource.OnBadRecord(kafkasource.SkipBadRecords()))
		if err != nil || !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
			t.Fatalf("job with the skip policy: %v, %v; want [1 2 3 4 5], nil", got, err)
		}
	})
	t.Run("dead-letter", func(t *testing.T) {
		dlq := createTopic(ctx, t, adm, 1)
		got, err := run(kafkasource.OnBadRecord(kafkasource.DeadLetterTopic(dlq)))
		if err != nil || !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
			t.Fatalf("job with a dead-letter topic: %v, %v; want [1 2 3 4 5], nil", got, err)
		}
		cl := newClient(t, kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var r *kgo.Record
		for r == nil {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("no record in the dead-letter topic: %v", ctx.Err())
			}
			fs.EachRecord(func(rec *kgo.Record) { r = rec })
		}
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		if string(r.Key) != "bad" || string(r.Value) != "not a number" ||
			headers[kafkasource.HeaderSourceTopic] != topic || headers[kafkasource.HeaderSourcePartition] != "0" ||
			headers[kafkasource.HeaderSourceOffset] != "2" || headers[kafkasource.HeaderError] == "" {
			t.Fatalf("dead-letter record %q=%q with headers %v; want the bad record with its origin", r.Key, r.Value, headers)
		}
	})
}
