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
// SLUICE_PARALLELISM, SLUICE_TRANSACTIONAL_ID_PREFIX, and the cluster's SLUICE_* variables
// (cluster.Flags); any option by its Flink key from -config
// (config.yaml), SLUICE_CONF_* or -D key=value, the job runner's too
// (package runner: rest.*, metrics.reporter.prom.*, log.*,
// execution.signal.action, traces.reporter.otel.*). The Kafka clients'
// security (kafka.properties.security.protocol, sasl.*, ssl.*) comes
// from the same configuration. Logs are JSON unless log.format says
// otherwise.
//
// /metrics and the REST API show the Kafka connectors' figures with no
// wiring here: the runtime reads every source reader and sink writer
// that reports metrics. The input's records lag, Flink's
// records-lag-max, is the one to watch:
//
//	sluice_kafka_source_records_lag_max{job_name="wordcountd",operator="lines",subtask="0",vertex="lines -> split"}
//	sluice_kafka_source_pendingRecords{...}                     the lag over the subtask's partitions
//	sluice_kafka_source_currentOffset{...,topic,partition}      and committedOffset, recordsLag, highWatermark
//	sluice_kafka_sink_transactionsCommitted{...,operator="output"}
//
// (flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_records_lag_max
// with metrics.reporter.prom.naming: flink;
// 0.lines.KafkaSourceReader.KafkaConsumer.records-lag-max in
// GET /jobs/wordcountd/vertices/<id>/metrics.)
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/runner"
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
	txnPrefix                                     string
	cluster                                       *cluster.Config
	conf                                          *sluice.Configuration
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
	flag.StringVar(&o.apiAddr, "api", ":8081", "single and coordinator roles: REST API, dashboard, /metrics, /healthz, /readyz (rest.port 8081); empty: none")
	flag.StringVar(&o.apiHosts, "api-allowed-hosts", env("SLUICE_API_ALLOWED_HOSTS", ""), "host names the API answers to besides localhost and IP addresses, comma separated (e.g. the coordinator Service's DNS name; $SLUICE_API_ALLOWED_HOSTS)")
	flag.StringVar(&o.txnPrefix, "transactional-id-prefix", env("SLUICE_TRANSACTIONAL_ID_PREFIX", "wordcountd"),
		"the output's Kafka transactional id prefix: one per job writing to a cluster at once ($SLUICE_TRANSACTIONAL_ID_PREFIX)")
	flag.StringVar(&o.metricsAddr, "metrics", ":9249", "worker role: the worker's /metrics, /healthz, /readyz (Flink's Prometheus reporter port 9249); empty: none")
	o.cluster = cluster.Flags(flag.CommandLine)
	o.conf = sluice.ConfigFlags(flag.CommandLine)
	flag.Parse()
	if err := run(context.Background(), o, nil); err != nil {
		slog.Error("wordcountd", "err", err)
		os.Exit(1)
	}
}

// run runs this process's role until the job ended, a signal or ctx; a
// nil logger is made from log.level and log.format (JSON by default).
func run(ctx context.Context, o options, logger *slog.Logger) error {
	if o.brokers == "" {
		return errors.New("no Kafka brokers: set --brokers or KAFKA_BROKERS")
	}
	if o.checkpoints == "" {
		return errors.New("no checkpoint directory: set --checkpoints or SLUICE_CHECKPOINT_DIR")
	}
	seeds := strings.Split(o.brokers, ",")
	conf := o.conf
	if conf == nil {
		conf = sluice.NewConfiguration()
	}
	// The flags' values, unless the configuration has the key.
	defaults := map[string]string{"log.format": "json"}
	if o.apiHosts != "" {
		defaults[runner.KeyRestAllowed] = o.apiHosts
	}
	for k, v := range defaults {
		if _, set := conf.Get(k); !set {
			if err := conf.Set(k, v); err != nil {
				return err
			}
		}
	}
	kopts, err := kafkasource.ClientOptionsFrom(conf)
	if err != nil {
		return err
	}
	ropts := []runner.Option{}
	if logger != nil {
		ropts = append(ropts, runner.WithLogger(logger))
	}
	if o.apiAddr == "" {
		ropts = append(ropts, runner.WithoutREST())
	} else {
		ropts = append(ropts, runner.WithRESTAddress(o.apiAddr))
	}
	if _, set := conf.Get(runner.KeyPromPort); !set {
		ropts = append(ropts, runner.WithPrometheusAddress(o.metricsAddr))
	}

	envr := sluice.NewEnvironment(
		sluice.WithJobName("wordcountd"),
		sluice.WithParallelism(o.parallelism),
		sluice.WithCheckpointing(o.interval, o.checkpoints),
		sluice.WithStateBackend(rocksdb.Factory(o.stateDir, rocksdb.Options{})),
		cluster.With(*o.cluster),
		sluice.WithConfiguration(conf),
	)
	src, err := kafkasource.NewSource(seeds, kafkasource.Topics(o.input),
		func(r *kgo.Record) (string, error) { return string(r.Value), nil }, kafkasource.ClientOptions(kopts...))
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
	}, kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix(cmp.Or(o.txnPrefix, "wordcountd")), kafkasink.ClientOptions(kopts...))
	if err != nil {
		return err
	}
	sluice.SinkTo(counts, snk, sluice.Name("output"), sluice.UID("output"))
	return runner.Run(ctx, envr, ropts...)
}
