// Command kafka benchmarks Sluice against a real Kafka broker and prints a
// table: a keyed running count from a 4-partition topic of 100-byte
// records to an output topic, exactly once with 1 s checkpoints and
// parallelism 2, in records per second; beside it the broker's own limit
// measured in the same run (a franz-go producer, a franz-go consumer, and
// a consumer piping the same records into a producer with no processing);
// and the end-to-end latency from produce to visible for a read_committed
// consumer, p50 and p99, at 1 s checkpoints.
//
//	KAFKA_BROKERS=127.0.0.1:9092 go run ./bench/kafka
//	go run ./bench/kafka          # starts a broker with scripts/kafka, stops it after
//
// Flags size the runs (-records, -keys, -latency-rate, -latency-duration).
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
)

const (
	partitions = 4
	valueSize  = 100
)

type config struct {
	records         int
	keys            int
	interval        time.Duration
	parallelism     int
	latencyRate     int
	latencyDuration time.Duration
	latencyWarmup   time.Duration
	cpuProfile      string
	repeat          int
}

func main() {
	var c config
	flag.IntVar(&c.records, "records", 5_000_000, "records of the throughput runs")
	flag.IntVar(&c.keys, "keys", 10_000, "distinct keys")
	flag.DurationVar(&c.interval, "interval", time.Second, "checkpoint interval of the Sluice job")
	flag.IntVar(&c.parallelism, "parallelism", 2, "parallelism of the Sluice job")
	flag.IntVar(&c.latencyRate, "latency-rate", 5_000, "records per second produced during the latency run")
	flag.DurationVar(&c.latencyDuration, "latency-duration", 20*time.Second, "how long the latency run produces")
	flag.DurationVar(&c.latencyWarmup, "latency-warmup", 3*time.Second, "latency samples of the first part of the run are dropped")
	flag.IntVar(&c.repeat, "repeat", 3, "rounds of the consumer, pipe and job runs (the table shows medians)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the Sluice throughput run to this file")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintf(os.Stderr, "bench/kafka: %v\n", err)
		os.Exit(1)
	}
}

