package kafkatest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SafetyNet bounds every wait of the package: a passing test never
// reaches it.
const SafetyNet = 60 * time.Second

// CommittedReader reads a topic as a read_committed consumer does: the
// records of committed transactions and those written outside any, never
// those of an open or aborted transaction. Each Read reads up to the
// topic's last stable offsets at the time of the call, going on from the
// previous Read.
type CommittedReader struct {
	tb    testing.TB
	topic string
	cl    *kgo.Client
	adm   *kadm.Client
	next  map[int32]int64 // the offset after the last one seen, by partition
	recs  []*kgo.Record
}

// CommittedReader returns a reader of topic, closed when the test ends.
func (c *Cluster) CommittedReader(tb testing.TB, topic string) *CommittedReader {
	tb.Helper()
	// Control records (transaction markers) are kept, so that the reader
	// knows when it has passed the last stable offset even when a
	// partition ends with a marker.
	cl := c.Client(tb, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	return &CommittedReader{tb: tb, topic: topic, cl: cl, adm: kadm.NewClient(cl), next: map[int32]int64{}}
}

// Read returns every committed record of the topic up to its last stable
// offsets now (transaction markers left out), ordered by partition, then
// offset.
func (r *CommittedReader) Read() []*kgo.Record {
	r.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SafetyNet)
	defer cancel()
	starts, err := r.adm.ListStartOffsets(ctx, r.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		r.tb.Fatalf("kafkatest: list the start offsets of %s: %v", r.topic, err)
	}
	stable, err := r.adm.ListCommittedOffsets(ctx, r.topic)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		r.tb.Fatalf("kafkatest: list the last stable offsets of %s: %v", r.topic, err)
	}
	starts.Each(func(o kadm.ListedOffset) {
		if n, ok := r.next[o.Partition]; !ok || n < o.Offset {
			r.next[o.Partition] = o.Offset
		}
	})
	behind := func() (string, bool) {
		var lag string
		stable.Each(func(o kadm.ListedOffset) {
			if r.next[o.Partition] < o.Offset {
				lag += fmt.Sprintf(" partition %d at %d of %d;", o.Partition, r.next[o.Partition], o.Offset)
			}
		})
		return lag, lag != ""
	}
	for {
		lag, ok := behind()
		if !ok {
			break
		}
		fs := r.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			r.tb.Fatalf("kafkatest: read %s up to its last stable offsets:%s %v", r.topic, lag, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			r.tb.Fatalf("kafkatest: read %s partition %d: %v", topic, p, err)
		})
		fs.EachRecord(func(rec *kgo.Record) {
			r.next[rec.Partition] = max(r.next[rec.Partition], rec.Offset+1)
			if !rec.Attrs.IsControl() {
				r.recs = append(r.recs, rec)
			}
		})
	}
	slices.SortStableFunc(r.recs, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return slices.Clone(r.recs)
}

// ReadCommitted returns every committed record of topic now (see
// CommittedReader.Read).
func (c *Cluster) ReadCommitted(tb testing.TB, topic string) []*kgo.Record {
	tb.Helper()
	r := c.CommittedReader(tb, topic)
	defer r.cl.Close()
	return r.Read()
}

// ReadCommittedValues is ReadCommitted's values as strings.
func (c *Cluster) ReadCommittedValues(tb testing.TB, topic string) []string {
	tb.Helper()
	recs := c.ReadCommitted(tb, topic)
	vs := make([]string, len(recs))
	for i, r := range recs {
		vs[i] = string(r.Value)
	}
	return vs
}

// Decode is ReadCommitted's records decoded by decode; a record it
// refuses fails the test, naming its partition and offset.
func Decode[T any](tb testing.TB, recs []*kgo.Record, decode func(*kgo.Record) (T, error)) []T {
	tb.Helper()
	out := make([]T, len(recs))
	for i, r := range recs {
		v, err := decode(r)
		if err != nil {
			tb.Fatalf("kafkatest: decode the record of %s partition %d offset %d: %v", r.Topic, r.Partition, r.Offset, err)
		}
		out[i] = v
	}
	return out
}

// AwaitCommitted reads topic until at least n committed records are
// there, under the safety net, and returns them.
func (c *Cluster) AwaitCommitted(tb testing.TB, topic string, n int) []*kgo.Record {
	tb.Helper()
	r := c.CommittedReader(tb, topic)
	defer r.cl.Close()
	deadline := time.Now().Add(SafetyNet)
	for {
		recs := r.Read()
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			tb.Fatalf("kafkatest: %d committed records in %s, want %d (safety net %v)", len(recs), topic, n, SafetyNet)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
