package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/source"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeOutput records what a reader emits. It is a source.ReaderOutput,
// as the runtime's: a split output records its own records and the
// reader's output all of them, with the split each came from.
type fakeOutput[T any] struct {
	values []T
	ts     []int64
	wms    []int64
	idle   int

	parent   *fakeOutput[T] // of a split output
	split    string         // the split of a split output
	froms    []string       // per value, its split ("" for none)
	splits   map[string]*fakeOutput[T]
	released []string
}

func (o *fakeOutput[T]) Collect(v T, ts int64) error {
	o.values = append(o.values, v)
	o.ts = append(o.ts, ts)
	o.froms = append(o.froms, o.split)
	if o.parent != nil {
		o.parent.values = append(o.parent.values, v)
		o.parent.ts = append(o.parent.ts, ts)
		o.parent.froms = append(o.parent.froms, o.split)
	}
	return nil
}

func (o *fakeOutput[T]) CreateOutputForSplit(id string) source.Output[T] {
	if o.splits == nil {
		o.splits = map[string]*fakeOutput[T]{}
	}
	if so := o.splits[id]; so != nil {
		return so
	}
	so := &fakeOutput[T]{parent: o, split: id}
	o.splits[id] = so
	return so
}

func (o *fakeOutput[T]) ReleaseOutputForSplit(id string) { o.released = append(o.released, id) }
func (o *fakeOutput[T]) EmitWatermark(wm int64) error {
	o.wms = append(o.wms, wm)
	return nil
}
func (o *fakeOutput[T]) MarkIdle() error { o.idle++; return nil }

type env struct {
	t     *testing.T
	seeds []string
	cl    *kgo.Client
	adm   *kadm.Client
}

func newEnv(t *testing.T, partitions int32, topics ...string) *env {
	t.Helper()
	seeds := testutil.KafkaCluster(t, partitions, topics...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &env{t: t, seeds: seeds, cl: cl, adm: kadm.NewClient(cl)}
}

func ctxFor(t *testing.T) context.Context { return testutil.Context(t, 30*time.Second) }

// produce writes values to topic/partition, with timestamps 1000+i.
func (e *env) produce(topic string, partition int32, values ...string) {
	e.t.Helper()
	var rs []*kgo.Record
	for i, v := range values {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(v), Timestamp: time.UnixMilli(int64(1000 + i))})
	}
	if err := e.cl.ProduceSync(ctxFor(e.t), rs...).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

func (e *env) source(sub Subscription, opts ...Option) *Source[string] {
	e.t.Helper()
	s, err := NewSource(e.seeds, sub, ValueDecoder[string](codec.String{}), opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func newTestReader(t *testing.T, s *Source[string], rc source.ReaderContext) *Reader[string] {
	t.Helper()
	r, err := s.NewReader(rc)
	if err != nil {
		t.Fatalf("NewReader(%+v): %v", rc, err)
	}
	t.Cleanup(func() { r.Close() })
	return r.(*Reader[string])
}

// pollUntil polls r until done reports true or the reader ends, waiting
// on Available when nothing is there; it fails the test after 20 s.
func pollUntil[T any](t *testing.T, r *Reader[T], out *fakeOutput[T], done func() bool) (source.Status, error) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !done() {
		st, err := r.PollNext(out)
		if err != nil || st == source.EndOfInput {
			return st, err
		}
		if st == source.NothingAvailable && !done() {
			select {
			case <-r.Available():
			case <-deadline:
				t.Fatalf("timed out waiting for the reader; emitted so far %v", out.values)
			}
		}
	}
	return source.MoreAvailable, nil
}

func count(n int) func(*fakeOutput[string]) func() bool {
	return func(o *fakeOutput[string]) func() bool { return func() bool { return len(o.values) >= n } }
}

func TestOwnerOfIsFlinksRule(t *testing.T) {
	// Java: "hello".hashCode() == 99162322, "".hashCode() == 0,
	// "orders".hashCode() == -1008770331.
	for s, want := range map[string]int32{"hello": 99162322, "": 0, "orders": -1008770331, "é€": 233*31 + 8364} {
		if got := javaStringHash(s); got != want {
			t.Errorf("javaStringHash(%q) = %d, want %d", s, got, want)
		}
	}
	// ((hash*31) & 0x7FFFFFFF) % 3 for "orders", then round robin.
	h := int32(-1008770331)
	start := int((h*31)&0x7FFFFFFF) % 3
	for p := int32(0); p < 6; p++ {
		if got, want := OwnerOf("orders", p, 3), (start+int(p))%3; got != want {
			t.Errorf("OwnerOf(orders, %d, 3) = %d, want %d", p, got, want)
		}
	}
	// Every subtask gets an even share of a topic's partitions.
	per := map[int]int{}
	for p := int32(0); p < 12; p++ {
		per[OwnerOf("t", p, 4)]++
	}
	for s := range 4 {
		if per[s] != 3 {
			t.Errorf("subtask %d owns %d of 12 partitions, want 3", s, per[s])
		}
	}
}

func TestSplitStateRoundTrip(t *testing.T) {
	st := SplitState{Topic: "tópico", Partition: 7, Offset: 1 << 40, StoppingOffset: NoStoppingOffset}
	got, err := DecodeSplitState(st.Encode())
	if err != nil || got != st {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, st)
	}
	b := st.Encode()
	for n := range len(b) {
		if _, err := DecodeSplitState(b[:n]); !errors.Is(err, ErrBadState) {
			t.Fatalf("truncated to %d: err %v, want ErrBadState", n, err)
		}
	}
}

