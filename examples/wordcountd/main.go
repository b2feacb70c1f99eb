// Command wordcountd is the word count as a long-running service: the
// program deploy/kubernetes runs (the image's entrypoint). It reads lines
// from a Kafka topic, counts words in RocksDB keyed state and writes
// (word, count) to another topic exactly once, with checkpoints into a
// directory every process can reach (s3://... on Kubernetes), resuming
// from the latest one at every start. SIGTERM or SIGINT suspends the job
// (its checkpoints are kept for the next start).
//
// One binary, three roles (--role, or SLUICE_ROLE):
//
//	wordcountd                          the whole job in this process
//	wordcountd --role coordinator       the job's life and checkpoints; API,
//	                                    dashboard and /metrics on --api
//	wordcountd --role worker --coordinator HOST:6123 --slots 2
//	                                    runs the tasks placed on it; its own
//	                                    /metrics (label worker) on --metrics
//
// Settings come from flags or the environment: KAFKA_BROKERS,
// SLUICE_INPUT_TOPIC, SLUICE_OUTPUT_TOPIC, SLUICE_CHECKPOINT_DIR,
// SLUICE_PARALLELISM, and the cluster's SLUICE_* variables
// (sluice.ClusterFlags); -D key=value sets a cluster option by its Flink
// key.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/metrics"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	kafkasource "github.com/sluicehq/sluice/source/kafka"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// WordCount is one output record.
type WordCount struct {
	Word  string
	Count int64
}

type countWords struct{ count state.ValueState[int64] }

