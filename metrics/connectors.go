package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/source"
)

// Reporter is a connector's source reader or sink writer whose figures
// the runtime reads with its task's (see package report): the Kafka
// source's *kafka.Reader and the Kafka sink's writers are ones.
type Reporter = report.Reporter

// KafkaReader is the Reporter of a source reader, by the name earlier
// versions gave it.
//
// Deprecated: use Reporter.
type KafkaReader = report.Reporter

// KafkaSink is the Reporter of a sink, by the name earlier versions gave
// it.
//
// Deprecated: use Reporter.
type KafkaSink = report.Reporter

// InstrumentSource returns src unchanged.
//
// Deprecated: the runtime reports every reader that implements Reporter
// (a Kafka source's do) with its task's figures, to the collectors that
// observe the job (sluice.WithObservers, AddJob) and the REST API, under
// the job's own vertex and operator names: wrapping adds nothing.
func InstrumentSource[T any](c *Collector, job, vertex string, src source.Source[T]) source.Source[T] {
	return src
}

// AddReader does nothing.
//
// Deprecated: the runtime reports every reader that implements Reporter
// with its task's figures (see InstrumentSource).
func (c *Collector) AddReader(job, vertex string, subtask int, r Reporter) {}

// AddKafkaReader does nothing.
//
// Deprecated: see AddReader.
func (c *Collector) AddKafkaReader(job, vertex string, subtask int, r KafkaReader) {}

// AddSink does nothing.
//
// Deprecated: the runtime reports every sink writer that implements
// Reporter (a Kafka sink's do) with its task's figures, per subtask.
func (c *Collector) AddSink(job, vertex string, s Reporter) {}

// AddKafkaSink does nothing.
//
// Deprecated: see AddSink.
func (c *Collector) AddKafkaSink(job, vertex string, s KafkaSink) {}

// Label of the operator whose reader or writer reported a connector's
// figure.
const labelOperator = "operator"

// familyDescs holds the descriptor of every family seen, made once.
var familyDescs sync.Map // *report.Family -> *prometheus.Desc

func familyDesc(f *report.Family) *prometheus.Desc {
	if d, ok := familyDescs.Load(f); ok {
		return d.(*prometheus.Desc)
	}
	labels := append([]string{labelJob, labelVertex, labelSubtask, labelOperator}, f.Labels...)
	d, _ := familyDescs.LoadOrStore(f, prometheus.NewDesc(Prefix+f.Name, f.Help, labels, nil))
	return d.(*prometheus.Desc)
}

// collectConnectors sends the figures of the task's connectors, those of
// families this process registered (a figure of another is a worker's
// connector this program does not import: it has no descriptor).
func collectConnectors(em emitter, job string, t runtime.TaskMetrics) {
	sub := strconv.Itoa(t.Subtask)
	for _, fig := range t.Connectors {
		f := report.Lookup(fig.Family)
		if f == nil {
			continue
		}
		var d *prometheus.Desc
		var labels []string
		if em.flink {
			d = flinkFamilyDesc(f)
			labels = []string{flinkID(job), job, flinkID(job, t.Vertex), t.Vertex, sub, flinkID(job, t.Vertex, fig.Operator), fig.Operator}
		} else {
			d = familyDesc(f)
			labels = []string{job, t.Vertex, sub, fig.Operator}
		}
		labels = append(labels, fig.Labels...)
		var m prometheus.Metric
		var err error
		switch f.Kind {
		case report.Counter:
			m, err = prometheus.NewConstMetric(d, prometheus.CounterValue, fig.Value, labels...)
		case report.Gauge:
			m, err = prometheus.NewConstMetric(d, prometheus.GaugeValue, fig.Value, labels...)
		case report.Histogram:
			m, err = prometheus.NewConstHistogram(d, fig.Count, fig.Sum, fig.BucketMap(), labels...)
		default:
			continue
		}
		if err == nil { // a figure whose labels do not fit its family's is left out
			em.ch <- m
		}
	}
}
