package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/cluster"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

// jobFlags configure the job. Every process of it gets the same values
// (the parent passes them on): they all build the same plan.
type jobFlags struct {
	brokers     string
	input       string
	output      string
	checkpoints string
	txnPrefix   string
	parallelism int
	interval    time.Duration
	pace        time.Duration
}

func (j *jobFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&j.brokers, "brokers", "", "job: Kafka seed brokers, comma separated")
	fs.StringVar(&j.input, "input", "", "job: the input topic (lines of text)")
	fs.StringVar(&j.output, "output", "", "job: the output topic ((word, count) records)")
	fs.StringVar(&j.checkpoints, "checkpoints", "", "job: the checkpoint directory, shared by every process of the job")
	fs.StringVar(&j.txnPrefix, "txn-prefix", "clustercount", "job: the Kafka sink's transactional id prefix")
	fs.IntVar(&j.parallelism, "parallelism", 4, "job: parallelism of every operator")
	fs.DurationVar(&j.interval, "interval", 500*time.Millisecond, "job: checkpoint interval")
	fs.DurationVar(&j.pace, "pace", 2*time.Millisecond, "job: pause per line in each source subtask, so that the run lasts long enough to kill a worker in it")
}

// args are the flags that give another process the same job.
func (j *jobFlags) args() []string {
	return []string{
		"--brokers", j.brokers, "--input", j.input, "--output", j.output,
		"--checkpoints", j.checkpoints, "--txn-prefix", j.txnPrefix,
		"--parallelism", strconv.Itoa(j.parallelism), "--interval", j.interval.String(), "--pace", j.pace.String(),
	}
}

// What a coordinator logs besides the framework's own lines; the parent
// reads them from its standard output.
const (
	msgCheckpoint = "clustercount: checkpoint completed"
	msgJobEnded   = "clustercount: job ended"
)

// WordCount is one output record: a word and how often it has been seen.
type WordCount struct {
	Word  string
	Count int64
}

// countWords keeps the count of every word in keyed state.
type countWords struct {
	count state.ValueState[int64]
}

func (c *countWords) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countWords) ProcessElement(ctx *sluice.KeyedContext[string], _ string, out sluice.Collector[WordCount]) error {
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(WordCount{Word: ctx.Key(), Count: n})
	return nil
}

// words splits a line into lower-case words.
func words(line string) []string {
	return strings.FieldsFunc(strings.ToLower(line), func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
}

// newJob builds the job's plan, the same in every process: a bounded
// Kafka source (it ends at the input's end offsets when the job first
// started, so the job finishes by itself), a paced split into words, a
// count per word in keyed state, and an exactly-once Kafka sink.
func newJob(j jobFlags, cc cluster.Config, log *slog.Logger, completed *atomic.Int64) (*sluice.Environment, error) {
	if j.brokers == "" || j.input == "" || j.output == "" || j.checkpoints == "" {
		return nil, errors.New("--brokers, --input, --output and --checkpoints are needed with --role")
	}
	seeds := strings.Split(j.brokers, ",")
	// The Kafka clients log warnings only.
	quiet := slog.New(levelFilter{log.Handler(), slog.LevelWarn}).With("component", "kafka")
	env := sluice.NewEnvironment(
		sluice.WithJobName("clustercount"),
		sluice.WithParallelism(j.parallelism),
		sluice.WithLogger(log),
		cluster.With(cc),
		sluice.WithCheckpointing(j.interval, j.checkpoints),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Timeout = 30 * time.Second }),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(5, 500*time.Millisecond)),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				completed.Add(1)
				log.Info(msgCheckpoint, "checkpoint", s.ID, "duration_ms", s.EndToEndDuration.Milliseconds(), "state_bytes", s.StateSize)
			}
		}),
	)
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(j.input),
		func(r *kgo.Record) (string, error) { return string(r.Value), nil },
		kafkasource.Bounded(), kafkasource.Logger(quiet))
	if err != nil {
		return nil, err
	}
	lines := sluice.FromSource(env, src, sluice.NoWatermarks[string](), "lines", sluice.UID("lines"))
	pace := j.pace
	split := sluice.FlatMap(lines, func(line string, c sluice.Collector[string]) error {
		time.Sleep(pace)
		for _, w := range words(line) {
			c.Collect(w)
		}
		return nil
	}, sluice.Name("split"), sluice.UID("split"))
	counts := sluice.Process[string, string, WordCount](sluice.KeyBy(split, func(w string) string { return w }),
		&countWords{}, sluice.Name("count"), sluice.UID("count"))
	output := j.output
	snk, err := kafkasink.NewSink(seeds, func(wc WordCount) (*kgo.Record, error) {
		return &kgo.Record{Topic: output, Key: []byte(wc.Word), Value: strconv.AppendInt(nil, wc.Count, 10)}, nil
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(j.txnPrefix),
		kafkasink.TransactionTimeout(5*time.Minute), kafkasink.Logger(quiet))
	if err != nil {
		return nil, err
	}
	sluice.SinkTo(counts, snk, sluice.Name("output"), sluice.UID("output"))
	return env, nil
}

// runProcess is a child: one process of the job, in the role cc says.
// It logs JSON lines on standard output, which the parent reads. With
// exitWithParent it stops when its standard input closes: the parent is
// gone, however it ended.
func runProcess(cc cluster.Config, j jobFlags, exitWithParent bool) error {
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if exitWithParent {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			log.Warn("clustercount: the parent is gone; stopping")
			cancel()
			time.AfterFunc(5*time.Second, func() { os.Exit(3) })
		}()
	}
	var completed atomic.Int64
	env, err := newJob(j, cc, log, &completed)
	if err != nil {
		return err
	}
	if cc.Role != cluster.RoleCoordinator {
		return env.Execute(ctx) // a worker, until the job has ended
	}
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	err = job.Wait()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	log.Info(msgJobEnded, "status", fmt.Sprint(job.Status()), "restarts", job.Restarts(), "checkpoints", completed.Load(), "err", msg)
	return err
}

// levelFilter drops records below its level.
type levelFilter struct {
	slog.Handler
	level slog.Level
}

func (f levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.level && f.Handler.Enabled(ctx, l)
}

func (f levelFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return levelFilter{f.Handler.WithAttrs(as), f.level}
}

func (f levelFilter) WithGroup(name string) slog.Handler {
	return levelFilter{f.Handler.WithGroup(name), f.level}
}
