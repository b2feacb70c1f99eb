package integration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	"github.com/sluicehq/sluice/source"
)

// The Kafka sink over the life of a job against the real broker: a
// transaction the broker aborted at its timeout, a broker that
// goes away under a cancellation, and poison pills on the way out.

// awaitBrokerAbort waits until the broker has aborted the open
// transaction of id: the broker looks for timed-out transactions every
// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s by
// default), so this takes up to the timeout plus 10 s.
func awaitBrokerAbort(ctx context.Context, t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	for {
		ds, err := adm.DescribeTransactions(ctx, id)
		if d, ok := ds[id]; err == nil && ok && d.Err == nil && d.State == "CompleteAbort" {
			return d
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the broker did not abort the transaction of %s: %v (last: %+v, %v)", id, ctx.Err(), ds, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkLostError checks that err is the terminal loss of cm's transaction.
func checkLostError(t *testing.T, err error, cm kafkasink.Committable) {
	t.Helper()
	var lost *kafkasink.TransactionLostError
	if !errors.As(err, &lost) {
		t.Fatalf("err %v, want a *kafka.TransactionLostError", err)
	}
	var sr interface{ SuppressRestarts() bool }
	if !errors.As(err, &sr) || !sr.SuppressRestarts() {
		t.Fatalf("err %v does not suppress restarts", err)
	}
	// The broker's answer to EndTxn(commit) of a transaction it aborted
	// at its timeout (Kafka 4.1, transaction version 2).
	if !errors.Is(err, kerr.InvalidTxnState) || !errors.Is(err, kafkasink.ErrDataLoss) {
		t.Fatalf("err %v, want INVALID_TXN_STATE and ErrDataLoss", err)
	}
	if lost.TransactionalID != cm.TransactionalID || lost.CheckpointID != cm.CheckpointID || lost.ProducerID != cm.ProducerID ||
		lost.ProducerEpoch != cm.ProducerEpoch || lost.Records != cm.Records || len(lost.Partitions) != len(cm.LastOffsets) {
		t.Fatalf("lost %+v, want it to name %v (%d records in %d partitions)", lost, cm, cm.Records, len(cm.LastOffsets))
	}
	for _, want := range []string{cm.TransactionalID, fmt.Sprint("checkpoint ", cm.CheckpointID), fmt.Sprint(cm.Records, " records")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// A pre-committed transaction outlives its 2 s timeout and the broker
// aborts it; its commit then fails with one terminal TransactionLostError
// naming the id, the checkpoint and what was lost: through the writer's
// own client (notify-complete) and from the committable by a new
// committer (a restore). The broker answers INVALID_TXN_STATE.
func TestSinkTransactionLostAfterTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t))
	s, topic := eosSink(t, uniqueName(t, "lost"), kafkasink.TransactionTimeout(2*time.Second),
		kafkasink.Logger(slog.New(slog.DiscardHandler)))
	w, err := s.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, err := s.NewCommitter(sink.WriterContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	write(t, w, "a", "b", "c", "d")
	b := precommit(t, w, 3)
	cm, err := kafkasink.DecodeCommittable(b)
	if err != nil {
		t.Fatal(err)
	}
	d := awaitBrokerAbort(ctx, t, adm, cm.TransactionalID)
	t.Logf("the broker aborted %v: %+v", cm, d)

	err = c.Commit(ctx, 3, [][]byte{b})
	t.Logf("commit: %v", err)
	checkLostError(t, err, cm)

	fresh, err := kafkasink.NewCommitter(brokers(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	checkLostError(t, fresh.Commit(ctx, 3, [][]byte{b}), cm)
	if got := kcatRead(t, topic); len(got) != 0 {
		t.Fatalf("read_committed sees %v, want nothing", got)
	}
}

// A transaction fenced by a new producer under its id (a restore that did
// not know it) is answered PRODUCER_FENCED: data loss as before
// (ErrDataLoss), not a timed-out transaction.
func TestSinkFencedTransactionIsNotLost(t *testing.T) {
	ctx := testContext(t)
	s, _ := eosSink(t, uniqueName(t, "fenced"), kafkasink.Logger(slog.New(slog.DiscardHandler)))
	w, err := s.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write(t, w, "doomed")
	b := precommit(t, w, 1)
	// A restore that does not know checkpoint 1 aborts its transaction.
	other, err := s.NewWriter(sink.WriterContext{Subtask: 0, Parallelism: 1, Restored: true, RestoredParallelisms: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	fresh, err := kafkasink.NewCommitter(brokers(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	err = fresh.Commit(ctx, 1, [][]byte{b})
	var lost *kafkasink.TransactionLostError
	if !errors.Is(err, kafkasink.ErrDataLoss) || !errors.Is(err, kerr.ProducerFenced) || errors.As(err, &lost) {
		t.Fatalf("commit of a fenced transaction: err %v, want ErrDataLoss from PRODUCER_FENCED, not a TransactionLostError", err)
	}
	var terminal interface{ SuppressRestarts() bool }
	if !errors.As(err, &terminal) || !terminal.SuppressRestarts() {
		t.Fatalf("commit of a fenced transaction: err %v does not suppress restarts: every restore would fail the same way", err)
	}
}

// At job level: the broker aborts the transaction of a completed
// checkpoint before its commit (a checkpoint listener holds the
// notification until then). The job, with a fixed-delay restart strategy
// of 5 attempts, fails once with the TransactionLostError and does not
// restart: a restore would only meet the same abort.
func TestJobTransactionLostFailsWithoutRestarts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t))
	topic := createTopic(ctx, t, adm, 1)
	prefix := uniqueName(t, "joblost")
	id := kafkasink.TransactionalID(prefix, 0, 0) // the first transaction of subtask 0
	quiet := slog.New(slog.DiscardHandler)

	var held sync.Once
	listen := func(cs checkpoint.Stats) {
		if cs.Status != checkpoint.StatusCompleted {
			return
		}
		// Hold the first completed checkpoint that covers the open
		// transaction of id until the broker has aborted it.
		ds, err := adm.DescribeTransactions(ctx, id)
		if d, ok := ds[id]; err != nil || !ok || d.Err != nil || d.State != "Ongoing" {
			return
		}
		held.Do(func() {
			t.Logf("checkpoint %d completed; holding its notification until the broker aborts %s", cs.ID, id)
			awaitBrokerAbort(ctx, t, adm, id)
		})
	}
	env := sluice.NewEnvironment(
		sluice.WithLogger(quiet),
		sluice.WithCheckpointing(200*time.Millisecond, t.TempDir()),
		// The pause keeps the next checkpoint from being triggered (when
		// checkpoint 1 completes, before the listener's hold) and then
		// expiring during the hold: the job must end on the lost
		// transaction, not on a checkpoint timeout.
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Timeout, c.MinPause = time.Second, 20*time.Second }),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(5, 100*time.Millisecond)),
		sluice.WithCheckpointListener(listen),
	)
	gen := source.NewDatagen(func(i int64) string { return fmt.Sprint("r", i) }, source.DatagenCount(10))
	snk, err := kafkasink.NewSink(brokers(t), kafkasink.ValueSerializer(topic, codec.String{}),
		kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(prefix),
		kafkasink.TransactionTimeout(2*time.Second), kafkasink.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	sluice.SinkTo(sluice.FromSource(env, gen, sluice.NoWatermarks[string](), "gen", sluice.UID("gen")), snk, sluice.UID("kafka"))
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- job.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		job.Cancel()
		t.Fatalf("the job did not end: %v (restarts %d)", ctx.Err(), job.Restarts())
	}
	var lost *kafkasink.TransactionLostError
	if !errors.As(err, &lost) || lost.TransactionalID != id || !strings.Contains(err.Error(), id) ||
		!strings.Contains(err.Error(), fmt.Sprint("checkpoint ", lost.CheckpointID)) {
		t.Fatalf("job error %v, want a TransactionLostError naming %s and its checkpoint", err, id)
	}
	if n := job.Restarts(); n != 0 {
		t.Fatalf("the job restarted %d times; want none (the loss suppresses restarts)", n)
	}
	if job.Status() != runtime.JobFailed {
		t.Fatalf("job status %v, want failed", job.Status())
	}
	t.Logf("job failed once: %v", err)
}

// privateBroker starts a broker of the test's own with scripts/kafka and
// returns its seeds and a function that stops it (also run at cleanup).
func privateBroker(t *testing.T) (seeds []string, stop func()) {
	t.Helper()
	brokers(t) // skips or fails, as every integration test, without a test broker
	script, err := filepath.Abs(filepath.Join("..", "scripts", "kafka"))
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "KAFKA_RUN_DIR="+filepath.Join(t.TempDir(), "run"), "KAFKA_PORT=", "KAFKA_CONTROLLER_PORT=")
	start := exec.Command(script, "start")
	start.Env = env
	var stderr strings.Builder
	start.Stderr = &stderr
	out, err := start.Output()
	if err != nil {
		t.Fatalf("scripts/kafka start: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	addr, ok := strings.CutPrefix(lines[len(lines)-1], "KAFKA_BROKERS=")
	if !ok || addr == "" {
		t.Fatalf("scripts/kafka start printed %q, want KAFKA_BROKERS=host:port last", out)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd := exec.Command(script, "stop")
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("scripts/kafka stop: %v\n%s", err, out)
			}
		})
	}
	t.Cleanup(stop)
	return []string{addr}, stop
}

// An exactly-once job writes to a broker of its own; the broker stops
// while the job runs, with a checkpoint pending (stuck in the sinks'
// flush). Job.Cancel must end the job promptly anyway: Wait
// returns (ErrJobCanceled) within a generous bound, awaited on a channel.
func TestJobCancelWithBrokerDown(t *testing.T) {
	seeds, stopBroker := privateBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	topic := uniqueName(t, "sluice-it-down")
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	quiet := slog.New(slog.DiscardHandler)
	completed := make(chan struct{}, 100)
	env := sluice.NewEnvironment(
		sluice.WithLogger(quiet),
		sluice.WithParallelism(2),
		sluice.WithCheckpointing(200*time.Millisecond, t.TempDir()),
		sluice.WithCheckpointListener(func(cs checkpoint.Stats) {
			if cs.Status == checkpoint.StatusCompleted {
				select {
				case completed <- struct{}{}:
				default:
				}
			}
		}),
	)
	gen := source.NewDatagen(func(i int64) string { return fmt.Sprint("r", i) }, source.DatagenRate(500))
	snk, err := kafkasink.NewSink(seeds, kafkasink.ValueSerializer(topic, codec.String{}),
		kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(uniqueName(t, "down")),
		kafkasink.Logger(quiet), kafkasink.ClientOptions(kgo.MaxBufferedRecords(50)))
	if err != nil {
		t.Fatal(err)
	}
	sluice.SinkTo(sluice.FromSource(env, gen, sluice.NoWatermarks[string](), "gen", sluice.UID("gen")), snk, sluice.UID("kafka"))
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer job.Cancel()
	for range 2 {
		select {
		case <-completed:
		case <-ctx.Done():
			t.Fatalf("no checkpoint completed against the private broker: %v", ctx.Err())
		}
	}
	stopping := time.Now()
	stopBroker()
	t.Logf("the private broker stopped in %v", time.Since(stopping).Round(time.Millisecond))
	// The job runs on with the broker gone: a checkpoint is pending (the
	// sinks' flush at its barrier cannot finish) and the writers' small
	// producer buffers are full.
	for {
		st, ok := job.CheckpointStats()
		if ok && st.InProgress > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no checkpoint is pending with the broker down: %+v", st)
		case <-time.After(20 * time.Millisecond):
		}
	}
	canceled := time.Now()
	job.Cancel()
	done := make(chan error, 1)
	go func() { done <- job.Wait() }()
	select {
	case err := <-done:
		if !errors.Is(err, sluice.ErrJobCanceled) {
			t.Fatalf("Wait after Cancel with the broker down: %v, want ErrJobCanceled", err)
		}
		t.Logf("Wait returned %v after Cancel with the broker down", time.Since(canceled).Round(time.Millisecond))
	case <-time.After(60 * time.Second):
		t.Fatal("Job.Wait did not return within 60 s of Cancel with the broker down")
	}
}

