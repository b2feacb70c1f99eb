// Command tablequery measures queries against a running job: a job
// counts records per key into a materialized table (table.Materialize,
// 100 000 keys by default, the source at 20 000 records/s), and queries
// for random keys are sent at a fixed rate (1 000/s by default, each on
// its own goroutine, whatever the latency of the others), in process
// (sluice.Job.QueryState) or over the REST API (api.Client.QueryState on
// loopback). It prints the latency percentiles and the answers that were
// not values.
//
//	go run ./bench/tablequery                       # in process, heap state
//	go run ./bench/tablequery -via rest -rocksdb    # over REST, RocksDB state
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state/rocksdb"
	"github.com/sluicehq/sluice/table"
)

func main() {
	var o options
	flag.IntVar(&o.keys, "keys", 100_000, "keys of the table")
	flag.Float64Var(&o.rate, "rate", 1000, "queries per second")
	flag.Float64Var(&o.records, "records", 20_000, "records per second into the table")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long to query")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "how long the job runs before the queries start")
	flag.StringVar(&o.via, "via", "job", "job (in process) or rest (the REST API on loopback)")
	flag.BoolVar(&o.rocksdb, "rocksdb", false, "keep the table in RocksDB (default: heap)")
	flag.Parse()
	res, err := run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tablequery:", err)
		os.Exit(1)
	}
	fmt.Println(res)
}

type options struct {
	keys     int
	rate     float64
	records  float64
	duration time.Duration
	warmup   time.Duration
	via      string
	rocksdb  bool
}

// result is what a run measured.
type result struct {
	o                    options
	queries, found, errs int
	p50, p90, p99, max   time.Duration
}

func (r result) String() string {
	backend := "heap"
	if r.o.rocksdb {
		backend = "rocksdb"
	}
	return fmt.Sprintf("%d queries at %.0f/s via %s (%d keys, %s, %.0f records/s into the table): p50 %v, p90 %v, p99 %v, max %v; %d found, %d errors",
		r.queries, r.o.rate, r.o.via, r.o.keys, backend, r.o.records, r.p50, r.p90, r.p99, r.max, r.found, r.errs)
}

func run(ctx context.Context, o options) (result, error) {
	if o.via != "job" && o.via != "rest" {
		return result{}, fmt.Errorf("-via %q: want job or rest", o.via)
	}
	dir, err := os.MkdirTemp("", "sluice-tablequery-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := []sluice.Option{sluice.WithJobName("tablequery"), sluice.WithParallelism(2), sluice.WithLogger(logger),
		sluice.WithCheckpointing(time.Second, dir+"/checkpoints")}
	if o.rocksdb {
		opts = append(opts, sluice.WithStateBackend(rocksdb.Factory(dir+"/rocksdb", rocksdb.Options{})))
	}
	env := sluice.NewEnvironment(opts...)
	keys := int64(o.keys)
	gen := source.NewDatagen(func(i int64) int64 { return i * 7919 % keys }, source.DatagenRate(o.records))
	ones := sluice.Map(sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen"),
		func(k int64) (table.Change[int64, int64], error) { return table.Upsert(k, int64(1)), nil })
	counts := sluice.Reduce(sluice.KeyBy(ones, func(c table.Change[int64, int64]) int64 { return c.Key }),
		func(a, b table.Change[int64, int64]) (table.Change[int64, int64], error) {
			return table.Upsert(a.Key, a.Value+b.Value), nil
		}, sluice.UID("count"))
	t := table.Materialize(table.FromChangelog(counts), "counts")
	sluice.SinkTo(t.Changes(), sink.NewDiscard[table.Change[int64, int64]]())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		return result{}, err
	}
	defer func() {
		job.Cancel()
		_ = job.Wait()
	}()

	query := func(ctx context.Context, key string) (bool, error) {
		res, err := job.QueryState(ctx, "counts", key)
		return res.Found, err
	}
	if o.via == "rest" {
		srv := api.New(api.Options{Addr: "127.0.0.1:0", Logger: logger})
		id := srv.AddJob(job)
		if err := srv.Start(); err != nil {
			return result{}, err
		}
		defer srv.Close()
		cl := api.NewClient(srv.Addr(), "")
		query = func(ctx context.Context, key string) (bool, error) {
			res, err := cl.QueryState(ctx, id, "counts", key)
			return res.Found, err
		}
	}
	// Let the job start and fill a part of the table.
	for job.Status().String() != "RUNNING" {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(o.warmup)

	var (
		mu        sync.Mutex
		latencies []time.Duration
		found     atomic.Int64
		errs      atomic.Int64
		wg        sync.WaitGroup
	)
	rng := rand.New(rand.NewPCG(1, 2))
	// A tick every millisecond sends the queries due by then, so the rate
	// holds when ticks are late or dropped.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	begin := time.Now()
	total := int(o.rate * o.duration.Seconds())
	var firstErr error
	for sent := 0; sent < total; {
		now := <-tick.C
		due := min(total, int(o.rate*now.Sub(begin).Seconds()))
		for ; sent < due; sent++ {
			key := strconv.FormatInt(rng.Int64N(keys), 10)
			wg.Add(1)
			go func() {
				defer wg.Done()
				qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
				defer qcancel()
				start := time.Now()
				ok, err := query(qctx, key)
				d := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				latencies = append(latencies, d)
				switch {
				case err != nil:
					errs.Add(1)
					if firstErr == nil {
						firstErr = err
					}
				case ok:
					found.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if len(latencies) == 0 {
		return result{}, errors.New("no query was sent")
	}
	if firstErr != nil && errs.Load() == int64(len(latencies)) {
		return result{}, fmt.Errorf("every query failed: %w", firstErr)
	}
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))] }
	return result{o: o, queries: len(latencies), found: int(found.Load()), errs: int(errs.Load()),
		p50: pct(0.50), p90: pct(0.90), p99: pct(0.99), max: latencies[len(latencies)-1]}, nil
}
