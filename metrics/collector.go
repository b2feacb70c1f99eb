package metrics

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/backpressure"
	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/runtime/autoscaler"
)

// Job is what the collector reads from a job on every scrape;
// *runtime.Job (sluice.Job) implements it.
type Job interface {
	Config() runtime.Config
	Status() runtime.JobStatus
	Restarts() int64
	Metrics() []runtime.TaskMetrics
	CheckpointStats() (checkpoint.JobStats, bool)
	LastRestore() (runtime.RestoreInfo, bool)
}

// downtimeSource is a job that records its outages after failures
// (*runtime.Job).
type downtimeSource interface {
	Downtime() time.Duration
	Downtimes() []runtime.FailoverDowntime
}

// Prefix starts every metric name.
const Prefix = "sluice_"

// DefaultDurationBuckets are the buckets of the checkpoint duration
// histogram, in seconds: 5 ms to about 80 s.
var DefaultDurationBuckets = prometheus.ExponentialBuckets(0.005, 2, 15)

// MinRateWindow is the least task time between two scrapes over which
// the per-second busy, idle and backpressured times are measured; a scrape
// sooner than that repeats the previous figures.
const MinRateWindow = time.Second

// Collector is a prometheus.Collector of the jobs added to it. Register it
// with one registry; it is safe for concurrent use.
type Collector struct {
	durations *prometheus.HistogramVec
	flink     bool // WithFlinkNames

	mu   sync.Mutex
	jobs map[string]*jobEntry
}

type jobEntry struct {
	job   Job
	rates *backpressure.Sampler
}

type taskKey struct {
	vertex  string
	subtask int
}

// Option configures a Collector.
type Option func(*collectorConfig)

type collectorConfig struct {
	buckets []float64
	flink   bool
}

// WithDurationBuckets sets the buckets (seconds) of the checkpoint
// duration histogram.
func WithDurationBuckets(b []float64) Option {
	return func(c *collectorConfig) { c.buckets = slices.Clone(b) }
}

// NewCollector returns a collector with no jobs.
func NewCollector(opts ...Option) *Collector {
	cfg := collectorConfig{buckets: DefaultDurationBuckets}
	for _, o := range opts {
		o(&cfg)
	}
	return &Collector{
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    Prefix + "job_checkpoint_duration_seconds",
			Help:    "End-to-end duration of completed checkpoints (savepoints excluded), from trigger to the last acknowledgement.",
			Buckets: cfg.buckets,
		}, []string{labelJob}),
		jobs:  map[string]*jobEntry{},
		flink: cfg.flink,
	}
}

// AddJob makes the collector report j under its job name (replacing an
// earlier job of the same name, whose histogram it keeps).
func (c *Collector) AddJob(j Job) {
	name := j.Config().JobName
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(name)
	e.job = j
	e.rates = backpressure.NewSampler(MinRateWindow)
}

// RemoveJob stops reporting the job of that name.
func (c *Collector) RemoveJob(name string) {
	c.mu.Lock()
	delete(c.jobs, name)
	c.mu.Unlock()
	c.durations.DeleteLabelValues(name)
}

func (c *Collector) entry(name string) *jobEntry {
	e := c.jobs[name]
	if e == nil {
		e = &jobEntry{rates: backpressure.NewSampler(MinRateWindow)}
		c.jobs[name] = e
	}
	return e
}

// CheckpointListener returns the listener (for sluice.WithCheckpointListener)
// that feeds the checkpoint duration histogram of the job of that name
// with every completed checkpoint.
func (c *Collector) CheckpointListener(job string) func(checkpoint.Stats) {
	return func(cs checkpoint.Stats) { c.ObserveCheckpoint(job, cs) }
}

// ObserveCheckpoint feeds the checkpoint duration histogram of the job
// named job with a checkpoint that ended: completed checkpoints count,
// savepoints and failed checkpoints do not.
func (c *Collector) ObserveCheckpoint(job string, cs checkpoint.Stats) {
	if cs.Status == checkpoint.StatusCompleted && cs.Kind != checkpoint.KindSavepoint {
		c.durations.WithLabelValues(job).Observe(cs.EndToEndDuration.Seconds())
	}
}

// Describe sends the descriptors of every metric the collector reports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.flink {
		for _, d := range flinkDescs {
			ch <- d.task
			if d.operator != nil {
				ch <- d.operator
			}
		}
		for _, d := range flinkStatusDescs {
			ch <- d
		}
		// User metrics keep their Sluice names.
		for _, d := range []*prometheus.Desc{descUserCounter, descUserGauge, descUserMeterRate, descUserMeterN, descUserHistogram} {
			ch <- d
		}
	} else {
		for _, d := range allDescs {
			ch <- d
		}
	}
	for _, f := range report.Families() {
		if c.flink {
			ch <- flinkFamilyDesc(f)
		} else {
			ch <- familyDesc(f)
		}
	}
	c.durations.Describe(ch)
}

// Collect reads every job and sends its metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	type snap struct {
		name string
		e    *jobEntry
	}
	c.mu.Lock()
	snaps := make([]snap, 0, len(c.jobs))
	for name, e := range c.jobs {
		snaps = append(snaps, snap{name, e})
	}
	c.mu.Unlock()
	em := emitter{ch: ch, flink: c.flink}
	for _, s := range snaps {
		if s.e.job != nil {
			collectJob(em, s.name, s.e)
		}
	}
	c.durations.Collect(ch)
}

