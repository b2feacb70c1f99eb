// Command kafka is the benchmark of Sluice's exactly-once Kafka path on a
// real broker: a keyed running count (RocksDB state, changelog
// checkpoints with -changelog, parallelism 2) from a 4-partition
// topic of 100-byte records to an output topic, exactly once.
// It prints two tables from one run:
//
//   - throughput: the job's records per second with each checkpoint
//     interval (-intervals), beside the broker's own limit measured in the
//     same run, in turn with the job: a franz-go producer, a
//     read_committed consumer, and a consumer piping the records into a
//     producer with no processing, plain and exactly once (a
//     transactional producer committing every interval);
//
//   - latency: the time from a record's produce to its count being
//     visible to a read_committed consumer, p50 / p99 / max, at each
//     steady rate (-rates) and checkpoint interval, after a warm-up, with
//     the median breakdown of the job's checkpoints (barrier to the
//     sink's pre-commit, _metadata, commit).
//
//     scripts/with-kafka go run ./bench/kafka
//     go run ./bench/kafka          # starts a broker with scripts/kafka, stops it after
//     go run ./bench/kafka -only latency -rates 100000 -intervals 100ms -duration 20s -warmup 10s
//
// With -kstreams (the jar of bench/kstreamsref: mvn -q -f bench/kstreamsref
// package) Kafka Streams runs the same keyed count, exactly_once_v2,
// committing every interval, beside Sluice in both tables, with its peak
// RSS.
//
// The defaults (20 K and 100 K records/s, 1 s and 100 ms checkpoints, 60 s
// after a 30 s warm-up each, 3 M records per throughput run, 3 rounds)
// take about 12 minutes.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
	_ "github.com/sluicehq/sluice/state/rocksdb" // state.backend.type rocksdb
)

const (
	partitions = 4
	valueSize  = 100
)

