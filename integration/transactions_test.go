package integration

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTransactionsSmoke proves the broker is ready for exactly-once work:
// records of a committed transaction are visible to a read_committed
// consumer, in order per partition, and those of an aborted transaction are
// not, although a read_uncommitted consumer sees that they were written.
func TestTransactionsSmoke(t *testing.T) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	const partitions, perPartition = 2, 5
	topic := createTopic(ctx, t, adm, partitions)

	producer := newClient(t,
		kgo.TransactionalID(uniqueName(t, "sluice-it-txn")),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)

	// Three transactions: committed, aborted, committed. Each writes
	// perPartition records to every partition, so the last committed
	// transaction lies behind the aborted one in every partition.
	phases := []struct {
		name   string
		commit kgo.TransactionEndTry
	}{
		{"first", kgo.TryCommit},
		{"aborted", kgo.TryAbort},
		{"last", kgo.TryCommit},
	}
	for _, ph := range phases {
		if err := producer.BeginTransaction(); err != nil {
			t.Fatalf("begin %s transaction: %v", ph.name, err)
		}
		var recs []*kgo.Record
		for p := int32(0); p < partitions; p++ {
			for i := 0; i < perPartition; i++ {
				recs = append(recs, &kgo.Record{
					Partition: p,
					Key:       []byte(fmt.Sprintf("k%d", i)),
					Value:     []byte(fmt.Sprintf("%s-%d-%d", ph.name, p, i)),
				})
			}
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %s transaction: %v", ph.name, err)
		}
		if err := producer.EndTransaction(ctx, ph.commit); err != nil {
			t.Fatalf("end %s transaction (commit=%v): %v", ph.name, ph.commit, err)
		}
	}

	want := func(names ...string) map[int32][]string {
		m := make(map[int32][]string)
		for p := int32(0); p < partitions; p++ {
			for _, n := range names {
				for i := 0; i < perPartition; i++ {
					m[p] = append(m[p], fmt.Sprintf("%s-%d-%d", n, p, i))
				}
			}
		}
		return m
	}

	committed := consumeAll(ctx, t, topic, kgo.ReadCommitted(), 2*partitions*perPartition)
	assertRecords(t, "read_committed", committed, want("first", "last"))

	uncommitted := consumeAll(ctx, t, topic, kgo.ReadUncommitted(), 3*partitions*perPartition)
	assertRecords(t, "read_uncommitted", uncommitted, want("first", "aborted", "last"))

	// The last stable offset is past the markers: nothing is left open.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list last stable offsets: %v", err)
	}
	for p := int32(0); p < partitions; p++ {
		e, _ := ends.Lookup(topic, p)
		s, _ := stable.Lookup(topic, p)
		if e.Err != nil || s.Err != nil || e.Offset != s.Offset {
			t.Errorf("partition %d: end offset %d (err %v), last stable offset %d (err %v); want equal",
				p, e.Offset, e.Err, s.Offset, s.Err)
		}
		// 3 transactions × perPartition records, plus one control marker each.
		if wantEnd := int64(3 * (perPartition + 1)); e.Offset != wantEnd {
			t.Errorf("partition %d: end offset %d, want %d", p, e.Offset, wantEnd)
		}
	}
}

// consumeAll reads topic from the start with the given isolation level until
// it has n records, and returns their values per partition in offset order.
// Should it get wrong records, the caller's comparison finds them.
func consumeAll(ctx context.Context, t *testing.T, topic string, level kgo.IsolationLevel, n int) map[int32][]string {
	t.Helper()
	cl := newClient(t,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level),
	)
	got := make(map[int32][]string)
	seen := 0
	for seen < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records before the deadline: %v (so far: %v)", seen, n, err, got)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			seen++
		})
	}
	return got
}

func assertRecords(t *testing.T, what string, got, want map[int32][]string) {
	t.Helper()
	for p, w := range want {
		g := got[p]
		if len(g) != len(w) {
			t.Errorf("%s partition %d: got %d records %v, want %d %v", what, p, len(g), g, len(w), w)
			continue
		}
		for i := range w {
			if g[i] != w[i] {
				t.Errorf("%s partition %d record %d: got %q, want %q (all: %v)", what, p, i, g[i], w[i], g)
				break
			}
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: records from unexpected partition %d: %v", what, p, got[p])
		}
	}
}
