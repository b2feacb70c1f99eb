package kafka

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/source"
)

// The reader's bounds and the consumer's fetch sizes come from the
// process's memory budget, shared by the source's readers; options win.
func TestReaderBuffersFromMemoryBudget(t *testing.T) {
	b, err := memory.Config{ProcessSize: 512 << 20}.Budget()
	if err != nil {
		t.Fatal(err)
	}
	old := memory.Install(b)
	t.Cleanup(func() { memory.Install(old) })
	e := newEnv(t, 2, "in")
	e.produce("in", 0, "a")
	share := readerShare(b, 2)
	r := newTestReader(t, e.source(Topics("in")), source.ReaderContext{Subtask: 0, Parallelism: 2})
	if r.buf.maxBytes != share.MaxBufferedBytes || r.buf.maxRecords != share.MaxBufferedRecords {
		t.Errorf("reader bounds %d bytes, %d records; want the budget's %+v", r.buf.maxBytes, r.buf.maxRecords, share)
	}
	if _, err := pollUntil(t, r, &fakeOutput[string]{}, func() bool { return r.consumer != nil }); err != nil {
		t.Fatal(err)
	}
	if got := r.consumer.OptValue(kgo.FetchMaxBytes); got != share.FetchMaxBytes {
		t.Errorf("consumer FetchMaxBytes %v, want %d", got, share.FetchMaxBytes)
	}
	if got := r.consumer.OptValue(kgo.FetchMaxPartitionBytes); got != share.FetchMaxPartitionBytes {
		t.Errorf("consumer FetchMaxPartitionBytes %v, want %d", got, share.FetchMaxPartitionBytes)
	}
	// The user's options win.
	r2 := newTestReader(t, e.source(Topics("in"), MaxBufferedBytes(12345), MaxBufferedRecords(7),
		ClientOptions(kgo.FetchMaxBytes(99999))), source.ReaderContext{Subtask: 0, Parallelism: 2})
	if r2.buf.maxBytes != 12345 || r2.buf.maxRecords != 7 {
		t.Errorf("reader bounds %d bytes, %d records; want the options' 12345, 7", r2.buf.maxBytes, r2.buf.maxRecords)
	}
	if _, err := pollUntil(t, r2, &fakeOutput[string]{}, func() bool { return r2.consumer != nil }); err != nil {
		t.Fatal(err)
	}
	if got := r2.consumer.OptValue(kgo.FetchMaxBytes); got != int32(99999) {
		t.Errorf("consumer FetchMaxBytes %v, want the option's 99999", got)
	}
}

// The reader's share: its part of the source's share of the budget,
// half of it held records, the fetch sizes a 32nd and a 64th of it, at
// least 64 and 32 KiB.
func TestReaderShare(t *testing.T) {
	const mib = 1 << 20
	if memoryShare.Name() != "kafka.source" || memory.ShareKey(memoryShare.Name()) != "taskmanager.memory.kafka.source.fraction" {
		t.Fatalf("share %q", memoryShare.Name())
	}
	b := memory.Budget{Shares: map[string]int64{"kafka.source": 64 * mib}}
	r := readerShare(b, 4) // 16 MiB each
	if r.MaxBufferedBytes != 8*mib || r.FetchMaxBytes != 512<<10 || r.FetchMaxPartitionBytes != 256<<10 || r.MaxBufferedRecords != 8*mib/kafkaclient.RecordOverhead {
		t.Errorf("reader share %+v", r)
	}
	// A large share keeps franz-go's limits.
	if r := readerShare(memory.Budget{Shares: map[string]int64{"kafka.source": 1 << 40}}, 1); r.FetchMaxBytes != 50<<20 || r.FetchMaxPartitionBytes != 1<<20 {
		t.Errorf("large reader share %+v", r)
	}
	// The default budget sets the source's share aside: 0.02 of the 224
	// MiB past the overhead, 4.48 MiB; each of two readers holds up to
	// 1.12 MiB of records and fetches its 32nd and 64th, 72 KiB at a
	// time and 36 KiB a partition (above the floors, 64 and 32 KiB).
	d, err := memory.Config{}.Budget()
	if err != nil {
		t.Fatal(err)
	}
	fraction := 0.02
	want := int64(224 * mib * fraction)
	if got := memoryShare.Of(d); got != want || d.Process-d.Overhead != 224*mib {
		t.Errorf("default share %d bytes of %d, want %d", got, d.Process-d.Overhead, want)
	}
	if r := readerShare(d, 2); r.MaxBufferedBytes != want/2/2 || r.FetchMaxBytes != int32(want/2/32) || r.FetchMaxPartitionBytes != int32(want/2/64) {
		t.Errorf("a reader of two under the default budget: %+v", r)
	}
}

// A reader bounded to one record still reads everything, and gives the
// memory of every fetch back.
func TestReaderBoundedToOneRecordReadsAll(t *testing.T) {
	e := newEnv(t, 2, "in")
	var want []string
	for i := range 50 {
		v := fmt.Sprint("v", i)
		e.produce("in", int32(i%2), v)
		want = append(want, v)
	}
	r := newTestReader(t, e.source(Topics("in"), Bounded(), MaxBufferedRecords(1)), source.ReaderContext{Subtask: 0, Parallelism: 1})
	out := &fakeOutput[string]{}
	if st, err := pollUntil(t, r, out, func() bool { return false }); err != nil || st != source.EndOfInput {
		t.Fatalf("status %v, err %v; want end of input", st, err)
	}
	slices.Sort(out.values)
	slices.Sort(want)
	if !slices.Equal(out.values, want) {
		t.Fatalf("read %v, want %v", out.values, want)
	}
	if b, n := r.heldBytes.Load(), r.heldRecs.Load(); b != 0 || n != 0 {
		t.Errorf("after the last record the reader holds %d bytes, %d records", b, n)
	}
}

// Under the default budget the readers of a source of parallelism 2 hold
// at most 6 MiB of records between them (the resident memory of the
// exactly-once Kafka job is most of its Go heap), and still fetch at
// least 64 KiB at a time, so that a broker far away is not asked for
// small fetches.
func TestDefaultReaderShare(t *testing.T) {
	d, err := memory.Config{}.Budget()
	if err != nil {
		t.Fatal(err)
	}
	r := readerShare(d, 2)
	if held := 2 * r.MaxBufferedBytes; held > 6<<20 {
		t.Errorf("two readers hold up to %d bytes of records, want at most 6 MiB", held)
	}
	if r.FetchMaxBytes < 64<<10 {
		t.Errorf("a reader fetches %d bytes at a time, want at least 64 KiB", r.FetchMaxBytes)
	}
}
