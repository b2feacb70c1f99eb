// Package runner owns running one Sluice job as a program, as Flink's
// cluster entrypoints do: Run wires what every job's main function
// otherwise copies (signals, the REST API and dashboard, Prometheus
// metrics, OpenTelemetry traces, /healthz and /readyz, logging, the
// metrics and logs of every Kafka client) from the same Configuration
// (config.yaml, SLUICE_CONF_*, -D) the job's options come from.
//
//	conf := sluice.ConfigFlags(flag.CommandLine) // -config, -D key=value
//	flag.Parse()
//	env := sluice.NewEnvironment(sluice.WithConfiguration(conf), sluice.WithJobName("orders"))
//	// ... sources, transformations, sinks ...
//	if err := runner.Run(context.Background(), env); err != nil {
//		log.Fatal(err)
//	}
//
// It sits above api, metrics and tracing (the root package must not
// import them) and declares its keys (rest.*, metrics.reporter.prom.*,
// log.*, execution.signal.action, traces.reporter.otel.*, listed in
// docs/configuration.md) in package config, so a file, SLUICE_CONF_* or
// -D takes them once a program imports it; unknown keys and bad values
// are refused with the key named, as the others.
//
// Without traces.reporter.otel.exporter.endpoint the OTEL_* variables
// decide (tracing.Provider: autoexport, OTLP over gRPC or HTTP); unset,
// nothing is exported.
//
// # Signals
//
// SIGTERM and SIGINT (WithSignals changes them) do what
// execution.signal.action says. SUSPEND, the lifecycle's meaning of
// SIGTERM: the job stops at once, nothing is recorded and its latest
// checkpoint is kept, so the next start with
// execution.checkpointing.dir resumes from it; Run returns nil.
// STOP_WITH_SAVEPOINT: the job takes a savepoint into
// execution.checkpointing.savepoint-dir (default
// <execution.checkpointing.dir>/savepoints) and finishes, as `flink stop`;
// STOP_WITH_SAVEPOINT_DRAIN first has the sources emit the maximum
// watermark, as `flink stop --drain`. A second signal, or a failed
// savepoint, suspends the job at once. Cancelling ctx suspends the job
// too; Run then returns sluice.ErrJobSuspended.
//
// After the job ended, the API keeps serving until the client that
// stopped it (`sluice stop`) has read where the savepoint is, within
// rest.shutdown-grace; a signal ends that wait.
//
// # Endpoints
//
// The API server (package api) with /metrics, /healthz and /readyz
// (the API's probes), on rest.bind-address:rest.port. A worker
// (cluster.RoleWorker) has no API: it serves /metrics (labelled worker),
// /healthz and /readyz (200 once it registered with the coordinator) on
// metrics.reporter.prom.port, 9249 by default.
//
// # Metrics and logs
//
// The job's metrics (package metrics), Go's and the process's, and
// franz-go's client metrics (kprom, metrics.RegisterKafkaClients) of
// every Kafka client the connectors make, all on one registry. The
// connectors, their Kafka clients and the RocksDB backend log through the
// job's logger (a connector's own Logger wins): the logger made from
// log.level and log.format, which also becomes slog's default, or the one
// given with WithLogger or to the environment (sluice.WithLogger).
//
// # Kafka client properties
//
// The configuration's kafka.properties.* (security.protocol, sasl.*,
// ssl.*, client.id; see docs/configuration.md) are given to every
// Kafka client the connectors make; a connector's own ClientOptions win.
package runner
