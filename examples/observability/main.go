// Command observability runs a job with everything an operator watches
// turned on: a datagen source (parallelism 2) feeds a keyed count with
// periodic checkpoints; its Prometheus metrics are at /metrics, its web
// dashboard and Flink-style REST API on the same address, and its
// checkpoint traces go over OTLP when the OTEL_* variables say where.
//
//	go run ./examples/observability                       # until Ctrl-C
//	go run ./examples/observability -slow -unaligned      # backpressure, unaligned checkpoints
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 go run ./examples/observability
//
// Then open http://127.0.0.1:8081/, or use the CLI:
//
//	go run ./cmd/sluice jobs
//	go run ./cmd/sluice checkpoints observability-demo
//	go run ./cmd/sluice stop observability-demo
//	go run ./cmd/sluice inspect /tmp/observability-demo-*/savepoints/savepoint-*
//
// deploy/README.md starts Prometheus, Grafana and Jaeger next to it.
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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/tracing"
)

const jobName = "observability-demo"

// countPerKey counts records per key in keyed state; with slow set each
// record costs that long, which backpressures the source.
type countPerKey struct {
	slow  time.Duration
	count state.ValueState[int64]
}

func (c *countPerKey) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countPerKey) ProcessElement(_ *sluice.KeyedContext[int64], _ source.Record, out sluice.Collector[int64]) error {
	if c.slow > 0 {
		time.Sleep(c.slow)
	}
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	out.Collect(n)
	return c.count.Update(n)
}

func main() {
	addr := flag.String("address", api.DefaultAddr, "address of the API, dashboard and /metrics (0.0.0.0:8081 to let Prometheus in Docker scrape it)")
	token := flag.String("token", os.Getenv("SLUICE_TOKEN"), "bearer token the API and /metrics require (default $SLUICE_TOKEN; none when empty)")
	duration := flag.Duration("duration", 0, "how long to run (0: until interrupted)")
	interval := flag.Duration("interval", 2*time.Second, "checkpoint interval")
	unaligned := flag.Bool("unaligned", false, "unaligned checkpoints")
	slow := flag.Bool("slow", false, "the count costs 2 ms per record: the source is backpressured")
	rate := flag.Float64("rate", 2000, "records per second (0: as fast as it can)")
	dir := flag.String("dir", "", "where checkpoints and savepoints go (default: a new directory under the temp directory)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(logger)
	if err := run(logger, *addr, *token, *duration, *interval, *unaligned, *slow, *rate, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "observability:", err)
		os.Exit(1)
	}
}

func run(logger *slog.Logger, addr, token string, duration, interval time.Duration, unaligned, slow bool, rate float64, dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	if dir == "" {
		d, err := os.MkdirTemp("", jobName+"-")
		if err != nil {
			return err
		}
		dir = d
	}

	// Metrics: one registry for the process.
	reg := prometheus.NewRegistry()
	collector := metrics.NewCollector()
	reg.MustRegister(collector, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Traces: exported only when the OTEL_* variables ask for it.
	export, err := tracing.ExportFromEnv(nil)
	if err != nil {
		return err
	}
	tp, shutdownTraces, err := tracing.ProviderFromEnv(ctx)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTraces(sctx); err != nil {
			logger.Warn("flush traces", "err", err)
		}
	}()
	logger.Info("traces", "exported", export.Enabled, "why", export.Reason)
	tracer := tracing.New(tp)

	opts := []sluice.Option{
		sluice.WithJobName(jobName),
		sluice.WithParallelism(2),
		sluice.WithLogger(logger),
		sluice.WithCheckpointing(interval, filepath.Join(dir, "checkpoints")),
		sluice.WithResumeFromLatestCheckpoint(),
		sluice.WithSavepointDir(filepath.Join(dir, "savepoints")),
		sluice.WithObservers(collector, tracer),
	}
	if unaligned {
		opts = append(opts, sluice.WithUnalignedCheckpoints(0))
	}
	env := sluice.NewEnvironment(opts...)
	var gopts []source.DatagenOption
	if rate > 0 {
		gopts = append(gopts, source.DatagenRate(rate))
	}
	gen := source.NewDatagen(source.RandomRecords(1, 256, 1000), gopts...)
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "datagen",
		sluice.WithCodec[source.Record](source.RecordCodec{}), sluice.UID("datagen"))
	per := time.Duration(0)
	if slow {
		per = 2 * time.Millisecond
	}
	counts := sluice.Process[int64, source.Record, int64](sluice.KeyBy(recs, func(r source.Record) int64 { return r.Key }),
		&countPerKey{slow: per}, sluice.Name("count-per-key"), sluice.UID("count-per-key"))
	sluice.SinkTo(counts, sink.NewDiscard[int64](), sluice.Name("discard"), sluice.UID("discard"))

	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	collector.AddJob(job)
	tracer.JobStarted(job)

	srv := api.New(api.Options{Addr: addr, Token: token, Logger: logger,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})})
	srv.AddJob(job)
	if err := srv.Start(); err != nil {
		job.Cancel()
		_ = job.Wait()
		return err
	}
	defer srv.Close()
	fmt.Printf("dashboard  %s/\nmetrics    %s/metrics\napi        %s/jobs\ncheckpoints and savepoints under %s\n",
		srv.URL(), srv.URL(), srv.URL(), dir)

	err = job.Wait()
	if errors.Is(err, sluice.ErrJobSuspended) && ctx.Err() != nil {
		// Interrupted (SIGINT, SIGTERM) or -duration ran out: the job is
		// suspended, its latest checkpoint kept; run again with the same
		// -dir to resume from it.
		return nil
	}
	return err
}
