package sluice_test

// The "Flink habits" suite: a job written the way a Flink user writes it
// gives Flink's answer, or is refused before it starts with an error that
// says what to do (issue 24). Each case is checked against a plain
// evaluation of its input. The real-broker versions are in
// integration/flink_habits_test.go, the CLI's in
// cmd/sluice/flink_habits_test.go.

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sink"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	"github.com/sluicehq/sluice/source"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
)

// habitClick is a click with its event time in the payload.
type habitClick struct {
	ID   int    `json:"id"`
	User string `json:"user"`
	TS   int64  `json:"ts"`
}

// habitWindow is one tumbling window's count of a user's clicks.
type habitWindow struct {
	User  string
	Start int64
	N     int
}

const (
	habitOutOfOrder = 500 * time.Millisecond
	habitWindowSize = time.Second
)

// habitClicks makes the clicks of parts partitions: each partition's
// event times advance 20 ms a click with up to 400 ms of disorder (within
// the strategy's bound of 500 ms), and the partitions are a minute apart
// in event time, so a reader that hands out its partitions in turn mixes
// timestamps a minute apart. Every perStraggler-th click of a partition
// is a straggler, 10 s behind its partition: Flink may call it late.
func habitClicks(parts, perPart, perStraggler int) [][]habitClick {
	rng := rand.New(rand.NewSource(24))
	const base = int64(1_700_000_000_000)
	out := make([][]habitClick, parts)
	id := 0
	for p := range parts {
		for i := range perPart {
			ts := base + int64(p)*60_000 + int64(i)*20 - rng.Int63n(400)
			if perStraggler > 0 && i > 0 && i%perStraggler == 0 {
				ts -= 10_000
			}
			out[p] = append(out[p], habitClick{ID: id, User: fmt.Sprint("u", rng.Intn(8)), TS: ts})
			id++
		}
	}
	return out
}