// Two readers split a 4-partition topic by OwnerOf and together read each
// record once, with the record timestamps.
func TestReadersSplitPartitions(t *testing.T) {
	e := newEnv(t, 4, "in")
	var want []string
	for p := int32(0); p < 4; p++ {
		vals := []string{fmt.Sprintf("p%d-0", p), fmt.Sprintf("p%d-1", p), fmt.Sprintf("p%d-2", p)}
		e.produce("in", p, vals...)
		want = append(want, vals...)
	}
	s := e.source(Topics("in"))
	var all []string
	for sub := range 2 {
		r := newTestReader(t, s, source.ReaderContext{Subtask: sub, Parallelism: 2})
		var mine int
		for p := int32(0); p < 4; p++ {
			if OwnerOf("in", p, 2) == sub {
				mine++
			}
		}
		out := &fakeOutput[string]{}
		if _, err := pollUntil(t, r, out, count(3*mine)(out)); err != nil {
			t.Fatal(err)
		}
		for i, v := range out.values {
			var p int
			fmt.Sscanf(v, "p%d-", &p)
			if OwnerOf("in", int32(p), 2) != sub {
				t.Errorf("subtask %d read %s of partition %d, owned by %d", sub, v, p, OwnerOf("in", int32(p), 2))
			}
			if ts := out.ts[i]; ts < 1000 || ts > 1002 {
				t.Errorf("record %s has timestamp %d, want the record's 1000..1002", v, ts)
			}
		}
		all = append(all, out.values...)
		if got := len(r.Metrics()); got != mine {
			t.Errorf("subtask %d reports %d partitions, owns %d", sub, got, mine)
		}
	}
	slices.Sort(all)
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("read %v, want %v", all, want)
	}
}

