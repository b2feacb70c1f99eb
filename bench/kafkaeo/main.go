// Command kafkaeo measures the wall time, throughput and peak resident
// memory of Sluice's exactly-once Kafka job: a keyed running count from a
// Kafka topic to a Kafka topic, 1 s checkpoints, parallelism 2, with the
// heap and the RocksDB state backends. Each run is a child process of its
// own (this command started again with -child), so that its peak RSS
// (VmHWM, read by the child at its end) is the job's alone, not the
// producer's or the checker's.
//
//	scripts/with-kafka go run ./bench/kafkaeo
//	scripts/with-kafka go run ./bench/kafkaeo -rounds 5 -backends rocksdb -D taskmanager.memory.process.size=1g
//	scripts/with-kafka go run ./bench/kafkaeo -backends rocksdb -vs taskmanager.memory.go.limit=64m
//	scripts/with-kafka /tmp/kafkaeo-new -backends rocksdb -vs-exec /tmp/kafkaeo-old
//
// Built with -tags norocksdb it links no RocksDB (rocksdb.go), as a
// program with the default heap backend does not, and runs only
// -backends hashmap:
//
//	go build -tags norocksdb -o /tmp/kafkaeo-heap ./bench/kafkaeo
//	scripts/with-kafka /tmp/kafkaeo-heap -backends hashmap -vs-exec /tmp/kafkaeo
//
// -vs runs a second variant of the job (more keys) and -vs-exec runs it
// with another build of this command, in turn with the first in every
// round, so that a pair is measured under the same load of a shared
// machine; every run prints the machine's load beside its figures.
//
// The input (-records records of -value-size bytes over -keys keys, in
// -partitions partitions) is produced once; every run reads all of it
// (bounded), and its committed output is counted under read_committed.
// Besides wall time it prints records per CPU second of the job's
// process (steadier than wall time on a shared machine), the live heap,
// the collector's share of the CPU, and the process's system CPU and
// minor page faults (memory the Go runtime returned and faulted back).
// -D key=value and -config pass configuration keys to the job (the
// memory model's, say); -memprofile writes the child's heap profile at
// its highest in-use heap.
package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bench"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/config"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
)

type flags struct {
	records, keys, partitions, valueSize, parallelism, rounds int
	interval                                                  time.Duration
	backends                                                  string
	memProfile, cpuProfile, liveProfile                       string
	liveAt                                                    time.Duration
	child                                                     bool
	backend, in, out, prefix, dir                             string
	dynamic, vs                                               []string
	vsExec                                                    string
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var f flags
	flag.IntVar(&f.records, "records", 2_000_000, "input records")
	flag.IntVar(&f.keys, "keys", 5_003, "distinct keys")
	flag.IntVar(&f.partitions, "partitions", 4, "partitions of the input topic")
	flag.IntVar(&f.valueSize, "value-size", 100, "bytes per input value")
	flag.IntVar(&f.parallelism, "parallelism", 2, "parallelism of the job")
	flag.IntVar(&f.rounds, "rounds", 3, "runs per backend (the table shows min and median)")
	flag.DurationVar(&f.interval, "interval", time.Second, "checkpoint interval")
	flag.StringVar(&f.backends, "backends", strings.Join(linkedBackends(), ","), "state backends to run, comma separated (those linked: -tags norocksdb leaves out rocksdb)")
	flag.StringVar(&f.memProfile, "memprofile", "", "write each run's heap profile at its highest in-use heap to this file (suffixed -<backend>-<round>)")
	flag.StringVar(&f.liveProfile, "liveprofile", "", "write each run's heap profile of what is live -liveprofile-at into the job, after a forced collection, to this file (suffixed -<backend>-<round>)")
	flag.DurationVar(&f.liveAt, "liveprofile-at", 3*time.Second, "when -liveprofile collects and writes the profile")
	flag.StringVar(&f.cpuProfile, "cpuprofile", "", "write each run's CPU profile to this file (suffixed -<backend>-<round>)")
	flag.Var((*multi)(&f.dynamic), "D", "key=value: a configuration key for the job (repeatable)")
	flag.StringVar(&f.vsExec, "vs-exec", "", "run the -vs variant's job with this build of bench/kafkaeo (another commit's), with -vs's keys if any: a pair of builds measured under the same load")
	flag.Var((*multi)(&f.vs), "vs", "key=value: a configuration key of a second variant of the job, run in turn with the first in every round and reported on rows of its own (repeatable): a pair measured under the same load")
	// The child's.
	flag.BoolVar(&f.child, "child", false, "run one job on -in (made with -produce), writing to -out, and print its figures as JSON: to time it by itself")
	produceTo := flag.String("produce", "", "only produce the input into this new topic and exit (for -child runs)")
	flag.StringVar(&f.backend, "backend", "", "the child's state backend (internal)")
	flag.StringVar(&f.in, "in", "", "the child's input topic (internal)")
	flag.StringVar(&f.out, "out", "", "the child's output topic (internal)")
	flag.StringVar(&f.prefix, "prefix", "", "the child's transactional id prefix (internal)")
	flag.StringVar(&f.dir, "dir", "", "the child's checkpoint and RocksDB directory (internal)")
	flag.Parse()
	backends := f.backends
	if f.child {
		backends = f.backend
	}
	if err := linked(backends); err != nil {
		fmt.Fprintf(os.Stderr, "bench/kafkaeo: %v\n", err)
		os.Exit(2)
	}
	seeds := strings.Split(strings.TrimSpace(os.Getenv("KAFKA_BROKERS")), ",")
	if seeds[0] == "" {
		fmt.Fprintln(os.Stderr, "bench/kafkaeo: KAFKA_BROKERS is unset: run it under scripts/with-kafka")
		os.Exit(2)
	}
	var err error
	if *produceTo != "" {
		err = produceOnly(f, seeds, *produceTo)
	} else if f.child {
		err = child(f, seeds)
	} else {
		err = parent(f, seeds)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench/kafkaeo: %v\n", err)
		os.Exit(1)
	}
}

