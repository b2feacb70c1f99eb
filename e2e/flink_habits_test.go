package e2e

// The "Flink habits" suite: a job written the way a Flink user writes it
// gives Flink's answer, or is refused before it starts with an error that
// says what to do. Each case is checked against a plain
// evaluation of its input. The real-broker versions are in
// integration/flink_habits_test.go, the CLI's in
// cmd/sluice/flink_habits_test.go.

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sink"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	"github.com/sluicehq/sluice/source"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
)

const (
	habitOutOfOrder = testutil.ClickDisorder
	habitWindowSize = time.Second
)

// Item 1 and 2: FromSource(kafkaSource, ForBoundedOutOfOrderness(...).
// WithTimestampAssigner(...)) as a Flink user writes it: 4 partitions
// read by 2 subtasks, timestamps from the payload (the Kafka record
// timestamps are the producer's, far from them). No click is late that
// Flink would not call late, and the window counts are those of a plain
// evaluation.
func TestFlinkHabitWatermarksPerPartition(t *testing.T) {
	const parts, perPart = 4, 1000
	seeds := testutil.KafkaCluster(t, parts, "clicks")
	clicks := testutil.Clickstream(parts, perPart, 250, 8)
	testutil.ProduceClicks(t, seeds, "clicks", clicks)

	quiet := slog.New(slog.DiscardHandler)
	env := sluice.NewEnvironment(sluice.WithParallelism(2), sluice.WithLogger(quiet),
		// Frequent watermarks: many of them while the readers hand out
		// their partitions in turn.
		sluice.WithAutoWatermarkInterval(time.Millisecond))
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics("clicks"), kafkasource.ValueDecoder(codec.JSON[testutil.Click]{}),
		kafkasource.Bounded(), kafkasource.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	in := sluice.FromSource(env, src, sluice.ForBoundedOutOfOrderness[testutil.Click](habitOutOfOrder).
		WithTimestampAssigner(func(c testutil.Click, _ int64) int64 { return c.TS }), "clicks", sluice.UID("clicks"))
	// A pause every 20 clicks lets the periodic watermarks come between
	// the partitions' turns.
	var n atomic.Int64
	in = sluice.Map(in, func(c testutil.Click) (testutil.Click, error) {
		if n.Add(1)%20 == 0 {
			time.Sleep(time.Millisecond)
		}
		return c, nil
	}, sluice.Name("pace"))
	late := sluice.NewOutputTag[testutil.Click]("late-clicks")
	windows := sluice.ProcessWindow(
		sluice.Window(sluice.KeyBy(in, func(c testutil.Click) string { return c.User }), sluice.TumblingEventTimeWindows(habitWindowSize)).
			SideOutputLateData(late),
		sluice.ProcessWindowFunc[string, testutil.Click, testutil.Window](func(ctx *sluice.WindowContext[string], cs []testutil.Click, out sluice.Collector[testutil.Window]) error {
			out.Collect(testutil.Window{User: ctx.Key(), Start: ctx.Window().Start, End: ctx.Window().End, N: len(cs)})
			return nil
		}), sluice.UID("windows"))
	got, lateOut := sink.NewCollect[testutil.Window](), sink.NewCollect[testutil.Click]()
	sluice.SinkTo(windows, got)
	sluice.SinkTo(sluice.SideOutput(windows, late), lateOut)
	if err := env.Execute(testutil.Context(t, 0)); err != nil {
		t.Fatal(err)
	}

	size := habitWindowSize.Milliseconds()
	may := testutil.MayCallLate(clicks, habitOutOfOrder, func(ts int64) int64 { return ts - ts%size + size - 1 })
	lateIDs := map[int]bool{}
	var wrong []testutil.Click
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
	if diff := testutil.DiffWindows(got.Values(), testutil.TumblingCounts(clicks, habitWindowSize, lateIDs)); diff != "" {
		t.Fatalf("window counts differ from the plain evaluation: %s", diff)
	}
	t.Logf("%d clicks, %d windows, %d late of %d Flink may call late", parts*perPart, got.Len(), len(lateIDs), len(may))
}

// Item 1: the deprecated way to ask for watermarks per partition,
// PartitionWatermarks (with a strategy on FromSource or not), is refused
// before the job starts, with the strategy to give FromSource instead.
func TestFlinkHabitPartitionWatermarksRefused(t *testing.T) {
	//lint:ignore SA1019 the deprecated option is what the test gives
	pw := kafkasource.PartitionWatermarks(5*time.Second, 0)
	_, err := kafkasource.NewSource([]string{"127.0.0.1:9092"}, kafkasource.Topics("clicks"), kafkasource.ValueDecoder(codec.JSON[testutil.Click]{}), pw)
	if !errors.Is(err, kafkasource.ErrInvalidConfig) {
		t.Fatalf("NewSource with PartitionWatermarks: %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"remove PartitionWatermarks", "sluice.ForBoundedOutOfOrderness[T](5s)", "FromSource", "per partition"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// A strategy that cannot hold: a negative bound or idleness.
	env := sluice.NewEnvironment(sluice.WithLogger(slog.New(slog.DiscardHandler)))
	in := sluice.FromSource(env, source.FromSlice([]int{1}), sluice.ForBoundedOutOfOrderness[int](-time.Second), "neg")
	sluice.SinkTo(in, sink.NewDiscard[int]())
	if err := env.Execute(testutil.Context(t, 0)); !errors.Is(err, sluice.ErrInvalidOption) || !strings.Contains(err.Error(), "out-of-orderness -1s") {
		t.Errorf("negative out-of-orderness: %v, want ErrInvalidOption naming it", err)
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
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
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
		got := testutil.ReadCommitted(t, seeds, topic)
		var dup, lost []string
		first := func(s []string) string {
			if len(s) == 0 {
				return "-"
			}
			return s[0]
		}
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

// Item 5: a job with a checkpoint directory and no savepoint directory
// stops with a savepoint (as `sluice stop`, or a runner's
// STOP_WITH_SAVEPOINT signal, asks with no directory): it goes to
// <checkpoint dir>/savepoints.
func TestFlinkHabitSavepointBesideCheckpoints(t *testing.T) {
	dir := t.TempDir()
	var completed atomic.Int64
	env := sluice.NewEnvironment(sluice.WithLogger(slog.New(slog.DiscardHandler)), sluice.WithCheckpointing(20*time.Millisecond, dir),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				completed.Add(1)
			}
		}))
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenRate(1000))
	sluice.SinkTo(sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen"), sink.NewDiscard[int64]())
	ctx := testutil.Context(t, 0)
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Await(t, "a completed checkpoint", func() bool { return completed.Load() > 0 })
	path, err := job.StopWithSavepoint(ctx, "", false)
	if err != nil {
		t.Fatalf("stop with a savepoint, no directory given: %v", err)
	}
	if want := filepath.Join(dir, checkpoint.DefaultSavepointSubdir, "savepoint-"); !strings.HasPrefix(path, want) {
		t.Fatalf("savepoint at %s, want it in %s*", path, want)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job stopped with a savepoint: %v", err)
	}
}
