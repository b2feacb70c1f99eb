// Command chaosjob is the job the integration tests run as a separate OS
// process, to kill it with SIGKILL and restart it: it reads keyed records
// from a Kafka topic (bounded: up to the offsets that were latest when it
// first started), keeps a running count per key in keyed state (RocksDB
// by default), and writes (key, count) to an output topic exactly once,
// with checkpoints into a directory shared by every run, from whose latest
// checkpoint each run resumes.
//
//	chaosjob -brokers 127.0.0.1:9092 -in in -out out -checkpoints /tmp/chk \
//	    -prefix chaos -mode aligned -state-dir /tmp/state
//
// It prints a line per completed checkpoint on stdout ("checkpoint N
// completed: unaligned=B persisted=BYTES") and its logs on stderr, and exits 0 once the job has
// finished (every record read, the final checkpoint committed), 1 when the
// job failed. With -kill-in-interval N it kills itself with SIGKILL once
// subtask 0's sink has written (and flushed) a record into the transaction
// that follows checkpoint N's barrier: a killed run that certainly leaves
// an open transaction behind. With -exit-before-commit N it exits with status 3 in the
// sink's commit path, after checkpoint N (or a later one) completed and
// before its transactions are committed: the injection point of a crash
// between a completed checkpoint and its commit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// exitBeforeCommitStatus is the exit status of the commit-path injection.
const exitBeforeCommitStatus = 3

type options struct {
	brokers          string
	in, out          string
	checkpoints      string
	prefix           string
	mode             string
	backend          string
	stateDir         string
	interval         time.Duration
	timeout          time.Duration
	parallelism      int
	rate             float64
	restarts         int
	exitBeforeCommit int64
	killInInterval   int64
}

func main() {
	var o options
	flag.StringVar(&o.brokers, "brokers", os.Getenv("KAFKA_BROKERS"), "seed brokers, comma separated (default $KAFKA_BROKERS)")
	flag.StringVar(&o.in, "in", "", "input topic: records whose key is the key to count")
	flag.StringVar(&o.out, "out", "", "output topic: (key, count) records, the count as a decimal string")
	flag.StringVar(&o.checkpoints, "checkpoints", "", "checkpoint directory, shared by every run")
	flag.StringVar(&o.prefix, "prefix", "", "transactional id prefix of the sink")
	flag.StringVar(&o.mode, "mode", "aligned", "checkpoints: aligned, unaligned, or mixed (aligned with a 20 ms timeout)")
	flag.StringVar(&o.backend, "backend", "rocksdb", "keyed state backend: rocksdb or heap")
	flag.StringVar(&o.stateDir, "state-dir", os.TempDir(), "root of the RocksDB working directories")
	flag.DurationVar(&o.interval, "interval", 200*time.Millisecond, "checkpoint interval")
	flag.DurationVar(&o.timeout, "checkpoint-timeout", time.Minute, "checkpoint timeout; a checkpoint that expires fails the job (no tolerable failures)")
	flag.IntVar(&o.parallelism, "parallelism", 2, "parallelism of every operator")
	flag.Float64Var(&o.rate, "rate", 0, "records per second the job reads and counts, over all subtasks (0: no limit)")
	flag.IntVar(&o.restarts, "restarts", 0, "in-process restarts (fixed delay 500 ms) before the job fails")
	flag.Int64Var(&o.exitBeforeCommit, "exit-before-commit", 0, "exit with status 3 before committing checkpoint N or later (0: never)")
	flag.Int64Var(&o.killInInterval, "kill-in-interval", 0, "SIGKILL the process in the first interval after checkpoint N's barrier, once subtask 0's sink has written a record into it (0: never)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(o, log); err != nil {
		fmt.Fprintf(os.Stderr, "chaosjob: %v\n", err)
		os.Exit(1)
	}
}