// A snapshot taken mid-way and restored with another parallelism resumes
// every partition exactly where it was: no record lost or read twice.
func TestSnapshotRestoreRescales(t *testing.T) {
	e := newEnv(t, 4, "in")
	var want []string
	for p := int32(0); p < 4; p++ {
		for i := range 5 {
			want = append(want, fmt.Sprintf("p%d-%d", p, i))
			e.produce("in", p, want[len(want)-1])
		}
	}
	s := e.source(Topics("in"))
	var got []string
	var union [][]byte
	for sub := range 2 {
		r := newTestReader(t, s, source.ReaderContext{Subtask: sub, Parallelism: 2})
		out := &fakeOutput[string]{}
		if _, err := pollUntil(t, r, out, count(3)(out)); err != nil {
			t.Fatal(err)
		}
		st, err := r.SnapshotState(1)
		if err != nil {
			t.Fatal(err)
		}
		union = append(union, st...)
		got = append(got, out.values...)
		r.Close()
	}
	if len(union) != 4 {
		t.Fatalf("snapshot has %d entries, want one per partition (4)", len(union))
	}
	for sub := range 3 {
		r := newTestReader(t, s, source.ReaderContext{Subtask: sub, Parallelism: 3, Restored: true, RestoredState: union, RestoredCheckpointID: 1})
		out := &fakeOutput[string]{}
		var rest int
		for _, m := range r.Metrics() {
			rest += 5 - int(m.CurrentOffset)
		}
		if _, err := pollUntil(t, r, out, count(rest)(out)); err != nil {
			t.Fatal(err)
		}
		got = append(got, out.values...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read across the restore %v, want each of %v once", got, want)
	}
}

// A bounded reader stops at the end offsets of its start, restored or not.
func TestBoundedStopsAtStartEnd(t *testing.T) {
	e := newEnv(t, 2, "in")
	e.produce("in", 0, "a", "b", "c")
	e.produce("in", 1, "d")
	s := e.source(Topics("in"), Bounded())
	if !s.Bounded() {
		t.Fatal("Bounded() = false")
	}
	r := newTestReader(t, s, source.ReaderContext{Subtask: 0, Parallelism: 1})
	e.produce("in", 0, "late")
	out := &fakeOutput[string]{}
	st, err := pollUntil(t, r, out, func() bool { return false })
	if err != nil || st != source.EndOfInput {
		t.Fatalf("status %v, err %v; want end of input", st, err)
	}
	slices.Sort(out.values)
	if fmt.Sprint(out.values) != "[a b c d]" {
		t.Fatalf("bounded reader read %v, want [a b c d]", out.values)
	}
	// Restored mid-way, it keeps the original stopping offsets.
	r2 := newTestReader(t, s, source.ReaderContext{Subtask: 0, Parallelism: 1})
	out2 := &fakeOutput[string]{}
	if _, err := pollUntil(t, r2, out2, count(1)(out2)); err != nil {
		t.Fatal(err)
	}
	snap, _ := r2.SnapshotState(1)
	e.produce("in", 1, "later")
	r3 := newTestReader(t, s, source.ReaderContext{Subtask: 0, Parallelism: 1, Restored: true, RestoredState: snap})
	out3 := &fakeOutput[string]{}
	if st, err := pollUntil(t, r3, out3, func() bool { return false }); err != nil || st != source.EndOfInput {
		t.Fatalf("restored bounded reader: %v, %v", st, err)
	}
	if n := len(out2.values) + len(out3.values); n != 5 || slices.Contains(out3.values, "later") {
		t.Fatalf("restored bounded reader read %v after %v; want the 5 records of the first start, not 'later'", out3.values, out2.values)
	}
	// A bounded reader with nothing to read ends at once.
	r4 := newTestReader(t, e.source(Topics("in"), Bounded(), StartFrom(Latest())), source.ReaderContext{Subtask: 0, Parallelism: 1})
	if st, err := r4.PollNext(&fakeOutput[string]{}); st != source.EndOfInput || err != nil {
		t.Fatalf("bounded reader starting at the end: %v, %v", st, err)
	}
}

func TestStartingOffsets(t *testing.T) {
	e := newEnv(t, 1, "in")
	e.produce("in", 0, "0", "1", "2", "3", "4") // timestamps 1000..1004
	ctx := ctxFor(t)
	if _, err := e.adm.CommitOffsets(ctx, "g", kadm.OffsetsFromRecords(kgo.Record{Topic: "in", Partition: 0, Offset: 2})); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		opts  []Option
		first string
	}{
		{"earliest", []Option{StartFrom(Earliest())}, "0"},
		{"latest", []Option{StartFrom(Latest())}, "late"},
		{"timestamp", []Option{StartFrom(Timestamp(time.UnixMilli(1003)))}, "3"},
		{"offsets", []Option{StartFrom(Offsets(map[string]map[int32]int64{"in": {0: 4}}, Earliest()))}, "4"},
		{"offsets fallback", []Option{StartFrom(Offsets(map[string]map[int32]int64{"other": {0: 4}}, Latest()))}, "late"},
		{"committed", []Option{GroupID("g"), StartFrom(Committed(Earliest()))}, "3"},
		{"committed fallback", []Option{GroupID("none"), StartFrom(Committed(Earliest()))}, "0"},
	}
	var readers []*Reader[string]
	for _, c := range cases {
		readers = append(readers, newTestReader(t, e.source(Topics("in"), c.opts...), source.ReaderContext{Subtask: 0, Parallelism: 1}))
	}
	e.produce("in", 0, "late")
	for i, c := range cases {
		out := &fakeOutput[string]{}
		if _, err := pollUntil(t, readers[i], out, count(1)(out)); err != nil {
			t.Fatal(err)
		}
		if out.values[0] != c.first {
			t.Errorf("%s: first record %q, want %q", c.name, out.values[0], c.first)
		}
	}
	if _, err := NewSource(e.seeds, Topics("in"), ValueDecoder[string](codec.String{}), StartFrom(Committed(Earliest()))); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("committed without a group: err %v, want ErrInvalidConfig", err)
	}
}