func run(c config) error {
	seeds, stop, err := broker()
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	suffix := randomSuffix()
	var topics []string
	topic := func(name string) (string, error) {
		t := "bench-" + name + "-" + suffix
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, t); err != nil {
			return "", fmt.Errorf("create topic %s: %w", t, err)
		}
		topics = append(topics, t)
		return t, nil
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		_, _ = adm.DeleteTopics(dctx, topics...)
	}()

	fmt.Printf("Kafka at %s; %d records of %d bytes over %d keys, %d partitions; %d cores (GOMAXPROCS)\n\n",
		strings.Join(seeds, ","), c.records, valueSize, c.keys, partitions, runtimeProcs())
	in, err := topic("in")
	if err != nil {
		return err
	}
	var rows []row

	// The broker's limit, measured on the same input.
	start := time.Now()
	if _, err := produce(ctx, seeds, in, c.records, c.keys, 0, 0); err != nil {
		return err
	}
	rows = append(rows, row{"broker limit: franz-go producer (idempotent, acks=all)", rate(c.records, time.Since(start)), ""})
	// The consumer, the pipe and the job, alternately, -repeat times; the
	// table shows medians.
	var consRates, pipeRates, jobRates []float64
	var checkpoints []int64
	chk, err := os.MkdirTemp("", "sluice-bench-kafka-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(chk)
	for i := range c.repeat {
		start = time.Now()
		if n, err := consume(ctx, seeds, in, c.records, nil); err != nil {
			return err
		} else if n != c.records {
			return fmt.Errorf("consumed %d records, want %d", n, c.records)
		}
		consRates = append(consRates, rate(c.records, time.Since(start)))

		pipeOut, err := topic(fmt.Sprint("pipe", i))
		if err != nil {
			return err
		}
		start = time.Now()
		if err := pipe(ctx, seeds, in, pipeOut, c.records); err != nil {
			return err
		}
		pipeRates = append(pipeRates, rate(c.records, time.Since(start)))

		jobOut, err := topic(fmt.Sprint("count", i))
		if err != nil {
			return err
		}
		if c.cpuProfile != "" && i == 0 {
			f, err := os.Create(c.cpuProfile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer f.Close()
		}
		start = time.Now()
		stats, err := runJob(ctx, c, seeds, in, jobOut, filepath.Join(chk, fmt.Sprint("throughput", i)), true, fmt.Sprintf("bench-eos-%s-%d", suffix, i))
		if err != nil {
			return err
		}
		elapsed := time.Since(start)
		pprof.StopCPUProfile()
		if n, err := consume(ctx, seeds, jobOut, c.records, nil); err != nil {
			return err
		} else if n != c.records {
			return fmt.Errorf("the job committed %d output records, want %d", n, c.records)
		}
		jobRates = append(jobRates, rate(c.records, elapsed))
		checkpoints = append(checkpoints, stats.completed.Load())
		fmt.Fprintf(os.Stderr, "round %d: consumer %.0f, pipe %.0f, sluice %.0f records/s\n", i+1, consRates[i], pipeRates[i], jobRates[i])
	}
	rows = append(rows, row{"broker limit: franz-go consumer (read_committed)", median(consRates), spread(consRates)})
	pipeRate := median(pipeRates)
	rows = append(rows, row{"broker limit: consumer -> producer pipe, no processing (*)", pipeRate, spread(pipeRates)})
	jobRate := median(jobRates)
	rows = append(rows, row{fmt.Sprintf("sluice: keyed count, exactly-once, %v checkpoints, parallelism %d", c.interval, c.parallelism),
		jobRate, fmt.Sprintf("%s; %.0f%% of the pipe; %v checkpoints", spread(jobRates), 100*jobRate/pipeRate, checkpoints)})

	// Latency: produce to visible under read_committed.
	latIn, err := topic("lat-in")
	if err != nil {
		return err
	}
	latOut, err := topic("lat-out")
	if err != nil {
		return err
	}
	p50, p99, samples, err := latency(ctx, c, seeds, latIn, latOut, filepath.Join(chk, "latency"), "bench-lat-"+suffix)
	if err != nil {
		return err
	}

	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "run\trecords/s\tMB/s\tnote (records/s)")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%.0f\t%.1f\t%s\n", r.name, r.rate, r.rate*valueSize/1e6, r.note)
	}
	w.Flush()
	fmt.Println("(*) writes, as the job does, a record of the input key and 16 bytes per input record")
	fmt.Printf("\nend-to-end latency, produce -> visible to a read_committed consumer, %v checkpoints, %d records/s:\n", c.interval, c.latencyRate)
	fmt.Printf("  p50 %v   p99 %v   (%d samples after a %v warm-up)\n", p50.Round(time.Millisecond), p99.Round(time.Millisecond), samples, c.latencyWarmup)
	return nil
}

