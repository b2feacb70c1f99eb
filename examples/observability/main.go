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
//	go run ./cmd/sluice stop observability-demo    # exits 0: "job observability-demo stopped; savepoint stored in ..."
//	go run ./cmd/sluice inspect /tmp/observability-demo-*/savepoints/savepoint-*
//
// The stop ends the job and then the program, which keeps serving the API
// until the CLI has read where the savepoint is (10 s at most).
//
// The API listens on the loopback interface only unless a token is set:
// without one it keeps out web pages (cross-origin and DNS-rebinding
// requests are refused) but not whoever reaches the port, who could stop
// or cancel the job. A non-loopback -address (0.0.0.0:8081, :8081, a LAN
// address) without -token is refused:
//
//	SLUICE_TOKEN=$(openssl rand -hex 16) go run ./examples/observability -address 0.0.0.0:8081
//	go run ./examples/observability -address 0.0.0.0:8081 -token ... -cert cert.pem -key key.pem   # and HTTPS
//
// deploy/README.md starts Prometheus, Grafana and Jaeger next to it, on
// the host network, so the default loopback address is enough for them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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

// config is what the flags set.
type config struct {
	addr, token, cert, key string
	duration, interval     time.Duration
	unaligned, slow        bool
	rate                   float64
	dir                    string
}

// resultGrace is how long the program keeps serving after its job ended,
// at most, for the client that stopped the job to read where the
// savepoint is.
const resultGrace = 10 * time.Second

func main() {
	var c config
	flag.StringVar(&c.addr, "address", api.DefaultAddr, "address of the API, dashboard and /metrics; an address other than loopback needs -token")
	flag.StringVar(&c.token, "token", os.Getenv("SLUICE_TOKEN"), "bearer token the API and /metrics require (default $SLUICE_TOKEN; none when empty, which is only allowed on a loopback -address)")
	flag.StringVar(&c.cert, "cert", "", "PEM certificate (chain) file: serve the API over HTTPS (with -key)")
	flag.StringVar(&c.key, "key", "", "PEM private key file of -cert")
	flag.DurationVar(&c.duration, "duration", 0, "how long to run (0: until interrupted)")
	flag.DurationVar(&c.interval, "interval", 2*time.Second, "checkpoint interval")
	flag.BoolVar(&c.unaligned, "unaligned", false, "unaligned checkpoints")
	flag.BoolVar(&c.slow, "slow", false, "the count costs 2 ms per record: the source is backpressured")
	flag.Float64Var(&c.rate, "rate", 2000, "records per second (0: as fast as it can)")
	flag.StringVar(&c.dir, "dir", "", "where checkpoints and savepoints go (default: a new directory under the temp directory)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, logger, os.Stdout, c); err != nil {
		fmt.Fprintln(os.Stderr, "observability:", err)
		os.Exit(1)
	}
}

// checkExposure refuses to serve the API without a token on an address
// others can reach.
func checkExposure(addr, token string) error {
	if token != "" || api.LoopbackAddr(addr) {
		return nil
	}
	return fmt.Errorf("-address %s is not a loopback address: without a token anyone who reaches it could stop or cancel the job; "+
		"set -token (or SLUICE_TOKEN), or use -address 127.0.0.1:8081", addr)
}

// run runs the job until it ends, ctx is done or -duration ran out.
func run(ctx context.Context, logger *slog.Logger, stdout io.Writer, c config) error {
	if err := checkExposure(c.addr, c.token); err != nil {
		return err
	}
	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	dir := c.dir
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
		sluice.WithCheckpointing(c.interval, filepath.Join(dir, "checkpoints")),
		sluice.WithResumeFromLatestCheckpoint(),
		sluice.WithSavepointDir(filepath.Join(dir, "savepoints")),
		sluice.WithObservers(collector, tracer),
	}
	if c.unaligned {
		opts = append(opts, sluice.WithUnalignedCheckpoints(0))
	}
	env := sluice.NewEnvironment(opts...)
	var gopts []source.DatagenOption
	if c.rate > 0 {
		gopts = append(gopts, source.DatagenRate(c.rate))
	}
	gen := source.NewDatagen(source.RandomRecords(1, 256, 1000), gopts...)
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "datagen",
		sluice.WithCodec[source.Record](source.RecordCodec{}), sluice.UID("datagen"))
	per := time.Duration(0)
	if c.slow {
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

	srv := api.New(api.Options{Addr: c.addr, Token: c.token, CertFile: c.cert, KeyFile: c.key, Logger: logger,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})})
	srv.AddJob(job)
	if err := srv.Start(); err != nil {
		job.Cancel()
		_ = job.Wait()
		return err
	}
	fmt.Fprintf(stdout, "dashboard  %s/\nmetrics    %s/metrics\napi        %s/jobs\ncheckpoints and savepoints under %s\n",
		srv.URL(), srv.URL(), srv.URL(), dir)

	err = job.Wait()
	// The job ended. If a client stopped it with a savepoint, it learns
	// where the savepoint is from the API: serve until it has read that,
	// resultGrace at most (a signal ends the wait).
	sctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	sctx, cancelGrace := context.WithTimeout(sctx, resultGrace)
	defer cancelGrace()
	if serr := srv.Shutdown(sctx); serr != nil {
		logger.Warn("close the API server", "err", serr)
	}
	if errors.Is(err, sluice.ErrJobSuspended) && ctx.Err() != nil {
		// Interrupted (SIGINT, SIGTERM) or -duration ran out: the job is
		// suspended, its latest checkpoint kept; run again with the same
		// -dir to resume from it.
		return nil
	}
	return err
}
