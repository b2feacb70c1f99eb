package operators

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/metrics/report"
)

// MetricKind says what a user-defined metric is.
type MetricKind string

const (
	MetricCounter   MetricKind = "counter"
	MetricGauge     MetricKind = "gauge"
	MetricHistogram MetricKind = "histogram"
	MetricMeter     MetricKind = "meter"
)

// MetricGroup holds the user-defined metrics of one operator subtask, as
// Flink's MetricGroup (getRuntimeContext().getMetricGroup()): register
// them in Open. They are reported with the task's metrics (the job
// handle's Metrics, the REST API's metrics, Prometheus). Registering a
// name again returns the metric registered first. Safe for concurrent
// use: a metric may be updated from any goroutine.
type MetricGroup struct {
	mu        sync.Mutex
	byName    map[string]any
	ordered   []string
	reporters []report.Reporter
}

// NewMetricGroup returns an empty group.
func NewMetricGroup() *MetricGroup { return &MetricGroup{byName: map[string]any{}} }

func register[M any](g *MetricGroup, name string, make func() M) M {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.byName[name].(M); ok {
		return m
	}
	m := make()
	if _, taken := g.byName[name]; !taken {
		g.ordered = append(g.ordered, name)
	}
	g.byName[name] = m
	return m
}

// Counter returns the counter named name (Flink's counter).
func (g *MetricGroup) Counter(name string) *Counter {
	return register(g, name, func() *Counter { return &Counter{} })
}

// Gauge registers fn as the gauge named name; fn is called at every
// report, on the reporting goroutine, so it must be safe for that.
func (g *MetricGroup) Gauge(name string, fn func() float64) {
	register(g, name, func() gaugeFunc { return gaugeFunc(fn) })
}

// Histogram returns the histogram named name: it keeps the last 1024
// values (Flink's DescriptiveStatisticsHistogram window) and reports
// their count, min, max, mean and quantiles.
func (g *MetricGroup) Histogram(name string) *Histogram {
	return register(g, name, func() *Histogram { return &Histogram{window: make([]float64, 0, histogramWindow)} })
}

// Meter returns the meter named name: its count and per-second rate over
// the last minute (Flink's MeterView of 60 s).
func (g *MetricGroup) Meter(name string) *Meter {
	return register(g, name, func() *Meter { return &Meter{start: time.Now()} })
}

// Counter counts, as Flink's Counter.
type Counter struct{ n atomic.Int64 }

func (c *Counter) Inc()         { c.n.Add(1) }
func (c *Counter) Add(n int64)  { c.n.Add(n) }
func (c *Counter) Dec()         { c.n.Add(-1) }
func (c *Counter) Count() int64 { return c.n.Load() }
func (c *Counter) Set(n int64)  { c.n.Store(n) }

type gaugeFunc func() float64

const histogramWindow = 1024

// Histogram records values; see MetricGroup.Histogram.
type Histogram struct {
	mu     sync.Mutex
	window []float64
	next   int
	count  int64
}

// Update records v.
func (h *Histogram) Update(v float64) {
	h.mu.Lock()
	if len(h.window) < histogramWindow {
		h.window = append(h.window, v)
	} else {
		h.window[h.next] = v
		h.next = (h.next + 1) % histogramWindow
	}
	h.count++
	h.mu.Unlock()
}

// HistogramStats are a histogram's figures over its window.
type HistogramStats struct {
	Count          int64
	Min, Max, Mean float64
	// StdDev is the sample standard deviation of the window (0 below two
	// values), as Flink's histogram statistics.
	StdDev float64
	// Quantiles are the 0.5, 0.75, 0.9, 0.95, 0.98, 0.99 and 0.999
	// quantiles, those Flink reports (its median, p75 ... p999).
	Quantiles map[float64]float64
}

// HistogramQuantiles are the quantiles a histogram reports.
var HistogramQuantiles = []float64{0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.999}

// Stats computes the histogram's figures.
func (h *Histogram) Stats() HistogramStats {
	h.mu.Lock()
	vals := slices.Clone(h.window)
	n := h.count
	h.mu.Unlock()
	st := HistogramStats{Count: n, Quantiles: map[float64]float64{}}
	if len(vals) == 0 {
		return st
	}
	sort.Float64s(vals)
	st.Min, st.Max = vals[0], vals[len(vals)-1]
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	st.Mean = sum / float64(len(vals))
	if len(vals) > 1 {
		sq := 0.0
		for _, v := range vals {
			sq += (v - st.Mean) * (v - st.Mean)
		}
		st.StdDev = math.Sqrt(sq / float64(len(vals)-1))
	}
	for _, q := range HistogramQuantiles {
		i := int(math.Ceil(q*float64(len(vals)))) - 1
		st.Quantiles[q] = vals[max(0, min(i, len(vals)-1))]
	}
	return st
}