// result is what a child reports on its last stdout line.
type result struct {
	Wall        float64 `json:"wall_s"`
	VmHWMKiB    int64   `json:"vmhwm_kib"`
	GoPeakBytes uint64  `json:"go_peak_bytes"` // highest Go-managed memory seen (runtime/metrics total minus released)
	HeapPeak    uint64  `json:"heap_peak_bytes"`
	// AnonPeakKiB is the highest RssAnon sampled: the resident memory
	// that is the process's own, without the pages of the binary and
	// the shared libraries (RssFile, tens of MiB, shared with every
	// process running them).
	AnonPeakKiB int64 `json:"anon_peak_kib"`
	// FileAtPeakKiB and AnonAtPeakKiB are RssFile and RssAnon in the
	// sample of the highest VmRSS: the peak's file pages (the binary's
	// and the shared libraries') and the process's own.
	FileAtPeakKiB int64 `json:"file_at_peak_kib"`
	AnonAtPeakKiB int64 `json:"anon_at_peak_kib"`
	// LivePeak is the highest live heap a collection left
	// (/gc/heap/live:bytes): what the job holds, without the garbage
	// the Go limit or GOGC lets the heap grow by.
	LivePeak uint64  `json:"live_peak_bytes"`
	GCs      uint64  `json:"gcs"`
	CPU      float64 `json:"cpu_s"`    // the process's user and system CPU over the job
	GCCPU    float64 `json:"gc_cpu_s"` // the collector's share of it (runtime/metrics' estimate)
	// Allocated is the heap bytes the process allocated over the job
	// (/gc/heap/allocs:bytes): divided by the records, what the
	// collector has to make room for per record.
	Allocated   uint64 `json:"allocated_bytes"`
	Checkpoints int64  `json:"checkpoints"`
}

type run struct {
	result
	maxRSSKiB int64 // the kernel's, for the reaped child
	// sysCPU and faults are the reaped child's system CPU seconds and
	// minor page faults (getrusage): memory the Go runtime returns to
	// the kernel and faults back costs system time.
	sysCPU float64
	faults int64
}

