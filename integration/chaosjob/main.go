// Command chaosjob is the job the integration tests run as a separate OS
// process, to kill it with SIGKILL, shut it down with SIGTERM and restart
// it: it reads keyed records from a Kafka topic (bounded: up to the
// offsets that were latest when it first started), keeps a running count
// per key in keyed state (RocksDB by default), and writes (key, count) to
// an output topic exactly once, with checkpoints into a directory shared
// by every run, from whose latest checkpoint each run resumes, as every
// job does by default (-fresh starts from no state instead).
//
//	chaosjob -brokers 127.0.0.1:9092 -in in -out out -checkpoints /tmp/chk \
//	    -prefix chaos -mode aligned -state-dir /tmp/state
//
// On stdout it prints a line per completed checkpoint ("checkpoint N
// completed: unaligned=B persisted=BYTES path=DIR"), "final checkpoint N
// completed" after the checkpoint that covers the end of the input,
// "restored from checkpoint N attempt=A path=DIR" for every restore, and
// one line saying how the job ended; its logs go to stderr. Exit status:
//
//	0  "job finished" (every record read, the final checkpoint committed),
//	   or "job already finished" (a finished job started again)
//	1  the job failed, or could not start (the error is on stderr)
//	3  the -exit-before-commit injection
//	4  "job suspended": SIGTERM or SIGINT cancelled the job's context and
//	   the job was suspended, its latest checkpoint kept
//	5  "job canceled": the signal cancelled the job instead of suspending it
//	6  "job locked": another process runs the job; the error names it
//
// With -kill-in-interval N it kills itself with SIGKILL once
// subtask 0's sink has written (and flushed) a record into the transaction
// that follows checkpoint N's barrier: a killed run that certainly leaves
// an open transaction behind. With -exit-before-commit N it exits with status 3 in the
// sink's commit path, after checkpoint N (or a later one) completed and
// before its transactions are committed: the injection point of a crash
// between a completed checkpoint and its commit. With -fail-once-after N
// the counting operator fails once, at its N-th record in this process
// (the restart strategy, -restarts, decides what follows). SIGUSR1 lifts
// -rate for the rest of the process's life: a test that needs the job
// running while it does something slow (broker kills) paces it until
// then, and lets it finish at full speed after.
//
// With -rest ADDR the coordinator (or the single process) serves the
// job's REST API there and logs "api listening" with the address: the
// tests rescale the job through it. -D key=value takes any configuration
// key (scheduler-mode, ...); the job's own flags override it.
//
// With -job operators it runs the operators job instead (operators_job.go):
// every DataStream operator on event-time input from the topics -in-left,
// -in-right and -in-rules, each writing to its own topic -out-<operator>.
//
// The same binary runs one job on several processes (package cluster):
// the cluster flags are cluster.Flags' (--role, --coordinator,
// --listen, --data-listen, --host, --worker-id, --slots, --etcd and
// -D key=value for Flink's keys such as heartbeat.interval,
// heartbeat.timeout and slot.request.timeout), over the SLUICE_*
// variables. Every process takes the job's flags as well, the same ones
// (other flags that change the plan, such as -parallelism, make a worker
// that the coordinator refuses):
//
//	chaosjob <job flags> --role coordinator --listen 127.0.0.1:6123
//	chaosjob <job flags> --role worker --coordinator 127.0.0.1:6123 \
//	    --slots 2 --data-listen 127.0.0.1:0 --host 127.0.0.1 --worker-id w1
//
// The coordinator prints and exits as the single role above: the
// checkpoint and restore lines come from it, and its restart strategy
// (-restarts) restarts the job when a worker is lost. A worker runs the
// tasks placed on it and prints no checkpoint line (it may print the
// restore lines of the tasks it restored); it exits 0
// ("worker exited") once the job's recorded result says the job ended
// (or a signal stopped it), 1 on an error ("worker failed", the error on
// stderr), for instance when the coordinator refuses it. -rate paces each
// process on its own: a job on N workers reads up to N times -rate.
package main

