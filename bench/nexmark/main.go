// Command nexmark is the Nexmark benchmark on Sluice: the generator of
// the Nexmark specification (persons, auctions and bids in the proportion
// 1:3:46, event times from the event rate, ids drawn from the active
// persons and in-flight auctions with hot ones), a parallel checkpointed
// source of it, and the queries q0-q8 and q11 with Flink's Nexmark SQL as
// their reference semantics (the tests check each against a plain
// evaluation). q4 and q7 are streaming forms that keep less state than
// Flink's SQL (an auction closes at its expiry; a window's highest bids
// live in its aggregate); q4sql and q7sql keep what the SQL keeps (every
// auction and bid of q4's join, q4's averages as a changelog; q7's window
// maxima joined back to every bid) and are the ones compared with Flink's
// q4 and q7 like for like. The command runs each query over the same events, exactly
// once with checkpoints, on RocksDB and on the heap, and prints the events
// processed per second per core beside Flink's published figures.
//
//	go run ./bench/nexmark -query all -events 5000000
//	go run ./bench/nexmark -query q5,q7 -backends rocksdb -max-time 60s
//
// With -flink, the same queries run on Flink too (bench/flinknexmark: the
// Flink Nexmark benchmark's SQL over this generator's events, on Flink's
// mini-cluster in one JVM, RocksDB, the same checkpoint interval and
// parallelism), after Sluice, on the same machine, and the table puts the
// two side by side:
//
//	(cd bench/flinknexmark && mvn -q package)
//	go run ./bench/nexmark -backends rocksdb -parallelism 2 -checkpoint-interval 10s \
//	    -flink bench/flinknexmark/target/flinknexmark.jar
//
// -flink-results FILE saves Flink's figures; a later run with
// -flink-results FILE and no -flink (say with -rocksdb-native-memtable)
// sets them beside its own instead of running Flink again.
//
// Cores are measured as the Nexmark benchmark measures them: the CPU the
// process used (user + system, every thread) over the wall time, so
// "per core" is events / CPU seconds. The wall-time figure per
// GOMAXPROCS core is printed beside it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bench"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// query is one Nexmark query, built on the events and ending in a
// discarding sink (Flink's blackhole) whose count it returns.
type query struct {
	name  string
	flink float64 // Flink 1.13's published throughput per core, K events/s (0: not published)
	build func(*sluice.Stream[Event]) func() int64
	// sql names the Flink Nexmark query this one is compared with when it
	// is not its own name: q4sql and q7sql are q4 and q7 as Flink's SQL
	// runs them; q11hand is q11 on a hand-written keyed function.
	sql string
	// unlike says the query's semantics are not Flink's SQL's, so its
	// ratio to Flink is not like for like (marked ~ in the table).
	unlike bool
}

// flinkName is the Flink Nexmark query q is compared with.
func (q query) flinkName() string {
	if q.sql != "" {
		return q.sql
	}
	return q.name
}

func discard[T any](q func(*sluice.Stream[Event]) *sluice.Stream[T]) func(*sluice.Stream[Event]) func() int64 {
	return func(events *sluice.Stream[Event]) func() int64 {
		d := sink.NewDiscard[T]()
		sluice.SinkTo(q(events), sink.Sink[T](d), sluice.Name("blackhole"), sluice.UID("blackhole"))
		return d.Count
	}
}

// queries are the queries with Flink's figures from the Nexmark README
// (Flink 1.13, 8 workers of 8 cores, RocksDB, exactly once).
// q4 and q7 are the streaming forms, which keep less than Flink's SQL
// (unlike); q4sql and q7sql keep what the SQL keeps and compare with
// Flink's q4 and q7 like for like.
var queries = []query{
	{name: "q0", flink: 155.02, build: discard(Q0)},
	{name: "q1", flink: 157.94, build: discard(Q1)},
	{name: "q2", flink: 175.21, build: discard(Q2)},
	{name: "q3", flink: 152.12, build: discard(Q3)},
	{name: "q4", flink: 34.33, build: discard(Q4), unlike: true},
	{name: "q4sql", flink: 34.33, build: discard(Q4SQL), sql: "q4"},
	{name: "q5", flink: 22.14, build: discard(Q5)},
	{name: "q6", build: discard(Q6)},
	{name: "q7", flink: 12.33, build: discard(Q7), unlike: true},
	{name: "q7sql", flink: 12.33, build: discard(Q7SQL), sql: "q7"},
	{name: "q8", flink: 146.14, build: discard(Q8)},
	{name: "q11", flink: 39.7, build: discard(Q11)},
	{name: "q11hand", flink: 39.7, build: discard(Q11Hand), sql: "q11"},
}