func parent(f flags, seeds []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
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
		t := "kafkaeo-" + name + "-" + suffix
		if _, err := adm.CreateTopic(ctx, int32(f.partitions), 1, nil, t); err != nil {
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
	in, err := topic("in")
	if err != nil {
		return err
	}
	start := time.Now()
	if err := produce(ctx, seeds, in, f); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "produced %d records in %v\n", f.records, time.Since(start).Round(time.Millisecond))
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "sluice-kafkaeo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Every backend, each in the configuration of -D and, with -vs, in
	// that of -D and -vs too ("<backend>-vs").
	type setup struct {
		name, backend, exec string
		dynamic             []string
	}
	var setups []setup
	for _, b := range strings.Split(f.backends, ",") {
		setups = append(setups, setup{b, b, self, f.dynamic})
		if len(f.vs) > 0 || f.vsExec != "" {
			setups = append(setups, setup{b + "-vs", b, cmp.Or(f.vsExec, self), append(slices.Clone(f.dynamic), f.vs...)})
		}
	}
	runs := map[string][]run{}
	// Backends and variants alternate within a round, so drift of the
	// machine's speed spreads over all of them.
	for i := range f.rounds {
		for _, s := range setups {
			b := s.name
			out, err := topic(fmt.Sprintf("out-%s-%d", b, i))
			if err != nil {
				return err
			}
			args := []string{"-child", "-backend", s.backend, "-in", in, "-out", out,
				"-prefix", fmt.Sprintf("kafkaeo-%s-%s-%d", suffix, b, i), "-dir", filepath.Join(tmp, fmt.Sprintf("%s-%d", b, i)),
				"-records", fmt.Sprint(f.records), "-parallelism", fmt.Sprint(f.parallelism), "-interval", f.interval.String()}
			if f.memProfile != "" {
				args = append(args, "-memprofile", fmt.Sprintf("%s-%s-%d", f.memProfile, b, i))
			}
			if f.cpuProfile != "" {
				args = append(args, "-cpuprofile", fmt.Sprintf("%s-%s-%d", f.cpuProfile, b, i))
			}
			if f.liveProfile != "" {
				args = append(args, "-liveprofile", fmt.Sprintf("%s-%s-%d", f.liveProfile, b, i), "-liveprofile-at", f.liveAt.String())
			}
			for _, d := range s.dynamic {
				args = append(args, "-D", d)
			}
			r, err := runChild(ctx, s.exec, args, f.memProfile == "" && f.liveProfile == "")
			if err != nil {
				return fmt.Errorf("%s round %d: %w", b, i+1, err)
			}
			if n, err := countCommitted(ctx, seeds, out, f.records); err != nil {
				return err
			} else if n != f.records {
				return fmt.Errorf("%s round %d: the job committed %d records, want %d", b, i+1, n, f.records)
			}
			_ = os.RemoveAll(filepath.Join(tmp, fmt.Sprintf("%s-%d", b, i)))
			runs[b] = append(runs[b], r)
			fmt.Fprintf(os.Stderr, "round %d %s (load %s): %.2f s, %.0f records/s, %.0f records per CPU s, peak RSS %.1f MiB (file %.1f MiB and anonymous %.1f MiB at the peak; anonymous %.0f MiB, Go %.0f MiB, heap %.0f MiB, live heap %.0f MiB), %d collections (%.0f%% of the CPU), %.0f bytes allocated per record, %d checkpoints, %.2f s system CPU, %.1f K page faults\n",
				i+1, b, loadAverage(), r.Wall, float64(f.records)/r.Wall, float64(f.records)/r.CPU, float64(r.maxRSSKiB)/1024, float64(r.FileAtPeakKiB)/1024, float64(r.AnonAtPeakKiB)/1024, float64(r.AnonPeakKiB)/1024, float64(r.GoPeakBytes)/(1<<20),
				float64(r.HeapPeak)/(1<<20), float64(r.LivePeak)/(1<<20), r.GCs, 100*r.GCCPU/r.CPU, float64(r.Allocated)/float64(f.records), r.Checkpoints, r.sysCPU, float64(r.faults)/1000)
		}
	}
	fmt.Printf("Kafka -> keyed running count -> Kafka, exactly-once: %d records of %d bytes over %d keys, %d partitions, parallelism %d, %v checkpoints, %d rounds; GOMAXPROCS %d\n",
		f.records, f.valueSize, f.keys, f.partitions, f.parallelism, f.interval, f.rounds, runtime.GOMAXPROCS(0))
	if len(f.dynamic) > 0 {
		fmt.Printf("configuration: %s\n", strings.Join(f.dynamic, " "))
	}
	if len(f.vs) > 0 || f.vsExec != "" {
		fmt.Printf("variant -vs: %s %s\n", f.vsExec, strings.Join(f.vs, " "))
	}
	w := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "backend\twall s (min / median)\trecords/s (median)\trecords per CPU s (median)\tpeak RSS MiB (min / median / max)\tanonymous MiB (median)\tGo peak MiB (median)\tlive heap MiB (median)\tGC CPU % (median)\tcheckpoints (median)")
	for _, s := range setups {
		b := s.name
		rs := runs[b]
		wall := col(rs, func(r run) float64 { return r.Wall })
		rss := col(rs, func(r run) float64 { return float64(r.maxRSSKiB) / 1024 })
		goPeak := col(rs, func(r run) float64 { return float64(r.GoPeakBytes) / (1 << 20) })
		anon := col(rs, func(r run) float64 { return float64(r.AnonPeakKiB) / 1024 })
		chk := col(rs, func(r run) float64 { return float64(r.Checkpoints) })
		cpu := col(rs, func(r run) float64 { return r.CPU })
		live := col(rs, func(r run) float64 { return float64(r.LivePeak) / (1 << 20) })
		gcShare := col(rs, func(r run) float64 { return 100 * r.GCCPU / r.CPU })
		fmt.Fprintf(w, "%s\t%.2f / %.2f\t%.0f\t%.0f\t%.0f / %.0f / %.0f\t%.0f\t%.0f\t%.0f\t%.1f\t%.0f\n", b, wall[0], med(wall), float64(f.records)/med(wall),
			float64(f.records)/med(cpu), rss[0], med(rss), rss[len(rss)-1], med(anon), med(goPeak), med(live), med(gcShare), med(chk))
	}
	return w.Flush()
}