import (
	"context"
	cryptorand "crypto/rand"
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
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// Exit statuses besides 0 (finished) and 1 (failed).
const (
	// exitBeforeCommitStatus is the exit status of the commit-path injection.
	exitBeforeCommitStatus = 3
	// suspendedStatus: a signal suspended the job (its latest checkpoint
	// kept, for the next run to resume from).
	suspendedStatus = 4
	// canceledStatus: a signal cancelled the job instead of suspending it.
	canceledStatus = 5
	// lockedStatus: another process runs the job (ErrJobLocked).
	lockedStatus = 6
)

type options struct {
	brokers          string
	in, out          string
	checkpoints      string
	prefix           string
	jobName, jobID   string
	mode             string
	backend          string
	incremental      bool
	changelog        bool
	localRecovery    bool
	restartDelay     time.Duration
	firstRecord      bool
	padState         int
	stateDir         string
	interval         time.Duration
	timeout          time.Duration
	parallelism      int
	rate             float64
	restarts         int
	fresh            bool
	exitBeforeCommit int64
	killInInterval   int64
	failOnceAfter    int64
	cluster          cluster.Config
	// job is the job graph: count (the default) or operators
	// (operators_job.go).
	job           string
	ruleRate      float64
	asyncCapacity int
	// kafkaRetryTimeout, when set, is franz-go's RetryTimeout for the
	// count job's Kafka clients.
	kafkaRetryTimeout time.Duration
	// rest is the address of the coordinator's (or single process's)
	// REST API; "" for none.
	rest string
	// logLevel is the level of the process's log (-log-level).
	logLevel slog.Level
	// conf holds the -D keys (any key, through the config package).
	conf *sluice.Configuration
}

func main() {
	var o options
	flag.StringVar(&o.brokers, "brokers", os.Getenv("KAFKA_BROKERS"), "seed brokers, comma separated (default $KAFKA_BROKERS)")
	flag.StringVar(&o.in, "in", "", "input topic: records whose key is the key to count")
	flag.StringVar(&o.out, "out", "", "output topic: (key, count) records, the count as a decimal string")
	flag.StringVar(&o.checkpoints, "checkpoints", "", "checkpoint directory, shared by every run")
	flag.StringVar(&o.prefix, "prefix", "", "transactional id prefix of the sink")
	flag.StringVar(&o.jobName, "job-name", "chaosjob", "job name, from which the job id (its directory under -checkpoints) derives unless -job-id is set")
	flag.StringVar(&o.jobID, "job-id", "", "job id: the job's directory under -checkpoints (default: from -job-name)")
	flag.StringVar(&o.mode, "mode", "aligned", "checkpoints: aligned, unaligned, or mixed (aligned with a 20 ms timeout)")
	flag.StringVar(&o.backend, "backend", "rocksdb", "keyed state backend: rocksdb or heap")
	flag.BoolVar(&o.incremental, "incremental", true, "incremental RocksDB checkpoints (state.backend.incremental); false: full snapshots")
	flag.BoolVar(&o.changelog, "changelog", false, "RocksDB changelog checkpoints (state.backend.changelog.enabled): the write buffers frozen at each barrier beside the last materialization")
	flag.StringVar(&o.stateDir, "state-dir", os.TempDir(), "root of the RocksDB working directories")
	flag.BoolVar(&o.localRecovery, "local-recovery", false, "RocksDB local recovery (execution.state-recovery.from-local): each subtask's working directory stays <state-dir>/<job>/<operator>/<subtask> across attempts, so a subtask restarted in this process restores from its local copy")
	flag.IntVar(&o.padState, "pad-state", 0, "count job: keep this many random bytes of keyed state per key besides its count (a larger state to restore; 0: none)")
	flag.DurationVar(&o.restartDelay, "restart-delay", 500*time.Millisecond, "the delay of the -restarts fixed-delay restart strategy")
	flag.BoolVar(&o.firstRecord, "report-first-record", false, "count job: print \"first record processed subtask=S attempt=A opened=UNIXNANO arrived=UNIXNANO at=UNIXNANO\" when a counting subtask processes its first record of an attempt (opened: when the counting operator opened; arrived: when the record reached it; at: once counted and handed to the sink)")
	flag.DurationVar(&o.interval, "interval", 200*time.Millisecond, "checkpoint interval")
	flag.DurationVar(&o.timeout, "checkpoint-timeout", time.Minute, "checkpoint timeout; a checkpoint that expires fails the job (no tolerable failures)")
	flag.IntVar(&o.parallelism, "parallelism", 2, "parallelism of every operator")
	flag.Float64Var(&o.rate, "rate", 0, "records per second the job reads and counts, over all subtasks of this process (0: no limit)")
	flag.IntVar(&o.restarts, "restarts", 0, "in-process restarts (fixed delay -restart-delay) before the job fails")
	flag.BoolVar(&o.fresh, "fresh", false, "start from no state (sluice.WithFreshStart) although the job has checkpoints; by default a run resumes from the latest")
	flag.Int64Var(&o.exitBeforeCommit, "exit-before-commit", 0, "exit with status 3 before committing checkpoint N or later (0: never)")
	flag.Int64Var(&o.killInInterval, "kill-in-interval", 0, "SIGKILL the process in the first interval after checkpoint N's barrier, once subtask 0's sink has written a record into it (0: never)")
	flag.Int64Var(&o.failOnceAfter, "fail-once-after", 0, "fail the counting operator once, at its N-th record in this process (0: never)")
	flag.StringVar(&o.job, "job", "count", "the job graph: count (a running count per key) or operators (every DataStream operator, see operators_job.go)")
	flag.Float64Var(&o.ruleRate, "rule-rate", 0, "operators job: rules per second the broadcast side reads (0: no limit)")
	flag.IntVar(&o.asyncCapacity, "async-capacity", 4, "operators job: capacity of the async I/O operator")
	flag.DurationVar(&o.kafkaRetryTimeout, "kafka-retry-timeout", 0, "count job: how long franz-go retries one request before the connectors see its error (kgo.RetryTimeout; 0: franz-go's 30 s)")
	flag.StringVar(&o.rest, "rest", "", "serve the job's REST API on this address (the coordinator's or single process's; it logs \"api listening\" with the address)")
	flag.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "level of the log on stderr: DEBUG, INFO, WARN or ERROR")
	cc := cluster.Flags(flag.CommandLine)
	o.conf = sluice.ConfigFlags(flag.CommandLine)
	flag.Parse()
	o.cluster = *cc

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: o.logLevel}))
	liftRateOnSignal(log)
	var alreadyFinished atomic.Bool
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, log, &alreadyFinished)
	signaled := ctx.Err() != nil
	stop()
	if o.cluster.Role == cluster.RoleWorker {
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaosjob: %v\n", err)
			fmt.Println("worker failed")
			os.Exit(1)
		}
		fmt.Println("worker exited")
		return
	}
	switch {
	case err == nil && alreadyFinished.Load():
		fmt.Println("job already finished")
	case err == nil:
		fmt.Println("job finished")
	case signaled && errors.Is(err, sluice.ErrJobSuspended):
		fmt.Fprintf(os.Stderr, "chaosjob: %v\n", err)
		fmt.Println("job suspended")
		os.Exit(suspendedStatus)
	case signaled && errors.Is(err, sluice.ErrJobCanceled):
		fmt.Fprintf(os.Stderr, "chaosjob: %v\n", err)
		fmt.Println("job canceled")
		os.Exit(canceledStatus)
	case errors.Is(err, sluice.ErrJobLocked):
		fmt.Fprintf(os.Stderr, "chaosjob: %v\n", err)
		fmt.Println("job locked")
		os.Exit(lockedStatus)
	default:
		fmt.Fprintf(os.Stderr, "chaosjob: %v\n", err)
		fmt.Println("job failed")
		os.Exit(1)
	}
}

