package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/source"
)

// BenchmarkHandOut measures the hand-out of buffered records (one op is
// one PollNext of up to perPoll records from four partitions), without a
// broker: the reader's hot path.
func BenchmarkHandOut(b *testing.B) {
	const perPartition = 8192
	out := &intOutput{}
	var r *Reader[int]
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if r == nil {
			b.StopTimer()
			r = handOutReader(b, perPartition, perPartition, perPartition, perPartition)
			b.StartTimer()
		}
		st, err := r.PollNext(out)
		if err != nil {
			b.Fatal(err)
		}
		if st == source.NothingAvailable {
			r = nil
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(out.n, 1)), "ns/record")
}

// BenchmarkReadBounded measures a bounded reader reading 4 partitions of
// 5000 records each from a fake cluster (franz-go's kfake), from its
// creation to the end of its input: fetches, queues and hand-out.
func BenchmarkReadBounded(b *testing.B) {
	const parts, perPart = 4, 5000
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, "in"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	seeds := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for p := int32(0); p < parts; p++ {
		for i := 0; i < perPart; i++ {
			rs = append(rs, &kgo.Record{Topic: "in", Partition: p, Value: fmt.Appendf(nil, "p%d-%06d-%s", p, i, "0123456789abcdef0123456789abcdef")})
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	s, err := NewSource(seeds, Topics("in"), ValueDecoder[string](codec.String{}), Bounded(), Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
		if err != nil {
			b.Fatal(err)
		}
		out := &countOutput{}
		for st := source.MoreAvailable; st != source.EndOfInput; {
			if st, err = r.PollNext(out); err != nil {
				b.Fatal(err)
			}
			if st == source.NothingAvailable {
				select {
				case <-r.Available():
				case <-ctx.Done():
					b.Fatalf("reader stuck after %d records", out.n)
				}
			}
		}
		if out.n != parts*perPart {
			b.Fatalf("read %d records, want %d", out.n, parts*perPart)
		}
		r.Close()
	}
}

type countOutput struct{ n int }

func (o *countOutput) Collect(string, int64) error { o.n++; return nil }
func (o *countOutput) EmitWatermark(int64) error   { return nil }
func (o *countOutput) MarkIdle() error             { return nil }