func produceOnly(f flags, seeds []string, topic string) error {
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, int32(f.partitions), 1, nil, topic); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return produce(ctx, seeds, topic, f)
}

func col(rs []run, fn func(run) float64) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, fn(r))
	}
	slices.Sort(out)
	return out
}

func med(xs []float64) float64 { return xs[len(xs)/2] }

func runChild(ctx context.Context, self string, args []string, noHeapProfile bool) (run, error) {
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	if noHeapProfile {
		cmd.Env = withoutHeapProfile(os.Environ())
	}
	out, err := cmd.Output()
	if err != nil {
		return run{}, fmt.Errorf("child %v: %w", args, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r run
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r.result); err != nil {
		return run{}, fmt.Errorf("child printed %q: %w", out, err)
	}
	// The child's own VmHWM, not the kernel's ru_maxrss of the reaped
	// child: Go starts a child with vfork (CLONE_VM), and Linux takes
	// the high-water mark of the memory the child leaves at exec, the
	// parent's, into the child's ru_maxrss, so that figure is at least
	// this process's peak (which grows with the records it produces and
	// counts).
	r.maxRSSKiB = r.VmHWMKiB
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		if r.maxRSSKiB <= 0 {
			r.maxRSSKiB = ru.Maxrss
		}
		r.sysCPU = float64(ru.Stime.Sec) + float64(ru.Stime.Usec)/1e6
		r.faults = ru.Minflt
	}
	return r, nil
}

func produce(ctx context.Context, seeds []string, topic string, f flags) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(200_000), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var firstErr atomic.Pointer[error]
	filler := make([]byte, f.valueSize)
	_, _ = rand.Read(filler)
	for i := range f.records {
		v := make([]byte, max(8, f.valueSize))
		copy(v, filler)
		binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "key-%06d", i%f.keys), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("produce to %s: %w", topic, *p)
	}
	return nil
}

// countCommitted reads topic under read_committed until it has want
// records or, past them, nothing more comes for a second.
func countCommitted(ctx context.Context, seeds []string, topic string, want int) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	got := 0
	for got < want {
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		if err := ctx.Err(); err != nil {
			return got, err
		}
		if fs.IsClientClosed() || (fs.NumRecords() == 0 && pctx.Err() != nil) {
			return got, fmt.Errorf("count %s: %d of %d records, then nothing for 30 s", topic, got, want)
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return got, fmt.Errorf("count %s: %w", topic, err)
		}
		got += fs.NumRecords()
	}
	return got, nil
}

// event is what the job reads: a key and when its record was produced.
type event struct {
	Key  string
	Sent int64
}

// eventCodec encodes events on the job's keyed exchange.
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

type counted struct {
	Key   string
	Count int64
	Sent  int64
}