type row struct {
	name string
	rate float64
	note string
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func spread(xs []float64) string {
	return fmt.Sprintf("%.0f..%.0f over %d rounds", slices.Min(xs), slices.Max(xs), len(xs))
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
		// Paced in 10 ms steps.
		step := 10 * time.Millisecond
		perStep := max(1, perSecond/100)
		t := time.NewTicker(step)
		defer t.Stop()
		end := time.Now().Add(d)
		produced = 0
		for time.Now().Before(end) {
			for range perStep {
				cl.Produce(ctx, mk(produced), promise)
				produced++
			}
			select {
			case <-t.C:
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
		fs.EachRecord(func(r *kgo.Record) {
			got++
			if fn != nil {
				fn(r)
			}
		})
	}
	return got, nil
}

// pipe moves n records from in to out: a consumer and a producer, no
// processing. Each output record has the key and the first 16 bytes of
// the value of its input record: the size of the job's output records.
func pipe(ctx context.Context, seeds []string, in, out string, n int) error {
	p, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(out),
		kgo.MaxBufferedRecords(200_000), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer p.Close()
	var firstErr atomic.Pointer[error]
	if _, err := consume(ctx, seeds, in, n, func(r *kgo.Record) {
		p.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value[:min(16, len(r.Value))]}, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
			}
		})
	}); err != nil {
		return err
	}
	if err := p.Flush(ctx); err != nil {
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

type jobStats struct{ completed atomic.Int64 }

// runJob runs the keyed count from in to out, exactly once: bounded (to
// the end offsets at its start) when bounded, else until ctx ends.
func runJob(ctx context.Context, c config, seeds []string, in, out, chk string, bounded bool, prefix string) (*jobStats, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	stats := &jobStats{}
	env := sluice.NewEnvironment(
		sluice.WithJobName("bench-kafka"),
		sluice.WithParallelism(c.parallelism),
		sluice.WithLogger(quiet),
		sluice.WithCheckpointing(c.interval, chk),
		sluice.WithRestartStrategy(sluice.NoRestart()),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				stats.completed.Add(1)
			}
		}),
	)
	opts := []kafkasource.Option{kafkasource.Logger(quiet)}
	if bounded {
		opts = append(opts, kafkasource.Bounded())
	}
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(in), func(r *kgo.Record) (event, error) {
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
	snk, err := kafkasink.NewSink(seeds, func(v counted) (*kgo.Record, error) {
		b := make([]byte, 16)
		binary.BigEndian.PutUint64(b, uint64(v.Count))
		binary.BigEndian.PutUint64(b[8:], uint64(v.Sent))
		return &kgo.Record{Topic: out, Key: []byte(v.Key), Value: b}, nil
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(prefix), kafkasink.Logger(quiet))
	if err != nil {
		return nil, err
	}
	sluice.SinkTo(counts, snk, sluice.Name("out"), sluice.UID("out"))
	err = env.Execute(ctx)
	if err != nil && !(errors.Is(err, sluice.ErrJobCanceled) && !bounded) {
		return nil, fmt.Errorf("job: %w", err)
	}
	return stats, nil
}

// latency runs the job unbounded while records are produced at the
// latency rate, and measures, for each output record, the time from its
// input record's production to its being read under read_committed.
func latency(ctx context.Context, c config, seeds []string, in, out, chk, prefix string) (p50, p99 time.Duration, samples int, err error) {
	jctx, stopJob := context.WithCancel(ctx)
	defer stopJob()
	jobErr := make(chan error, 1)
	go func() {
		_, err := runJob(jctx, c, seeds, in, out, chk, false, prefix)
		jobErr <- err
	}()
	type produced struct {
		n   int
		err error
	}
	prodDone := make(chan produced, 1)
	begin := time.Now()
	go func() {
		n, err := produce(ctx, seeds, in, 0, c.keys, c.latencyRate, c.latencyDuration)
		prodDone <- produced{n, err}
	}()
	var mu sync.Mutex
	var lat []time.Duration
	var seen atomic.Int64
	warm := begin.Add(c.latencyWarmup).UnixNano()
	cctx, stopConsume := context.WithCancel(ctx)
	defer stopConsume()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		_, _ = consume(cctx, seeds, out, int(^uint(0)>>1), func(r *kgo.Record) {
			seen.Add(1)
			if len(r.Value) < 16 {
				return
			}
			sent := int64(binary.BigEndian.Uint64(r.Value[8:]))
			if sent >= warm {
				mu.Lock()
				lat = append(lat, time.Duration(time.Now().UnixNano()-sent))
				mu.Unlock()
			}
		})
	}()
	p := <-prodDone
	if p.err != nil {
		return 0, 0, 0, p.err
	}
	// Everything produced is visible within a few checkpoint intervals.
	deadline := time.Now().Add(10*c.interval + 10*time.Second)
	for seen.Load() < int64(p.n) {
		select {
		case err := <-jobErr:
			return 0, 0, 0, fmt.Errorf("latency job ended: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("only %d of %d records visible %v after the last was produced", seen.Load(), p.n, 10*c.interval+10*time.Second)
		}
	}
	stopConsume()
	<-consumed
	stopJob()
	if err := <-jobErr; err != nil {
		return 0, 0, 0, err
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lat) == 0 {
		return 0, 0, 0, errors.New("no latency samples")
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return pct(0.50), pct(0.99), len(lat), nil
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
