package metrics_test

import (
	"io"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/source/kafka"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// series is one gathered sample: its labels and value.
type series struct {
	labels map[string]string
	value  float64
	hist   *dto.Histogram
}

func gather(t *testing.T, reg *prometheus.Registry) map[string][]series {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string][]series{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := series{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Histogram != nil:
				s.hist = m.GetHistogram()
			}
			out[mf.GetName()] = append(out[mf.GetName()], s)
		}
	}
	return out
}

// wantValue is the value one series of a name, whose labels include
// these, must have.
type wantValue struct {
	name   string
	labels map[string]string
	value  float64
}

// checkValues fails the test for every wanted series that is missing or
// has another value.
func checkValues(t *testing.T, all map[string][]series, wants ...wantValue) {
	t.Helper()
	for _, w := range wants {
		if got, ok := value(all, w.name, w.labels); !ok || got != w.value {
			t.Errorf("%s%v = %v (present %t), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
}

// value returns the value of the one series of name whose labels include
// want; ok is false when there is none.
func value(all map[string][]series, name string, want map[string]string) (float64, bool) {
	for _, s := range all[name] {
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
			}
		}
		if match {
			return s.value, true
		}
	}
	return 0, false
}

func sum(all map[string][]series, name, vertex string) float64 {
	var n float64
	for _, s := range all[name] {
		if s.labels["vertex"] == vertex {
			n += s.value
		}
	}
	return n
}

// A bounded job of 1000 records: the record counts are exact, the
// checkpoint figures are those of the last completed checkpoint, and the
// histogram saw every completed checkpoint.
func TestMetricsAfterKnownRun(t *testing.T) {
	const name = "known-run"
	c := metrics.NewCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	run := testjob.Start(t, testjob.Options{Name: name, Records: 1000, Rate: 5000, Interval: 20 * time.Millisecond,
		Options: []sluice.Option{sluice.WithCheckpointListener(c.CheckpointListener(name))}})
	c.AddJob(run.Job)
	if err := run.Wait(t); err != nil {
		t.Fatal(err)
	}
	stats, ok := run.Job.CheckpointStats()
	if !ok || stats.Completed < 2 {
		t.Fatalf("checkpoint stats %+v (ok %t): want at least two completed checkpoints", stats, ok)
	}
	completed := run.Completed()
	last := completed[len(completed)-1]
	if stats.LatestCompleted == nil || stats.LatestCompleted.ID != last.ID {
		t.Fatalf("latest completed %+v, listener's last %d", stats.LatestCompleted, last.ID)
	}
	all := gather(t, reg)
	job := map[string]string{"job_name": name}

	for metric, want := range map[string]float64{
		"sluice_job_numberOfCompletedCheckpoints":  float64(stats.Completed),
		"sluice_job_numberOfFailedCheckpoints":     0,
		"sluice_job_numberOfInProgressCheckpoints": 0,
		"sluice_job_totalNumberOfCheckpoints":      float64(stats.Total),
		"sluice_job_lastCompletedCheckpointId":     float64(last.ID),
		"sluice_job_lastCheckpointDuration":        float64(last.EndToEndDuration.Milliseconds()),
		"sluice_job_lastCheckpointSize":            float64(last.CheckpointedSize),
		"sluice_job_lastCheckpointFullSize":        float64(last.StateSize),
		"sluice_job_lastCheckpointPersistedData":   float64(last.PersistedData),
		"sluice_job_numRestarts":                   0,
	} {
		got, ok := value(all, metric, job)
		if !ok || got != want {
			t.Errorf("%s = %v (present %t), want %v", metric, got, ok, want)
		}
	}
	if stats.Completed != len(completed) {
		t.Errorf("stats count %d completed, the listener saw %d", stats.Completed, len(completed))
	}
	if v, _ := value(all, "sluice_job_status", map[string]string{"job_name": name, "status": "FINISHED"}); v != 1 {
		t.Errorf("status FINISHED = %v, want 1", v)
	}
	if v, _ := value(all, "sluice_job_status", map[string]string{"job_name": name, "status": "RUNNING"}); v != 0 {
		t.Errorf("status RUNNING = %v, want 0", v)
	}

	// Records: every one of the 1000 crosses the network once.
	if got := sum(all, "sluice_task_numRecordsOut", testjob.SourceVertex); got != 1000 {
		t.Errorf("source numRecordsOut %v, want 1000", got)
	}
	if got := sum(all, "sluice_task_numRecordsIn", testjob.CountVertex); got != 1000 {
		t.Errorf("count numRecordsIn %v, want 1000", got)
	}
	out, in := sum(all, "sluice_task_numBytesOut", testjob.SourceVertex), sum(all, "sluice_task_numBytesIn", testjob.CountVertex)
	if out <= 1000*64 || in != out {
		t.Errorf("bytes out %v, in %v: want equal and more than the payloads", out, in)
	}

	// Per task: the figures of the last completed checkpoint, in
	// nanoseconds, and the per-second times that add up to a second.
	for _, ts := range last.Tasks {
		l := map[string]string{"job_name": name, "vertex": ts.Vertex, "subtask": strconv.Itoa(ts.Subtask)}
		if v, ok := value(all, "sluice_task_checkpointAlignmentTime", l); !ok || v != float64(ts.Figures.Alignment.Nanoseconds()) {
			t.Errorf("%v alignment %v (present %t), want %d ns", l, v, ok, ts.Figures.Alignment.Nanoseconds())
		}
		if v, ok := value(all, "sluice_task_checkpointStartDelayNanos", l); !ok || v != float64(ts.Figures.StartDelay.Nanoseconds()) {
			t.Errorf("%v start delay %v (present %t), want %d ns", l, v, ok, ts.Figures.StartDelay.Nanoseconds())
		}
		busy, _ := value(all, "sluice_task_busyTimeMsPerSecond", l)
		idle, _ := value(all, "sluice_task_idleTimeMsPerSecond", l)
		bp, _ := value(all, "sluice_task_backPressuredTimeMsPerSecond", l)
		if math.Abs(busy+idle+bp-1000) > 1e-6 {
			t.Errorf("%v busy %v + idle %v + backpressured %v != 1000", l, busy, idle, bp)
		}
	}
	// Watermarks: the job's own, per subtask.
	for _, m := range run.Job.Metrics() {
		l := map[string]string{"job_name": name, "vertex": m.Vertex, "subtask": strconv.Itoa(m.Subtask)}
		in, okIn := value(all, "sluice_task_currentInputWatermark", l)
		out, okOut := value(all, "sluice_task_currentOutputWatermark", l)
		if !okIn || !okOut || in != float64(m.InputWatermark) || out != float64(m.OutputWatermark) {
			t.Errorf("%v watermarks in %v out %v (present %t %t), the job says %d %d", l, in, out, okIn, okOut, m.InputWatermark, m.OutputWatermark)
		}
	}
	if len(all["sluice_task_numRecordsIn"]) != 4 {
		t.Errorf("%d task series, want 4 (2 vertices × 2 subtasks)", len(all["sluice_task_numRecordsIn"]))
	}

	// The histogram saw every completed checkpoint, savepoints aside.
	h := all["sluice_job_checkpoint_duration_seconds"]
	if len(h) != 1 || h[0].hist == nil || h[0].hist.GetSampleCount() != uint64(len(completed)) {
		t.Fatalf("duration histogram %+v, want %d samples", h, len(completed))
	}
	var total float64
	for _, cs := range completed {
		total += cs.EndToEndDuration.Seconds()
	}
	if math.Abs(h[0].hist.GetSampleSum()-total) > 1e-9 {
		t.Errorf("histogram sum %v, want %v", h[0].hist.GetSampleSum(), total)
	}

	// The exposition has Flink's names.
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`sluice_job_numberOfCompletedCheckpoints{job_name="known-run"} ` + strconv.Itoa(stats.Completed),
		`sluice_task_numRecordsIn{job_name="known-run",subtask="0",vertex="count -> discard"}`,
		`# TYPE sluice_task_numRecordsIn counter`,
		`# TYPE sluice_job_checkpoint_duration_seconds histogram`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

// A job whose keyed operator is slow backpressures its source: the
// source's backPressuredTimeMsPerSecond rises
// to most of each second while the slow task is busy.
func TestBackpressureOfSlowJob(t *testing.T) {
	const name = "slow"
	c := metrics.NewCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	run := testjob.Start(t, testjob.Options{Name: name, Slow: 200 * time.Microsecond, Payload: 1024})
	c.AddJob(run.Job)
	src := map[string]string{"job_name": name, "vertex": testjob.SourceVertex, "subtask": "0"}
	cnt := map[string]string{"job_name": name, "vertex": testjob.CountVertex, "subtask": "0"}
	var bp, busy float64
	testjob.Await(t, "the source to be backpressured and the counter busy", func() bool {
		all := gather(t, reg)
		bp, _ = value(all, "sluice_task_backPressuredTimeMsPerSecond", src)
		busy, _ = value(all, "sluice_task_busyTimeMsPerSecond", cnt)
		return bp > 500 && busy > 500
	})
	all := gather(t, reg)
	acc, ok := value(all, "sluice_task_accumulatedBackPressuredTime", src)
	if !ok || acc <= 0 {
		t.Errorf("accumulated backpressured time %v, want > 0", acc)
	}
}

// connectorJob is a running job of one task whose connectors are the
// reporters given, read as the runtime reads them (runtime.TaskMetrics).
type connectorJob struct {
	name, vertex, operator string
	subtask                int
	reporters              []report.Reporter
}

func (j connectorJob) Config() runtime.Config    { return runtime.Config{JobName: j.name} }
func (j connectorJob) Status() runtime.JobStatus { return runtime.JobRunning }
func (j connectorJob) Restarts() int64           { return 0 }
func (j connectorJob) Metrics() []runtime.TaskMetrics {
	return []runtime.TaskMetrics{{Vertex: j.vertex, Subtask: j.subtask, Status: runtime.TaskRunning,
		Connectors: report.Read(j.operator, j.reporters...)}}
}
func (j connectorJob) CheckpointStats() (checkpoint.JobStats, bool) {
	return checkpoint.JobStats{}, false
}
func (j connectorJob) LastRestore() (runtime.RestoreInfo, bool) { return runtime.RestoreInfo{}, false }

// registryOf is a registry (pedantic: it checks that the collector
// describes what it reports) of a collector of opts that reads j.
func registryOf(j metrics.Job, opts ...metrics.Option) *prometheus.Registry {
	c := metrics.NewCollector(opts...)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	c.AddJob(j)
	return reg
}

// fakeReader reports fixed partitions as a Kafka reader does.
type fakeReader struct{ parts []kafka.PartitionMetrics }

func (r *fakeReader) Report(emit func(report.Sample)) { kafka.ReportPartitions(r.parts, emit) }

// The figures of a task's Kafka reader are exported with the task's and
// the reader's operator's labels.
func TestKafkaSourceMetrics(t *testing.T) {
	all := gather(t, registryOf(connectorJob{name: "kafka-job", vertex: "orders -> parse", operator: "orders", subtask: 1, reporters: []report.Reporter{&fakeReader{[]kafka.PartitionMetrics{
		{Topic: "orders", Partition: 0, CurrentOffset: 100, CommittedOffset: 90, HighWatermark: 150, LastStableOffset: 150, Lag: 50},
		{Topic: "orders", Partition: 1, CurrentOffset: 7, CommittedOffset: -1, HighWatermark: -1, LastStableOffset: -1, Lag: -1},
		{Topic: "orders", Partition: 2, CurrentOffset: 3, CommittedOffset: -1, HighWatermark: 23, LastStableOffset: 23, Lag: 20},
	}}}}))
	sub := map[string]string{"job_name": "kafka-job", "vertex": "orders -> parse", "subtask": "1", "operator": "orders"}
	p0 := map[string]string{"job_name": "kafka-job", "vertex": "orders -> parse", "subtask": "1", "operator": "orders", "topic": "orders", "partition": "0"}
	p1 := map[string]string{"job_name": "kafka-job", "vertex": "orders -> parse", "subtask": "1", "operator": "orders", "topic": "orders", "partition": "1"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
		ok     bool
	}{
		{"sluice_kafka_source_records_lag_max", sub, 50, true},
		{"sluice_kafka_source_pendingRecords", sub, 70, true},
		{"sluice_kafka_source_currentOffset", p0, 100, true},
		{"sluice_kafka_source_committedOffset", p0, 90, true},
		{"sluice_kafka_source_highWatermark", p0, 150, true},
		{"sluice_kafka_source_recordsLag", p0, 50, true},
		{"sluice_kafka_source_currentOffset", p1, 7, true},
		{"sluice_kafka_source_committedOffset", p1, 0, false},
		{"sluice_kafka_source_recordsLag", p1, 0, false},
	} {
		got, ok := value(all, c.name, c.labels)
		if ok != c.ok || got != c.want {
			t.Errorf("%s%v = %v (present %t), want %v (present %t)", c.name, c.labels, got, ok, c.want, c.ok)
		}
	}

	// Under Flink's names: its Prometheus reporter's names for the
	// KafkaSource's metrics, the groups' values as labels.
	fl := gather(t, registryOf(connectorJob{name: "kafka-job", vertex: "orders -> parse", operator: "orders", subtask: 1, reporters: []report.Reporter{&fakeReader{[]kafka.PartitionMetrics{
		{Topic: "orders", Partition: 0, CurrentOffset: 100, CommittedOffset: 90, HighWatermark: 150, LastStableOffset: 150, Lag: 50},
	}}}}, metrics.WithFlinkNames()))
	op := map[string]string{"job_name": "kafka-job", "task_name": "orders -> parse", "subtask_index": "1", "operator_name": "orders"}
	fp0 := map[string]string{"job_name": "kafka-job", "subtask_index": "1", "operator_name": "orders", "topic": "orders", "partition": "0"}
	checkValues(t, fl,
		wantValue{"flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_records_lag_max", op, 50},
		wantValue{"flink_taskmanager_job_task_operator_pendingRecords", op, 50},
		wantValue{"flink_taskmanager_job_task_operator_KafkaSourceReader_topic_partition_currentOffset", fp0, 100},
		wantValue{"flink_taskmanager_job_task_operator_KafkaSourceReader_topic_partition_committedOffset", fp0, 90})
}

// InstrumentSource is deprecated: the runtime reports the readers, and
// the wrapper returns the source as it is.
func TestInstrumentSourceIsTheSource(t *testing.T) {
	src := source.FromSlice([]int{1})
	if got := metrics.InstrumentSource[int](metrics.NewCollector(), "job", "v", src); got != source.Source[int](src) {
		t.Errorf("InstrumentSource returned %T, want the source itself", got)
	}
}

// Removing a job removes its series, the histogram's too.
func TestRemoveJob(t *testing.T) {
	c := metrics.NewCollector()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	c.CheckpointListener("gone")(checkpoint.Stats{Status: checkpoint.StatusCompleted, EndToEndDuration: time.Second})
	c.CheckpointListener("gone")(checkpoint.Stats{Status: checkpoint.StatusCompleted, Kind: checkpoint.KindSavepoint})
	all := gather(t, reg)
	if h := all["sluice_job_checkpoint_duration_seconds"]; len(h) != 1 || h[0].hist.GetSampleCount() != 1 {
		t.Fatalf("histogram %+v, want one sample (savepoints excluded)", h)
	}
	c.RemoveJob("gone")
	if all := gather(t, reg); len(all) != 0 {
		t.Fatalf("series left after RemoveJob: %v", all)
	}
}
