package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/kafka"
)

// The bad-record counters of every partition are exported, zero included.
func TestKafkaSourceBadRecordCounters(t *testing.T) {
	reg := registryOf(connectorJob{name: "kafka-job", vertex: "orders", operator: "orders", reporters: []report.Reporter{&fakeReader{[]kafka.PartitionMetrics{
		{Topic: "orders", Partition: 0, CurrentOffset: 10, CommittedOffset: -1, HighWatermark: -1, LastStableOffset: -1, Lag: -1,
			SkippedRecords: 3, DeadLetteredRecords: 2},
		{Topic: "orders", Partition: 1, CurrentOffset: 7, CommittedOffset: -1, HighWatermark: -1, LastStableOffset: -1, Lag: -1},
	}}}})
	all := gather(t, reg)
	p0 := map[string]string{"job_name": "kafka-job", "vertex": "orders", "subtask": "0", "topic": "orders", "partition": "0"}
	p1 := map[string]string{"job_name": "kafka-job", "vertex": "orders", "subtask": "0", "topic": "orders", "partition": "1"}
	checkValues(t, all,
		wantValue{"sluice_kafka_source_numBadRecordsSkipped", p0, 3},
		wantValue{"sluice_kafka_source_numBadRecordsDeadLettered", p0, 2},
		wantValue{"sluice_kafka_source_numBadRecordsSkipped", p1, 0},
		wantValue{"sluice_kafka_source_numBadRecordsDeadLettered", p1, 0})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if n := mf.GetName(); (n == "sluice_kafka_source_numBadRecordsSkipped" || n == "sluice_kafka_source_numBadRecordsDeadLettered") &&
			mf.GetType().String() != "COUNTER" {
			t.Errorf("%s is a %s, want a counter", n, mf.GetType())
		}
	}
}

// A real Kafka source reader (on a fake cluster) that dead-letters a
// record shows it in both counters.
func TestKafkaSourceBadRecordCountersFromReader(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	seeds := cluster.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one, _ := codec.Int[int64]{}.Append(nil, 1)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("bad")}, &kgo.Record{Value: one}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ks, err := kafka.NewSource(seeds, kafka.Topics("in"), kafka.ValueDecoder[int64](codec.Int[int64]{}),
		kafka.OnBadRecord(kafka.DeadLetterTopic("dlq")), kafka.Bounded())
	if err != nil {
		t.Fatal(err)
	}
	c := metrics.NewCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	r, err := ks.NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c.AddJob(connectorJob{name: "job", vertex: "kafka", operator: "kafka", reporters: []report.Reporter{r.(report.Reporter)}})
	out := &discardOutput{}
	for st := source.MoreAvailable; st != source.EndOfInput; {
		if st, err = r.PollNext(out); err != nil {
			t.Fatal(err)
		}
		if st == source.NothingAvailable {
			select {
			case <-r.Available():
			case <-ctx.Done():
				t.Fatalf("reader stuck: %v", ctx.Err())
			}
		}
	}
	// At the end of its input a bounded reader has its copies acknowledged.
	all := gather(t, reg)
	labels := map[string]string{"job_name": "job", "vertex": "kafka", "subtask": "0", "topic": "in", "partition": "0"}
	for _, name := range []string{"sluice_kafka_source_numBadRecordsSkipped", "sluice_kafka_source_numBadRecordsDeadLettered"} {
		if got, ok := value(all, name, labels); !ok || got != 1 {
			t.Errorf("%s = %v (present %t), want 1", name, got, ok)
		}
	}
	if out.n != 1 {
		t.Errorf("emitted %d records, want the good one", out.n)
	}
}

type discardOutput struct{ n int }

func (o *discardOutput) Collect(int64, int64) error { o.n++; return nil }
func (o *discardOutput) EmitWatermark(int64) error  { return nil }
func (o *discardOutput) MarkIdle() error            { return nil }
