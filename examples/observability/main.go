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
//
// The wiring is the job runner's (package runner): any of its keys and
// the job's go in a config.yaml (-config) or -D key=value, e.g.
//
//	go run ./examples/observability -D metrics.reporter.prom.naming=flink   # Flink's metric names
//	go run ./examples/observability -D execution.signal.action=STOP_WITH_SAVEPOINT   # Ctrl-C takes a savepoint
//	go run ./examples/observability -D log.level=debug -D log.format=json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/runner"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
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
	conf                   *sluice.Configuration // -config, -D
}

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
	c.conf = sluice.ConfigFlags(flag.CommandLine)
	flag.Parse()
	if err := run(context.Background(), nil, os.Stdout, c); err != nil {
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

// run runs the job until it ends, a signal suspends it (or stops it, as
// execution.signal.action says), ctx is done or -duration ran out. A nil
// logger is made from log.level and log.format.
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
	conf := c.conf
	if conf == nil {
		conf = sluice.NewConfiguration()
	}
	// The flags' values, unless the configuration has the key.
	defaults := map[string]string{
		"pipeline.name":                         jobName,
		"parallelism.default":                   "2",
		"execution.checkpointing.interval":      c.interval.String(),
		"execution.checkpointing.dir":           filepath.Join(dir, "checkpoints"),
		"execution.checkpointing.savepoint-dir": filepath.Join(dir, "savepoints"),
	}
	if c.unaligned {
		defaults["execution.checkpointing.unaligned.enabled"] = "true"
	}
	if c.token != "" {
		defaults[runner.KeyRestToken] = c.token
	}
	if c.cert != "" || c.key != "" {
		defaults[runner.KeyRestCert], defaults[runner.KeyRestKey] = c.cert, c.key
	}
	for k, v := range defaults {
		if _, set := conf.Get(k); !set {
			if err := conf.Set(k, v); err != nil {
				return err
			}
		}
	}

	env := sluice.NewEnvironment(sluice.WithConfiguration(conf))
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

	opts := []runner.Option{runner.WithRESTAddress(c.addr), runner.OnStarted(func(s runner.Started) {
		fmt.Fprintf(stdout, "dashboard  %s/\nmetrics    %s/metrics\napi        %s/jobs\nhealth     %s/healthz %s/readyz\ncheckpoints and savepoints under %s\n",
			s.APIURL, s.APIURL, s.APIURL, s.APIURL, s.APIURL, dir)
	})}
	if logger != nil {
		opts = append(opts, runner.WithLogger(logger))
	}
	err := runner.Run(ctx, env, opts...)
	if errors.Is(err, sluice.ErrJobSuspended) && ctx.Err() != nil {
		// -duration ran out: the job is suspended, its latest checkpoint
		// kept; run again with the same -dir to resume from it.
		return nil
	}
	return err
}
