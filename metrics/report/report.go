// Package report is the contract between the metrics collector (package
// metrics), the runtime and the connectors it reports, with no
// dependency on any of them or on Prometheus: a connector declares the
// metric families it reports (Register, from an init function) and its
// source readers or sink writers implement Reporter. The runtime hands
// every reader, writer and committer that implements Reporter to its
// operator's metric group, and reads it (Read) with the task's figures:
// they travel with them (runtime.TaskMetrics, the control plane of a job
// on several hosts) to the REST API and the collector, which adds the
// job, vertex, subtask and operator labels, the sluice_ prefix, and
// serves them. A new connector plugs in here without any change to
// package metrics, the runtime or the user's program.
package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

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
	// Subtask: job_name, vertex, subtask, operator; every figure the
	// runtime reads from a reader or writer is a subtask's.
	Subtask Scope = iota
	// Vertex: job_name, vertex, operator; for figures over all the
	// subtasks of an operator.
	//
	// Deprecated: the runtime reports every reader and writer per
	// subtask; a family of this scope is reported as Subtask.
	Vertex
)

// Family is one metric a connector reports.
type Family struct {
	// Scope is Subtask.
	Scope Scope
	// Name follows the collector's sluice_ prefix, as
	// "kafka_source_currentOffset".
	Name string
	Help string
	Kind Kind
	// Labels follow the scope's labels.
	Labels []string
	// Flink is the metric's identifier in Flink's metric system, under its
	// operator: groups and name, dot-separated, with {label} where a
	// key-value group puts the value of one of Labels, as
	// "KafkaSourceReader.topic.{topic}.partition.{partition}.currentOffset".
	// The REST API lists the metric as <subtask>.<operator>.<Flink, with
	// the values> (Flink's metric ids); the collector's Flink names are
	// what Flink's Prometheus reporter makes of it
	// (flink_taskmanager_job_task_operator_KafkaSourceReader_topic_partition_currentOffset).
	// Empty: Name.
	Flink string
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

// Reporter is a source reader, sink writer or committer whose figures
// are read with its task's: Report calls emit once per sample, of
// families that were registered. It may be called from any goroutine,
// also after the reader or writer was closed.
type Reporter interface {
	Report(emit func(Sample))
}

var (
	mu       sync.Mutex
	families []*Family
	byName   = map[string]*Family{}
)

// Register declares families, so that the collector describes them
// before any reporter is added and finds them by name (Lookup) in the
// figures a worker sends. Call it from an init function of the package
// that reports them. It panics when a name is registered already.
func Register(fs ...*Family) {
	mu.Lock()
	defer mu.Unlock()
	for _, f := range fs {
		if _, dup := byName[f.Name]; dup {
			panic(fmt.Sprintf("report: metric family %q registered twice", f.Name))
		}
		byName[f.Name] = f
		families = append(families, f)
	}
}

// Families returns the registered families, in registration order.
func Families() []*Family {
	mu.Lock()
	defer mu.Unlock()
	return append([]*Family(nil), families...)
}

// Lookup returns the registered family of that name, nil when none is.
func Lookup(name string) *Family {
	mu.Lock()
	defer mu.Unlock()
	return byName[name]
}

// Figure is one sample of an operator's reporter as read at one time, in
// a form that outlives the reporter and crosses processes (JSON, by the
// family's name): what runtime.TaskMetrics carries.
type Figure struct {
	// Operator is the name of the operator whose reader or writer
	// reported it.
	Operator string   `json:"operator"`
	Family   string   `json:"family"`
	Labels   []string `json:"labels,omitempty"`
	Value    float64  `json:"value,omitempty"`
	// Count, Sum and Buckets are a histogram's, buckets by upper bound,
	// ascending, cumulative.
	Count   uint64   `json:"count,omitempty"`
	Sum     float64  `json:"sum,omitempty"`
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is a histogram's cumulative count up to an upper bound.
type Bucket struct {
	UpperBound float64 `json:"le"`
	Count      uint64  `json:"count"`
}

// Read returns the figures reporters report now, as operator's. A sample
// whose value is not finite (NaN, ±Inf: JSON has no such numbers) or of
// an unregistered family is left out.
func Read(operator string, reporters ...Reporter) []Figure {
	var out []Figure
	for _, r := range reporters {
		r.Report(func(s Sample) {
			if s.Family == nil || Lookup(s.Family.Name) != s.Family || !finite(s.Value) || !finite(s.Sum) {
				return
			}
			f := Figure{Operator: operator, Family: s.Family.Name, Labels: append([]string(nil), s.LabelValues...),
				Value: s.Value, Count: s.Count, Sum: s.Sum}
			for ub, n := range s.Buckets {
				if finite(ub) { // +Inf is implied, as in Prometheus
					f.Buckets = append(f.Buckets, Bucket{UpperBound: ub, Count: n})
				}
			}
			slices.SortFunc(f.Buckets, func(a, b Bucket) int { return cmp.Compare(a.UpperBound, b.UpperBound) })
			out = append(out, f)
		})
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// BucketMap returns f's buckets as Sample.Buckets has them.
func (f Figure) BucketMap() map[float64]uint64 {
	m := make(map[float64]uint64, len(f.Buckets))
	for _, b := range f.Buckets {
		m[b.UpperBound] = b.Count
	}
	return m
}

// FlinkID is f's metric identifier in Flink's metric system (Flink, or
// Name) with the values of a sample's labels put in:
// "KafkaSourceReader.topic.orders.partition.0.currentOffset".
func (f *Family) FlinkID(labelValues []string) string {
	parts := f.flinkParts()
	for i, p := range parts {
		if l, ok := labelOf(p); ok {
			if j := slices.Index(f.Labels, l); j >= 0 && j < len(labelValues) {
				parts[i] = labelValues[j]
			}
		}
	}
	return strings.Join(parts, ".")
}

// FlinkName is the name Flink's Prometheus reporter gives the metric
// under its operator's scope: the groups and the name joined by '_'
// (a key-value group by its key, its value being a label), every
// character other than a letter, digit, ':' or '_' made '_':
// "KafkaSourceReader_topic_partition_currentOffset",
// "KafkaSourceReader_KafkaConsumer_records_lag_max".
func (f *Family) FlinkName() string {
	var kept []string
	for _, p := range f.flinkParts() {
		if _, ok := labelOf(p); !ok {
			kept = append(kept, p)
		}
	}
	return strings.Map(func(r rune) rune {
		if r == ':' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, strings.Join(kept, "_"))
}

func (f *Family) flinkParts() []string { return strings.Split(cmp.Or(f.Flink, f.Name), ".") }

// labelOf returns the label of a "{label}" part of a Flink identifier.
func labelOf(part string) (string, bool) {
	if len(part) > 2 && part[0] == '{' && part[len(part)-1] == '}' {
		return part[1 : len(part)-1], true
	}
	return "", false
}
