// Package report is the contract between the metrics collector (package
// metrics) and the connectors it reports, with no dependency on either
// or on Prometheus: a connector declares the metric families it reports
// (Register, from an init function) and its readers or sinks implement
// Reporter; the collector adds the job, vertex and subtask labels, the
// sluice_ prefix, and serves them. A new connector plugs in here without
// any change to package metrics.
package report

import "sync"

// Kind is the Prometheus type of a family.
type Kind uint8

const (
	Counter Kind = iota
	Gauge
	Histogram
)

// Scope says which labels the collector puts before a family's own.
type Scope uint8

const (
	// Subtask: job_name, vertex, subtask; for a source reader's figures.
	Subtask Scope = iota
	// Vertex: job_name, vertex; for a sink's figures over its subtasks.
	Vertex
)

// Family is one metric a connector reports.
type Family struct {
	Scope Scope
	// Name follows the collector's sluice_ prefix, as
	// "kafka_source_currentOffset".
	Name string
	Help string
	Kind Kind
	// Labels follow the scope's labels.
	Labels []string
}

// Sample is one value of a family, with the values of the family's own
// labels. A histogram has Count, Sum and the cumulative count per upper
// bound in Buckets instead of Value.
type Sample struct {
	Family      *Family
	LabelValues []string
	Value       float64
	Count       uint64
	Sum         float64
	Buckets     map[float64]uint64
}

// Reporter is a source reader or a sink whose figures the collector
// reads on every scrape: Report calls emit once per sample, of families
// that were registered. It may be called from any goroutine.
type Reporter interface {
	Report(emit func(Sample))
}

var (
	mu       sync.Mutex
	families []*Family
)

// Register declares families, so that the collector describes them
// before any reporter is added. Call it from an init function of the
// package that reports them.
func Register(fs ...*Family) {
	mu.Lock()
	defer mu.Unlock()
	families = append(families, fs...)
}

// Families returns the registered families, in registration order.
func Families() []*Family {
	mu.Lock()
	defer mu.Unlock()
	return append([]*Family(nil), families...)
}