// run runs the job (a worker's part of it in the worker role);
// alreadyFinished is set when the job's recorded result says it had
// finished, so this run did nothing.
func run(ctx context.Context, o options, log *slog.Logger, alreadyFinished *atomic.Bool) error {
	if o.brokers == "" || o.in == "" || o.out == "" || o.checkpoints == "" || o.prefix == "" {
		return errors.New("-brokers (or KAFKA_BROKERS), -in, -out, -checkpoints and -prefix are required")
	}
	seeds := strings.Split(o.brokers, ",")
	final := &finalTracker{}
	opts := []sluice.Option{
		sluice.WithConfiguration(o.conf), // -D keys; the flags below override them
		sluice.WithJobName(o.jobName),
		cluster.With(o.cluster),
		sluice.WithParallelism(o.parallelism),
		sluice.WithLogger(log),
		sluice.WithBufferTimeout(5 * time.Millisecond),
		sluice.WithCheckpointing(o.interval, o.checkpoints),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Timeout = o.timeout }),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				fmt.Printf("checkpoint %d completed: unaligned=%t persisted=%d path=%s\n", s.ID, s.Unaligned, s.PersistedData, s.Path)
				if final.covers(s.ID) {
					fmt.Printf("final checkpoint %d completed\n", s.ID)
				}
			}
		}),
		sluice.WithRestoreListener(func(r sluice.RestoreInfo) {
			fmt.Printf("restored from checkpoint %d attempt=%d path=%s\n", r.CheckpointID, r.Attempt, r.Path)
		}),
	}
	if o.jobID != "" {
		opts = append(opts, sluice.WithJobID(o.jobID))
	}
	if o.fresh {
		opts = append(opts, sluice.WithFreshStart())
	}
	if o.restarts > 0 {
		opts = append(opts, sluice.WithRestartStrategy(sluice.FixedDelayRestart(o.restarts, o.restartDelay)))
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
		if o.localRecovery {
			opts = append(opts, sluice.WithStateBackend(rocksdb.Factory(o.stateDir, rocksdb.Options{LocalRecovery: true, DisableIncremental: !o.incremental, Changelog: o.changelog})))
		} else {
			opts = append(opts, sluice.WithStateBackend(rocksDBBackend(o.stateDir, o.incremental, o.changelog)))
		}
	case "heap":
	default:
		return fmt.Errorf("unknown -backend %q", o.backend)
	}
	env := sluice.NewEnvironment(opts...)
	var err error
	switch o.job {
	case "count":
		err = countJob(env, o, seeds, log, final)
	case "operators":
		err = operatorsJob(env, o, seeds, log, final)
	default:
		err = fmt.Errorf("unknown -job %q", o.job)
	}
	if err != nil {
		return err
	}
	if o.cluster.Role == cluster.RoleWorker {
		// A worker has no job handle: Execute runs its tasks until the job
		// ended.
		return env.Execute(ctx)
	}
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	if o.rest != "" {
		srv := api.New(api.Options{Addr: o.rest, Logger: log})
		srv.AddJob(job)
		if err := srv.Start(); err != nil {
			job.Cancel()
			<-job.Done()
			return err
		}
		defer srv.Close()
		log.Info("api listening", "address", srv.Addr())
	}
	err = job.Wait()
	if _, ok := job.PreviousResult(); ok && err == nil {
		alreadyFinished.Store(true)
	}
	return err
}

