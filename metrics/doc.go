// Package metrics owns the Prometheus metrics of Sluice jobs: a
// prometheus.Collector that, on every scrape, reads the jobs registered
// with it (their checkpoint statistics, restarts and task figures, the
// figures of their connectors among them), plus a histogram of
// checkpoint durations fed by the checkpoint listener.
//
// It imports no connector. A connector plugs in through package report:
// it registers the metric families it reports (the Kafka source and sink
// do so in their init functions) and its readers or writers implement
// report.Reporter; the runtime reads them with their task's figures,
// with no wiring by the program, and the collector adds the job, vertex,
// subtask and operator labels.
//
// Names are Flink's where a Flink user would look for them, with a
// sluice_ prefix and the scope (job, task, kafka_source) in between, as
// Flink's Prometheus reporter writes them:
//
//	sluice_job_numberOfCompletedCheckpoints{job_name}
//	sluice_task_busyTimeMsPerSecond{job_name,vertex,subtask}
//	sluice_kafka_source_records_lag_max{job_name,vertex,subtask,operator}
//	sluice_kafka_source_currentOffset{job_name,vertex,subtask,operator,topic,partition}
//
// The job label is job_name (as Flink's reporter has it), not job, which
// Prometheus reserves for the scrape job. The only global state is the
// connectors' families, declared once at init: make a Collector per
// process and register it with the registry you serve.
//
//	reg := prometheus.NewRegistry()
//	c := metrics.NewCollector()
//	reg.MustRegister(c)
//	env := sluice.NewEnvironment(sluice.WithJobName("orders"), sluice.WithObservers(c))
//	job, _ := env.ExecuteAsync(ctx)
//	c.AddJob(job)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
package metrics