// Meter measures events per second; see MetricGroup.Meter.
type Meter struct {
	n     atomic.Int64
	mu    sync.Mutex
	start time.Time
	// ring of (time, count) samples taken when the rate is read.
	samples []meterSample
}

type meterSample struct {
	at time.Time
	n  int64
}

// MarkEvent counts one event; MarkEvents n.
func (m *Meter) MarkEvent()         { m.n.Add(1) }
func (m *Meter) MarkEvents(n int64) { m.n.Add(n) }
func (m *Meter) Count() int64       { return m.n.Load() }

// Rate returns the events per second over the last minute (or since the
// meter was made, if sooner).
func (m *Meter) Rate() float64 {
	now := time.Now()
	n := m.n.Load()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, meterSample{now, n})
	from := meterSample{m.start, 0}
	i := 0
	for ; i < len(m.samples) && now.Sub(m.samples[i].at) > time.Minute; i++ {
		from = m.samples[i]
	}
	m.samples = m.samples[i:]
	if len(m.samples) > 0 && now.Sub(from.at) > time.Minute {
		from = m.samples[0]
	}
	d := now.Sub(from.at).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(n-from.n) / d
}

// UserMetric is one user-defined metric's figures, as reported.
type UserMetric struct {
	Operator string     `json:"operator"`
	Name     string     `json:"name"`
	Kind     MetricKind `json:"kind"`
	// Value is a counter's count, a gauge's value, a meter's rate per
	// second, a histogram's mean.
	Value float64 `json:"value"`
	// Count is a meter's or histogram's count of events.
	Count     int64               `json:"count,omitempty"`
	Histogram *HistogramStatsJSON `json:"histogram,omitempty"`
}

// HistogramStatsJSON is HistogramStats with quantiles keyed by their text
// ("0.5"), for JSON.
type HistogramStatsJSON struct {
	Min, Max, Mean, StdDev float64
	Quantiles              map[string]float64
}

// Report returns the figures of every metric of the group, in the order
// they were registered; operator names them.
func (g *MetricGroup) Report(operator string) []UserMetric {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	names := slices.Clone(g.ordered)
	ms := make([]any, len(names))
	for i, n := range names {
		ms[i] = g.byName[n]
	}
	g.mu.Unlock()
	out := make([]UserMetric, 0, len(names))
	for i, m := range ms {
		u := UserMetric{Operator: operator, Name: names[i]}
		switch m := m.(type) {
		case *Counter:
			u.Kind, u.Value = MetricCounter, float64(m.Count())
		case gaugeFunc:
			u.Kind, u.Value = MetricGauge, m()
		case *Meter:
			u.Kind, u.Value, u.Count = MetricMeter, m.Rate(), m.Count()
		case *Histogram:
			st := m.Stats()
			q := map[string]float64{}
			for k, v := range st.Quantiles {
				q[formatQuantile(k)] = v
			}
			u.Kind, u.Value, u.Count = MetricHistogram, st.Mean, st.Count
			u.Histogram = &HistogramStatsJSON{Min: st.Min, Max: st.Max, Mean: st.Mean, StdDev: st.StdDev, Quantiles: q}
		}
		out = append(out, u)
	}
	return out
}

// AddReporter makes the group report r's figures too (ReporterFigures):
// the source operator adds its reader, the sink operator its writer and
// committer, when they implement report.Reporter, so that a connector's
// metrics are reported with the task's without the user wiring them.
// A nil group ignores it.
func (g *MetricGroup) AddReporter(r report.Reporter) {
	if g == nil || r == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reporters = append(g.reporters, r)
}

// ReporterFigures returns what the group's reporters report now, as
// operator's.
func (g *MetricGroup) ReporterFigures(operator string) []report.Figure {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	rs := slices.Clone(g.reporters)
	g.mu.Unlock()
	return report.Read(operator, rs...)
}

func formatQuantile(q float64) string { return strconv.FormatFloat(q, 'g', -1, 64) }