// countJob builds the count job: the running count of every key of -in,
// written to -out.
func countJob(env *sluice.Environment, o options, seeds []string, log *slog.Logger, final *finalTracker) error {
	var clientOpts []kgo.Opt
	if o.kafkaRetryTimeout > 0 {
		clientOpts = append(clientOpts, kgo.RetryTimeout(o.kafkaRetryTimeout))
	}
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(o.in),
		func(r *kgo.Record) (string, error) { return string(r.Key), nil },
		kafkasource.Bounded(), kafkasource.Logger(log), kafkasource.ClientOptions(clientOpts...))
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
		&runningCount{limit: newLimiter(o.rate), fail: &failOnce{at: o.failOnceAfter}, report: o.firstRecord, pad: o.padState}, sluice.Name("count"), sluice.UID("count"))
	out, err := kafkasink.NewSink(seeds, func(kc keyCount) (*kgo.Record, error) {
		return &kgo.Record{Topic: o.out, Key: []byte(kc.Key), Value: strconv.AppendInt(nil, kc.Count, 10)}, nil
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(o.prefix), kafkasink.Logger(log),
		kafkasink.ClientOptions(clientOpts...))
	if err != nil {
		return err
	}
	sluice.SinkTo(counts, injectedSink(o, final, out), sluice.Name("kafka-out"), sluice.UID("kafka-out"))
	return nil
}