func collectJob(em emitter, name string, e *jobEntry) {
	j := e.job
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		em.send(d, prometheus.GaugeValue, v, append([]string{name}, labels...)...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		em.send(d, prometheus.CounterValue, v, append([]string{name}, labels...)...)
	}
	em.status(name, j.Status())
	counter(descNumRestarts, float64(j.Restarts()))

	stats, ok := j.CheckpointStats()
	var last *checkpoint.Stats
	if ok {
		gauge(descCompleted, float64(stats.Completed))
		gauge(descFailed, float64(stats.Failed))
		gauge(descInProgress, float64(stats.InProgress))
		gauge(descTotal, float64(stats.Total))
		last = latestCompleted(stats)
		if last != nil {
			gauge(descLastDuration, float64(last.EndToEndDuration.Milliseconds()))
			gauge(descLastSize, float64(last.CheckpointedSize))
			gauge(descLastFullSize, float64(last.StateSize))
			gauge(descLastPersisted, float64(last.PersistedData))
			gauge(descLastProcessed, float64(last.ProcessedData))
			gauge(descLastID, float64(last.ID))
		}
		if r := stats.LatestRestored; r != nil {
			gauge(descLastRestoreTS, float64(r.RestoreTime.UnixMilli()))
		}
	}
	if ds, ok := j.(downtimeSource); ok {
		gauge(descDowntime, float64(ds.Downtime().Milliseconds()))
		if list := ds.Downtimes(); len(list) > 0 {
			if last := list[len(list)-1]; last.Checkpointed > 0 {
				gauge(descFailoverDown, float64(last.Checkpointed.Milliseconds()))
			}
		}
	}
	collectAutoscaler(gauge, counter, j)
	if r, ok := j.LastRestore(); ok {
		gauge(descRestoredSize, float64(r.RestoredSize))
		gauge(descRestoreDuration, float64((r.StateRestore + r.ChannelStateReplay).Milliseconds()))
	}

	tasks := j.Metrics()
	rates := e.rates.Rates(tasks)
	figures := map[taskKey]checkpoint.TaskFigures{}
	if last != nil {
		for _, t := range last.Tasks {
			if t.Acknowledged {
				figures[taskKey{t.Vertex, t.Subtask}] = t.Figures
			}
		}
	}
	for i, t := range tasks {
		sub := strconv.Itoa(t.Subtask)
		collectUser(em.ch, name, t)
		collectConnectors(em, name, t)
		counter(descRecordsIn, float64(t.RecordsIn), t.Vertex, sub)
		counter(descRecordsOut, float64(t.RecordsOut), t.Vertex, sub)
		counter(descBytesIn, float64(t.BytesIn), t.Vertex, sub)
		counter(descBytesOut, float64(t.BytesOut), t.Vertex, sub)
		gauge(descBusyPerSec, rates[i].Busy, t.Vertex, sub)
		gauge(descIdlePerSec, rates[i].Idle, t.Vertex, sub)
		gauge(descBPPerSec, rates[i].BackPressured, t.Vertex, sub)
		counter(descAccBusy, float64(t.BusyTime.Milliseconds()), t.Vertex, sub)
		counter(descAccIdle, float64(t.IdleTime.Milliseconds()), t.Vertex, sub)
		counter(descAccBP, float64(t.BackPressuredTime.Milliseconds()), t.Vertex, sub)
		gauge(descInputWM, float64(t.InputWatermark), t.Vertex, sub)
		gauge(descOutputWM, float64(t.OutputWatermark), t.Vertex, sub)
		if f, ok := figures[taskKey{t.Vertex, t.Subtask}]; ok {
			gauge(descAlignment, float64(f.Alignment.Nanoseconds()), t.Vertex, sub)
			gauge(descStartDelay, float64(f.StartDelay.Nanoseconds()), t.Vertex, sub)
		}
	}
}

// collectAutoscaler sends the figures of the autoscaler running with j,
// if one does: per vertex those of its latest evaluation over a full
// metrics window.
func collectAutoscaler(gauge, counter func(d *prometheus.Desc, v float64, labels ...string), j Job) {
	d := autoscaler.Of(j)
	if d == nil {
		return
	}
	counter(descASRescales, float64(d.Rescales()))
	for _, v := range d.LastEvaluated().Vertices {
		gauge(descASRecommended, float64(v.NewParallelism), v.Name)
		gauge(descASTrueRate, float64(v.TrueProcessingRate), v.Name)
		gauge(descASTargetRate, float64(v.TargetRate), v.Name)
		gauge(descASLag, float64(v.Lag), v.Name)
	}
}

// latestCompleted returns the newest completed checkpoint or savepoint.
func latestCompleted(s checkpoint.JobStats) *checkpoint.Stats {
	last := s.LatestCompleted
	if sp := s.LatestSavepoint; sp != nil && (last == nil || sp.ID > last.ID) {
		last = sp
	}
	return last
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ObserveJob registers a job that has just started (sluice.WithObservers
// calls it).
func (c *Collector) ObserveJob(j *runtime.Job) { c.AddJob(j) }
