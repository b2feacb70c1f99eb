package autoscaler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/source/kafka"
)

// graph compiles source(2) -hash-> agg(3) -> sink(3, chained): two
// vertices.
func graph(t *testing.T) *runtime.JobGraph {
	t.Helper()
	var p runtime.Plan
	out := runtime.TypeOf[int64](codec.Int[int64]{})
	build := func(any) (operators.Operator, []any, error) { return nil, nil, errors.New("placeholder") }
	src := p.Add(&runtime.Node{Name: "orders", UID: "orders", Parallelism: 2, Out: out,
		BuildSource: func(*runtime.SourceContext, any) (runtime.SourceDriver, error) { return nil, errors.New("placeholder") }})
	agg := p.Add(&runtime.Node{Name: "agg", UID: "agg", Parallelism: 3, Out: out, Keyed: true, Build: build})
	p.Connect(src, agg, runtime.PartitionHash, 0, func(v int64, b []byte) (uint32, []byte) { return uint32(v), b })
	sink := p.Add(&runtime.Node{Name: "sink", UID: "sink", Parallelism: 3, Build: build})
	p.Connect(agg, sink, runtime.PartitionForward, 0, nil)
	cfg := runtime.DefaultConfig()
	cfg.MaxParallelism = 12
	g, err := runtime.Compile(&p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type fakeJob struct {
	g       *runtime.JobGraph
	metrics []runtime.TaskMetrics
	req     runtime.ResourceRequirements
}

func (j *fakeJob) Graph() *runtime.JobGraph       { return j.g }
func (j *fakeJob) Metrics() []runtime.TaskMetrics { return j.metrics }
func (j *fakeJob) ExplicitResourceRequirements() runtime.ResourceRequirements {
	return j.req
}
func (f reporterFunc) Report(emit func(report.Sample)) { f(emit) }

type reporterFunc func(func(report.Sample))

// kafkaFigures are the figures the Kafka source's reader reports for
// its partitions (kafka.ReportPartitions, what the reader itself calls).
func kafkaFigures(parts ...kafka.PartitionMetrics) []report.Figure {
	return report.Read("orders", reporterFunc(func(emit func(report.Sample)) { kafka.ReportPartitions(parts, emit) }))
}

func partition(p int32, offset, lag int64) kafka.PartitionMetrics {
	return kafka.PartitionMetrics{Topic: "orders", Partition: p, CurrentOffset: offset, CommittedOffset: -1, HighWatermark: offset + lag,
		LastStableOffset: -1, Lag: lag}
}

func TestTopologyOfAJobGraph(t *testing.T) {
	topo := TopologyOf(graph(t))
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Topology{Vertices: []Vertex{
		{Name: "Source: orders", MaxParallelism: 12, Source: true},
		{Name: "agg -> sink", MaxParallelism: 12, Inputs: []Input{{From: 0, Ship: Hash}}},
	}}
	if len(topo.Vertices) != 2 {
		t.Fatalf("topology %+v", topo)
	}
	for i, v := range topo.Vertices {
		w := want.Vertices[i]
		if v.MaxParallelism != w.MaxParallelism || v.Source != w.Source || len(v.Inputs) != len(w.Inputs) ||
			len(v.Inputs) == 1 && v.Inputs[0] != w.Inputs[0] {
			t.Errorf("vertex %d: %+v, want %+v", i, v, w)
		}
	}
}

func TestJobSourceReadsTheRuntimesFigures(t *testing.T) {
	g := graph(t)
	src, agg := g.Vertices[0].Name, g.Vertices[1].Name
	job := &fakeJob{g: g}
	for s := range 2 {
		job.metrics = append(job.metrics, runtime.TaskMetrics{Vertex: src, Subtask: s, Status: runtime.TaskRunning,
			BusyTime: time.Duration(s+1) * time.Second, RecordsOut: 500,
			Connectors: kafkaFigures(partition(int32(2*s), 1000, 10), partition(int32(2*s+1), 2000, 5))})
	}
	for s := range 3 {
		job.metrics = append(job.metrics, runtime.TaskMetrics{Vertex: agg, Subtask: s, Status: runtime.TaskRunning,
			BusyTime: 3 * time.Second, RecordsIn: 300, RecordsOut: 30})
	}
	at := time.Unix(1000, 0)
	js := NewJobSource(job)
	js.now = func() time.Time { return at }
	snap, err := js.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Running || !snap.Time.Equal(at) {
		t.Fatalf("snapshot running=%v at %v", snap.Running, snap.Time)
	}
	s := snap.Vertices[0]
	// The source's input is its offsets' progress, its lag the readers'
	// pending records, its partitions those it reports.
	if s.Parallelism != 2 || s.RecordsIn != 6000 || s.Lag != 30 || s.Partitions != 4 ||
		s.Busy[0] != time.Second || s.Busy[1] != 2*time.Second {
		t.Errorf("source figures %+v", s)
	}
	a := snap.Vertices[1]
	if a.Parallelism != 3 || a.RecordsIn != 900 || a.RecordsOut != 90 || a.Lag != -1 || a.Partitions != 0 || a.Lower != 0 || a.Upper != 0 {
		t.Errorf("agg figures %+v", a)
	}
	// The bounds a user set are the vertex's.
	job.req = runtime.ResourceRequirements{1: {Lower: 2, Upper: 6}}
	if snap, err = js.Snapshot(context.Background()); err != nil || snap.Vertices[1].Lower != 2 || snap.Vertices[1].Upper != 6 ||
		snap.Vertices[0].Lower != 0 {
		t.Fatalf("with agg required within [2,6]: %+v, %v", snap.Vertices, err)
	}

	// A task that is not running: the snapshot is not used.
	job.metrics[4].Status = runtime.TaskCanceled
	if snap, err = js.Snapshot(context.Background()); err != nil || snap.Running {
		t.Fatalf("with a canceled task: running=%v, %v", snap.Running, err)
	}
	// A subtask missing (agg's second): not running either.
	job.metrics[4].Status = runtime.TaskRunning
	job.metrics = append(job.metrics[:3], job.metrics[4])
	if snap, err = js.Snapshot(context.Background()); err != nil || snap.Running {
		t.Fatalf("with a subtask missing: running=%v, %v", snap.Running, err)
	}
}

// TestJobSourceWithoutKafka: a source that reports no offsets is read by
// the records it sends downstream; its lag is unknown.
func TestJobSourceWithoutKafka(t *testing.T) {
	g := graph(t)
	job := &fakeJob{g: g}
	job.metrics = append(job.metrics, runtime.TaskMetrics{Vertex: g.Vertices[0].Name, Subtask: 0, Status: runtime.TaskRunning, RecordsOut: 700})
	for s := range 3 {
		job.metrics = append(job.metrics, runtime.TaskMetrics{Vertex: g.Vertices[1].Name, Subtask: s, Status: runtime.TaskRunning})
	}
	snap, err := NewJobSource(job).Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f := snap.Vertices[0]; f.RecordsIn != 700 || f.Lag != -1 || f.Parallelism != 1 {
		t.Fatalf("source figures %+v", f)
	}
}

func TestJobSourceRefusesMetricsOfAnotherGraph(t *testing.T) {
	job := &fakeJob{g: graph(t), metrics: []runtime.TaskMetrics{{Vertex: "other", Status: runtime.TaskRunning}}}
	if _, err := NewJobSource(job).Snapshot(context.Background()); !errors.Is(err, ErrTopology) {
		t.Fatalf("metrics of an unknown vertex: %v", err)
	}
}

// The families the adapter reads are the Kafka source's.
func TestKafkaFamiliesAreRegistered(t *testing.T) {
	for _, name := range []string{familyCurrentOffset, familyPendingRecords} {
		if report.Lookup(name) == nil {
			t.Errorf("no family %s: the Kafka source renamed it", name)
		}
	}
}
