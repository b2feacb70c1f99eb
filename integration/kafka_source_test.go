package integration

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/source"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
)

// collectOutput gathers what a reader emits.
type collectOutput[T any] struct{ values []T }

func (o *collectOutput[T]) Collect(v T, _ int64) error { o.values = append(o.values, v); return nil }
func (o *collectOutput[T]) EmitWatermark(int64) error  { return nil }
func (o *collectOutput[T]) MarkIdle() error            { return nil }

// An undecodable input record fails the source with an error naming topic,
// partition and offset; under the skip policy it is counted and skipped.
func TestKafkaSourceUndecodableRecord(t *testing.T) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	topic := createTopic(ctx, t, adm, 1)
	p := newClient(t, kgo.DefaultProduceTopic(topic))
	one, _ := codec.Int[int64]{}.Append(nil, 1)
	two, _ := codec.Int[int64]{}.Append(nil, 2)
	if err := p.ProduceSync(ctx, &kgo.Record{Value: one}, &kgo.Record{Value: []byte("not a number")}, &kgo.Record{Value: two}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	run := func(opts ...kafkasource.Option) (*collectOutput[int64], error, int64) {
		s, err := kafkasource.NewSource(brokers(t), kafkasource.Topics(topic), kafkasource.ValueDecoder[int64](codec.Int[int64]{}),
			append(opts, kafkasource.Bounded())...)
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		out := &collectOutput[int64]{}
		deadline := time.After(time.Minute)
		for {
			st, err := r.PollNext(out)
			if err != nil || st == source.EndOfInput {
				return out, err, r.(*kafkasource.Reader[int64]).SkippedRecords()
			}
			if st == source.NothingAvailable {
				select {
				case <-r.Available():
				case <-deadline:
					t.Fatalf("reader stuck after %v", out.values)
				}
			}
		}
	}
	out, err, _ := run()
	want := "topic " + topic + " partition 0 offset 1"
	if !errors.Is(err, kafkasource.ErrBadRecord) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want ErrBadRecord naming %q", err, want)
	}
	if len(out.values) != 1 || out.values[0] != 1 {
		t.Fatalf("emitted %v before the bad record, want [1]", out.values)
	}
	out, err, skipped := run(kafkasource.OnBadRecord(kafkasource.SkipBadRecords()))
	if err != nil || len(out.values) != 2 || skipped != 1 {
		t.Fatalf("skip policy: %v, %v, skipped %d; want [1 2], nil, 1", out.values, err, skipped)
	}
}
