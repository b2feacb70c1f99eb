package kafka

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/source"
)

// One reader owns three partitions: two with a large backlog each and one
// with a few records. Within the first records it emits, every partition
// is represented by a bounded batch and every partition's offset has
// moved: a partition's backlog does not hold back the others.
func TestReaderInterleavesPartitions(t *testing.T) {
	e := newEnv(t, 3, "in")
	const big, small = 3000, 5
	for p := int32(0); p < 2; p++ {
		vals := make([]string, big)
		for i := range vals {
			vals[i] = fmt.Sprintf("p%d-%d", p, i)
		}
		e.produce("in", p, vals...)
	}
	e.produce("in", 2, "p2-0", "p2-1", "p2-2", "p2-3", "p2-4")
	r := newTestReader(t, e.source(Topics("in")), source.ReaderContext{Subtask: 0, Parallelism: 1})
	batch := r.cfg.partitionBatch
	// Two turns of each partition: far fewer than either backlog.
	n := 2*2*batch + small
	out := &fakeOutput[string]{}
	if _, err := pollUntil(t, r, out, count(n)(out)); err != nil {
		t.Fatal(err)
	}
	per := map[int]int{}
	for _, v := range out.values[:n] {
		var p int
		fmt.Sscanf(v, "p%d-", &p)
		per[p]++
	}
	if per[0] < batch || per[1] < batch || per[2] != small {
		t.Fatalf("first %d records per partition %v; want at least a batch (%d) of partitions 0 and 1 and all %d of partition 2 (first records %s)",
			n, per, batch, small, strings.Join(out.values[:min(len(out.values), 3*batch)], " "))
	}
	// The positions a checkpoint would take now.
	snap, err := r.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range snap {
		st, err := DecodeSplitState(b)
		if err != nil {
			t.Fatal(err)
		}
		if st.Offset == 0 {
			t.Errorf("partition %d still at offset 0 after %d records: %v", st.Partition, len(out.values), per)
		}
		if st.Partition < 2 && st.Offset >= big {
			t.Errorf("partition %d at offset %d: read to the end before the check, which proves nothing", st.Partition, st.Offset)
		}
	}
}

// handOutReader is a reader without a broker whose partitions 0..n-1 of
// topic "t" have the given records buffered, as if fetched.
func handOutReader(t testing.TB, perPartition ...int) *Reader[int] {
	t.Helper()
	r := &Reader[int]{
		cfg:    &config{perPoll: 64, partitionBatch: 32, maxBatches: 4},
		decode: func(rec *kgo.Record) (int, error) { return int(rec.Partition), nil },
		log:    slog.New(slog.DiscardHandler),
		parts:  map[topicPartition]*partition{},
		items:  make(chan item, 4),
		slots:  make(chan struct{}, 4),
		avail:  make(chan struct{}, 1),
	}
	it := item{slot: true}
	for i, n := range perPartition {
		tp := topicPartition{"t", int32(i)}
		p := &partition{tp: tp, stop: NoStoppingOffset, index: i}
		r.parts[tp] = p
		r.order = append(r.order, p)
		r.outputs = append(r.outputs, nil)
		recs := make([]*kgo.Record, n)
		for o := range recs {
			recs[o] = &kgo.Record{Topic: "t", Partition: int32(i), Offset: int64(o)}
		}
		it.parts = append(it.parts, fetched{tp: tp, hwm: int64(n), lso: int64(n), records: recs})
	}
	r.slots <- struct{}{}
	r.items <- it
	return r
}

// intOutput counts what it is given, without allocating.
type intOutput struct {
	n    int
	last []int
}

func (o *intOutput) Collect(v int, _ int64) error {
	o.n++
	if o.last != nil {
		o.last = append(o.last, v)
	}
	return nil
}
func (o *intOutput) EmitWatermark(int64) error { return nil }
func (o *intOutput) MarkIdle() error           { return nil }

// The hand-out is round robin in batches of partitionBatch over the
// partitions with buffered records, in partition order, and the fetch's
// slot is given back once its last record is handed out.
func TestHandOutRoundRobin(t *testing.T) {
	r := handOutReader(t, 100, 40, 3)
	out := &intOutput{last: []int{}}
	for {
		st, err := r.PollNext(out)
		if err != nil {
			t.Fatal(err)
		}
		if st == source.NothingAvailable {
			break
		}
	}
	var runs []string
	for i := 0; i < len(out.last); {
		j := i
		for j < len(out.last) && out.last[j] == out.last[i] {
			j++
		}
		runs = append(runs, fmt.Sprintf("%d×%d", out.last[i], j-i))
		i = j
	}
	want := "0×32 1×32 2×3 0×32 1×8 0×36"
	if got := strings.Join(runs, " "); got != want {
		t.Fatalf("hand-out order %s, want %s", got, want)
	}
	if len(r.slots) != 0 || r.buffered != 0 {
		t.Fatalf("after the hand-out: %d slots taken, %d records buffered; want 0, 0", len(r.slots), r.buffered)
	}
	for _, m := range r.Metrics() {
		if want := []int64{100, 40, 3}[m.Partition]; m.CurrentOffset != want {
			t.Errorf("partition %d at offset %d, want %d", m.Partition, m.CurrentOffset, want)
		}
	}
}

// Handing out buffered records allocates nothing per record.
func TestHandOutAllocatesNothing(t *testing.T) {
	r := handOutReader(t, 20000, 20000)
	out := &intOutput{}
	if _, err := r.PollNext(out); err != nil { // takes the item
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if st, err := r.PollNext(out); err != nil || st != source.MoreAvailable {
			t.Fatalf("poll: %v, %v", st, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per poll of %d records, want 0", allocs, r.cfg.perPoll)
	}
}

// yieldingOutput is an intOutput whose task asks for its goroutine back
// once after records have been emitted (source.Yielder).
type yieldingOutput struct {
	intOutput
	after int
}

func (o *yieldingOutput) ShouldYield() bool { return o.n >= o.after }

// A poll ends at the record after which the task asks for its goroutine
// back (a checkpoint's trigger waiting), instead of emitting the rest of
// its batch; the records left are handed out by the next polls, in order.
func TestHandOutYieldsToTheTask(t *testing.T) {
	r := handOutReader(t, 100)
	out := &yieldingOutput{intOutput: intOutput{last: []int{}}, after: 3}
	if st, err := r.PollNext(out); err != nil || st != source.MoreAvailable {
		t.Fatalf("poll: %v, %v", st, err)
	}
	if out.n != 3 {
		t.Fatalf("the poll emitted %d records, want 3: it did not stop when the task asked (a batch is %d)", out.n, r.cfg.perPoll)
	}
	out.after = 4 // the task ran its mail; it asks again after one more record
	if _, err := r.PollNext(out); err != nil {
		t.Fatal(err)
	}
	if out.n != 4 {
		t.Fatalf("the second poll ended after %d records in all, want 4", out.n)
	}
	if snap := r.Metrics(); snap[0].CurrentOffset != 4 {
		t.Fatalf("partition at offset %d after 4 records, want 4", snap[0].CurrentOffset)
	}
}