func (c *countWords) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *countWords) ProcessElement(ctx *sluice.KeyedContext[string], _ string, out sluice.Collector[WordCount]) error {
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(WordCount{Word: ctx.Key(), Count: n})
	return nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

type options struct {
	brokers, input, output, checkpoints, stateDir string
	parallelism                                   int
	interval                                      time.Duration
	apiAddr, metricsAddr                          string
	apiHosts                                      string
	cluster                                       *sluice.ClusterConfig
}

func main() {
	var o options
	par, _ := strconv.Atoi(env("SLUICE_PARALLELISM", "2"))
	flag.StringVar(&o.brokers, "brokers", env("KAFKA_BROKERS", ""), "Kafka seed brokers, comma separated ($KAFKA_BROKERS)")
	flag.StringVar(&o.input, "input", env("SLUICE_INPUT_TOPIC", "lines"), "input topic of text lines ($SLUICE_INPUT_TOPIC)")
	flag.StringVar(&o.output, "output", env("SLUICE_OUTPUT_TOPIC", "word-counts"), "output topic of (word, count) ($SLUICE_OUTPUT_TOPIC)")
	flag.StringVar(&o.checkpoints, "checkpoints", env("SLUICE_CHECKPOINT_DIR", ""), "checkpoint directory every process reaches: s3://bucket/prefix or a shared path ($SLUICE_CHECKPOINT_DIR)")
	flag.StringVar(&o.stateDir, "state-dir", env("SLUICE_STATE_DIR", os.TempDir()), "RocksDB working directory ($SLUICE_STATE_DIR)")
	flag.IntVar(&o.parallelism, "parallelism", par, "parallelism of every operator ($SLUICE_PARALLELISM)")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "checkpoint interval (execution.checkpointing.interval)")
	flag.StringVar(&o.apiAddr, "api", ":8081", "single and coordinator roles: REST API, dashboard and /metrics (rest.port 8081); empty: none")
	flag.StringVar(&o.apiHosts, "api-allowed-hosts", env("SLUICE_API_ALLOWED_HOSTS", ""), "host names the API answers to besides localhost and IP addresses, comma separated (e.g. the coordinator Service's DNS name; $SLUICE_API_ALLOWED_HOSTS)")
	flag.StringVar(&o.metricsAddr, "metrics", ":9249", "worker role: the worker's /metrics (Flink's Prometheus reporter port 9249); empty: none")
	o.cluster = sluice.ClusterFlags(flag.CommandLine)
	flag.Parse()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, logger); err != nil {
		logger.Error("wordcountd", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, logger *slog.Logger) error {
	if o.brokers == "" {
		return errors.New("no Kafka brokers: set --brokers or KAFKA_BROKERS")
	}
	if o.checkpoints == "" {
		return errors.New("no checkpoint directory: set --checkpoints or SLUICE_CHECKPOINT_DIR")
	}
	seeds := strings.Split(o.brokers, ",")

	reg := prometheus.NewRegistry()
	collector := metrics.NewCollector()
	role := o.cluster.Role
	if role == sluice.RoleWorker && o.metricsAddr != "" {
		// One worker per process: its collector is registered once.
		started := o.cluster.WorkerStarted
		o.cluster.WorkerStarted = func(v *cluster.WorkerView) {
			collector.AddJob(v)
			prometheus.WrapRegistererWith(prometheus.Labels{"worker": v.WorkerID()}, reg).MustRegister(collector)
			if started != nil {
				started(v)
			}
		}
		srv := &http.Server{Addr: o.metricsAddr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("worker metrics endpoint", "addr", o.metricsAddr, "err", err)
			}
		}()
		defer srv.Close()
	}

	envr := sluice.NewEnvironment(
		sluice.WithJobName("wordcountd"),
		sluice.WithLogger(logger),
		sluice.WithParallelism(o.parallelism),
		sluice.WithCheckpointing(o.interval, o.checkpoints),
		sluice.WithResumeFromLatestCheckpoint(),
		sluice.WithStateBackend(rocksdb.Factory(o.stateDir, rocksdb.Options{})),
		sluice.WithCluster(*o.cluster),
		sluice.WithCheckpointListener(collector.CheckpointListener("wordcountd")),
	)
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(o.input),
		func(r *kgo.Record) (string, error) { return string(r.Value), nil }, kafkasource.Logger(logger))
	if err != nil {
		return err
	}
	lines := sluice.FromSource(envr, src, sluice.NoWatermarks[string](), "lines", sluice.UID("lines"))
	split := sluice.FlatMap(lines, func(line string, c sluice.Collector[string]) error {
		for _, w := range strings.FieldsFunc(strings.ToLower(line), func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' }) {
			c.Collect(w)
		}
		return nil
	}, sluice.Name("split"), sluice.UID("split"))
	counts := sluice.Process[string, string, WordCount](sluice.KeyBy(split, func(w string) string { return w }),
		&countWords{}, sluice.Name("count"), sluice.UID("count"))
	snk, err := kafkasink.NewSink(seeds, func(wc WordCount) (*kgo.Record, error) {
		return &kgo.Record{Topic: o.output, Key: []byte(wc.Word), Value: strconv.AppendInt(nil, wc.Count, 10)}, nil
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix("wordcountd"), kafkasink.Logger(logger))
	if err != nil {
		return err
	}
	sluice.SinkTo(counts, snk, sluice.Name("output"), sluice.UID("output"))

	if role == sluice.RoleWorker {
		// Runs the tasks placed here until the job ended or a signal.
		if err := envr.Execute(ctx); err != nil {
			return err
		}
		logger.Info("worker exited")
		return nil
	}
	job, err := envr.ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	if o.apiAddr != "" {
		collector.AddJob(job)
		reg.MustRegister(collector)
		var hosts []string
		for _, h := range strings.Split(o.apiHosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hosts = append(hosts, h)
			}
		}
		a := api.New(api.Options{Addr: o.apiAddr, Logger: logger, AllowedHosts: hosts,
			Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})})
		a.AddJob(job)
		if err := a.Start(); err != nil {
			return fmt.Errorf("API on %s: %w", o.apiAddr, err)
		}
		defer func() {
			// A stop-with-savepoint's caller reads its result before the
			// API goes (bounded).
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = a.Shutdown(sctx)
		}()
		logger.Info("API, dashboard and /metrics", "url", a.URL())
	}
	err = job.Wait()
	switch {
	case errors.Is(err, sluice.ErrJobSuspended):
		logger.Info("job suspended; it resumes from its latest checkpoint at the next start")
		return nil
	case err != nil:
		return err
	}
	logger.Info("job finished")
	return nil
}