type options struct {
	cfg         Config
	parallelism int
	backends    []string
	interval    time.Duration
	delay       time.Duration
	maxTime     time.Duration
	dir         string
	// rocksdb are the RocksDB backend's options (-rocksdb-native-memtable).
	rocksdb rocksdb.Options
	// windowBuffer is the session windows' buffer (-window-buffer-limit).
	windowBuffer int
}

// result is one run of one query on one backend.
type result struct {
	events, outputs int64
	wall, cpu       time.Duration
	checkpoints     int
	capped          bool
}

func (r result) perCoreCPU() float64 {
	if r.cpu <= 0 {
		return 0
	}
	return float64(r.events) / r.cpu.Seconds() / 1000
}

func (r result) perCoreWall(cores int) float64 {
	return float64(r.events) / r.wall.Seconds() / float64(cores) / 1000
}

// progress counts the events generated, per subtask without sharing a
// cache line: subtask i of p generates the event numbers i mod p in
// order, so the last one it generated says how many it did.
type progress struct {
	p     int64
	slots []paddedInt
}

type paddedInt struct {
	v atomic.Int64
	_ [56]byte
}

func newProgress(p int) *progress {
	pr := &progress{p: int64(p), slots: make([]paddedInt, p)}
	for i := range pr.slots {
		pr.slots[i].v.Store(int64(i) - int64(p))
	}
	return pr
}

func (pr *progress) saw(n int64) { pr.slots[n%pr.p].v.Store(n) }

func (pr *progress) total() int64 {
	var t int64
	for i := range pr.slots {
		t += (pr.slots[i].v.Load()-int64(i))/pr.p + 1
	}
	return t
}

func run(ctx context.Context, q query, backend string, o options) (result, error) {
	g, err := NewGenerator(o.cfg)
	if err != nil {
		return result{}, err
	}
	dir, err := os.MkdirTemp(o.dir, "nexmark-"+q.name+"-"+backend+"-")
	if err != nil {
		return result{}, fmt.Errorf("%s on %s: %w", q.name, backend, err)
	}
	defer os.RemoveAll(dir)
	var checkpoints atomic.Int64
	opts := []sluice.Option{
		sluice.WithJobName("nexmark-" + q.name),
		sluice.WithParallelism(o.parallelism),
		sluice.WithWindowBufferLimit(o.windowBuffer),
		sluice.WithCheckpointing(o.interval, filepath.Join(dir, "checkpoints")),
		sluice.WithCheckpointListener(func(cs checkpoint.Stats) {
			if cs.Status == checkpoint.StatusCompleted {
				checkpoints.Add(1)
			}
		}),
	}
	switch backend {
	case "rocksdb":
		opts = append(opts, sluice.WithStateBackend(rocksdb.Factory(filepath.Join(dir, "rocksdb"), o.rocksdb)))
	case "heap":
	default:
		return result{}, fmt.Errorf("-backends: unknown state backend %q (rocksdb, heap)", backend)
	}
	env := sluice.NewEnvironment(opts...)
	pr := newProgress(o.parallelism)
	src := newSource(g, func(n int64) Event {
		pr.saw(n)
		return g.Event(n)
	})
	outputs := q.build(eventsFrom(env, src, o.delay))

	runtime.GC()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cpu0, start := bench.ProcessCPUTime(), time.Now()
	job, err := env.ExecuteAsync(runCtx)
	if err != nil {
		return result{}, fmt.Errorf("%s on %s: %w", q.name, backend, err)
	}
	var capped atomic.Bool
	if o.maxTime > 0 {
		t := time.AfterFunc(o.maxTime, func() { capped.Store(true); job.Cancel() })
		defer t.Stop()
	}
	err = job.Wait()
	r := result{wall: time.Since(start), cpu: bench.ProcessCPUTime() - cpu0, events: pr.total(), outputs: outputs(),
		checkpoints: int(checkpoints.Load()), capped: capped.Load()}
	if err != nil && !r.capped {
		return r, fmt.Errorf("%s on %s: %w", q.name, backend, err)
	}
	return r, nil
}