// poisonSerializer refuses "bad-..." values after making their key
// (ErrSerialize's value text and the dead-letter copy show it).
func poisonSerializer(topic string) kafkasink.Serializer[string] {
	return func(v string) (*kgo.Record, error) {
		if strings.HasPrefix(v, "bad-") {
			return &kgo.Record{Topic: topic, Key: []byte(v)}, errors.New("value refused by the schema")
		}
		return &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}, nil
	}
}

// A serializer that refuses some records in an exactly-once job, under
// each policy, checked with a read_committed consumer: fail ends the job
// with ErrSerialize naming the subtask and the value; skip commits every
// other record exactly once; dead-letter also commits a copy of each
// refused record, with headers naming the error, to the dead-letter topic.
func TestJobSerializerErrorPolicies(t *testing.T) {
	ctx := testContext(t)
	adm := kadm.NewClient(newClient(t))
	const n = 60
	value := func(i int64) string {
		if i%10 == 7 {
			return fmt.Sprint("bad-", i)
		}
		return fmt.Sprint("ok-", i)
	}
	var good, bad []string
	for i := range int64(n) {
		if v := value(i); strings.HasPrefix(v, "bad-") {
			bad = append(bad, v)
		} else {
			good = append(good, v)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	run := func(t *testing.T, topic string, opts ...kafkasink.Option) (*kafkasink.Sink[string], error) {
		env := sluice.NewEnvironment(sluice.WithLogger(quiet), sluice.WithParallelism(2),
			sluice.WithCheckpointing(100*time.Millisecond, t.TempDir()), sluice.WithRestartStrategy(sluice.NoRestart()))
		gen := source.NewDatagen(value, source.DatagenCount(n), source.DatagenRate(200))
		snk, err := kafkasink.NewSink(brokers(t), poisonSerializer(topic), append([]kafkasink.Option{
			kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(uniqueName(t, "poison")),
			kafkasink.Logger(quiet)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		sluice.SinkTo(sluice.FromSource(env, gen, sluice.NoWatermarks[string](), "gen", sluice.UID("gen")), snk, sluice.UID("kafka"))
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return snk, env.Execute(ctx)
	}
	values := func(m map[int32][]string) []string {
		var out []string
		for _, vs := range m {
			out = append(out, vs...)
		}
		slices.Sort(out)
		return out
	}
	sortedCopy := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

	t.Run("fail", func(t *testing.T) {
		topic := createTopic(ctx, t, adm, 2)
		_, err := run(t, topic)
		if !errors.Is(err, kafkasink.ErrSerialize) || !strings.Contains(err.Error(), `value "bad-7"`) ||
			!strings.Contains(err.Error(), "subtask") || !strings.Contains(err.Error(), "value refused by the schema") {
			t.Fatalf("job error %v, want ErrSerialize naming the subtask, the value bad-7 and the cause", err)
		}
		// Never a refused record.
		for _, l := range kcatRead(t, topic) {
			if strings.Contains(l, "bad-") {
				t.Fatalf("read_committed sees the refused record %s", l)
			}
		}
	})
	t.Run("skip", func(t *testing.T) {
		topic := createTopic(ctx, t, adm, 2)
		snk, err := run(t, topic, kafkasink.OnSerializerError(kafkasink.SkipSerializerErrors()))
		if err != nil {
			t.Fatalf("job with the skip policy: %v", err)
		}
		if got := values(consumeAll(ctx, t, topic, kgo.ReadCommitted(), len(good))); !slices.Equal(got, sortedCopy(good)) {
			t.Fatalf("read_committed sees %v, want %v", got, sortedCopy(good))
		}
		awaitNoOpenTransaction(ctx, t, adm, topic, "after the job")
		if got := kcatRead(t, topic); len(got) != len(good) {
			t.Fatalf("kcat (read_committed) sees %d records, want %d (no duplicates): %v", len(got), len(good), got)
		}
		if m := snk.Metrics(); m.RecordsSkipped != int64(len(bad)) {
			t.Fatalf("metrics count %d skipped records, want %d", m.RecordsSkipped, len(bad))
		}
	})
	t.Run("dead-letter", func(t *testing.T) {
		topic, dlq := createTopic(ctx, t, adm, 2), createTopic(ctx, t, adm, 1)
		snk, err := run(t, topic, kafkasink.OnSerializerError(kafkasink.DeadLetterTopic(dlq)))
		if err != nil {
			t.Fatalf("job with a dead-letter topic: %v", err)
		}
		if got := values(consumeAll(ctx, t, topic, kgo.ReadCommitted(), len(good))); !slices.Equal(got, sortedCopy(good)) {
			t.Fatalf("read_committed sees %v on the output, want %v", got, sortedCopy(good))
		}
		dl := readCommittedRecords(ctx, t, dlq, len(bad))
		var keys []string
		for _, r := range dl {
			keys = append(keys, string(r.Key))
			var errh, format, target string
			for _, h := range r.Headers {
				switch h.Key {
				case kafkasink.HeaderError:
					errh = string(h.Value)
				case kafkasink.HeaderValueFormat:
					format = string(h.Value)
				case kafkasink.HeaderSinkTopic:
					target = string(h.Value)
				}
			}
			// The serializer made the key but no value: the copy's value
			// is the record printed with %v.
			if string(r.Value) != string(r.Key) || format != "fmt" || errh != "value refused by the schema" || target != topic {
				t.Errorf("dead-letter copy key %q value %q headers %v; want the value printed, format fmt, the error and topic %s",
					r.Key, r.Value, r.Headers, topic)
			}
		}
		slices.Sort(keys)
		if !slices.Equal(keys, sortedCopy(bad)) {
			t.Fatalf("dead-letter topic holds %v, want %v", keys, sortedCopy(bad))
		}
		awaitNoOpenTransaction(ctx, t, adm, dlq, "after the job")
		if got := kcatRead(t, dlq); len(got) != len(bad) {
			t.Fatalf("kcat (read_committed) sees %d records on the dead-letter topic, want %d (no duplicates): %v", len(got), len(bad), got)
		}
		if m := snk.Metrics(); m.RecordsDeadLettered != int64(len(bad)) {
			t.Fatalf("metrics count %d dead-lettered records, want %d", m.RecordsDeadLettered, len(bad))
		}
	})
}

// readCommittedRecords reads topic under read_committed until it has n
// records and returns them.
func readCommittedRecords(ctx context.Context, t *testing.T, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
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