// injectedSink wraps the job's Kafka sink: final watches for the final
// checkpoint, and -exit-before-commit or -kill-in-interval inject their
// crash.
func injectedSink[T any](o options, final *finalTracker, out sink.TwoPhaseCommitSink[T]) sink.TwoPhaseCommitSink[T] {
	var snk sink.TwoPhaseCommitSink[T] = &finalWatch[T]{TwoPhaseCommitSink: out, t: final}
	switch {
	case o.exitBeforeCommit > 0:
		snk = &exitBeforeCommit[T]{TwoPhaseCommitSink: snk, from: o.exitBeforeCommit}
	case o.killInInterval > 0:
		snk = &killInInterval[T]{TwoPhaseCommitSink: snk, after: o.killInInterval}
	}
	return snk
}

// finalTracker knows which checkpoint is the final one: the sink writers'
// end of input (Flush(true)) comes after every barrier of a periodic
// checkpoint and before the final checkpoint's, so the checkpoint that
// every writer snapshots after its end of input, in one attempt, is the
// final checkpoint.
type finalTracker struct {
	mu          sync.Mutex
	parallelism int
	ended       map[int]bool  // subtask -> its writer had its end of input
	after       map[int]int64 // subtask -> the first checkpoint it snapshot after that
}

// finalWatch is the Kafka sink reporting to its finalTracker.
type finalWatch[T any] struct {
	sink.TwoPhaseCommitSink[T]
	t *finalTracker
}

func (f *finalWatch[T]) NewWriter(ctx sink.WriterContext) (sink.Writer[T], error) {
	w, err := f.TwoPhaseCommitSink.NewWriter(ctx)
	if err != nil {
		return nil, err
	}
	t := f.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended == nil || t.parallelism != ctx.Parallelism {
		t.parallelism, t.ended, t.after = ctx.Parallelism, map[int]bool{}, map[int]int64{}
	}
	delete(t.ended, ctx.Subtask) // a new attempt's writer
	delete(t.after, ctx.Subtask)
	return &watchedWriter[T]{Writer: w, f: t, subtask: ctx.Subtask}, nil
}

// covers reports whether checkpoint id is the final checkpoint.
func (f *finalTracker) covers(id int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.parallelism == 0 || len(f.after) < f.parallelism {
		return false
	}
	for _, a := range f.after {
		if a != id {
			return false
		}
	}
	return true
}

type watchedWriter[T any] struct {
	sink.Writer[T]
	f       *finalTracker
	subtask int
}

func (w *watchedWriter[T]) Flush(endOfInput bool) error {
	err := w.Writer.Flush(endOfInput)
	if endOfInput && err == nil {
		w.f.mu.Lock()
		w.f.ended[w.subtask] = true
		w.f.mu.Unlock()
	}
	return err
}

func (w *watchedWriter[T]) PrepareCommit(id int64) ([][]byte, error) {
	w.f.mu.Lock()
	if _, ok := w.f.after[w.subtask]; w.f.ended[w.subtask] && !ok {
		w.f.after[w.subtask] = id
	}
	w.f.mu.Unlock()
	return w.Writer.(sink.PrecommittingWriter[T]).PrepareCommit(id)
}

func (w *watchedWriter[T]) SnapshotState(id int64) ([][]byte, error) {
	return w.Writer.(sink.StatefulWriter[T]).SnapshotState(id)
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
	fail  *failOnce
	// report: print when the subtask processes its first record of the
	// attempt (-report-first-record); first is that line, until printed.
	report bool
	first  string
	// pad: bytes of state per key besides the count (-pad-state).
	pad    int
	padded state.ValueState[[]byte]
}

// failOnce fails the at-th call of hit in the process, and no other.
type failOnce struct {
	at, n int64
	mu    sync.Mutex
}

