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
// import them) and registers its keys with the Configuration
// (sluice.RegisterConfigKey), so a file, SLUICE_CONF_* or -D takes them
// once a program imports it; unknown keys and bad values are refused
// with the key named, as the others.
//
// # Keys
//
//	rest.enabled                 serve the REST API, dashboard, /metrics, /healthz, /readyz (true)
//	rest.bind-address            the address to listen on (rest.address when unset; 127.0.0.1 when neither)
//	rest.address                 Flink's advertised address, the listen address without rest.bind-address
//	rest.port                    8081; 0: any free port
//	rest.bind-port               Flink's port list: 8081, 50100-50200, 50100,50101 (the first free); rest.port when unset
//	rest.authentication.token    bearer token every API call and /metrics must carry (default $SLUICE_TOKEN)
//	rest.allowed-hosts           host names a server without a token answers to besides localhost and IPs (a list)
//	security.ssl.rest.cert-file  PEM certificate chain: serve HTTPS (with the key file)
//	security.ssl.rest.key-file   PEM private key of the certificate
//	rest.shutdown-grace          after the job ended, how long the API waits for the client that stopped it to read the savepoint (10 s)
//	metrics.reporter.prom.port   a separate /metrics endpoint, Flink's reporter port (9249 in a worker, off otherwise); a port list
//	metrics.reporter.prom.host   its listen address (all interfaces)
//	metrics.reporter.prom.naming sluice (sluice_task_numRecordsIn{job_name,vertex,subtask}) or flink (Flink's reporter's
//	                             names and labels, flink_taskmanager_job_task_operator_numRecordsIn{job_name,task_name,
//	                             subtask_index,operator_name,...}: see metrics.WithFlinkNames)
//	log.level                    DEBUG, INFO (default), WARN, ERROR, OFF (log4j's TRACE, FATAL too)
//	log.format                   text (default) or json, on standard error
//	execution.signal.action      what SIGTERM and SIGINT do: SUSPEND (default), STOP_WITH_SAVEPOINT, STOP_WITH_SAVEPOINT_DRAIN
//	traces.reporter.otel.exporter.endpoint   Flink's trace reporter: export traces over OTLP to this URL
//	traces.reporter.otel.exporter.protocol   gRPC (default) or HTTP
//	traces.reporter.otel.exporter.timeout    one export's timeout
//	traces.reporter.otel.service.name        service.name of the traces (sluice)
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
// (RoleWorker) has no API: it serves /metrics (labelled worker),
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
// ssl.*, client.id; see sluice.KafkaClientOptions) are given to every
// Kafka client the connectors make; a connector's own ClientOptions win.
package runner