func run(o options, log *slog.Logger) error {
	if o.brokers == "" || o.in == "" || o.out == "" || o.checkpoints == "" || o.prefix == "" {
		return errors.New("-brokers (or KAFKA_BROKERS), -in, -out, -checkpoints and -prefix are required")
	}
	seeds := strings.Split(o.brokers, ",")
	opts := []sluice.Option{
		sluice.WithJobName("chaosjob"),
		sluice.WithParallelism(o.parallelism),
		sluice.WithLogger(log),
		sluice.WithBufferTimeout(5 * time.Millisecond),
		sluice.WithCheckpointing(o.interval, o.checkpoints),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Timeout = o.timeout }),
		sluice.WithResumeFromLatestCheckpoint(),
		sluice.WithCheckpointListener(func(s checkpoint.CheckpointStats) {
			if s.Status == checkpoint.StatusCompleted {
				fmt.Printf("checkpoint %d completed: unaligned=%t persisted=%d\n", s.ID, s.Unaligned, s.PersistedData)
			}
		}),
	}
	if o.restarts > 0 {
		opts = append(opts, sluice.WithRestartStrategy(sluice.FixedDelayRestart(o.restarts, 500*time.Millisecond)))
	} else {
		opts = append(opts, sluice.WithRestartStrategy(sluice.NoRestart()))
	}
	switch o.mode {
	case "aligned":
	case "unaligned":
		opts = append(opts, sluice.WithUnalignedCheckpoints(0))
	case "mixed":
		opts = append(opts, sluice.WithUnalignedCheckpoints(20*time.Millisecond))
	default:
		return fmt.Errorf("unknown -mode %q", o.mode)
	}
	switch o.backend {
	case "rocksdb":
		opts = append(opts, sluice.WithStateBackend(rocksDBBackend(o.stateDir)))
	case "heap":
	default:
		return fmt.Errorf("unknown -backend %q", o.backend)
	}
	env := sluice.NewEnvironment(opts...)

	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(o.in),
		func(r *kgo.Record) (string, error) { return string(r.Key), nil },
		kafkasource.Bounded(), kafkasource.Logger(log))
	if err != nil {
		return err
	}
	keys := sluice.FromSource(env, src, sluice.NoWatermarks[string](), "kafka-in", sluice.UID("kafka-in"))
	// The source side is paced, so that the sources are still reading
	// while the test kills the job: checkpoints are taken while sources
	// run. The counting side is paced at the same rate, so that the
	// exchange between them holds data for unaligned checkpoints.
	pace := newLimiter(o.rate)
	keys = sluice.Map(keys, func(k string) (string, error) { pace.wait(); return k, nil }, sluice.Name("pace"), sluice.UID("pace"))
	counts := sluice.Process[string, string, keyCount](sluice.KeyBy(keys, func(k string) string { return k }),
		&runningCount{limit: newLimiter(o.rate)}, sluice.Name("count"), sluice.UID("count"))
	out, err := kafkasink.NewSink(seeds, func(kc keyCount) (*kgo.Record, error) {
		return &kgo.Record{Topic: o.out, Key: []byte(kc.Key), Value: strconv.AppendInt(nil, kc.Count, 10)}, nil
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(o.prefix), kafkasink.Logger(log))
	if err != nil {
		return err
	}
	var snk sink.Sink[keyCount] = out
	switch {
	case o.exitBeforeCommit > 0:
		snk = &exitBeforeCommit[keyCount]{Sink: out, from: o.exitBeforeCommit}
	case o.killInInterval > 0:
		snk = &killInInterval[keyCount]{Sink: out, after: o.killInInterval}
	}
	sluice.SinkTo(counts, snk, sluice.Name("kafka-out"), sluice.UID("kafka-out"))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return env.Execute(ctx)
}

// keyCount is one output record.
type keyCount struct {
	Key   string
	Count int64
}

// runningCount keeps a count per key in keyed state and emits it with
// every record.
type runningCount struct {
	count state.ValueState[int64]
	limit *limiter
}

