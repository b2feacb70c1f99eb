package kafka

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/kafkaclient"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// cluster starts a kfake cluster with topic (partitions partitions) and
// returns its seeds.
func cluster(t *testing.T, partitions int32, topics ...string) []string {
	t.Helper()
	return testutil.KafkaCluster(t, partitions, topics...)
}

// readAll reads topic with the isolation level until it has n records and
// returns their values; it fails the test if they do not arrive.
func readAll(t *testing.T, seeds []string, topic string, level kgo.IsolationLevel, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testutil.Context(t, 0)
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s: %v (got %v)", len(got), n, topic, ctx.Err(), got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// adminClient is an admin client of the cluster at seeds, closed when the
// test ends.
func adminClient(t *testing.T, seeds []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// stableOffsets returns the last stable offset and the end offset of
// every partition of topic.
func stableOffsets(t *testing.T, seeds []string, topic string) (lso, end map[int32]int64) {
	t.Helper()
	adm := adminClient(t, seeds)
	ctx := testutil.Context(t, 0)
	s, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	e, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	lso, end = map[int32]int64{}, map[int32]int64{}
	s.Each(func(o kadm.ListedOffset) { lso[o.Partition] = o.Offset })
	e.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	return lso, end
}

func wctx(subtask, par int) sink.WriterContext {
	return sink.WriterContext{Subtask: subtask, Parallelism: par}
}

func TestCommittableRoundTrip(t *testing.T) {
	c := Committable{
		TransactionalID: "p-3-1", ProducerID: 1 << 40, ProducerEpoch: 32766, TransactionVersion: 2, CheckpointID: 77,
		LastOffsets: []PartitionOffset{{"b", 2, 9}, {"a", 1, 1 << 33}, {"b", 0, 0}},
	}
	got, err := DecodeCommittable(c.Encode())
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.LastOffsets = []PartitionOffset{{"a", 1, 1 << 33}, {"b", 0, 0}, {"b", 2, 9}}
	if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(got.LastOffsets) != fmt.Sprint(want.LastOffsets) {
		t.Fatalf("round trip: got %+v, want %+v", got, want)
	}
	b := c.Encode()
	for n := 0; n < len(b); n++ {
		if _, err := DecodeCommittable(b[:n]); !errors.Is(err, ErrBadCommittable) {
			t.Fatalf("decode of %d of %d bytes: err %v, want ErrBadCommittable", n, len(b), err)
		}
	}
	if _, err := DecodeCommittable(append(b, 0)); !errors.Is(err, ErrBadCommittable) {
		t.Fatalf("trailing byte: err %v, want ErrBadCommittable", err)
	}
	if _, err := DecodeCommittable(append([]byte{9}, b[1:]...)); !errors.Is(err, ErrBadCommittable) {
		t.Fatalf("unknown version: err %v, want ErrBadCommittable", err)
	}
	// Version 1 (no record count) still decodes, with Records -1.
	c.Records = 5
	b = c.Encode()
	v1 := append([]byte{1}, b[1:len(b)-1]...) // 5 is one varint byte
	got, err = DecodeCommittable(v1)
	if err != nil || got.Records != -1 || got.TransactionalID != c.TransactionalID || len(got.LastOffsets) != 3 {
		t.Fatalf("version 1: %+v, %v; want the committable with Records -1", got, err)
	}
	if got, err := DecodeCommittable(b); err != nil || got.Records != 5 {
		t.Fatalf("version 2: %+v, %v; want Records 5", got, err)
	}
}

// BindJob: without Guarantee the guarantee follows the job's
// checkpointing; without a prefix an exactly-once sink's is derived from
// the job id and its uid; explicit options win, and are refused when
// they contradict the job.
func TestBindJob(t *testing.T) {
	ser := ValueSerializer[string]("t", codec.String{})
	quiet := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name    string
		opts    []Option
		ckpt    sink.Checkpointing
		want    DeliveryGuarantee
		prefix  string
		refused string
	}{
		{name: "default, exactly-once checkpoints", ckpt: sink.ExactlyOnceCheckpoints, want: ExactlyOnce, prefix: "job_1-kafka_out"},
		{name: "default, at-least-once checkpoints", ckpt: sink.AtLeastOnceCheckpoints, want: AtLeastOnce},
		{name: "default, no checkpoints", ckpt: sink.NoCheckpoints, want: DeliveryNone},
		{name: "explicit prefix", opts: []Option{TransactionalIDPrefix("mine")}, ckpt: sink.ExactlyOnceCheckpoints, want: ExactlyOnce, prefix: "mine"},
		{name: "explicit none", opts: []Option{Guarantee(DeliveryNone)}, ckpt: sink.ExactlyOnceCheckpoints, want: DeliveryNone},
		{name: "explicit at-least-once", opts: []Option{Guarantee(AtLeastOnce)}, ckpt: sink.NoCheckpoints, want: AtLeastOnce},
		{name: "explicit exactly-once", opts: []Option{Guarantee(ExactlyOnce)}, ckpt: sink.ExactlyOnceCheckpoints, want: ExactlyOnce, prefix: "job_1-kafka_out"},
		{name: "exactly-once without checkpoints", opts: []Option{Guarantee(ExactlyOnce), TransactionalIDPrefix("p")}, ckpt: sink.NoCheckpoints,
			refused: "execution.checkpointing.interval"},
		{name: "exactly-once with at-least-once checkpoints", opts: []Option{Guarantee(ExactlyOnce)}, ckpt: sink.AtLeastOnceCheckpoints,
			refused: "execution.checkpointing.mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSink([]string{"x:1"}, ser, append(tc.opts, Logger(quiet))...)
			if err != nil {
				t.Fatal(err)
			}
			ex, err := s.BindJob(sink.JobInfo{JobID: "job 1", UID: "kafka out", Name: "Kafka", Checkpointing: tc.ckpt, Logger: quiet})
			if tc.refused != "" {
				if !errors.Is(err, ErrGuaranteeConflict) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("BindJob: %v, want ErrGuaranteeConflict naming %s", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Guarantee() != tc.want || s.TransactionalIDPrefix() != tc.prefix {
				t.Fatalf("guarantee %v prefix %q, want %v %q", s.Guarantee(), s.TransactionalIDPrefix(), tc.want, tc.prefix)
			}
			if (len(ex) == 1) != (tc.want == ExactlyOnce) || len(ex) == 1 && !strings.Contains(ex[0].What, strconv.Quote(tc.prefix)) {
				t.Fatalf("claims %+v; want the prefix claimed by an exactly-once sink only", ex)
			}
		})
	}
	// One sink value bound for two operators is refused.
	s, _ := NewSink([]string{"x:1"}, ser, Logger(quiet))
	if _, err := s.BindJob(sink.JobInfo{JobID: "j", UID: "a", Checkpointing: sink.ExactlyOnceCheckpoints}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BindJob(sink.JobInfo{JobID: "j", UID: "b", Checkpointing: sink.ExactlyOnceCheckpoints}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("second operator of one sink value: %v, want ErrInvalidConfig", err)
	}
}

func TestConfigValidation(t *testing.T) {
	ser := ValueSerializer[string]("t", codec.String{})
	// Exactly-once without a prefix: the job derives one (BindJob); a
	// sink used by hand is refused a writer.
	eo, err := NewSink([]string{"x:1"}, ser, Guarantee(ExactlyOnce))
	if err != nil {
		t.Fatalf("exactly-once without prefix: %v", err)
	}
	if _, err := eo.NewWriter(sink.WriterContext{Parallelism: 1}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "TransactionalIDPrefix") {
		t.Fatalf("writer of an exactly-once sink without prefix outside a job: err %v, want ErrInvalidConfig naming TransactionalIDPrefix", err)
	}
	if _, err := NewSink[string](nil, ser); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("no seeds: err %v", err)
	}
	s, err := NewSink([]string{"x:1"}, ser, Guarantee(ExactlyOnce), TransactionalIDPrefix("p"), MaxConcurrentCheckpoints(2))
	if err != nil {
		t.Fatal(err)
	}
	if s.PoolSize() != 3 {
		t.Fatalf("pool size %d, want 3 (max concurrent checkpoints 2 + 1)", s.PoolSize())
	}
	// Default 15 min timeout: 10 min + 5 min fits exactly, 10 min + 10 min does not.
	if err := s.ValidateCheckpointing(sink.CheckpointTiming{Interval: 10 * time.Minute, Timeout: 5 * time.Minute}); err != nil {
		t.Fatalf("15 min timeout for 10 min + 5 min: %v", err)
	}
	err = s.ValidateCheckpointing(sink.CheckpointTiming{Interval: 10 * time.Minute, Timeout: 10 * time.Minute})
	if !errors.Is(err, ErrTransactionTimeoutTooSmall) {
		t.Fatalf("err %v, want ErrTransactionTimeoutTooSmall", err)
	}
	for _, fig := range []string{"transaction.timeout.ms 900000", "execution.checkpointing.interval 10m0s", "execution.checkpointing.timeout 10m0s"} {
		if !strings.Contains(err.Error(), fig) {
			t.Errorf("error %q does not name %q", err, fig)
		}
	}
	alo, _ := NewSink([]string{"x:1"}, ser, Guarantee(AtLeastOnce))
	if err := alo.ValidateCheckpointing(sink.CheckpointTiming{Interval: time.Hour, Timeout: time.Hour}); err != nil {
		t.Fatalf("at-least-once sink refused checkpointing: %v", err)
	}
}

func TestAtLeastOnceFlushesAtBarrier(t *testing.T) {
	seeds := cluster(t, 2, "out")
	s, err := NewSink(seeds, KeyValueSerializer("out", func(v string) string { return v }, codec.String{}, codec.String{}),
		Guarantee(AtLeastOnce))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 20 {
		if err := w.Write(fmt.Sprintf("v%02d", i), int64(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	pw := w.(sink.PrecommittingWriter[string])
	cs, err := pw.PrepareCommit(1)
	if err != nil || len(cs) != 0 {
		t.Fatalf("PrepareCommit: %d committables, err %v; want none, nil", len(cs), err)
	}
	// Everything before the barrier is acknowledged: the end offsets say so
	// right away, without waiting.
	_, end := stableOffsets(t, seeds, "out")
	if end[0]+end[1] != 20 {
		t.Fatalf("after PrepareCommit the end offsets are %v, want 20 records in all", end)
	}
	if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 20); len(got) != 20 {
		t.Fatalf("read %d records, want 20", len(got))
	}
}

// A record that fails is reported by PrepareCommit (and the next Write),
// although franz-go's Flush returns nil.
func TestAtLeastOnceChecksEveryPromise(t *testing.T) {
	seeds := cluster(t, 1, "out")
	s, err := NewSink(seeds, ValueSerializer[[]byte]("out", codec.Bytes{}), Guarantee(AtLeastOnce),
		ClientOptions(kgo.ProducerBatchMaxBytes(1024)))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write([]byte("small"), source.NoTimestamp); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(bytes.Repeat([]byte("x"), 4096), source.NoTimestamp); err != nil {
		t.Fatal(err)
	}
	ww := w.(*writer[[]byte])
	if err := ww.cl.Flush(testutil.Context(t, 0)); err != nil {
		t.Fatalf("franz-go Flush: %v (expected nil: it does not report record errors)", err)
	}
	_, err = w.(sink.PrecommittingWriter[[]byte]).PrepareCommit(1)
	if !errors.Is(err, ErrProduce) || !strings.Contains(err.Error(), "topic out partition") {
		t.Fatalf("PrepareCommit err %v, want ErrProduce naming the topic", err)
	}
	if err := w.Write([]byte("more"), source.NoTimestamp); !errors.Is(err, ErrProduce) {
		t.Fatalf("Write after a failed record: err %v, want ErrProduce", err)
	}
}

func eosSink(t *testing.T, seeds []string, prefix string, opts ...Option) *Sink[string] {
	t.Helper()
	s, err := NewSink(seeds, ValueSerializer("out", codec.String{}),
		append([]Option{Guarantee(ExactlyOnce), TransactionalIDPrefix(prefix), TransactionTimeout(time.Minute)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeAll(t *testing.T, w sink.Writer[string], vals ...string) {
	t.Helper()
	for _, v := range vals {
		if err := w.Write(v, source.NoTimestamp); err != nil {
			t.Fatalf("write %q: %v", v, err)
		}
	}
}

func prepare(t *testing.T, w sink.Writer[string], id int64) []byte {
	t.Helper()
	cs, err := w.(sink.PrecommittingWriter[string]).PrepareCommit(id)
	if err != nil {
		t.Fatalf("PrepareCommit(%d): %v", id, err)
	}
	if len(cs) != 1 {
		t.Fatalf("PrepareCommit(%d): %d committables, want 1", id, len(cs))
	}
	return cs[0]
}

// The pool rotates ids per checkpoint, commits make the records visible
// only then, a re-commit succeeds, and each id keeps its client.
func TestExactlyOncePoolRotationAndCommit(t *testing.T) {
	seeds := cluster(t, 1, "out")
	s := eosSink(t, seeds, "rot")
	w, err := s.NewWriter(wctx(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, err := s.NewCommitter(wctx(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testutil.Context(t, 0)

	var ids []string
	for cp := int64(1); cp <= 3; cp++ {
		writeAll(t, w, fmt.Sprintf("c%d-a", cp), fmt.Sprintf("c%d-b", cp))
		b := prepare(t, w, cp)
		cm, err := DecodeCommittable(b)
		if err != nil {
			t.Fatal(err)
		}
		if cm.CheckpointID != cp || cm.ProducerID < 0 || len(cm.LastOffsets) != 1 || cm.TransactionVersion == 0 {
			t.Fatalf("committable of checkpoint %d: %+v", cp, cm)
		}
		ids = append(ids, cm.TransactionalID)
		// Not visible before the commit: the last stable offset is held.
		lso, end := stableOffsets(t, seeds, "out")
		if lso[0] >= end[0] {
			t.Fatalf("checkpoint %d pre-committed: last stable offset %d, end %d; want the transaction open", cp, lso[0], end[0])
		}
		if err := c.Commit(ctx, cp, [][]byte{b}); err != nil {
			t.Fatalf("commit %d: %v", cp, err)
		}
		if err := c.Commit(ctx, cp, [][]byte{b}); err != nil {
			t.Fatalf("re-commit %d: %v", cp, err)
		}
	}
	if want := []string{"rot-1-0", "rot-1-1", "rot-1-0"}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("transactional ids %v, want %v", ids, want)
	}
	got := readAll(t, seeds, "out", kgo.ReadCommitted(), 6)
	if want := "[c1-a c1-b c2-a c2-b c3-a c3-b]"; fmt.Sprint(got) != want {
		t.Fatalf("read_committed sees %v, want %s", got, want)
	}

	// Three transactions committed (a re-commit is not counted again),
	// each with its latency in the histogram.
	m := s.Metrics()
	var n uint64
	for _, c := range m.CommitLatencyCounts {
		n += c
	}
	if m.TransactionsCommitted != 3 || n != 3 || m.CommitLatencySum <= 0 || m.TransactionsAborted != 0 {
		t.Fatalf("sink metrics %+v, want 3 commits with latencies and no abort", m)
	}

	// Each id has kept its client: one InitProducerId per id, not per
	// transaction.
	tw := w.(*transactionalWriter[string])
	if len(tw.slots) != 2 || tw.slots[0].cl == nil || tw.slots[1].cl == nil {
		t.Fatalf("slots %+v, want 2 with clients", tw.slots)
	}
}

// kill drops a writer as a crash would: its clients go without ending
// their transactions.
func kill(w sink.Writer[string]) {
	tw := w.(*transactionalWriter[string])
	tw.closed = true
	tw.cancel()
	for _, cl := range tw.s.pool.unregister(tw.slots) {
		cl.Close()
	}
	tw.closing.Wait()
}

func committable(t *testing.T, b []byte) Committable {
	t.Helper()
	c, err := DecodeCommittable(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An aborted checkpoint leaves its transaction pending until the next
// completed checkpoint commits it, and that commit runs on the task
// goroutine, after the writer has begun the next interval. The writer
// does not wait for it: it takes an overflow id, and gives it back once
// committed; later intervals go back to the pool. Every id keeps its
// client across transactions.
func TestExactlyOnceAbortedCheckpointTakesOverflowID(t *testing.T) {
	seeds := cluster(t, 1, "out")
	s := eosSink(t, seeds, "ovf")
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, _ := s.NewCommitter(wctx(0, 1))
	defer c.Close()
	ctx := testutil.Context(t, 0)
	tw := w.(*transactionalWriter[string])

	writeAll(t, w, "a1")
	b1 := prepare(t, w, 1) // checkpoint 1 is then aborted: b1 stays pending
	cl0 := tw.slots[0].cl
	pid0 := committable(t, b1).ProducerID
	writeAll(t, w, "a2")
	b2 := prepare(t, w, 2)
	writeAll(t, w, "a3") // ovf-0-0 still holds checkpoint 1's transaction
	b3 := prepare(t, w, 3)
	var ids []string
	for _, b := range [][]byte{b1, b2, b3} {
		ids = append(ids, committable(t, b).TransactionalID)
	}
	if want := "[ovf-0-0 ovf-0-1 ovf-0-2]"; fmt.Sprint(ids) != want {
		t.Fatalf("ids %v, want %s (the third an overflow id)", ids, want)
	}
	if st := stateIDs(t, tw); st != 3 {
		t.Fatalf("writer state records %d ids, want 3", st)
	}
	// Checkpoint 3 completes: the operator commits 1, 2 and 3 in order.
	for i, b := range [][]byte{b1, b2, b3} {
		if err := c.Commit(ctx, int64(i+1), [][]byte{b}); err != nil {
			t.Fatalf("commit %d: %v", i+1, err)
		}
	}
	// Back to the pool, in turn; the overflow id is not needed again.
	for cp := int64(4); cp <= 7; cp++ {
		writeAll(t, w, fmt.Sprint("a", cp))
		b := prepare(t, w, cp)
		cm := committable(t, b)
		if want := fmt.Sprint("ovf-0-", cp%2); cm.TransactionalID != want {
			t.Fatalf("checkpoint %d on %s, want %s", cp, cm.TransactionalID, want)
		}
		if cm.TransactionalID == "ovf-0-0" && cm.ProducerID != pid0 {
			t.Fatalf("checkpoint %d: producer id %d, want %d (the same client, no new InitProducerId)", cp, cm.ProducerID, pid0)
		}
		if err := c.Commit(ctx, cp, [][]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	if tw.slots[0].cl != cl0 {
		t.Fatal("the client of ovf-0-0 was replaced; want it reused")
	}
	if len(tw.slots) != 3 {
		t.Fatalf("%d ids used, want 3", len(tw.slots))
	}
	got := readAll(t, seeds, "out", kgo.ReadCommitted(), 7)
	if want := "[a1 a2 a3 a4 a5 a6 a7]"; fmt.Sprint(got) != want {
		t.Fatalf("read_committed sees %v, want %s", got, want)
	}
	lso, end := stableOffsets(t, seeds, "out")
	if lso[0] != end[0] {
		t.Fatalf("lso %d end %d: a transaction is still open", lso[0], end[0])
	}
}

func stateIDs(t *testing.T, tw *transactionalWriter[string]) int {
	t.Helper()
	st, err := tw.SnapshotState(0)
	if err != nil || len(st) != 1 {
		t.Fatalf("writer state %v, %v", st, err)
	}
	_, n, err := decodeWriterState(st[0])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Past the pool limit Write fails with ErrPoolExhausted, naming the oldest
// uncommitted transaction; the writer never waits.
func TestExactlyOncePoolLimit(t *testing.T) {
	seeds := cluster(t, 1, "out")
	s := eosSink(t, seeds, "lim", TransactionalIDPoolLimit(3))
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for cp := int64(1); cp <= 3; cp++ {
		writeAll(t, w, fmt.Sprint("v", cp))
		prepare(t, w, cp)
	}
	err = w.Write("v4", source.NoTimestamp)
	if !errors.Is(err, ErrPoolExhausted) || !strings.Contains(err.Error(), "lim-0-0") || !strings.Contains(err.Error(), "checkpoint 1") {
		t.Fatalf("write with every id pending: err %v, want ErrPoolExhausted naming lim-0-0 and checkpoint 1", err)
	}
	if _, err := NewSink(seeds, ValueSerializer("out", codec.String{}), Guarantee(ExactlyOnce), TransactionalIDPrefix("x"),
		TransactionalIDPoolSize(4), TransactionalIDPoolLimit(3)); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("limit below the pool size: err %v, want ErrInvalidConfig", err)
	}
}

// A restore aborts the lingering transaction of an overflow id the
// restored writer state records, by describing it (not only through the
// listing).
func TestExactlyOnceRestoreAbortsOverflowIDs(t *testing.T) {
	seeds := cluster(t, 1, "out")
	s := eosSink(t, seeds, "rov")
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	tw := w.(*transactionalWriter[string])
	writeAll(t, w, "p1")
	prepare(t, w, 1)
	writeAll(t, w, "p2")
	prepare(t, w, 2)
	writeAll(t, w, "open") // on the overflow id rov-0-2
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	state, _ := tw.SnapshotState(3)
	kill(w)

	w2, err := s.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1, Restored: true, RestoredParallelisms: []int{1}, RestoredState: state})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	nw := w2.(*transactionalWriter[string])
	if !slices.Contains(nw.checked, "rov-0-2") {
		t.Fatalf("ids described at restore %v, want rov-0-2 among them", nw.checked)
	}
	var aborted []string
	for _, d := range nw.lingering {
		aborted = append(aborted, d.TransactionalID)
	}
	slices.Sort(aborted)
	if want := "[rov-0-0 rov-0-1 rov-0-2]"; fmt.Sprint(aborted) != want {
		t.Fatalf("aborted %v, want %s", aborted, want)
	}
	lso, end := stableOffsets(t, seeds, "out")
	if lso[0] != end[0] {
		t.Fatalf("lso %d end %d after the restore: something is still open", lso[0], end[0])
	}
	// The fenced ids' clients serve the new writer.
	if nw.slots[0].cl == nil || nw.slots[1].cl == nil {
		t.Fatalf("the clients that aborted the pool ids were not kept")
	}
}

// A transaction pre-committed by a writer that is then dropped without
// ending it (a crash after the checkpoint completed, before the commit) is
// committed by a brand-new committer from its committable alone.
func TestExactlyOnceCommitAfterWriterIsGone(t *testing.T) {
	seeds := cluster(t, 3, "out")
	s := eosSink(t, seeds, "gone")
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, "a", "b", "c", "d")
	b := prepare(t, w, 7)
	kill(w) // the crash: the writer's clients go, nothing ends the transaction

	c, err := NewCommitter(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Commit(testutil.Context(t, 0), 7, [][]byte{b}); err != nil {
		t.Fatalf("commit from the committable: %v", err)
	}
	if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 4); len(got) != 4 {
		t.Fatalf("read %v, want 4 records", got)
	}
	// A re-commit by yet another committer succeeds too.
	c2, _ := NewCommitter(seeds)
	defer c2.Close()
	if err := c2.Commit(testutil.Context(t, 0), 7, [][]byte{b}); err != nil {
		t.Fatalf("re-commit: %v", err)
	}
}

// A writer restored with another parallelism aborts the open transactions
// of the ids that map to it, and the last stable offset moves.
func TestExactlyOnceAbortsLingeringAtRestore(t *testing.T) {
	seeds := cluster(t, 1, "out")
	s := eosSink(t, seeds, "ling")
	// Old run: parallelism 3; subtask 2 dies with an open transaction.
	old, err := s.NewWriter(wctx(2, 3))
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, old, "lost-1", "lost-2")
	if err := old.Flush(false); err != nil {
		t.Fatal(err)
	}
	kill(old) // no abort

	lso, end := stableOffsets(t, seeds, "out")
	if lso[0] >= end[0] {
		t.Fatalf("lingering transaction not open: lso %d end %d", lso[0], end[0])
	}
	// New run with parallelism 2: old subtask 2 maps to new subtask 0.
	rc := sink.WriterContext{Subtask: 0, Parallelism: 2, Restored: true, RestoredCheckpointID: 1, RestoredParallelisms: []int{3}}
	w, err := s.NewWriter(rc)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	nw := w.(*transactionalWriter[string])
	if len(nw.lingering) != 1 || nw.lingering[0].TransactionalID != "ling-2-0" {
		t.Fatalf("aborted at startup: %+v, want ling-2-0", nw.lingering)
	}
	if m := s.Metrics(); m.TransactionsAborted != 1 {
		t.Fatalf("sink metrics count %d aborted transactions, want 1", m.TransactionsAborted)
	}
	lso, end = stableOffsets(t, seeds, "out")
	if lso[0] != end[0] {
		t.Fatalf("after the abort: last stable offset %d, end offset %d; want equal", lso[0], end[0])
	}
	// Subtask 1 of the new run does not touch ids mapping to subtask 0.
	w1, err := s.NewWriter(sink.WriterContext{Subtask: 1, Parallelism: 2, Restored: true, RestoredParallelisms: []int{3}})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	if l := w1.(*transactionalWriter[string]).lingering; len(l) != 0 {
		t.Fatalf("subtask 1 aborted %+v, want nothing", l)
	}
	// The new writer writes and commits normally.
	writeAll(t, w, "new")
	b := prepare(t, w, 2)
	c, _ := s.NewCommitter(rc)
	defer c.Close()
	if err := c.Commit(testutil.Context(t, 0), 2, [][]byte{b}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 1); fmt.Sprint(got) != "[new]" {
		t.Fatalf("read_committed sees %v, want [new]", got)
	}
}

// The listing of open transactions catches an id outside the pool (here a
// pool that was larger).
func TestExactlyOnceListingSafetyNet(t *testing.T) {
	seeds := cluster(t, 1, "out")
	big := eosSink(t, seeds, "net", TransactionalIDPoolSize(4))
	w, err := big.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	w.(*transactionalWriter[string]).next = 3
	writeAll(t, w, "x")
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	kill(w)

	small := eosSink(t, seeds, "net")
	w2, err := small.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1, Restored: true, RestoredParallelisms: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if l := w2.(*transactionalWriter[string]).lingering; len(l) != 1 || l[0].TransactionalID != "net-0-3" {
		t.Fatalf("aborted %+v, want net-0-3 found by the listing", l)
	}
}

// Close aborts the open transaction of the current interval but leaves a
// pre-committed one to the committer.
func TestExactlyOnceCloseKeepsPrecommitted(t *testing.T) {
	seeds := cluster(t, 1, "out")
	s := eosSink(t, seeds, "close")
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, "kept")
	b := prepare(t, w, 1)
	writeAll(t, w, "dropped")
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c, _ := s.NewCommitter(wctx(0, 1))
	defer c.Close()
	if err := c.Commit(testutil.Context(t, 0), 1, [][]byte{b}); err != nil {
		t.Fatal(err)
	}
	lso, end := stableOffsets(t, seeds, "out")
	if lso[0] != end[0] {
		t.Fatalf("lso %d end %d: something is still open", lso[0], end[0])
	}
	if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 1); fmt.Sprint(got) != "[kept]" {
		t.Fatalf("read_committed sees %v, want [kept]", got)
	}
}

// A re-commit after the id moved on (the slot was reused) is refused by
// the broker; the committer proves it committed from its control marker.
// A transaction that was aborted instead is reported as data loss, naming
// the id and the checkpoint.
func TestExactlyOnceRecommitAfterReuseAndDataLoss(t *testing.T) {
	seeds := cluster(t, 2, "out")
	s := eosSink(t, seeds, "moved")
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, _ := s.NewCommitter(wctx(0, 1))
	defer c.Close()
	ctx := testutil.Context(t, 0)
	var bs [][]byte
	for cp := int64(1); cp <= 3; cp++ { // 1 and 3 both on moved-0-0
		writeAll(t, w, fmt.Sprint("v", cp), fmt.Sprint("w", cp))
		b := prepare(t, w, cp)
		if err := c.Commit(ctx, cp, [][]byte{b}); err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	fresh, _ := NewCommitter(seeds)
	defer fresh.Close()
	if err := fresh.Commit(ctx, 1, [][]byte{bs[0]}); err != nil {
		t.Fatalf("re-commit of checkpoint 1 after its id was reused: %v", err)
	}
	if v, u := fresh.Stats(); v != 1 || u != 0 {
		t.Fatalf("verified %d, unverifiable %d; want 1, 0 (the broker refuses the old epoch, the marker proves the commit)", v, u)
	}

	// Checkpoint 4 pre-commits; a restore that does not know it aborts it.
	writeAll(t, w, "doomed")
	b4 := prepare(t, w, 4)
	cm4, _ := DecodeCommittable(b4)
	other, err := s.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1, Restored: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = fresh.Commit(ctx, 4, [][]byte{b4})
	if !errors.Is(err, ErrDataLoss) || !strings.Contains(err.Error(), cm4.TransactionalID) || !strings.Contains(err.Error(), "checkpoint 4") {
		t.Fatalf("commit of an aborted transaction: err %v, want ErrDataLoss naming %s and checkpoint 4", err, cm4.TransactionalID)
	}
	// (kfake answers this fenced transaction's commit INVALID_TXN_STATE,
	// as Kafka does a timed-out one; Kafka 4.1 answers PRODUCER_FENCED,
	// which integration.TestSinkFencedTransactionIsNotLost checks.)
}

// A record after the end of input and the final checkpoint's pre-commit
// would never be committed: the writer says so loudly.
func TestExactlyOnceWriteAfterFinalCheckpointIsLogged(t *testing.T) {
	seeds := cluster(t, 1, "out")
	var logs strings.Builder
	var mu sync.Mutex
	s := eosSink(t, seeds, "fin", Logger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))))
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeAll(t, w, "last")
	if err := w.Flush(true); err != nil {
		t.Fatal(err)
	}
	prepare(t, w, 9) // the final checkpoint
	writeAll(t, w, "too late")
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "after the end of input and the final checkpoint") {
		t.Fatalf("no error logged for a record after the final checkpoint; logs:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// With the transaction protocol of version 1 (EndTxn v4 and below, no
// epoch bump at a commit), a client reused for the id's next transaction
// would give it the same producer id and epoch, and a committable would
// no longer name one transaction: the writer then initialises a new
// producer for every transaction, and every commit commits.
func TestExactlyOnceTransactionVersion1(t *testing.T) {
	seeds := cluster(t, 1, "out")
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	s := eosSink(t, seeds, "tv1", ClientOptions(kgo.MaxVersions(v)))
	w, err := s.NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, _ := s.NewCommitter(wctx(0, 1))
	defer c.Close()
	ctx := testutil.Context(t, 0)
	seen := map[string]bool{}
	var want []string
	for cp := int64(1); cp <= 5; cp++ {
		v := fmt.Sprint("v", cp)
		writeAll(t, w, v)
		want = append(want, v)
		cm := committable(t, prepare(t, w, cp))
		if cm.TransactionVersion != 1 {
			t.Fatalf("checkpoint %d: transaction version %d, want 1", cp, cm.TransactionVersion)
		}
		key := fmt.Sprint(cm.TransactionalID, "/", cm.ProducerID, "/", cm.ProducerEpoch)
		if seen[key] {
			t.Fatalf("checkpoint %d: %s names a transaction of an earlier checkpoint too", cp, key)
		}
		seen[key] = true
		if err := c.Commit(ctx, cp, [][]byte{cm.Encode()}); err != nil {
			t.Fatal(err)
		}
		if lso, end := stableOffsets(t, seeds, "out"); lso[0] != end[0] {
			t.Fatalf("after the commit of checkpoint %d: last stable offset %d, end %d", cp, lso[0], end[0])
		}
	}
	if got := readAll(t, seeds, "out", kgo.ReadCommitted(), len(want)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed sees %v, want %v", got, want)
	}
}

// The client configuration is validated by the shared kafkaclient; the
// error reads as before and matches both sentinels.
func TestNewSinkRefusesClientConfig(t *testing.T) {
	_, err := NewSink(nil, ValueSerializer("out", codec.String{}))
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, kafkaclient.ErrInvalidConfig) {
		t.Fatalf("no seeds: %v, want ErrInvalidConfig (the sink's and kafkaclient's)", err)
	}
	if want := "no seed brokers: kafka sink: invalid configuration"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// A sink that is no longer exactly-once (its guarantee follows the job's
// checkpointing mode, which changed between two runs) still commits the
// transactions a checkpoint of the exactly-once run prepared, so that
// their records are not left in an open transaction.
func TestCommitterOfAtLeastOnceSinkCommitsRestoredTransactions(t *testing.T) {
	seeds := cluster(t, 1, "out")
	w, err := eosSink(t, seeds, "flip").NewWriter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, "a", "b", "c")
	b := prepare(t, w, 3)
	kill(w)

	alo, err := NewSink(seeds, ValueSerializer("out", codec.String{}), Guarantee(AtLeastOnce))
	if err != nil {
		t.Fatal(err)
	}
	c, err := alo.NewCommitter(wctx(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Commit(testutil.Context(t, 0), 3, [][]byte{b}); err != nil {
		t.Fatalf("commit of the restored committable: %v", err)
	}
	if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 3); len(got) != 3 {
		t.Fatalf("read_committed %v, want the 3 records of the restored transaction", got)
	}
}