type config struct {
	records     int
	keys        int
	intervals   []time.Duration
	rates       []int
	parallelism int
	backend     string
	changelog   bool
	duration    time.Duration
	warmup      time.Duration
	repeat      int
	only        string
	cpuProfile  string
	// kstreams is the jar of bench/kstreamsref: when set, Kafka Streams
	// runs the same job beside Sluice in both tables.
	kstreams string
	// dynamic are -D key=value configuration keys for the job.
	dynamic []string
	// sinkLinger is the sink producer's linger (franz-go's ProducerLinger)
	// when not negative; negative keeps the sink's default.
	sinkLinger time.Duration
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var c config
	var intervals, rates string
	flag.IntVar(&c.records, "records", 3_000_000, "records of each throughput run")
	flag.IntVar(&c.keys, "keys", 10_000, "distinct keys")
	flag.StringVar(&intervals, "intervals", "1s,100ms", "checkpoint intervals of the job, comma separated")
	flag.StringVar(&rates, "rates", "20000,100000", "steady input rates of the latency runs, records/s, comma separated")
	flag.IntVar(&c.parallelism, "parallelism", 2, "parallelism of the job")
	flag.StringVar(&c.backend, "backend", "rocksdb", "state backend of the job (state.backend.type)")
	flag.BoolVar(&c.changelog, "changelog", false, "RocksDB changelog checkpoints (state.backend.changelog.enabled, off by default as in the engine): each checkpoint uploads what changed since the last barrier beside the last materialization, and writes nothing into RocksDB")
	flag.DurationVar(&c.duration, "duration", 60*time.Second, "how long each latency run is measured, after the warm-up")
	flag.DurationVar(&c.warmup, "warmup", 30*time.Second, "how long each latency run produces before it is measured")
	flag.IntVar(&c.repeat, "repeat", 3, "rounds of the throughput runs (the table shows medians and ranges)")
	flag.StringVar(&c.only, "only", "", "run only the \"throughput\" or the \"latency\" table")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the first latency run to this file")
	flag.StringVar(&c.kstreams, "kstreams", "", "jar of bench/kstreamsref (mvn -q -f bench/kstreamsref package): run the same job on Kafka Streams (exactly_once_v2) beside Sluice's in both tables")
	flag.DurationVar(&c.sinkLinger, "sink-linger", -1, "the sink producer's linger (franz-go ProducerLinger, Kafka's linger.ms); negative: the sink's default")
	flag.Var((*multi)(&c.dynamic), "D", "key=value: a configuration key for the job, such as execution.checkpointing.max-concurrent-checkpoints=2 (repeatable)")
	flag.Parse()
	var err error
	if c.intervals, err = parseList(intervals, time.ParseDuration); err == nil {
		c.rates, err = parseList(rates, strconv.Atoi)
	}
	if err == nil && c.only != "" && c.only != "throughput" && c.only != "latency" {
		err = fmt.Errorf("-only %q: want throughput or latency", c.only)
	}
	if err == nil && c.kstreams != "" {
		if _, serr := os.Stat(c.kstreams); serr != nil {
			err = fmt.Errorf("-kstreams: %w (build it with mvn -q -f bench/kstreamsref package)", serr)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench/kafka: %v\n", err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintf(os.Stderr, "bench/kafka: %v\n", err)
		os.Exit(1)
	}
}

func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for f := range strings.SplitSeq(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("list %q: %w", s, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// bench is one run's broker, topics and scratch directory.
type bench struct {
	config
	ctx    context.Context
	seeds  []string
	adm    *kadm.Client
	suffix string
	topics []string
	dir    string
	runs   int
}

func (b *bench) topic(name string) (string, error) {
	t := "bench-" + name + "-" + b.suffix
	if _, err := b.adm.CreateTopic(b.ctx, partitions, 1, nil, t); err != nil {
		return "", fmt.Errorf("create topic %s: %w", t, err)
	}
	b.topics = append(b.topics, t)
	return t, nil
}

// next returns a fresh output topic, checkpoint directory and
// transactional id prefix for a job or a pipe.
func (b *bench) next(kind string) (out, dir, prefix string, err error) {
	b.runs++
	out, err = b.topic(fmt.Sprintf("%s%d", kind, b.runs))
	return out, filepath.Join(b.dir, fmt.Sprint(b.runs)), fmt.Sprintf("bench-%s-%s-%d", kind, b.suffix, b.runs), err
}

func run(c config) error {
	seeds, stop, err := broker()
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer admCl.Close()
	dir, err := os.MkdirTemp("", "sluice-bench-kafka-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{config: c, ctx: ctx, seeds: seeds, adm: kadm.NewClient(admCl), suffix: randomSuffix(), dir: dir}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		_, _ = b.adm.DeleteTopics(dctx, b.topics...)
	}()
	backend := c.backend
	if backend == "rocksdb" && c.changelog {
		backend += " (changelog checkpoints)"
	}
	fmt.Printf("Kafka at %s; keyed running count, exactly once, %s state, parallelism %d; %d partitions, records of %d bytes over %d keys; GOMAXPROCS %d\n",
		strings.Join(seeds, ","), backend, c.parallelism, partitions, valueSize, c.keys, runtime.GOMAXPROCS(0))
	if len(c.dynamic) > 0 {
		fmt.Printf("configuration: %s\n", strings.Join(c.dynamic, " "))
	}
	if c.only != "latency" {
		if err := b.throughput(); err != nil {
			return err
		}
	}
	if c.only != "throughput" {
		if err := b.latencyTable(); err != nil {
			return err
		}
	}
	return nil
}

// throughput prints the throughput table: the broker's limits and the job
// at each interval, in turn, -repeat rounds.
func (b *bench) throughput() error {
	in, err := b.topic("in")
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := produce(b.ctx, b.seeds, in, b.records, b.keys, 0, 0); err != nil {
		return err
	}
	producer := rate(b.records, time.Since(start))
	var consRates, pipeRates []float64
	eoRates := make([][]float64, len(b.intervals))
	jobRates := make([][]float64, len(b.intervals))
	ksRates := make([][]float64, len(b.intervals))
	var ksRSS int64
	for round := range b.repeat {
		start = time.Now()
		if n, err := consume(b.ctx, b.seeds, in, b.records, nil); err != nil {
			return err
		} else if n != b.records {
			return fmt.Errorf("consumed %d records, want %d", n, b.records)
		}
		consRates = append(consRates, rate(b.records, time.Since(start)))
		out, _, _, err := b.next("pipe")
		if err != nil {
			return err
		}
		start = time.Now()
		if err := pipe(b.ctx, b.seeds, in, out, b.records, 0, ""); err != nil {
			return err
		}
		pipeRates = append(pipeRates, rate(b.records, time.Since(start)))
		for i, iv := range b.intervals {
			out, _, prefix, err := b.next("eopipe")
			if err != nil {
				return err
			}
			start = time.Now()
			if err := pipe(b.ctx, b.seeds, in, out, b.records, iv, prefix); err != nil {
				return err
			}
			eoRates[i] = append(eoRates[i], rate(b.records, time.Since(start)))
			if err := b.expect(out, b.records); err != nil {
				return fmt.Errorf("exactly-once pipe: %w", err)
			}

			out, dir, prefix, err := b.next("count")
			if err != nil {
				return err
			}
			start = time.Now()
			if _, err := b.runJob(b.ctx, iv, in, out, dir, prefix, true); err != nil {
				return err
			}
			jobRates[i] = append(jobRates[i], rate(b.records, time.Since(start)))
			if err := b.expect(out, b.records); err != nil {
				return fmt.Errorf("job: %w", err)
			}
			fmt.Fprintf(os.Stderr, "round %d, %v checkpoints: exactly-once pipe %.0f, job %.0f records/s\n",
				round+1, iv, eoRates[i][round], jobRates[i][round])
			if b.kstreams != "" {
				r, rss, err := b.throughputKStreams(in, iv)
				if err != nil {
					return err
				}
				ksRates[i], ksRSS = append(ksRates[i], r), max(ksRSS, rss)
				fmt.Fprintf(os.Stderr, "round %d, %v commits: kafka streams %.0f records/s, peak RSS %d MiB\n", round+1, iv, r, rss>>20)
			}
		}
	}
	fmt.Printf("\nthroughput, %d records a run, median and range of %d rounds run in turn:\n", b.records, b.repeat)
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "run\trecords/s\trange\tshare of the pipe\t")
	line := func(name string, xs []float64, of []float64) {
		share := ""
		if of != nil {
			share = fmt.Sprintf("%.0f%%", 100*median(xs)/median(of))
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.0f-%.0f\t%s\t\n", name, median(xs), slices.Min(xs), slices.Max(xs), share)
	}
	line("broker: franz-go producer (idempotent, acks=all)", []float64{producer}, nil)
	line("broker: franz-go consumer (read_committed)", consRates, nil)
	line("broker: consumer -> producer pipe (*)", pipeRates, nil)
	for i, iv := range b.intervals {
		line(fmt.Sprintf("broker: consumer -> transactional producer, commit every %v (*)", iv), eoRates[i], pipeRates)
		line(fmt.Sprintf("sluice: keyed count, exactly once, %v checkpoints", iv), jobRates[i], pipeRates)
		if b.kstreams != "" {
			line(fmt.Sprintf("kafka streams: keyed count, exactly_once_v2, %v commits (**)", iv), ksRates[i], pipeRates)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(b.intervals) > 1 {
		fmt.Printf("job at %v / at %v checkpoints: %.2f\n", b.intervals[len(b.intervals)-1], b.intervals[0],
			median(jobRates[len(b.intervals)-1])/median(jobRates[0]))
	}
	fmt.Println("(*) writes, as the job does, a record of the input key and 16 bytes per input record")
	if b.kstreams != "" {
		fmt.Printf("(**) bench/kstreamsref, Kafka Streams 4.1 in its own JVM (defaults), timed from RUNNING to the last record visible; peak RSS %d MiB\n", ksRSS>>20)
	}
	return nil
}

// expect checks that topic holds n committed records.
func (b *bench) expect(topic string, n int) error {
	got, err := consume(b.ctx, b.seeds, topic, n, nil)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("%s holds %d committed records, want %d", topic, got, n)
	}
	return nil
}

// latencyTable runs the job at every rate and interval and prints the
// latency table.
func (b *bench) latencyTable() error {
	type cell struct {
		system   string
		rate     int
		interval time.Duration
		res      latencyResult
	}
	systems := []string{"sluice"}
	if b.kstreams != "" {
		systems = append(systems, "kafka streams")
	}
	var cells []cell
	for _, r := range b.rates {
		for _, iv := range b.intervals {
			for _, sys := range systems {
				res, err := b.latency(r, iv, sys == "kafka streams")
				if err != nil {
					return fmt.Errorf("%s latency at %d records/s, %v checkpoints: %w", sys, r, iv, err)
				}
				fmt.Fprintf(os.Stderr, "%s, %d records/s, %v: p50 %v p99 %v max %v\n", sys, r, iv, ms(res.p50), ms(res.p99), ms(res.max))
				cells = append(cells, cell{sys, r, iv, res})
			}
		}
	}
	fmt.Printf("\nend-to-end latency, produce -> visible to a read_committed consumer, %v after a %v warm-up at a steady rate:\n", b.duration, b.warmup)
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "system\trecords/s\tcheckpoints\tp50 ms\tp99 ms\tmax ms\tsamples\tnot visible\tcompleted\tbarrier\tsync\tasync\t_metadata\tcommit\t")
	for _, c := range cells {
		r := c.res
		if c.system != "sluice" {
			fmt.Fprintf(w, "%s\t%d\t%v\t%s\t%s\t%s\t%d\t%d\t-\t-\t-\t-\t-\t-\t\n", c.system, c.rate, c.interval, ms(r.p50), ms(r.p99), ms(r.max),
				r.samples, r.unseen)
			continue
		}
		fmt.Fprintf(w, "%s\t%d\t%v\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", c.system, c.rate, c.interval, ms(r.p50), ms(r.p99), ms(r.max),
			r.samples, r.unseen, r.checkpoints, ms(r.barrier), ms(r.sync), ms(r.async), ms(r.metadata), ms(r.commit))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, c := range cells {
		if c.res.detail != "" {
			fmt.Printf("\n%s, %d records/s, %v checkpoints; %s\n%s", c.system, c.rate, c.interval, c.res.gc, c.res.detail)
		}
	}
	fmt.Println("(not visible: records produced but not visible 10 intervals + 10 s after the last was produced; when not 0 the job fell behind the rate and the percentiles are of the records it caught up with)")
	if b.kstreams != "" {
		fmt.Println("(kafka streams: bench/kstreamsref, exactly_once_v2, its commit.interval.ms at the interval, started before the input: a transaction commit per interval, as Sluice's per checkpoint)")
	}
	fmt.Println("(the checkpoint columns, in ms, are medians over the measured checkpoints of the parts of its critical path " +
		"(checkpoint.Phases): the barrier's way to the last task to acknowledge, that task's synchronous part (the state backend's " +
		"and the sink's pre-commit) and asynchronous part, the _metadata written and the notifications sent; then the sink's mean commit, EndTxn)")
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianDuration(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// broker returns KAFKA_BROKERS, or starts a broker with scripts/kafka in a
// run directory of its own and returns a function that stops it.
func broker() ([]string, func(), error) {
	if v := strings.TrimSpace(os.Getenv("KAFKA_BROKERS")); v != "" {
		return strings.Split(v, ","), func() {}, nil
	}
	script, err := findScript()
	if err != nil {
		return nil, nil, fmt.Errorf("KAFKA_BROKERS is unset and %w", err)
	}
	runDir, err := os.MkdirTemp("", "sluice-bench-kafka-run-")
	if err != nil {
		return nil, nil, err
	}
	env := append(os.Environ(), "KAFKA_RUN_DIR="+runDir)
	fmt.Fprintln(os.Stderr, "KAFKA_BROKERS is unset: starting a broker with scripts/kafka start")
	cmd := exec.Command(script, "start")
	cmd.Env, cmd.Stderr = env, os.Stderr
	out, err := cmd.Output()
	stop := func() {
		c := exec.Command(script, "stop")
		c.Env, c.Stderr = env, os.Stderr
		_ = c.Run()
		os.RemoveAll(runDir)
	}
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("scripts/kafka start: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	addr, ok := strings.CutPrefix(lines[len(lines)-1], "KAFKA_BROKERS=")
	if !ok {
		stop()
		return nil, nil, fmt.Errorf("scripts/kafka start printed %q, want KAFKA_BROKERS=host:port last", out)
	}
	return []string{addr}, stop, nil
}

func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "kafka")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/kafka is not found from the working directory up: run from the repository")
		}
		dir = parent
	}
}

func keyOf(i, keys int) []byte { return fmt.Appendf(nil, "key-%06d", i%keys) }

// produce writes n records of valueSize bytes (the first 8 the time of
// producing, in Unix nanoseconds) round robin over keys, as fast as the
// broker takes them, or at perSecond for d when perSecond > 0.
func produce(ctx context.Context, seeds []string, topic string, n, keys, perSecond int, d time.Duration) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(200_000), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var firstErr atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	filler := make([]byte, valueSize)
	_, _ = rand.Read(filler)
	mk := func(i int) *kgo.Record {
		v := make([]byte, valueSize)
		copy(v, filler)
		binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
		return &kgo.Record{Key: keyOf(i, keys), Value: v}
	}
	produced := n
	if perSecond <= 0 {
		for i := range n {
			cl.Produce(ctx, mk(i), promise)
		}
	} else {
		// Paced in 10 ms steps: by each step, as many records as the
		// rate says for the time since the start.
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		start := time.Now()
		end := start.Add(d)
		produced = 0
		for now := start; now.Before(end); {
			due := int(float64(perSecond) * now.Sub(start).Seconds())
			for ; produced < due; produced++ {
				cl.Produce(ctx, mk(produced), promise)
			}
			select {
			case now = <-t.C:
			case <-ctx.Done():
				return produced, ctx.Err()
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return produced, err
	}
	if p := firstErr.Load(); p != nil {
		return produced, fmt.Errorf("produce to %s: %w", topic, *p)
	}
	return produced, nil
}

// consume reads topic from the start under read_committed until it has n
// records, calling fn (if set) with each, and returns how many it read.
func consume(ctx context.Context, seeds []string, topic string, n int, fn func(*kgo.Record)) (int, error) {
	return consumeWith(ctx, seeds, topic, n, func(fs kgo.Fetches) { fs.EachRecord(fn) }, fn == nil)
}

// consumeWith reads topic from the start under read_committed until it
// has n records, handing every poll's fetches to each (unless count
// only).
func consumeWith(ctx context.Context, seeds []string, topic string, n int, each func(kgo.Fetches), countOnly bool) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return got, fmt.Errorf("consume %s: %d of %d records: %w", topic, got, n, err)
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.Canceled) {
			return got, fmt.Errorf("consume %s: %w", topic, err)
		}
		got += fs.NumRecords()
		if !countOnly {
			each(fs)
		}
	}
	return got, nil
}

// pipe moves n records from in to out: a consumer and a producer, no
// processing. Each output record has the key and the first 16 bytes of
// the value of its input record: the size of the job's output records.
// With a transactional id prefix the producer is transactional and
// commits every interval (flush, EndTxn, begin the next), as an
// exactly-once job without state would.
func pipe(ctx context.Context, seeds []string, in, out string, n int, interval time.Duration, prefix string) error {
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(out),
		kgo.MaxBufferedRecords(200_000), kgo.ProducerLinger(5 * time.Millisecond)}
	if prefix != "" {
		opts = append(opts, kgo.TransactionalID(prefix))
	}
	p, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer p.Close()
	var firstErr atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			firstErr.CompareAndSwap(nil, &err)
		}
	}
	var began time.Time
	var txnErr error
	end := func() error {
		if err := p.Flush(ctx); err != nil {
			return err
		}
		return p.EndTransaction(ctx, kgo.TryCommit)
	}
	if _, err := consumeWith(ctx, seeds, in, n, func(fs kgo.Fetches) {
		if txnErr != nil {
			return
		}
		if prefix != "" && began.IsZero() {
			if txnErr = p.BeginTransaction(); txnErr != nil {
				return
			}
			began = time.Now()
		}
		fs.EachRecord(func(r *kgo.Record) {
			p.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value[:min(16, len(r.Value))]}, promise)
		})
		if prefix != "" && time.Since(began) >= interval {
			txnErr = end()
			began = time.Time{}
		}
	}, false); err != nil {
		return err
	}
	if txnErr != nil {
		return fmt.Errorf("transactional pipe: %w", txnErr)
	}
	if prefix != "" && !began.IsZero() {
		if err := end(); err != nil {
			return fmt.Errorf("transactional pipe: %w", err)
		}
	} else if err := p.Flush(ctx); err != nil {
		return err
	}
	if e := firstErr.Load(); e != nil {
		return *e
	}
	return nil
}