func intSource(e *env, opts ...Option) *Source[int64] {
	s, err := NewSource(e.seeds, Topics("in"), ValueDecoder[int64](codec.Int[int64]{}), opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) produceInts(vals ...any) {
	e.t.Helper()
	var rs []*kgo.Record
	for _, v := range vals {
		var b []byte
		switch v := v.(type) {
		case int64:
			b, _ = codec.Int[int64]{}.Append(nil, v)
		case string:
			b = []byte(v)
		}
		rs = append(rs, &kgo.Record{Topic: "in", Value: b})
	}
	if err := e.cl.ProduceSync(ctxFor(e.t), rs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

func TestBadRecordPolicies(t *testing.T) {
	e := newEnv(t, 1, "in", "dlq")
	e.produceInts(int64(1), "bad", int64(2))

	r, err := intSource(e).NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := &fakeOutput[int64]{}
	_, err = pollUntil(t, r.(*Reader[int64]), out, func() bool { return false })
	if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "topic in partition 0 offset 1") {
		t.Fatalf("default policy: err %v, want ErrBadRecord naming topic in partition 0 offset 1", err)
	}
	if fmt.Sprint(out.values) != "[1]" {
		t.Fatalf("emitted %v before the bad record, want [1]", out.values)
	}

	for _, pol := range []BadRecordPolicy{SkipBadRecords(), DeadLetterTopic("dlq")} {
		r, err := intSource(e, OnBadRecord(pol)).NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		kr := r.(*Reader[int64])
		out := &fakeOutput[int64]{}
		if _, err := pollUntil(t, kr, out, func() bool { return len(out.values) == 2 }); err != nil {
			t.Fatalf("policy %+v: %v", pol, err)
		}
		if fmt.Sprint(out.values) != "[1 2]" || kr.SkippedRecords() != 1 {
			t.Fatalf("policy %+v: emitted %v, skipped %d; want [1 2], 1", pol, out.values, kr.SkippedRecords())
		}
		if _, err := kr.SnapshotState(1); err != nil { // waits for the dead-letter copy
			t.Fatal(err)
		}
		r.Close()
	}
	// The dead-letter copy carries the record and where it came from.
	cl, _ := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.ConsumeTopics("dlq"))
	defer cl.Close()
	fs := cl.PollFetches(ctxFor(t))
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Value) != "bad" {
		t.Fatalf("dead-letter topic holds %v, want the bad record", recs)
	}
	h := map[string]string{}
	for _, x := range recs[0].Headers {
		h[x.Key] = string(x.Value)
	}
	if h[HeaderSourceTopic] != "in" || h[HeaderSourcePartition] != "0" || h[HeaderSourceOffset] != "1" || h[HeaderError] == "" {
		t.Fatalf("dead-letter headers %v", h)
	}
}