type countPerKey struct{ count state.ValueState[int64] }

func (c *countPerKey) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countPerKey) ProcessElement(_ *sluice.KeyedContext[string], e event, out sluice.Collector[counted]) error {
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

// child runs the job once and prints its result as JSON.
func child(f flags, seeds []string) error {
	conf := sluice.NewConfiguration()
	if err := conf.FromEnv(); err != nil {
		return err
	}
	for _, d := range f.dynamic {
		k, v, ok := strings.Cut(d, "=")
		if !ok {
			return fmt.Errorf("-D %q: want key=value", d)
		}
		if err := conf.Set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return err
		}
	}
	if _, set := conf.Get("state.backend.type"); !set {
		if err := conf.Set("state.backend.type", f.backend); err != nil {
			return err
		}
	}
	// execution.checkpointing.interval from -D or -vs is the job's
	// interval, over -interval: -vs execution.checkpointing.interval=1s
	// measures two intervals in turn.
	interval := f.interval
	if v, set := conf.Get("execution.checkpointing.interval"); set {
		d, err := config.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("execution.checkpointing.interval %q: %w", v, err)
		}
		interval = d
	}
	// RocksDB's keys are known when its package is linked (not with
	// -tags norocksdb).
	if _, set := conf.Get("state.backend.rocksdb.localdir"); !set && slices.Contains(state.BackendTypes(), "rocksdb") {
		if err := conf.Set("state.backend.rocksdb.localdir", filepath.Join(f.dir, "rocksdb")); err != nil {
			return err
		}
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	peaks := startPeakWatch(f.memProfile)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var completed atomic.Int64
	env := sluice.NewEnvironment(
		sluice.WithConfiguration(conf),
		sluice.WithJobName("bench-kafkaeo"),
		sluice.WithParallelism(f.parallelism),
		sluice.WithLogger(quiet),
		sluice.WithCheckpointing(interval, filepath.Join(f.dir, "checkpoints")),
		sluice.WithRestartStrategy(sluice.NoRestart()),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				completed.Add(1)
			}
		}),
	)
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(f.in), func(r *kgo.Record) (event, error) {
		if len(r.Value) < 8 {
			return event{}, fmt.Errorf("value of %d bytes, want at least 8", len(r.Value))
		}
		return event{Key: string(r.Key), Sent: int64(binary.BigEndian.Uint64(r.Value))}, nil
	}, kafkasource.Logger(quiet), kafkasource.Bounded(),
		// The decoder copies the key (string) and reads the value:
		// the source may reuse the records' memory.
		kafkasource.DecoderKeepsNothing())
	if err != nil {
		return err
	}
	events := sluice.FromSource(env, src, sluice.NoWatermarks[event](), "in", sluice.UID("in"), sluice.WithCodec[event](eventCodec{}))
	counts := sluice.Process[string, event, counted](sluice.KeyBy(events, func(e event) string { return e.Key }),
		&countPerKey{}, sluice.Name("count"), sluice.UID("count"))
	out := f.out
	snk, err := kafkasink.NewSink(seeds, func(v counted) (*kgo.Record, error) {
		// The record, its key and its value in one allocation.
		r := kafkasink.NewRecord(out, len(v.Key), 16)
		copy(r.Key, v.Key)
		binary.BigEndian.PutUint64(r.Value, uint64(v.Count))
		binary.BigEndian.PutUint64(r.Value[8:], uint64(v.Sent))
		return r, nil
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(f.prefix), kafkasink.Logger(quiet))
	if err != nil {
		return err
	}
	sluice.SinkTo(counts, snk, sluice.Name("out"), sluice.UID("out"))
	if f.liveProfile != "" {
		t := time.AfterFunc(f.liveAt, func() {
			runtime.GC()
			if pf, err := os.Create(f.liveProfile); err == nil {
				_ = pprof.Lookup("heap").WriteTo(pf, 0)
				pf.Close()
			}
		})
		defer t.Stop()
	}
	gc0 := gcFigures()
	start, cpu0 := time.Now(), bench.ProcessCPUTime()
	if err := env.Execute(context.Background()); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	wall, cpu := time.Since(start), bench.ProcessCPUTime()-cpu0
	gc1 := gcFigures()
	goPeak, heapPeak, anonPeak, livePeak, atPeak := peaks()
	return json.NewEncoder(os.Stdout).Encode(result{
		Wall: wall.Seconds(), VmHWMKiB: procStatus("VmHWM:"), GoPeakBytes: goPeak, HeapPeak: heapPeak, AnonPeakKiB: anonPeak,
		FileAtPeakKiB: atPeak.file, AnonAtPeakKiB: atPeak.anon,
		LivePeak: livePeak, GCs: gc1.cycles - gc0.cycles, CPU: cpu.Seconds(), GCCPU: gc1.cpu - gc0.cpu, Allocated: gc1.allocs - gc0.allocs,
		Checkpoints: completed.Load(),
	})
}

