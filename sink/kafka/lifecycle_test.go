package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// The transaction timeout must cover interval + timeout + tolerable
// failures × (timeout + min pause) + restart delay: each term alone can
// push the sum past it, the sum itself fits, and the error names every
// term under its Flink key with its value.
func TestValidateCheckpointingCountsEveryTerm(t *testing.T) {
	s, err := NewSink([]string{"x:1"}, ValueSerializer("t", codec.String{}), Guarantee(ExactlyOnce), TransactionalIDPrefix("p"),
		TransactionTimeout(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	const m = time.Minute
	base := sink.CheckpointTiming{Interval: m, Timeout: 2 * m}
	with := func(edit func(*sink.CheckpointTiming)) sink.CheckpointTiming {
		c := base
		edit(&c)
		return c
	}
	for _, tc := range []struct {
		name   string
		timing sink.CheckpointTiming
		ok     bool
		names  []string // figures the error must name
	}{
		{"interval and timeout fit", with(func(c *sink.CheckpointTiming) { c.Interval = 8 * m }), true, nil},
		{"interval", with(func(c *sink.CheckpointTiming) { c.Interval = 8*m + time.Second }), false,
			[]string{"execution.checkpointing.interval 8m1s"}},
		{"timeout", with(func(c *sink.CheckpointTiming) { c.Timeout = 9*m + time.Second }), false,
			[]string{"execution.checkpointing.timeout 9m1s"}},
		{"tolerable failures fit", with(func(c *sink.CheckpointTiming) { c.TolerableFailures = 3 }), true, nil},
		{"tolerable failures", with(func(c *sink.CheckpointTiming) { c.TolerableFailures = 4 }), false,
			[]string{"execution.checkpointing.tolerable-failed-checkpoints 4"}},
		{"min pause fits", with(func(c *sink.CheckpointTiming) { c.TolerableFailures, c.MinPause = 1, 5*m }), true, nil},
		{"min pause", with(func(c *sink.CheckpointTiming) { c.TolerableFailures, c.MinPause = 1, 5*m+time.Second }), false,
			[]string{"execution.checkpointing.min-pause 5m1s", "execution.checkpointing.tolerable-failed-checkpoints 1"}},
		{"min pause without failures does not count", with(func(c *sink.CheckpointTiming) { c.MinPause = time.Hour }), true, nil},
		{"restart delay fits", with(func(c *sink.CheckpointTiming) {
			c.RestartDelay, c.RestartDelayOption = 7*m, "restart-strategy.fixed-delay.delay 7m0s"
		}), true, nil},
		{"restart delay", with(func(c *sink.CheckpointTiming) {
			c.RestartDelay, c.RestartDelayOption = 7*m+time.Second, "restart-strategy.fixed-delay.delay 7m1s"
		}), false, []string{"restart-strategy.fixed-delay.delay 7m1s"}},
		{"huge tolerable failures saturate", with(func(c *sink.CheckpointTiming) { c.TolerableFailures = math.MaxInt }), false,
			[]string{fmt.Sprint("tolerable-failed-checkpoints ", math.MaxInt)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.ValidateCheckpointing(tc.timing)
			if tc.ok {
				if err != nil {
					t.Fatalf("%v (%v) refused: %v", tc.timing, tc.timing.MaxCommitWait(), err)
				}
				return
			}
			if !errors.Is(err, ErrTransactionTimeoutTooSmall) {
				t.Fatalf("%v: err %v, want ErrTransactionTimeoutTooSmall", tc.timing, err)
			}
			for _, fig := range append(tc.names, "transaction.timeout.ms 600000", "execution.checkpointing.interval",
				"execution.checkpointing.timeout", "execution.checkpointing.min-pause", "execution.checkpointing.tolerable-failed-checkpoints") {
				if !strings.Contains(err.Error(), fig) {
					t.Errorf("error %q does not name %q", err, fig)
				}
			}
		})
	}
	if err := s.ValidateCheckpointing(sink.CheckpointTiming{Timeout: m}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("checkpointing off: err %v, want ErrInvalidConfig", err)
	}
}

// testSerializer refuses some values: "bad-<k>" with an error after
// making key and value (a dead-letter copy keeps them), "nokey" with an
// error before anything, "panic" with a panic, "nil" with no record.
func testSerializer(v string) (*kgo.Record, error) {
	switch {
	case strings.HasPrefix(v, "bad-"):
		k := strings.TrimPrefix(v, "bad-")
		return &kgo.Record{Topic: "out", Key: []byte(k), Value: []byte("raw-" + k)}, errors.New("schema check failed")
	case strings.HasPrefix(v, "nokey"):
		return nil, errors.New("cannot encode")
	case v == "panic":
		panic("serializer bug")
	case v == "nil":
		return nil, nil
	}
	return &kgo.Record{Topic: "out", Value: []byte(v)}, nil
}

// logBuffer collects log lines of several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// A record the serializer refuses, under each policy and guarantee: fail
// names the sink, the subtask and the (truncated) value; skip drops it and
// counts it; dead-letter writes the serializer's key and value (or the
// value's %v) with headers naming the error, inside the checkpoint's
// transaction for exactly-once.
func TestSerializerErrorPolicies(t *testing.T) {
	long := "nokey-" + strings.Repeat("x", 1000)
	for _, g := range []DeliveryGuarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			newSink := func(t *testing.T, seeds []string, opts ...Option) *Sink[string] {
				t.Helper()
				s, err := NewSink(seeds, testSerializer, append([]Option{Guarantee(g), TransactionalIDPrefix("ser"),
					TransactionTimeout(time.Minute), Logger(slog.New(slog.DiscardHandler))}, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			// checkpoint pre-commits and commits checkpoint id.
			checkpoint := func(t *testing.T, s *Sink[string], w sink.Writer[string], id int64) {
				t.Helper()
				cs, err := w.(sink.PrecommittingWriter[string]).PrepareCommit(id)
				if err != nil {
					t.Fatal(err)
				}
				c, _ := s.NewCommitter(wctx(0, 1))
				defer c.Close()
				if err := c.Commit(testutil.Context(t, 0), id, cs); err != nil {
					t.Fatal(err)
				}
			}

			t.Run("fail", func(t *testing.T) {
				seeds := cluster(t, 1, "out")
				s := newSink(t, seeds)
				w, err := s.NewWriter(wctx(0, 1))
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				for _, v := range []string{long, "panic", "nil", "bad-k"} {
					err := w.Write(v, 1234)
					if !errors.Is(err, ErrSerialize) {
						t.Fatalf("write %.20q: err %v, want ErrSerialize", v, err)
					}
					for _, want := range []string{"kafka sink (" + g.String(), "subtask 0", truncate(v, maxValueInError)} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("write %.20q: error %q does not name %q", v, err, want)
						}
					}
					if len(err.Error()) > 600 {
						t.Errorf("write %.20q: error of %d bytes, want the value truncated: %s", v, len(err.Error()), err)
					}
				}
			})

			t.Run("skip", func(t *testing.T) {
				seeds := cluster(t, 1, "out")
				s := newSink(t, seeds, OnSerializerError(SkipSerializerErrors()))
				w, err := s.NewWriter(wctx(0, 1))
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				// An interval of refused records only begins no
				// transaction and hands over nothing.
				writeAll(t, w, "nokey", "panic")
				if cs, err := w.(sink.PrecommittingWriter[string]).PrepareCommit(1); err != nil || len(cs) != 0 {
					t.Fatalf("PrepareCommit of an interval of skipped records: %d committables, %v; want none", len(cs), err)
				}
				writeAll(t, w, "a", "bad-k", "nil", "b")
				checkpoint(t, s, w, 2)
				if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 2); fmt.Sprint(got) != "[a b]" {
					t.Fatalf("read_committed sees %v, want [a b]", got)
				}
				if m := s.Metrics(); m.RecordsSkipped != 4 || m.RecordsDeadLettered != 0 {
					t.Fatalf("metrics %+v, want 4 skipped", m)
				}
			})

			t.Run("dead-letter", func(t *testing.T) {
				seeds := cluster(t, 1, "out", "dlq")
				s := newSink(t, seeds, OnSerializerError(DeadLetterTopic("dlq")))
				w, err := s.NewWriter(wctx(0, 1))
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				writeAll(t, w, "a", "bad-k", "panic", "b")
				if g == ExactlyOnce {
					cs, err := w.(sink.PrecommittingWriter[string]).PrepareCommit(1)
					if err != nil || len(cs) != 1 {
						t.Fatalf("PrepareCommit: %d committables, %v", len(cs), err)
					}
					cm := committable(t, cs[0])
					if !slices.ContainsFunc(cm.LastOffsets, func(p PartitionOffset) bool { return p.Topic == "dlq" }) || cm.Records != 4 {
						t.Fatalf("committable %+v (offsets %v), want the dead-letter partition in the transaction and 4 records", cm, cm.LastOffsets)
					}
					// Not visible before the commit: the copies are in the
					// checkpoint's transaction.
					if lso, end := stableOffsets(t, seeds, "dlq"); lso[0] >= end[0] {
						t.Fatalf("dead-letter topic before the commit: last stable offset %d, end %d; want the transaction open", lso[0], end[0])
					}
					c, _ := s.NewCommitter(wctx(0, 1))
					defer c.Close()
					if err := c.Commit(testutil.Context(t, 0), 1, cs); err != nil {
						t.Fatal(err)
					}
				} else {
					checkpoint(t, s, w, 1)
				}
				if got := readAll(t, seeds, "out", kgo.ReadCommitted(), 2); fmt.Sprint(got) != "[a b]" {
					t.Fatalf("read_committed sees %v on out, want [a b]", got)
				}
				dl := readRecords(t, seeds, "dlq", 2)
				want := []struct{ key, value, format, err string }{
					{"k", "raw-k", "serialized", "schema check failed"},
					{"", "panic", "fmt", "serializer panicked: serializer bug"},
				}
				for i, r := range dl {
					w := want[i]
					if string(r.Key) != w.key || string(r.Value) != w.value || string(headerValue(r, HeaderValueFormat)) != w.format ||
						string(headerValue(r, HeaderError)) != w.err || string(headerValue(r, HeaderSinkSubtask)) != "0" {
						t.Errorf("dead-letter record %d: key %q value %q headers %v; want key %q value %q format %q error %q",
							i, r.Key, r.Value, r.Headers, w.key, w.value, w.format, w.err)
					}
				}
				if got := string(headerValue(dl[0], HeaderSinkTopic)); got != "out" {
					t.Errorf("dead-letter record 0 names topic %q, want out", got)
				}
				if m := s.Metrics(); m.RecordsDeadLettered != 2 || m.RecordsSkipped != 0 {
					t.Fatalf("metrics %+v, want 2 dead-lettered", m)
				}
			})
		})
	}
	if _, err := NewSink([]string{"x:1"}, testSerializer, OnSerializerError(DeadLetterTopic(""))); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty dead-letter topic: err %v, want ErrInvalidConfig", err)
	}
}