func (f *failOnce) hit() error {
	if f == nil || f.at <= 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n++; f.n != f.at {
		return nil
	}
	fmt.Printf("injected failure at record %d\n", f.at)
	return fmt.Errorf("chaosjob: injected failure at record %d of this process (-fail-once-after)", f.at)
}

func (r *runningCount) Open(ctx *sluice.OperatorContext) error {
	if r.report {
		r.first = fmt.Sprintf("first record processed subtask=%d attempt=%d opened=%d", ctx.Subtask, ctx.Attempt, time.Now().UnixNano())
	}
	var err error
	r.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	if err != nil || r.pad == 0 {
		return err
	}
	r.padded, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[[]byte]{Name: "pad", Codec: codec.Bytes{}})
	return err
}

func (r *runningCount) ProcessElement(ctx *sluice.KeyedContext[string], _ string, out sluice.Collector[keyCount]) error {
	var arrived time.Time
	if r.first != "" {
		arrived = time.Now()
	}
	r.limit.wait()
	if err := r.fail.hit(); err != nil {
		return err
	}
	n, _, err := r.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := r.count.Update(n); err != nil {
		return err
	}
	if r.pad > 0 && n == 1 {
		// Random bytes: RocksDB's compression keeps their size.
		pad := make([]byte, r.pad)
		_, _ = cryptorand.Read(pad)
		if err := r.padded.Update(pad); err != nil {
			return err
		}
	}
	out.Collect(keyCount{Key: ctx.Key(), Count: n})
	if r.first != "" {
		fmt.Printf("%s arrived=%d at=%d\n", r.first, arrived.UnixNano(), time.Now().UnixNano())
		r.first = ""
	}
	return nil
}

// rateLifted is set by SIGUSR1: every limiter lets calls through at once.
var rateLifted atomic.Bool

// liftRateOnSignal lifts every limiter at the first SIGUSR1.
func liftRateOnSignal(log *slog.Logger) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		<-ch
		rateLifted.Store(true)
		log.Info("chaosjob: SIGUSR1, -rate lifted")
	}()
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
	if l == nil || rateLifted.Load() {
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
func rocksDBBackend(root string, incremental, changelog bool) runtime.StateBackendFactory {
	var n atomic.Int64
	return func(o runtime.StateBackendOptions) (state.KeyedBackend, error) {
		kgr := o.KeyGroups
		dir := filepath.Join(root, fmt.Sprintf("%s-%d-%d-%d", o.OperatorUID, o.Subtask, os.Getpid(), n.Add(1)))
		return rocksdb.New(rocksdb.Options{Dir: dir, MaxParallelism: o.MaxParallelism, KeyGroups: &kgr, DisableIncremental: !incremental,
			Changelog: changelog, Logger: o.Logger})
	}
}

// exitBeforeCommit is the Kafka sink with the crash injection: its
// committers exit the process before committing checkpoint from or a later
// one (committables restored from a checkpoint are committed normally).
type exitBeforeCommit[T any] struct {
	sink.TwoPhaseCommitSink[T]
	from int64
}

func (s *exitBeforeCommit[T]) NewCommitter(ctx sink.WriterContext) (sink.Committer, error) {
	c, err := s.TwoPhaseCommitSink.NewCommitter(ctx)
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

// beforeKill, when set, runs in the -kill-in-interval writer right before
// it kills the process (the operators job waits there for async calls in
// flight and prints how many).
var beforeKill func()

// killInInterval is the Kafka sink whose subtask 0 writer kills the
// process in the interval after checkpoint after's barrier, once a record
// of that interval is acknowledged: its transaction is left open, and no
// commit of that subtask is in flight (commits run on the same goroutine).
type killInInterval[T any] struct {
	sink.TwoPhaseCommitSink[T]
	after int64
}

func (s *killInInterval[T]) NewWriter(ctx sink.WriterContext) (sink.Writer[T], error) {
	w, err := s.TwoPhaseCommitSink.NewWriter(ctx)
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
	if beforeKill != nil {
		beforeKill()
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
