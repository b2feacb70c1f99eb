package kafka

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
)

// benchSink writes b.N records through one writer of a sink with the
// given options to a fake cluster (franz-go's kfake), with a barrier
// every 1000 records (committed when exactly-once).
func benchSink(b *testing.B, opts ...Option) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "out"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := NewSink(c.ListenAddrs(), KeyValueSerializer("out", func(v string) string { return v }, codec.String{}, codec.String{}), append([]Option{Logger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	wc := sink.WriterContext{Subtask: 0, Parallelism: 1}
	w, err := s.NewWriter(wc)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	cm, err := s.NewCommitter(wc)
	if err != nil {
		b.Fatal(err)
	}
	defer cm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := int64(0)
	barrier := func() {
		cp++
		cs, err := w.(sink.PrecommittingWriter[string]).PrepareCommit(cp)
		if err != nil {
			b.Fatal(err)
		}
		if err := cm.Commit(ctx, cp, cs); err != nil {
			b.Fatal(err)
		}
	}
	vals := make([]string, 1000)
	for i := range vals {
		vals[i] = "value-" + strconv.Itoa(i) + "-0123456789abcdef0123456789abcdef0123456789abcdef"
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.Write(vals[i%len(vals)], int64(1000+i)); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			barrier()
		}
	}
	barrier()
}

func BenchmarkWriteAtLeastOnce(b *testing.B) { benchSink(b, Guarantee(AtLeastOnce)) }

func BenchmarkWriteExactlyOnce(b *testing.B) {
	benchSink(b, Guarantee(ExactlyOnce), TransactionalIDPrefix("bench"), TransactionTimeout(time.Minute))
}

// BenchmarkKeyValueSerializer makes the records of the exactly-once Kafka
// job's sink (a 10-byte key, a 16-byte value) with the library's
// serializer: one allocation a record (NewRecord).
func BenchmarkKeyValueSerializer(b *testing.B) {
	ser := KeyValueSerializer("out", func(v string) string { return v[:10] }, codec.String{}, codec.String{})
	v := "key-000123" + "0123456789abcdef"
	b.ReportAllocs()
	for b.Loop() {
		r, err := ser(v)
		if err != nil {
			b.Fatal(err)
		}
		serialized = r
	}
}

// serialized keeps the benchmark's records on the heap, as the sink
// does.
var serialized *kgo.Record