// event is what the job reads: a key and when its record was produced.
type event struct {
	Key  string
	Sent int64
}

// eventCodec encodes events on the job's keyed exchange: the key,
// length-prefixed, then the time.
type eventCodec struct{}

func (eventCodec) Append(dst []byte, e event) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
	dst = append(dst, e.Key...)
	return binary.BigEndian.AppendUint64(dst, uint64(e.Sent)), nil
}

func (eventCodec) Decode(src []byte) (event, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || uint64(len(src)-k) != n+8 {
		return event{}, fmt.Errorf("event of %d bytes: malformed", len(src))
	}
	return event{Key: string(src[k : k+int(n)]), Sent: int64(binary.BigEndian.Uint64(src[k+int(n):]))}, nil
}

// counted is what the job writes.
type counted struct {
	Key   string
	Count int64
	Sent  int64
}

type countPerKey struct {
	count state.ValueState[int64]
}

func (c *countPerKey) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countPerKey) ProcessElement(ctx *sluice.KeyedContext[string], e event, out sluice.Collector[counted]) error {
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(counted{Key: e.Key, Count: n, Sent: e.Sent})
	return nil
}

// jobRun is what a job run saw: its completed checkpoints (from
// measureFrom on) and its sink.
type jobRun struct {
	mu          sync.Mutex
	measureFrom time.Time
	completed   []checkpoint.Stats
	sink        *kafkasink.Sink[counted]
}