func main() {
	def := DefaultConfig()
	var (
		which    = flag.String("query", "all", "queries to run: all, or a comma-separated list such as q0,q5")
		events   = flag.Int64("events", 5_000_000, "events per query (nexmark events.num)")
		rate     = flag.Float64("rate", def.Rate, "events per second of event time (first-event.rate)")
		wallRate = flag.Float64("wall-rate", 0, "limit the source to this many events per wall-clock second; 0: as fast as it goes")
		seed     = flag.Uint64("seed", def.Seed, "generator seed")
		group    = flag.Int64("out-of-order-group", 1, "shuffle the events in groups of this size (1: in order)")
		delay    = flag.Duration("watermark-delay", 4*time.Second, "bounded out-of-orderness of the watermarks (Flink's Nexmark DDL: 4 s)")
		par      = flag.Int("parallelism", runtime.GOMAXPROCS(0), "parallelism of every operator")
		backends = flag.String("backends", "rocksdb,heap", "state backends, comma-separated: rocksdb, heap")
		interval = flag.Duration("checkpoint-interval", 10*time.Second, "exactly-once checkpoint interval")
		maxTime  = flag.Duration("max-time", 0, "stop a run after this long and count the events it generated; 0: no cap")
		dir      = flag.String("dir", "", "directory for checkpoints and RocksDB (default: the system's temporary directory)")
		profile  = flag.String("cpuprofile", "", "write a CPU profile of all the runs to this file")
		flinkJar = flag.String("flink", "", "also run the queries on Flink with this jar (bench/flinknexmark/target/flinknexmark.jar) and print both side by side")
		flinkRes = flag.String("flink-results", "", "with -flink, also save Flink's figures in this file; without -flink, set the figures an earlier -flink run saved here beside this run's (the same -events, -parallelism and -checkpoint-interval) instead of running Flink again")
		winBuf   = flag.Int("window-buffer-limit", sluice.DefaultWindowBufferLimit, "the sessions q11's session windows combine in memory before they write them into keyed state (sluice.WithWindowBufferLimit); 0: none, every bid reads and writes the state")
		native   = flag.Bool("rocksdb-native-memtable", false, "RocksDB: value states write straight into RocksDB's memtables, without the write buffer in Go memory (rocksdb.Options.NativeMemtable), as Flink does")
	)
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fail(fmt.Errorf("-cpuprofile: %w", err))
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(fmt.Errorf("-cpuprofile: %w", err))
		}
		defer pprof.StopCPUProfile()
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))

	o := options{cfg: def, parallelism: *par, interval: *interval, delay: *delay, maxTime: *maxTime, dir: *dir,
		rocksdb: rocksdb.Options{NativeMemtable: *native}, windowBuffer: *winBuf}
	o.cfg.Events, o.cfg.Rate, o.cfg.WallRate, o.cfg.Seed, o.cfg.OutOfOrderGroupSize = *events, *rate, *wallRate, *seed, *group
	if _, err := NewGenerator(o.cfg); err != nil {
		fail(err)
	}
	for b := range strings.SplitSeq(*backends, ",") {
		o.backends = append(o.backends, strings.TrimSpace(b))
	}
	var selected []query
	if *which == "all" {
		selected = queries
	} else {
		for name := range strings.SplitSeq(*which, ",") {
			found := false
			for _, q := range queries {
				if q.name == strings.TrimSpace(name) {
					selected, found = append(selected, q), true
				}
			}
			if !found {
				fail(fmt.Errorf("-query: unknown query %q (q0-q8, q11 but q9, q10; q4sql, q7sql, q11hand)", name))
			}
		}
	}

	cores := runtime.GOMAXPROCS(0)
	fmt.Printf("Nexmark on Sluice: %d events per query at %.0f events/s of event time, parallelism %d, GOMAXPROCS %d, %d CPUs;\n",
		o.cfg.Events, o.cfg.Rate, o.parallelism, cores, runtime.NumCPU())
	fmt.Printf("exactly-once checkpoints every %v, watermarks %v behind; per core = events / CPU seconds (user+system) of the process.\n\n",
		o.interval, o.delay)
	ctx := context.Background()
	results := map[string]map[string]result{}
	for _, q := range selected {
		results[q.name] = map[string]result{}
		for _, b := range o.backends {
			r, err := run(ctx, q, b, o)
			if err != nil {
				fail(err)
			}
			results[q.name][b] = r
			capped := ""
			if r.capped {
				capped = " (capped)"
			}
			fmt.Fprintf(os.Stderr, "%s %s: %d events in %v, %.2f cores, %d results, %d checkpoints%s\n",
				q.name, b, r.events, r.wall.Round(time.Millisecond), r.cpu.Seconds()/r.wall.Seconds(), r.outputs, r.checkpoints, capped)
		}
	}

	var flink map[string]flinkResult
	flinkFrom := *flinkJar
	switch {
	case *flinkJar != "":
		var err error
		if flink, err = runFlink(*flinkJar, selected, o); err != nil {
			fail(err)
		}
		if *flinkRes != "" {
			if err := saveFlink(*flinkRes, flink, o); err != nil {
				fail(err)
			}
		}
	case *flinkRes != "":
		var err error
		if flink, err = loadFlink(*flinkRes, selected, o); err != nil {
			fail(err)
		}
		flinkFrom = *flinkRes
		if st, err := os.Stat(*flinkRes); err == nil {
			flinkFrom += ", an earlier run saved at " + st.ModTime().UTC().Format("15:04 UTC")
		}
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "query\t"
	for _, b := range o.backends {
		head += b + " K/s/core\t" + b + " cores\t" + b + " wall s\t"
	}
	if flink != nil {
		head += "wall K/s per GOMAXPROCS core\tresults\tFlink K/s/core\tFlink cores\tFlink wall s\tvs Flink\t"
	} else {
		head += "wall K/s per GOMAXPROCS core\tresults\tFlink 1.13 K/s/core\tvs Flink\t"
	}
	fmt.Fprintln(w, head)
	for _, q := range selected {
		line := q.name + "\t"
		for _, b := range o.backends {
			r := results[q.name][b]
			mark := ""
			if r.capped {
				mark = "*"
			}
			line += fmt.Sprintf("%.1f%s\t%.2f\t%.1f\t", r.perCoreCPU(), mark, r.cpu.Seconds()/r.wall.Seconds(), r.wall.Seconds())
		}
		first := results[q.name][o.backends[0]]
		line += fmt.Sprintf("%.1f\t%d\t", first.perCoreWall(cores), first.outputs)
		unlike := ""
		if q.unlike {
			unlike = "~"
		}
		switch f, ok := flink[q.flinkName()]; {
		case flink != nil && ok:
			line += fmt.Sprintf("%.1f\t%.2f\t%.1f\t%s%.2fx\t", f.perCore(), f.cpu/f.wall, f.wall, unlike, first.perCoreCPU()/f.perCore())
		case flink != nil:
			line += "-\t-\t-\t-\t"
		case q.flink > 0:
			line += fmt.Sprintf("%.1f\t%s%.1fx\t", q.flink, unlike, first.perCoreCPU()/q.flink)
		default:
			line += "-\t-\t"
		}
		fmt.Fprintln(w, line)
	}
	w.Flush()
	fmt.Printf("\n(wall, results and vs Flink: the first backend, %s; * capped by -max-time at the events generated so far)\n", o.backends[0])
	fmt.Println("(~ not like for like: q4 closes each auction at its expiry and q7 keeps a window's highest bids in its aggregate; q4sql and q7sql keep what Flink's SQL keeps)")
	if flink == nil {
		fmt.Println("(Flink 1.13: the Nexmark README's published figures, other hardware; -flink measures Flink here)")
	} else {
		fmt.Printf("(Flink: %s, the same events, parallelism, checkpoint interval and machine; its JVM warmed on the first query)\n", flinkFrom)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "nexmark:", err)
	os.Exit(1)
}