// produceHabitClicks writes each partition's clicks to it, in order, with
// the producer's default record timestamps (the time of writing, nothing
// like the clicks' event times).
func produceHabitClicks(t *testing.T, seeds []string, topic string, clicks [][]habitClick) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for p, cs := range clicks {
		for _, c := range cs {
			b, _ := json.Marshal(c)
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(p), Value: b})
		}
	}
	if err := cl.ProduceSync(testutil.Context(t, 0), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// flinkMayCallLate is the plain per-partition evaluation of Flink's
// lateness: with the strategy per partition, the watermark when a click
// is read is at most its partition's largest earlier timestamp - bound -
// 1 ms, so only a click whose window ends at or before that may be late.
func flinkMayCallLate(clicks [][]habitClick) map[int]bool {
	may := map[int]bool{}
	size := habitWindowSize.Milliseconds()
	for _, cs := range clicks {
		maxBefore := int64(-1 << 63)
		for _, c := range cs {
			end := c.TS - c.TS%size + size
			if maxBefore != -1<<63 && end-1 <= maxBefore-habitOutOfOrder.Milliseconds()-1 {
				may[c.ID] = true
			}
			maxBefore = max(maxBefore, c.TS)
		}
	}
	return may
}

// habitCounts is the plain evaluation of the window job: clicks per user
// and tumbling window, leaving out those in skip.
func habitCounts(clicks [][]habitClick, skip map[int]bool) map[habitWindow]bool {
	n := map[[2]any]int{}
	size := habitWindowSize.Milliseconds()
	for _, cs := range clicks {
		for _, c := range cs {
			if !skip[c.ID] {
				n[[2]any{c.User, c.TS - c.TS%size}]++
			}
		}
	}
	out := map[habitWindow]bool{}
	for k, v := range n {
		out[habitWindow{User: k[0].(string), Start: k[1].(int64), N: v}] = true
	}
	return out
}

// Item 1 and 2: FromSource(kafkaSource, ForBoundedOutOfOrderness(...).
// WithTimestampAssigner(...)) as a Flink user writes it: 4 partitions
// read by 2 subtasks, timestamps from the payload (the Kafka record
// timestamps are the producer's, far from them). No click is late that
// Flink would not call late, and the window counts are those of a plain
// evaluation.
func TestFlinkHabitWatermarksPerPartition(t *testing.T) {
	const parts, perPart = 4, 1000
	seeds := testutil.KafkaCluster(t, parts, "clicks")
	clicks := habitClicks(parts, perPart, 250)
	produceHabitClicks(t, seeds, "clicks", clicks)

	quiet := slog.New(slog.DiscardHandler)
	env := sluice.NewEnvironment(sluice.WithParallelism(2), sluice.WithLogger(quiet),
		// Frequent watermarks: many of them while the readers hand out
		// their partitions in turn.
		sluice.WithAutoWatermarkInterval(time.Millisecond))
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics("clicks"), kafkasource.ValueDecoder(codec.JSON[habitClick]{}),
		kafkasource.Bounded(), kafkasource.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	in := sluice.FromSource(env, src, sluice.ForBoundedOutOfOrderness[habitClick](habitOutOfOrder).
		WithTimestampAssigner(func(c habitClick, _ int64) int64 { return c.TS }), "clicks", sluice.UID("clicks"))
	// A pause every 20 clicks lets the periodic watermarks come between
	// the partitions' turns.
	var n atomic.Int64
	in = sluice.Map(in, func(c habitClick) (habitClick, error) {
		if n.Add(1)%20 == 0 {
			time.Sleep(time.Millisecond)
		}
		return c, nil
	}, sluice.Name("pace"))
	late := sluice.NewOutputTag[habitClick]("late-clicks")
	windows := sluice.ProcessWindow(
		sluice.Window(sluice.KeyBy(in, func(c habitClick) string { return c.User }), sluice.TumblingEventTimeWindows(habitWindowSize)).
			SideOutputLateData(late),
		sluice.ProcessWindowFunc[string, habitClick, habitWindow](func(ctx *sluice.WindowContext[string], cs []habitClick, out sluice.Collector[habitWindow]) error {
			out.Collect(habitWindow{User: ctx.Key(), Start: ctx.Window().Start, N: len(cs)})
			return nil
		}), sluice.UID("windows"))
	got, lateOut := sink.NewCollect[habitWindow](), sink.NewCollect[habitClick]()
	sluice.SinkTo(windows, got)
	sluice.SinkTo(sluice.SideOutput(windows, late), lateOut)
	if err := env.Execute(testutil.Context(t, 0)); err != nil {
		t.Fatal(err)
	}

	may := flinkMayCallLate(clicks)
	lateIDs := map[int]bool{}
	var wrong []habitClick
	for _, c := range lateOut.Values() {
		lateIDs[c.ID] = true
		if !may[c.ID] {
			wrong = append(wrong, c)
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("%d of %d clicks went to the late output that Flink would not call late (within their partition's bound of %v), e.g. %+v",
			len(wrong), len(lateIDs), habitOutOfOrder, wrong[0])
	}
	want := habitCounts(clicks, lateIDs)
	have := map[habitWindow]bool{}
	for _, w := range got.Values() {
		if have[w] {
			t.Errorf("window %+v fired twice", w)
		}
		have[w] = true
	}
	var missing, unexpected []habitWindow
	for w := range want {
		if !have[w] {
			missing = append(missing, w)
		}
	}
	for w := range have {
		if !want[w] {
			unexpected = append(unexpected, w)
		}
	}
	if len(missing)+len(unexpected) > 0 {
		t.Fatalf("window counts differ from the plain evaluation: %d missing (e.g. %v), %d unexpected (e.g. %v)",
			len(missing), first(missing), len(unexpected), first(unexpected))
	}
	t.Logf("%d clicks, %d windows, %d late of %d Flink may call late", parts*perPart, len(have), len(lateIDs), len(may))
}

func first[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}

// Item 1: the deprecated way to ask for watermarks per partition,
// PartitionWatermarks (with a strategy on FromSource or not), is refused
// before the job starts, with the strategy to give FromSource instead.
func TestFlinkHabitPartitionWatermarksRefused(t *testing.T) {
	//lint:ignore SA1019 the deprecated option is what the test gives
	pw := kafkasource.PartitionWatermarks(5*time.Second, 0)
	_, err := kafkasource.NewSource([]string{"127.0.0.1:9092"}, kafkasource.Topics("clicks"), kafkasource.ValueDecoder(codec.JSON[habitClick]{}), pw)
	if !errors.Is(err, kafkasource.ErrInvalidConfig) {
		t.Fatalf("NewSource with PartitionWatermarks: %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"remove PartitionWatermarks", "sluice.ForBoundedOutOfOrderness[T](5s)", "FromSource", "per partition"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// logLines collects the job's log records.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logLines) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// readCommitted returns how often each value was committed to topic.
// The job has ended, so no transaction is open: an end marker written to
// every partition after it bounds what there is to read.
func readCommitted(t *testing.T, seeds []string, topic string) map[string]int {
	t.Helper()
	ctx := testutil.Context(t, 0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "\x00end"
	open := map[int32]bool{}
	ends.Each(func(o kadm.ListedOffset) {
		open[o.Partition] = true
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: o.Partition, Value: []byte(marker)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	})
	seen := map[string]int{}
	for len(open) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (the end marker of partitions %v not seen)", topic, ctx.Err(), open)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == marker {
				delete(open, r.Partition)
			} else {
				seen[string(r.Value)]++
			}
		})
	}
	return seen
}

// Item 4: a Kafka sink given no guarantee in a job with exactly-once
// checkpoints is exactly-once (Flink users expect the promise of their
// checkpointing mode), with a transactional id prefix derived from the job
// id and the sink's uid, so two such sinks need nothing more. A failure
// after a checkpoint: every record is committed exactly once to both
// topics, and the job logged the guarantee once per sink.
func TestFlinkHabitKafkaSinkFollowsCheckpointing(t *testing.T) {
	const records = 3000
	seeds := testutil.KafkaCluster(t, 2, "out-a", "out-b")
	logs := &logLines{}
	var completed atomic.Int64
	env := sluice.NewEnvironment(sluice.WithParallelism(2), sluice.WithJobName("habit-sink"),
		sluice.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		sluice.WithCheckpointing(20*time.Millisecond, t.TempDir()),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(1, 10*time.Millisecond)),
		sluice.WithCheckpointListener(func(s checkpoint.CheckpointStats) {
			if s.Status == checkpoint.StatusCompleted {
				completed.Add(1)
			}
		}))
	gen := source.NewDatagen(func(i int64) string { return fmt.Sprint("r", i) }, source.DatagenCount(records), source.DatagenRate(4*records))
	// The first attempt fails once a checkpoint completed and records
	// were written after it.
	var seen atomic.Int64
	var failed atomic.Bool
	in := sluice.Map(sluice.FromSource(env, gen, sluice.NoWatermarks[string](), "gen", sluice.UID("gen")), func(v string) (string, error) {
		if seen.Add(1) > records/2 && completed.Load() > 0 && failed.CompareAndSwap(false, true) {
			return "", errors.New("injected failure")
		}
		return v, nil
	}, sluice.UID("fail-once"))
	for _, topic := range []string{"out-a", "out-b"} {
		snk, err := kafkasink.NewSink(seeds, kafkasink.ValueSerializer(topic, codec.String{}))
		if err != nil {
			t.Fatal(err)
		}
		sluice.SinkTo(in, snk, sluice.Name("to "+topic), sluice.UID(topic))
	}
	if err := env.Execute(testutil.Context(t, 0)); err != nil {
		t.Fatal(err)
	}
	if !failed.Load() {
		t.Fatal("the injected failure did not happen")
	}
	for _, topic := range []string{"out-a", "out-b"} {
		got := readCommitted(t, seeds, topic)
		var dup, lost []string
		for i := range records {
			switch k := fmt.Sprint("r", i); got[k] {
			case 1:
			case 0:
				lost = append(lost, k)
			default:
				dup = append(dup, k)
			}
		}
		if len(dup)+len(lost) > 0 || len(got) != records {
			t.Errorf("%s: %d records committed more than once (e.g. %v), %d never, %d distinct; want each of %d once",
				topic, len(dup), first(dup), len(lost), len(got), records)
		}
		lines := logs.matching("kafka sink: delivery guarantee")
		lines = slices.DeleteFunc(lines, func(l string) bool { return !strings.Contains(l, "uid="+topic) })
		if len(lines) != 1 || !strings.Contains(lines[0], "guarantee=exactly-once") || !strings.Contains(lines[0], "habit-sink-"+topic) {
			t.Errorf("log lines of sink %s's guarantee %q; want one saying exactly-once with the prefix habit-sink-%s", topic, lines, topic)
		}
	}
}

// Item 4: two exactly-once sinks of one job with one transactional id
// prefix would abort each other's transactions at run time; they are
// refused before the job starts, naming both. An explicit exactly-once
// sink in a job that cannot back it is refused with what to change.
func TestFlinkHabitKafkaSinkRefusals(t *testing.T) {
	seeds := testutil.KafkaCluster(t, 1, "out")
	quiet := slog.New(slog.DiscardHandler)
	job := func(ckpt bool, sinks ...[]kafkasink.Option) error {
		opts := []sluice.Option{sluice.WithLogger(quiet)}
		if ckpt {
			opts = append(opts, sluice.WithCheckpointing(time.Second, t.TempDir()))
		}
		env := sluice.NewEnvironment(opts...)
		in := sluice.FromSource(env, source.NewDatagen(func(i int64) string { return fmt.Sprint(i) }, source.DatagenCount(10)),
			sluice.NoWatermarks[string](), "gen")
		for i, so := range sinks {
			snk, err := kafkasink.NewSink(seeds, kafkasink.ValueSerializer("out", codec.String{}), append(so, kafkasink.Logger(quiet))...)
			if err != nil {
				return err
			}
			sluice.SinkTo(in, snk, sluice.Name(fmt.Sprint("clicks out ", i+1)), sluice.UID(fmt.Sprint("out-", i+1)))
		}
		return env.Execute(testutil.Context(t, 0))
	}
	same := []kafkasink.Option{kafkasink.TransactionalIDPrefix("clicks")}
	err := job(true, same, same)
	if !errors.Is(err, sluice.ErrInvalidOption) {
		t.Fatalf("two exactly-once sinks with prefix clicks: %v, want ErrInvalidOption before the job starts", err)
	}
	for _, want := range []string{`"clicks out 1"`, `"clicks out 2"`, `prefix "clicks"`, "TransactionalIDPrefix"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	err = job(false, []kafkasink.Option{kafkasink.Guarantee(kafkasink.ExactlyOnce)})
	if !errors.Is(err, sluice.ErrInvalidOption) || !errors.Is(err, kafkasink.ErrGuaranteeConflict) {
		t.Fatalf("exactly-once sink without checkpointing: %v, want ErrInvalidOption and ErrGuaranteeConflict", err)
	}
	for _, want := range []string{`"clicks out 1"`, "Guarantee(ExactlyOnce)", "execution.checkpointing.interval"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