// runJob runs the keyed count from in to out, exactly once with
// checkpoints every interval: bounded (to the end offsets at its start)
// when bounded, else until ctx ends.
func (b *bench) runJob(ctx context.Context, interval time.Duration, in, out, dir, prefix string, bounded bool) (*jobRun, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	jr := &jobRun{}
	conf := sluice.NewConfiguration()
	if err := conf.Set("state.backend.type", b.backend); err != nil {
		return nil, err
	}
	if err := conf.Set("state.backend.rocksdb.localdir", filepath.Join(dir, "rocksdb")); err != nil {
		return nil, err
	}
	if b.backend == "rocksdb" {
		if err := conf.Set("state.backend.changelog.enabled", strconv.FormatBool(b.changelog)); err != nil {
			return nil, err
		}
	}
	for _, d := range b.dynamic {
		k, v, ok := strings.Cut(d, "=")
		if !ok {
			return nil, fmt.Errorf("-D %q: want key=value", d)
		}
		if err := conf.Set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return nil, fmt.Errorf("-D %q: %w", d, err)
		}
	}
	env := sluice.NewEnvironment(
		sluice.WithConfiguration(conf),
		sluice.WithJobName("bench-kafka"),
		sluice.WithParallelism(b.parallelism),
		sluice.WithLogger(quiet),
		sluice.WithCheckpointing(interval, filepath.Join(dir, "checkpoints")),
		sluice.WithRestartStrategy(sluice.NoRestart()),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status != checkpoint.StatusCompleted {
				return
			}
			jr.mu.Lock()
			defer jr.mu.Unlock()
			if !jr.measureFrom.IsZero() && s.TriggerTime.After(jr.measureFrom) {
				jr.completed = append(jr.completed, s)
			}
		}),
	)
	opts := []kafkasource.Option{kafkasource.Logger(quiet)}
	if bounded {
		opts = append(opts, kafkasource.Bounded())
	}
	src, err := kafkasource.NewSource(b.seeds, kafkasource.Topics(in), func(r *kgo.Record) (event, error) {
		if len(r.Value) < 8 {
			return event{}, fmt.Errorf("value of %d bytes, want at least 8", len(r.Value))
		}
		return event{Key: string(r.Key), Sent: int64(binary.BigEndian.Uint64(r.Value))}, nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	events := sluice.FromSource(env, src, sluice.NoWatermarks[event](), "in", sluice.UID("in"), sluice.WithCodec[event](eventCodec{}))
	counts := sluice.Process[string, event, counted](sluice.KeyBy(events, func(e event) string { return e.Key }),
		&countPerKey{}, sluice.Name("count"), sluice.UID("count"))
	sinkOpts := []kafkasink.Option{kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(prefix), kafkasink.Logger(quiet)}
	if b.sinkLinger >= 0 {
		sinkOpts = append(sinkOpts, kafkasink.ClientOptions(kgo.ProducerLinger(b.sinkLinger)))
	}
	snk, err := kafkasink.NewSink(b.seeds, func(v counted) (*kgo.Record, error) {
		b := make([]byte, 16)
		binary.BigEndian.PutUint64(b, uint64(v.Count))
		binary.BigEndian.PutUint64(b[8:], uint64(v.Sent))
		return &kgo.Record{Topic: out, Key: []byte(v.Key), Value: b}, nil
	}, sinkOpts...)
	if err != nil {
		return nil, err
	}
	jr.sink = snk
	sluice.SinkTo(counts, snk, sluice.Name("out"), sluice.UID("out"))
	if !bounded {
		jr.measureFrom = time.Now() // the caller drops the warm-up's
	}
	err = env.Execute(ctx)
	if err != nil && !((errors.Is(err, sluice.ErrJobCanceled) || errors.Is(err, context.Canceled)) && !bounded) {
		return nil, fmt.Errorf("job: %w", err)
	}
	return jr, nil
}

type latencyResult struct {
	p50, p99, max time.Duration
	samples       int
	// unseen counts the records produced but not visible by the end
	// (10 intervals + 10 s after the last was produced): the job did not
	// keep up with the rate.
	unseen      int64
	checkpoints int
	// Medians over the measured checkpoints of the parts of
	// checkpoint.Phases: the barrier's way to the task whose
	// acknowledgement came last (and its alignment), its synchronous and
	// asynchronous parts, the coordinator's _metadata and notifications.
	barrier, sync, async, metadata time.Duration
	// commit is the sink's mean commit over the whole run.
	commit time.Duration
	// detail is where the records' time went and the distributions of
	// the checkpoints' parts (breakdown); gc the collector's work while
	// measured.
	detail string
	gc     string
}

// latency runs the job unbounded while records are produced at rate for
// the warm-up and the duration, and measures, for each output record of
// an input record produced after the warm-up, the time from its input
// record's production to its being read under read_committed.
//
// With kstreams the job is the Kafka Streams reference instead, committing
// every interval; its result has no checkpoint parts.
func (b *bench) latency(rate int, interval time.Duration, kstreams bool) (latencyResult, error) {
	ctx := b.ctx
	in, err := b.topic(fmt.Sprintf("lat-in%d", b.runs+1))
	if err != nil {
		return latencyResult{}, err
	}
	out, dir, prefix, err := b.next("lat-out")
	if err != nil {
		return latencyResult{}, err
	}
	if b.cpuProfile != "" {
		f, err := os.Create(b.cpuProfile)
		if err != nil {
			return latencyResult{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return latencyResult{}, err
		}
		defer pprof.StopCPUProfile()
		b.cpuProfile = ""
	}
	jctx, stopJob := context.WithCancel(ctx)
	defer stopJob()
	type jobDone struct {
		jr  *jobRun
		err error
	}
	jobs := make(chan jobDone, 1)
	var ks *ksRun
	if kstreams {
		if ks, err = b.startKStreams(ctx, in, out, prefix, dir, interval); err != nil {
			return latencyResult{}, err
		}
		go func() {
			<-ks.exited
			jobs <- jobDone{nil, fmt.Errorf("kafka streams exited (%v)\n%s", ks.err, ks.stderr.tail(20))}
		}()
	} else {
		go func() {
			jr, err := b.runJob(jctx, interval, in, out, dir, prefix, false)
			jobs <- jobDone{jr, err}
		}()
	}
	type produced struct {
		n   int
		err error
	}
	prodDone := make(chan produced, 1)
	begin := time.Now()
	warm := begin.Add(b.warmup)
	go func() {
		n, err := produce(ctx, b.seeds, in, 0, b.keys, rate, b.warmup+b.duration)
		prodDone <- produced{n, err}
	}()
	var mu sync.Mutex
	var lat []time.Duration
	var seenAt []sample
	var seen atomic.Int64
	cctx, stopConsume := context.WithCancel(ctx)
	defer stopConsume()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		_, _ = consume(cctx, b.seeds, out, int(^uint(0)>>1), func(r *kgo.Record) {
			seen.Add(1)
			if len(r.Value) < 16 {
				return
			}
			sent := int64(binary.BigEndian.Uint64(r.Value[8:]))
			if sent >= warm.UnixNano() {
				now := time.Now().UnixNano()
				mu.Lock()
				lat = append(lat, time.Duration(now-sent))
				seenAt = append(seenAt, sample{sent, now})
				mu.Unlock()
			}
		})
	}()
	gcAtWarm := make(chan gcSnapshot, 1)
	go func() {
		select {
		case <-time.After(time.Until(warm)):
			gcAtWarm <- takeGC()
		case <-ctx.Done():
		}
	}()
	p := <-prodDone
	gcAfter := takeGC()
	var gcBefore gcSnapshot
	select {
	case gcBefore = <-gcAtWarm:
	default:
	}
	if p.err != nil {
		return latencyResult{}, p.err
	}
	// Everything produced is visible within a few checkpoint intervals,
	// unless the job cannot keep up with the rate: then the run reports
	// the records it did not see (and the percentiles of those it saw,
	// which understate the backlog's).
	wait := 10*interval + 10*time.Second
	deadline := time.Now().Add(wait)
	for seen.Load() < int64(p.n) && time.Now().Before(deadline) {
		select {
		case j := <-jobs:
			return latencyResult{}, fmt.Errorf("the job ended: %v", j.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	unseen := int64(p.n) - seen.Load()
	stopConsume()
	<-consumed
	var j jobDone
	if ks != nil {
		if _, err := ks.stop(); err != nil {
			return latencyResult{}, err
		}
	} else {
		stopJob()
		if j = <-jobs; j.err != nil {
			return latencyResult{}, j.err
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lat) == 0 {
		return latencyResult{}, errors.New("no latency samples")
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	res := latencyResult{p50: pct(0.50), p99: pct(0.99), max: lat[len(lat)-1], samples: len(lat), unseen: max(unseen, 0)}
	if j.jr == nil {
		return res, nil
	}
	var barrier, sync, async, meta []time.Duration
	j.jr.mu.Lock()
	for _, s := range j.jr.completed {
		if s.TriggerTime.Before(warm) {
			continue
		}
		ph := s.Phases
		barrier = append(barrier, ph.TriggerToSource+ph.BarrierToLast+ph.Alignment)
		sync = append(sync, ph.Sync)
		async = append(async, ph.Async+ph.Ack)
		meta = append(meta, ph.Metadata+ph.Notify)
	}
	j.jr.mu.Unlock()
	res.checkpoints = len(barrier)
	res.detail = breakdown(j.jr.completed, seenAt, warm)
	res.gc = gcAfter.since(gcBefore)
	res.barrier, res.sync, res.async, res.metadata = medianDuration(barrier), medianDuration(sync), medianDuration(async), medianDuration(meta)
	if m := j.jr.sink.Metrics(); m.TransactionsCommitted > 0 {
		res.commit = m.CommitLatencySum / time.Duration(m.TransactionsCommitted)
	}
	return res, nil
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
