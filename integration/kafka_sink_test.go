package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
)

func eosSink(t *testing.T, prefix string, opts ...kafkasink.Option) (*kafkasink.Sink[string], string) {
	t.Helper()
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	topic := createTopic(ctx, t, adm, 2)
	s, err := kafkasink.NewSink(brokers(t), kafkasink.KeyValueSerializer(topic, func(v string) string { return v }, codec.String{}, codec.String{}),
		append([]kafkasink.Option{kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(prefix),
			kafkasink.TransactionTimeout(time.Minute)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, topic
}

func write(t *testing.T, w sink.Writer[string], vals ...string) {
	t.Helper()
	for _, v := range vals {
		if err := w.Write(v, time.Now().UnixMilli()); err != nil {
			t.Fatalf("write %q: %v", v, err)
		}
	}
}

func precommit(t *testing.T, w sink.Writer[string], id int64) []byte {
	t.Helper()
	cs, err := w.(sink.PrecommittingWriter[string]).PrepareCommit(id)
	if err != nil || len(cs) != 1 {
		t.Fatalf("PrepareCommit(%d): %d committables, %v", id, len(cs), err)
	}
	return cs[0]
}

// openTransaction reports whether a transaction holds topic's last stable
// offset below its end.
func openTransaction(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) bool {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	open := false
	ends.Each(func(e kadm.ListedOffset) {
		s, _ := stable.Lookup(topic, e.Partition)
		if s.Offset < e.Offset {
			open = true
		}
	})
	return open
}

// awaitNoOpenTransaction waits until no transaction holds topic's last
// stable offset: markers are written after EndTxn returns.
func awaitNoOpenTransaction(ctx context.Context, t *testing.T, adm *kadm.Client, topic, when string) {
	t.Helper()
	for openTransaction(ctx, t, adm, topic) {
		select {
		case <-ctx.Done():
			t.Fatalf("a transaction still holds the last stable offset of %s %s", topic, when)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func sorted(m map[int32][]string) []string {
	var out []string
	for p, vs := range m {
		for _, v := range vs {
			out = append(out, fmt.Sprintf("%d:%s", p, v))
		}
	}
	slices.Sort(out)
	return out
}

// kcatRead reads topic with kcat (librdkafka) under read_committed to its
// end and returns partition:value lines, sorted.
func kcatRead(t *testing.T, topic string) []string {
	t.Helper()
	return kcatReadFormat(t, topic, "%p:%s\n")
}

// kcatReadFormat reads topic with kcat under read_committed to its end and
// returns its output lines in kcat's -f format, sorted.
func kcatReadFormat(t *testing.T, topic, format string) []string {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatalf("kcat not installed (Debian: apt-get install kcat): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kcat", "-b", strings.Join(brokers(t), ","), "-C", "-t", topic,
		"-X", "isolation.level=read_committed", "-o", "beginning", "-e", "-q", "-f", format)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v: %s", err, stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return lines
}

// The exactly-once sink driven by hand: records are invisible until the
// committer commits the committable; re-commits by brand-new committers
// (a restarted job) succeed, also
// after the id was reused (the broker answers PRODUCER_FENCED and the
// committer finds the commit marker); an aborted interval never shows; and
// kcat sees exactly what franz-go's read_committed consumer sees.
func TestKafkaSinkExactlyOnceByHand(t *testing.T) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	prefix := uniqueName(t, "sluice-it-eos")
	s, topic := eosSink(t, prefix)
	w, err := s.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	var committables [][]byte
	for cp := int64(1); cp <= 3; cp++ {
		var vals []string
		for i := range 5 {
			vals = append(vals, fmt.Sprintf("c%d-%d", cp, i))
		}
		write(t, w, vals...)
		b := precommit(t, w, cp)
		cm, err := kafkasink.DecodeCommittable(b)
		if err != nil {
			t.Fatal(err)
		}
		if cm.TransactionVersion != 2 {
			t.Logf("broker runs transaction version %d (Kafka 4.x defaults to 2)", cm.TransactionVersion)
		}
		if !openTransaction(ctx, t, adm, topic) {
			t.Fatalf("checkpoint %d pre-committed but no transaction holds the last stable offset", cp)
		}
		// The job's committer commits through the writer's client for
		// the id, which then begins a later transaction under it.
		c, err := s.NewCommitter(sink.WriterContext{Subtask: 0, Parallelism: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(ctx, cp, [][]byte{b}); err != nil {
			t.Fatalf("commit checkpoint %d (%v): %v", cp, cm, err)
		}
		c.Close()
		// An immediate re-commit by another committer (a restarted job):
		// the broker treats it as a retry of the EndTxn that completed it
		// (or answers CONCURRENT_TRANSACTIONS while the markers are
		// written, which the committer retries).
		again, err := kafkasink.NewCommitter(brokers(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := again.Commit(ctx, cp, [][]byte{b}); err != nil {
			t.Fatalf("re-commit checkpoint %d: %v", cp, err)
		}
		if v, u := again.Stats(); v != 0 || u != 0 {
			t.Fatalf("re-commit of checkpoint %d needed a marker check (%d, %d): the broker should accept it as a retry", cp, v, u)
		}
		again.Close()
		committables = append(committables, b)
		want = append(want, vals...)
	}
	// Checkpoint 3 reused checkpoint 1's id: re-committing 1 now gets a
	// fencing answer, and the marker proves it committed.
	c, err := kafkasink.NewCommitter(brokers(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Commit(ctx, 1, committables[:1]); err != nil {
		t.Fatalf("re-commit of checkpoint 1 after its id was reused: %v", err)
	}
	if v, u := c.Stats(); v != 1 || u != 0 {
		t.Fatalf("verified %d unverifiable %d, want 1 0", v, u)
	}
	// An interval that is never pre-committed is aborted by Close.
	write(t, w, "never-1", "never-2")
	if err := w.Flush(false); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	awaitNoOpenTransaction(ctx, t, adm, topic, "after Close aborted the open interval")

	got := consumeAll(ctx, t, topic, kgo.ReadCommitted(), len(want))
	var gotAll []string
	for _, vs := range got {
		gotAll = append(gotAll, vs...)
	}
	slices.Sort(gotAll)
	slices.Sort(want)
	if !slices.Equal(gotAll, want) {
		t.Fatalf("read_committed sees %v, want %v", gotAll, want)
	}
	if k := kcatRead(t, topic); !slices.Equal(k, sorted(got)) {
		t.Fatalf("kcat read_committed sees %v, franz-go sees %v", k, sorted(got))
	}
}

// A crash after checkpoint n completed and before its commit: the writer
// pre-committed and is gone without ending the transaction; a new
// committer (the restarted job) commits it from the stored committable.
func TestKafkaSinkCommitAfterCrashBeforeCommit(t *testing.T) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	s, topic := eosSink(t, uniqueName(t, "sluice-it-crash"))
	w, err := s.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	write(t, w, "a", "b", "c", "d", "e", "f")
	stored := precommit(t, w, 9) // in checkpoint 9, which completes
	w.Close()                    // the process dies: the pre-committed transaction stays open
	if !openTransaction(ctx, t, adm, topic) {
		t.Fatal("the pre-committed transaction is not open after the writer went")
	}
	c, err := kafkasink.NewCommitter(brokers(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Commit(ctx, 9, [][]byte{stored}); err != nil {
		t.Fatalf("commit on restore: %v", err)
	}
	got := consumeAll(ctx, t, topic, kgo.ReadCommitted(), 6)
	if n := len(sorted(got)); n != 6 {
		t.Fatalf("read_committed sees %d records, want 6", n)
	}
	awaitNoOpenTransaction(ctx, t, adm, topic, "after the commit")
}

// A lingering transaction of a killed writer holds read_committed
// consumers back; the restored writer aborts it at startup and they move
// on. A committable whose transaction was aborted that way is reported as
// data loss, naming id and checkpoint.
func TestKafkaSinkAbortsLingeringTransaction(t *testing.T) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	prefix := uniqueName(t, "sluice-it-linger")
	s, topic := eosSink(t, prefix)

	// The killed run: subtask 1 of parallelism 2 had an open transaction
	// under its pool id, then died without ending it.
	killed, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)...), kgo.TransactionalID(kafkasink.TransactionalID(prefix, 1, 1)),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := killed.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := killed.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("lingering")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := killed.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed.Close() // no EndTxn: the transaction lingers
	// Committed data after it is held back for read_committed consumers.
	plain := newClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := plain.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if !openTransaction(ctx, t, adm, topic) {
		t.Fatal("the killed writer's transaction is not open")
	}

	// The restored run has parallelism 1: old subtask 1 maps to it.
	w, err := s.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1, Restored: true, RestoredCheckpointID: 3, RestoredParallelisms: []int{2}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if openTransaction(ctx, t, adm, topic) {
		t.Fatal("the lingering transaction still holds the last stable offset after the restored writer started")
	}
	got := consumeAll(ctx, t, topic, kgo.ReadCommitted(), 1)
	if fmt.Sprint(got[0]) != "[after]" {
		t.Fatalf("read_committed sees %v, want [after] (the lingering record aborted)", got)
	}

	// Had that transaction been pre-committed for a completed checkpoint,
	// its commit would now be data loss, reported as such.
	lost := kafkasink.Committable{TransactionalID: kafkasink.TransactionalID(prefix, 1, 1), ProducerID: pid, ProducerEpoch: epoch,
		TransactionVersion: 2, CheckpointID: 3, LastOffsets: []kafkasink.PartitionOffset{{Topic: topic, Partition: 0, Offset: 0}}}
	c, _ := kafkasink.NewCommitter(brokers(t))
	defer c.Close()
	err = c.Commit(ctx, 3, [][]byte{lost.Encode()})
	if !errors.Is(err, kafkasink.ErrDataLoss) || !strings.Contains(err.Error(), lost.TransactionalID) || !strings.Contains(err.Error(), "checkpoint 3") {
		t.Fatalf("commit of the aborted transaction: %v; want ErrDataLoss naming %s and checkpoint 3", err, lost.TransactionalID)
	}
}
