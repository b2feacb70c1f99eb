package kafka

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/source"
)

// batchesRead counts the record batches a client has decoded
// (kgo.HookFetchBatchRead).
type batchesRead struct{ n atomic.Int64 }

func (b *batchesRead) OnFetchBatchRead(kgo.BrokerMetadata, string, int32, kgo.FetchBatchMetrics) {
	b.n.Add(1)
}

// produceBatches writes n batches of perBatch records of about 100
// bytes to partition 0 of "in", each one batch (the producer lingers
// until flushed), and returns their values in order.
func produceBatches(t *testing.T, e *env, n, perBatch int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want []string
	for b := range n {
		var errs atomic.Pointer[error]
		for i := range perBatch {
			v := fmt.Sprintf("batch %d record %04d %s", b, i, strings.Repeat("x", 80))
			want = append(want, v)
			cl.Produce(ctxFor(t), &kgo.Record{Topic: "in", Partition: 0, Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err != nil {
					errs.Store(&err)
				}
			})
		}
		if err := cl.Flush(ctxFor(t)); err != nil {
			t.Fatalf("flush: %v", err)
		}
		if p := errs.Load(); p != nil {
			t.Fatalf("produce: %v", *p)
		}
	}
	return want
}

// A reader that takes a fetch larger than its tail mark does not have
// franz-go fetch and decode the next one while it hands out the first:
// franz-go keeps the fetch's last record until the records the reader
// holds fall to the tail mark, so it cannot fetch again. Every record is
// still read once, in order, and a checkpoint taken while franz-go holds
// the last record stores the offset of the records handed out.
func TestLargeFetchNotDecodedAhead(t *testing.T) {
	e := newEnv(t, 1, "in")
	const batches, perBatch = 3, 1000
	want := produceBatches(t, e, batches, perBatch)
	read := &batchesRead{}
	// One batch a fetch; a tail mark of 32 KiB, about 90 of these
	// records (each counts its bytes and kafkaclient.RecordOverhead).
	r := newTestReader(t, e.source(Topics("in"), MaxBufferedBytes(64<<10),
		ClientOptions(kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1), kgo.WithHooks(read))),
		source.ReaderContext{Subtask: 0, Parallelism: 1})
	out := &fakeOutput[string]{}
	if _, err := pollUntil(t, r, out, count(1)(out)); err != nil {
		t.Fatal(err)
	}
	if len(out.values) > perBatch/2 {
		t.Fatalf("one poll handed out %d records, want a poll's", len(out.values))
	}
	// The reader has part of the first batch handed out, the rest
	// queued: franz-go holds the batch's last record and has decoded no
	// other batch. (A reader that took the whole fetch leaves franz-go
	// nothing buffered, or the next batch decoded.)
	if held, decoded := r.consumer.BufferedFetchRecords(), read.n.Load(); held == 0 || decoded != 1 {
		t.Fatalf("after %d records of the first batch franz-go holds %d records and has decoded %d batches; want the rest of the first batch, and only it decoded",
			len(out.values), held, decoded)
	}
	snap, err := r.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := DecodeSplitState(snap[0]); err != nil || st.Offset != int64(len(out.values)) {
		t.Fatalf("checkpoint while franz-go holds the last record: %+v (%v), want offset %d", st, err, len(out.values))
	}
	if _, err := pollUntil(t, r, out, count(len(want))(out)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.values, want) {
		t.Fatalf("read %d records, want the %d produced, once each and in order", len(out.values), len(want))
	}
	if n := read.n.Load(); n != batches {
		t.Errorf("decoded %d batches, want %d", n, batches)
	}
}