// readRecords reads n records of topic under read_committed.
func readRecords(t *testing.T, seeds []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testutil.Context(t, 0)
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s: %v", len(got), n, topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	return got
}

// awaitTimedOut waits until the broker no longer shows the transaction of
// id open: its timeout expired and the broker aborted it.
func awaitTimedOut(t *testing.T, seeds []string, id string) {
	t.Helper()
	adm := adminClient(t, seeds)
	ctx := testutil.Context(t, 0)
	for {
		ds, err := adm.DescribeTransactions(ctx, id)
		if d, ok := ds[id]; err == nil && ok && d.Err == nil && d.State != "Ongoing" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the transaction of %s is still open: %v", id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A transaction of a completed checkpoint that the broker aborted because
// its timeout expired: the commit (through the writer's client, and again
// from the committable by a new committer, as after a restore) fails with
// one *TransactionLostError naming the id, the producer, the checkpoint
// and what was lost, that suppresses restarts and is ErrDataLoss. Under
// IgnoreFailuresAfterTransactionTimeout the loss is logged at Error
// level, counted, and the id serves the next transaction.
func TestTransactionLostAfterTimeout(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore=%v", ignore), func(t *testing.T) {
			seeds := cluster(t, 2, "out")
			var logs logBuffer
			opts := []Option{Guarantee(ExactlyOnce), TransactionalIDPrefix("lost"), TransactionTimeout(time.Second),
				Logger(logs.logger())}
			if ignore {
				opts = append(opts, IgnoreFailuresAfterTransactionTimeout())
			}
			s, err := NewSink(seeds, ValueSerializer("out", codec.String{}), opts...)
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.NewWriter(wctx(0, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			c, _ := s.NewCommitter(wctx(0, 1))
			defer c.Close()
			writeAll(t, w, "a", "b", "c")
			b := prepare(t, w, 5)
			cm := committable(t, b)
			awaitTimedOut(t, seeds, cm.TransactionalID)

			err = c.Commit(testutil.Context(t, 0), 5, [][]byte{b})
			if ignore {
				if err != nil {
					t.Fatalf("commit with IgnoreFailuresAfterTransactionTimeout: %v", err)
				}
				if m := s.Metrics(); m.TransactionsLost != 1 || m.TransactionsCommitted != 0 {
					t.Fatalf("metrics %+v, want 1 lost and none committed", m)
				}
				l := logs.String()
				for _, want := range []string{"level=ERROR", "DATA LOSS", "transactional_id=" + cm.TransactionalID, "checkpoint=5", "records=3"} {
					if !strings.Contains(l, want) {
						t.Errorf("logs do not contain %q:\n%s", want, l)
					}
				}
				// The id is free again: later intervals commit.
				for cp := int64(6); cp <= 7; cp++ {
					writeAll(t, w, fmt.Sprint("v", cp))
					if err := c.Commit(testutil.Context(t, 0), cp, [][]byte{prepare(t, w, cp)}); err != nil {
						t.Fatalf("commit %d after the loss: %v", cp, err)
					}
				}
				got := readAll(t, seeds, "out", kgo.ReadCommitted(), 2)
				if slices.Sort(got); fmt.Sprint(got) != "[v6 v7]" {
					t.Fatalf("read_committed sees %v, want [v6 v7]", got)
				}
				return
			}
			checkLost(t, err, cm, 3)
			// A restore re-commits the committable from another
			// committer: the same terminal error.
			fresh, _ := NewCommitter(seeds, TransactionTimeout(time.Second))
			defer fresh.Close()
			checkLost(t, fresh.Commit(testutil.Context(t, 0), 5, [][]byte{b}), cm, 3)
		})
	}
}

func checkLost(t *testing.T, err error, cm Committable, records int64) {
	t.Helper()
	var lost *TransactionLostError
	if !errors.As(err, &lost) {
		t.Fatalf("commit of a timed-out transaction: err %v, want *TransactionLostError", err)
	}
	var sr interface{ SuppressRestarts() bool }
	if !errors.As(err, &sr) || !sr.SuppressRestarts() {
		t.Fatalf("err %v does not suppress restarts", err)
	}
	if !errors.Is(err, ErrDataLoss) || !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("err %v, want ErrDataLoss and the broker's INVALID_TXN_STATE", err)
	}
	if lost.TransactionalID != cm.TransactionalID || lost.ProducerID != cm.ProducerID || lost.ProducerEpoch != cm.ProducerEpoch ||
		lost.CheckpointID != cm.CheckpointID || lost.Records != records || len(lost.Partitions) == 0 || lost.TransactionTimeout != time.Second {
		t.Fatalf("lost %+v, want it to name %v with %d records", lost, cm, records)
	}
	for _, want := range []string{cm.TransactionalID, fmt.Sprint("checkpoint ", cm.CheckpointID), fmt.Sprint(records, " records"),
		"transaction.timeout.ms 1000", "INVALID_TXN_STATE", "out/"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// With the broker gone, every blocking call of the sink operator returns
// once the task's context is cancelled: Open (the abort of lingering
// transactions), Collect (a producer buffer that cannot drain), Finish
// (the flush), SnapshotState (the pre-commit's flush) and
// NotifyCheckpointComplete (the commit), and Close after them. Each is
// awaited on a channel with a generous deadline, not timed.
func TestCancelWithBrokerDown(t *testing.T) {
	for _, g := range []DeliveryGuarantee{AtLeastOnce, ExactlyOnce} {
		for _, op := range []string{"open", "collect", "finish", "snapshot", "commit"} {
			if g != ExactlyOnce && (op == "open" || op == "commit") {
				continue // nothing blocks there without transactions
			}
			t.Run(g.String()+"/"+op, func(t *testing.T) { cancelWithBrokerDown(t, g, op) })
		}
	}
}

func cancelWithBrokerDown(t *testing.T, g DeliveryGuarantee, op string) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := c.ListenAddrs()
	s, err := NewSink(seeds, ValueSerializer("out", codec.String{}), Guarantee(g), TransactionalIDPrefix("down"),
		TransactionTimeout(time.Minute), Logger(slog.New(slog.DiscardHandler)),
		ClientOptions(kgo.MaxBufferedRecords(1)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opCtx := &operators.Context{OperatorName: "kafka-sink", Subtask: 0, Parallelism: 1, Ctx: ctx}
	o := operators.NewSink[string](s)
	if op == "open" {
		// A restored writer must describe and abort its ids, with the
		// broker down.
		opCtx.Restored, opCtx.RestoredParallelisms = true, []int{1}
		c.Close()
	} else {
		if err := o.Open(opCtx); err != nil {
			t.Fatal(err)
		}
		// The producer is up (and for exactly-once its transaction
		// open) before the broker goes.
		if err := o.Collect("first", source.NoTimestamp); err != nil {
			t.Fatal(err)
		}
		if err := o.Finish(); err != nil {
			t.Fatal(err)
		}
		if op == "commit" {
			if _, err := o.SnapshotState(1); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		if op != "commit" {
			// One record that cannot be delivered fills the buffer.
			if err := o.Collect("stuck", source.NoTimestamp); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := make(chan error, 1)
	go func() {
		var err error
		switch op {
		case "open":
			err = o.Open(opCtx)
		case "collect":
			err = o.Collect("blocked", source.NoTimestamp)
		case "finish":
			err = o.Finish()
		case "snapshot":
			_, err = o.SnapshotState(1)
		case "commit":
			err = o.NotifyCheckpointComplete(1)
		}
		o.Close()
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("%s returned with the broker down before the cancellation: %v", op, err)
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		// Write has nothing to report (the record's promise has); the
		// others give up because of the cancellation, and say so.
		if op != "collect" && !errors.Is(err, context.Canceled) {
			t.Fatalf("%s after the cancellation: err %v, want one wrapping context.Canceled", op, err)
		}
		t.Logf("%s after the cancellation: %v", op, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s and Close did not return within 30 s of the cancellation with the broker down", op)
	}
}