// A bounded reader acknowledges its dead-letter copies before it reports
// the end of its input: a job without checkpoints takes no snapshot that
// would wait for them, and closes the reader right after.
func TestDeadLetterFlushedAtEndOfInput(t *testing.T) {
	e := newEnv(t, 1, "in", "dlq")
	e.produceInts(int64(1), "bad", int64(2))
	// With a minute's linger, only a flush sends the copy in time.
	r, err := intSource(e, OnBadRecord(DeadLetterTopic("dlq")), Bounded(), ClientOptions(kgo.ProducerLinger(time.Minute))).
		NewReader(source.ReaderContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	out := &fakeOutput[int64]{}
	st, err := pollUntil(t, r.(*Reader[int64]), out, func() bool { return false })
	if err != nil || st != source.EndOfInput {
		t.Fatalf("poll to the end: %v, %v", st, err)
	}
	// Before Close: the copy is already acknowledged, so the end offset
	// counts it right away.
	ends, err := e.adm.ListEndOffsets(ctxFor(t), "dlq")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("dlq", 0); o.Offset != 1 {
		t.Fatalf("dead-letter topic end offset %d at the end of input, want 1", o.Offset)
	}
	r.Close()
}

// New partitions and new topics matching the pattern are found at the
// discovery interval and read from their earliest offset.
func TestPartitionDiscovery(t *testing.T) {
	e := newEnv(t, 1, "ev-a")
	e.produce("ev-a", 0, "a0")
	s := e.source(TopicPattern(regexp.MustCompile(`ev-.*`)), PartitionDiscoveryInterval(50*time.Millisecond),
		ClientOptions(kgo.MetadataMinAge(50*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond)))
	r := newTestReader(t, s, source.ReaderContext{Subtask: 0, Parallelism: 1})
	out := &fakeOutput[string]{}
	if _, err := pollUntil(t, r, out, count(1)(out)); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	if _, err := e.adm.CreatePartitions(ctx, 2, "ev-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.adm.CreateTopic(ctx, 1, 1, nil, "ev-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.adm.CreateTopic(ctx, 1, 1, nil, "other"); err != nil {
		t.Fatal(err)
	}
	// A new producer, so that it sees the new partitions.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	e.cl = cl
	e.produce("ev-a", 1, "a1")
	e.produce("ev-a", 2, "a2")
	e.produce("ev-b", 0, "b0")
	e.produce("other", 0, "x")
	if _, err := pollUntil(t, r, out, count(4)(out)); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out.values)
	if fmt.Sprint(out.values) != "[a0 a1 a2 b0]" {
		t.Fatalf("read %v, want [a0 a1 a2 b0]", out.values)
	}
}

// The offsets of a completed checkpoint are committed to the group and
// show in the metrics.
func TestCommitOffsetsOnCheckpointComplete(t *testing.T) {
	e := newEnv(t, 1, "in")
	e.produce("in", 0, "a", "b", "c")
	r := newTestReader(t, e.source(Topics("in"), GroupID("lag")), source.ReaderContext{Subtask: 0, Parallelism: 1})
	out := &fakeOutput[string]{}
	if _, err := pollUntil(t, r, out, count(2)(out)); err != nil {
		t.Fatal(err)
	}
	// Possibly all three were emitted in one poll; the snapshot says where.
	snap, err := r.SnapshotState(5)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := DecodeSplitState(snap[0])
	if int(st.Offset) != len(out.values) {
		t.Fatalf("snapshot offset %d after %d records", st.Offset, len(out.values))
	}
	if err := r.NotifyCheckpointComplete(5); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	for {
		m := r.Metrics()[0]
		if m.CommittedOffset == st.Offset {
			if m.CurrentOffset != st.Offset || m.HighWatermark != 3 || m.Lag != 3-st.Offset {
				t.Fatalf("metrics %+v", m)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("offset never committed: %+v", m)
		case <-time.After(10 * time.Millisecond):
		}
	}
	os, err := e.adm.FetchOffsets(ctx, "lag")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := os.Lookup("in", 0); o.At != st.Offset {
		t.Fatalf("group offset %d, want %d", o.At, st.Offset)
	}
}

// Under read_committed, records of an aborted transaction are skipped and
// a bounded reader still reaches its stopping offset past them.
func TestReadCommittedBoundedPastAbortedTail(t *testing.T) {
	e := newEnv(t, 1, "in")
	e.produce("in", 0, "plain")
	txn, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...), kgo.TransactionalID("t"), kgo.DefaultProduceTopic("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	ctx := ctxFor(t)
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := "committed"
		if !commit {
			v = "aborted"
		}
		if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	r := newTestReader(t, e.source(Topics("in"), Bounded()), source.ReaderContext{Subtask: 0, Parallelism: 1})
	out := &fakeOutput[string]{}
	st, err := pollUntil(t, r, out, func() bool { return false })
	if err != nil || st != source.EndOfInput {
		t.Fatalf("status %v, err %v", st, err)
	}
	if fmt.Sprint(out.values) != "[plain committed committed]" {
		t.Fatalf("read %v, want [plain committed committed]", out.values)
	}
}

func TestReaderWithoutPartitionsIsIdle(t *testing.T) {
	e := newEnv(t, 1, "in")
	s := e.source(Topics("in"))
	owner := OwnerOf("in", 0, 2)
	r := newTestReader(t, s, source.ReaderContext{Subtask: 1 - owner, Parallelism: 2})
	out := &fakeOutput[string]{}
	if st, err := r.PollNext(out); st != source.NothingAvailable || err != nil || out.idle != 1 {
		t.Fatalf("reader without partitions: %v, %v, idle marks %d; want nothing-available and one idle mark", st, err, out.idle)
	}
}

// The reader emits each partition's records to the partition's split
// output, made when the partition is assigned (so that a partition
// without records holds the watermark back, as in Flink) and released
// when a bounded partition reached its end.
func TestReaderEmitsPerPartition(t *testing.T) {
	e := newEnv(t, 3, "in")
	e.produce("in", 0, "a", "b", "c")
	e.produce("in", 1, "x")
	r := newTestReader(t, e.source(Topics("in")), source.ReaderContext{Subtask: 0, Parallelism: 1})
	out := &fakeOutput[string]{}
	if _, err := pollUntil(t, r, out, count(4)(out)); err != nil {
		t.Fatal(err)
	}
	if len(out.splits) != 3 {
		t.Fatalf("split outputs %v, want one per partition: in-0, in-1, in-2", slices.Collect(maps.Keys(out.splits)))
	}
	for id, want := range map[string]string{"in-0": "[a b c]", "in-1": "[x]", "in-2": "[]"} {
		if got := fmt.Sprint(out.splits[id].values); got != want {
			t.Errorf("split %s got %s, want %s", id, got, want)
		}
	}
	if slices.Contains(out.froms, "") || len(out.released) > 0 {
		t.Errorf("records by split %q (\"\": the reader's own output), released %v: want every record on its split's output and nothing released",
			out.froms, out.released)
	}

	// Bounded: each partition's output is released at its end (the empty
	// partition 2 is finished from the start and gets none).
	r = newTestReader(t, e.source(Topics("in"), Bounded()), source.ReaderContext{Subtask: 0, Parallelism: 1})
	out = &fakeOutput[string]{}
	if st, err := pollUntil(t, r, out, func() bool { return false }); err != nil || st != source.EndOfInput {
		t.Fatalf("status %v, err %v", st, err)
	}
	slices.Sort(out.released)
	if fmt.Sprint(out.released) != "[in-0 in-1]" {
		t.Errorf("released split outputs %v, want those of partitions 0 and 1 once they ended", out.released)
	}
}

// PartitionWatermarks, deprecated, is refused with the strategy to give
// FromSource instead.
func TestPartitionWatermarksRefused(t *testing.T) {
	_, err := NewSource([]string{"localhost:9092"}, Topics("in"), ValueDecoder[string](codec.String{}),
		PartitionWatermarks(5*time.Second, time.Minute))
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("NewSource with PartitionWatermarks: %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"PartitionWatermarks", "FromSource", "ForBoundedOutOfOrderness[T](5s).WithIdleness(1m0s)", "applied per partition"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