func (r *runningCount) Open(ctx *sluice.OperatorContext) error {
	var err error
	r.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (r *runningCount) ProcessElement(ctx *sluice.KeyedContext[string], _ string, out sluice.Collector[keyCount]) error {
	r.limit.wait()
	n, _, err := r.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := r.count.Update(n); err != nil {
		return err
	}
	out.Collect(keyCount{Key: ctx.Key(), Count: n})
	return nil
}

// limiter spaces calls to wait at least 1/rate apart over every subtask,
// so that a run lasts long enough to be killed in the middle; the waiting
// operator backpressures its inputs, which gives unaligned checkpoints
// in-flight data to persist.
type limiter struct {
	mu   sync.Mutex
	gap  time.Duration
	next time.Time
}

func newLimiter(rate float64) *limiter {
	if rate <= 0 {
		return nil
	}
	return &limiter{gap: time.Duration(float64(time.Second) / rate)}
}

func (l *limiter) wait() {
	if l == nil {
		return
	}
	l.mu.Lock()
	now := time.Now()
	at := l.next
	if at.Before(now) {
		at = now
	}
	l.next = at.Add(l.gap)
	l.mu.Unlock()
	time.Sleep(time.Until(at))
}

// rocksDBBackend makes the RocksDB keyed backend of each subtask, in a
// working directory of its own under root (a fresh one per attempt: state
// comes back from the checkpoint).
func rocksDBBackend(root string) runtime.StateBackendFactory {
	var n atomic.Int64
	return func(o runtime.StateBackendOptions) (state.KeyedBackend, error) {
		kgr := o.KeyGroups
		dir := filepath.Join(root, fmt.Sprintf("%s-%d-%d-%d", o.OperatorUID, o.Subtask, os.Getpid(), n.Add(1)))
		return rocksdb.New(rocksdb.Options{Dir: dir, MaxParallelism: o.MaxParallelism, KeyGroups: &kgr})
	}
}

// exitBeforeCommit is the Kafka sink with the crash injection: its
// committers exit the process before committing checkpoint from or a later
// one (committables restored from a checkpoint are committed normally).
type exitBeforeCommit[T any] struct {
	*kafkasink.Sink[T]
	from int64
}

func (s *exitBeforeCommit[T]) NewCommitter(ctx sink.WriterContext) (sink.Committer, error) {
	c, err := s.Sink.NewCommitter(ctx)
	if err != nil {
		return nil, err
	}
	return &exitingCommitter{Committer: c, from: s.from, restored: ctx.RestoredCheckpointID}, nil
}

type exitingCommitter struct {
	sink.Committer
	from, restored int64
}

func (c *exitingCommitter) Commit(ctx context.Context, id int64, committables [][]byte) error {
	if id >= c.from && id != c.restored && len(committables) > 0 {
		fmt.Fprintf(os.Stderr, "chaosjob: checkpoint %d completed; exiting before its commit (-exit-before-commit %d)\n", id, c.from)
		os.Exit(exitBeforeCommitStatus)
	}
	return c.Committer.Commit(ctx, id, committables)
}

// killInInterval is the Kafka sink whose subtask 0 writer kills the
// process in the interval after checkpoint after's barrier, once a record
// of that interval is acknowledged: its transaction is left open, and no
// commit of that subtask is in flight (commits run on the same goroutine).
type killInInterval[T any] struct {
	*kafkasink.Sink[T]
	after int64
}

func (s *killInInterval[T]) NewWriter(ctx sink.WriterContext) (sink.Writer[T], error) {
	w, err := s.Sink.NewWriter(ctx)
	if err != nil || ctx.Subtask != 0 {
		return w, err
	}
	return &killingWriter[T]{Writer: w, after: s.after}, nil
}

type killingWriter[T any] struct {
	sink.Writer[T]
	after int64
	armed bool
}

func (w *killingWriter[T]) Write(v T, ts int64) error {
	if err := w.Writer.Write(v, ts); err != nil || !w.armed {
		return err
	}
	if err := w.Writer.Flush(false); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "chaosjob: a record is in the transaction after checkpoint %d's barrier; SIGKILL (-kill-in-interval)\n", w.after)
	return syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

func (w *killingWriter[T]) PrepareCommit(id int64) ([][]byte, error) {
	c, err := w.Writer.(sink.PrecommittingWriter[T]).PrepareCommit(id)
	w.armed = w.armed || id >= w.after
	return c, err
}

func (w *killingWriter[T]) SnapshotState(id int64) ([][]byte, error) {
	return w.Writer.(sink.StatefulWriter[T]).SnapshotState(id)
}
