// Package metrics owns the Prometheus metrics of Sluice jobs: a
// prometheus.Collector that, on every scrape, reads the jobs registered
// with it (their checkpoint statistics, restarts and task figures) and the
// connectors' readers and sinks added to it, plus a histogram of
// checkpoint durations fed by the checkpoint listener.
//
// It imports no connector. A connector plugs in through package report:
// it registers the metric families it reports (the Kafka source and sink
// do so in their init functions) and its readers or sinks implement
// report.Reporter; the collector adds the job, vertex and subtask labels.
//
// Names are Flink's where a Flink user would look for them, with a
// sluice_ prefix and the scope (job, task, kafka_source) in between, as
// Flink's Prometheus reporter writes them:
//
//	sluice_job_numberOfCompletedCheckpoints{job_name}
//	sluice_task_busyTimeMsPerSecond{job_name,vertex,subtask}
//	sluice_kafka_source_currentOffset{job_name,vertex,subtask,topic,partition}
//
// Source readers are reported when their source is wrapped with
// InstrumentSource, sinks when added with AddSink.
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
