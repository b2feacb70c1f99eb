package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/source"
)

// Reporter is a connector's source reader or sink that the collector
// reads on every scrape (see package report): the Kafka source's
// *kafka.Reader and the Kafka sink's *kafka.Sink are ones.
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

// InstrumentSource returns src with every reader it makes reported by the
// collector under job, vertex and the reader's subtask, when the reader
// implements Reporter (a Kafka source's readers do); other readers pass
// through unreported. A reader made for a restarted attempt replaces the
// one before it.
//
//	src, _ := kafka.NewSource(...)
//	stream := sluice.FromSource(env, metrics.InstrumentSource(c, "orders", "kafka", src), ws, "kafka")
func InstrumentSource[T any](c *Collector, job, vertex string, src source.Source[T]) source.Source[T] {
	return &instrumentedSource[T]{Source: src, c: c, job: job, vertex: vertex}
}

type instrumentedSource[T any] struct {
	source.Source[T]
	c           *Collector
	job, vertex string
}

func (s *instrumentedSource[T]) NewReader(ctx source.ReaderContext) (source.Reader[T], error) {
	r, err := s.Source.NewReader(ctx)
	if err != nil {
		return nil, err
	}
	if rep, ok := r.(Reporter); ok {
		s.c.AddReader(s.job, s.vertex, ctx.Subtask, rep)
	}
	return r, nil
}

// AddReader reports the figures of a source reader under job, vertex and
// subtask, replacing the reader registered there before.
func (c *Collector) AddReader(job, vertex string, subtask int, r Reporter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entry(job).readers[readerKey{vertex, subtask}] = r
}

// AddKafkaReader is AddReader, by the name earlier versions gave it.
//
// Deprecated: use AddReader.
func (c *Collector) AddKafkaReader(job, vertex string, subtask int, r KafkaReader) {
	c.AddReader(job, vertex, subtask, r)
}

// AddSink reports the figures of a sink under job and the sink's vertex
// (operator) name, replacing the sink registered there before.
func (c *Collector) AddSink(job, vertex string, s Reporter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(job)
	if e.sinks == nil {
		e.sinks = map[string]Reporter{}
	}
	e.sinks[vertex] = s
}

// AddKafkaSink is AddSink, by the name earlier versions gave it.
//
// Deprecated: use AddSink.
func (c *Collector) AddKafkaSink(job, vertex string, s KafkaSink) { c.AddSink(job, vertex, s) }

// familyDescs holds the descriptor of every family seen, made once.
var familyDescs sync.Map // *report.Family -> *prometheus.Desc

func familyDesc(f *report.Family) *prometheus.Desc {
	if d, ok := familyDescs.Load(f); ok {
		return d.(*prometheus.Desc)
	}
	labels := []string{labelJob, labelVertex}
	if f.Scope == report.Subtask {
		labels = append(labels, labelSubtask)
	}
	d, _ := familyDescs.LoadOrStore(f, prometheus.NewDesc(Prefix+f.Name, f.Help, append(labels, f.Labels...), nil))
	return d.(*prometheus.Desc)
}

// collectReporter sends what r reports, with the labels before the
// family's own (job, vertex and, for readers, subtask).
func collectReporter(em emitter, r Reporter, scope ...string) {
	ch := em.ch
	if em.flink {
		scope = flinkScope(scope)
	}
	r.Report(func(s report.Sample) {
		d := familyDesc(s.Family)
		if em.flink {
			d = flinkFamilyDesc(s.Family)
		}
		labels := append(append(make([]string, 0, len(scope)+len(s.LabelValues)), scope...), s.LabelValues...)
		switch s.Family.Kind {
		case report.Counter:
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, s.Value, labels...)
		case report.Gauge:
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, s.Value, labels...)
		case report.Histogram:
			ch <- prometheus.MustNewConstHistogram(d, s.Count, s.Sum, s.Buckets, labels...)
		}
	})
}

func collectReaders(em emitter, job string, readers map[readerKey]Reporter) {
	for k, r := range readers {
		collectReporter(em, r, job, k.vertex, strconv.Itoa(k.subtask))
	}
}

func collectSinks(em emitter, job string, sinks map[string]Reporter) {
	for vertex, s := range sinks {
		collectReporter(em, s, job, vertex)
	}
}