type gcFig struct {
	cycles uint64
	cpu    float64
	allocs uint64
}

// gcFigures reads the collections so far and the CPU seconds the
// runtime estimates the collector took.
func gcFigures() gcFig {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return gcFig{cycles: s[0].Value.Uint64(), cpu: s[1].Value.Float64(), allocs: s[2].Value.Uint64()}
}

// rssSample is a sample of /proc/self/status's VmRSS, RssFile and
// RssAnon, KiB.
type rssSample struct{ rss, file, anon int64 }

// startPeakWatch samples the Go runtime's memory and the process's
// VmRSS, RssFile and RssAnon every 20 ms and, when profile is set,
// writes a heap profile whenever the in-use heap reaches a new high (by
// more than 5%). The function it returns stops it and gives the highest
// Go-managed memory, heap and RssAnon (KiB) it saw, and the sample of
// the highest VmRSS.
func startPeakWatch(profile string) func() (goPeak, heapPeak uint64, anonPeak int64, livePeak uint64, atPeak rssSample) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	if profile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	var goPeak, heapPeak, livePeak, written uint64
	var anonPeak int64
	var atPeak rssSample
	stop := make(chan struct{})
	done := make(chan struct{})
	sample := func() {
		metrics.Read(samples)
		g := samples[0].Value.Uint64() - samples[1].Value.Uint64()
		h := samples[2].Value.Uint64()
		goPeak, heapPeak, livePeak = max(goPeak, g), max(heapPeak, h), max(livePeak, samples[3].Value.Uint64())
		v := procStatusFields("VmRSS:", "RssFile:", "RssAnon:")
		anonPeak = max(anonPeak, v[2])
		if v[0] > atPeak.rss {
			atPeak = rssSample{v[0], v[1], v[2]}
		}
		if profile != "" && h > written+written/20 {
			written = h
			if pf, err := os.Create(profile); err == nil {
				_ = pprof.Lookup("heap").WriteTo(pf, 0)
				pf.Close()
			}
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() (uint64, uint64, int64, uint64, rssSample) {
		close(stop)
		<-done
		return goPeak, heapPeak, anonPeak, livePeak, atPeak
	}
}

// procStatus is a KiB figure of /proc/self/status (field "VmHWM:", the
// process's peak resident set size; "RssAnon:"), -1 if unknown.
func procStatus(field string) int64 { return procStatusFields(field)[0] }

// procStatusFields is procStatus of several fields, read at once.
func procStatusFields(fields ...string) []int64 {
	out := make([]int64, len(fields))
	for i := range out {
		out[i] = -1
	}
	fh, err := os.Open("/proc/self/status")
	if err != nil {
		return out
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		for i, field := range fields {
			if v, ok := strings.CutPrefix(sc.Text(), field); ok {
				_, _ = fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &out[i])
			}
		}
	}
	return out
}

// withoutHeapProfile returns env with memprofilerate=0 added to
// $GODEBUG, unless $GODEBUG sets a rate: this command links
// runtime/pprof (for -memprofile), so the Go runtime samples its
// allocations for a heap profile, and keeps a table of 1.4 MiB of
// allocation stacks within the Go limit; a job's program that links no
// heap profile does neither (the linker turns profiling off), and its
// memory is what the child measures.
func withoutHeapProfile(env []string) []string {
	out := make([]string, 0, len(env)+1)
	debug := "memprofilerate=0"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if strings.Contains(v, "memprofilerate=") {
				return env
			}
			if v != "" {
				debug = v + "," + debug
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GODEBUG="+debug)
}

// loadAverage is the machine's load over the last 1, 5 and 15 minutes
// (/proc/loadavg), printed beside every run: other processes share the
// CPU.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
