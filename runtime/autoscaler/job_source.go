package autoscaler

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/runtime"
)

// The connector families the adapter reads (package source/kafka
// registers them): a partition's next offset, and a reader's records
// behind the end of its partitions.
const (
	familyCurrentOffset  = "kafka_source_currentOffset"
	familyPendingRecords = "kafka_source_pendingRecords"
)

// Job is what JobSource reads; *runtime.Job has these methods, in one
// process and on the coordinator of a job on several.
type Job interface {
	Metrics() []runtime.TaskMetrics
	Graph() *runtime.JobGraph
	// ExplicitResourceRequirements are the bounds a user set (PUT
	// resource-requirements), which the decisions keep within.
	ExplicitResourceRequirements() runtime.ResourceRequirements
}

// JobSource is the MetricsSource of a running job: the figures the
// runtime has (runtime.TaskMetrics) per vertex. A source vertex's input
// is the progress of its Kafka offsets where it reports them, else the
// records it sent downstream; its lag is the sum of its readers'
// pendingRecords, its partitions those its readers report offsets of.
// A vertex's bounds are those of the job's explicit resource
// requirements.
type JobSource struct {
	job Job
	now func() time.Time
}

// NewJobSource returns the source of job's metrics, read at time.Now.
func NewJobSource(job Job) *JobSource { return &JobSource{job: job, now: time.Now} }

// TopologyOf is the topology of a compiled job graph.
func TopologyOf(g *runtime.JobGraph) Topology {
	t := Topology{Vertices: make([]Vertex, len(g.Vertices))}
	for i, v := range g.Vertices {
		tv := Vertex{Name: v.Name, MaxParallelism: v.MaxParallelism, Source: v.Head().IsSource()}
		for _, e := range v.In {
			in := Input{From: g.VertexOf(e.From).ID}
			switch e.Partitioner {
			case runtime.PartitionHash:
				in.Ship = Hash
			case runtime.PartitionForward:
				in.Ship = Forward
			case runtime.PartitionBroadcast:
				in.Ship = Broadcast
			}
			tv.Inputs = append(tv.Inputs, in)
		}
		t.Vertices[i] = tv
	}
	return t
}

// Snapshot reads the job's task metrics now.
func (s *JobSource) Snapshot(context.Context) (Snapshot, error) {
	g := s.job.Graph()
	tasks := s.job.Metrics()
	now := s.now()
	byName := make(map[string]int, len(g.Vertices))
	for i, v := range g.Vertices {
		if _, dup := byName[v.Name]; dup {
			return Snapshot{}, fmt.Errorf("%w: two vertices are named %q: the task metrics cannot tell them apart", ErrTopology, v.Name)
		}
		byName[v.Name] = i
	}
	snap := Snapshot{Time: now, Running: len(tasks) > 0, Vertices: make([]Figures, len(g.Vertices))}
	type source struct {
		offsets    float64
		hasOffsets bool
		partitions map[[2]string]bool
		pending    float64
		hasPending bool
	}
	sources := make([]source, len(g.Vertices))
	for i := range snap.Vertices {
		snap.Vertices[i].Lag = -1
		sources[i].partitions = map[[2]string]bool{}
	}
	for _, t := range tasks {
		i, ok := byName[t.Vertex]
		if !ok {
			return Snapshot{}, fmt.Errorf("%w: task metrics of vertex %q, which the job graph does not have", ErrTopology, t.Vertex)
		}
		if t.Status != runtime.TaskRunning {
			snap.Running = false
		}
		f := &snap.Vertices[i]
		for len(f.Busy) <= t.Subtask {
			f.Busy = append(f.Busy, -1)
		}
		f.Busy[t.Subtask] = t.BusyTime
		f.RecordsIn += t.RecordsIn
		f.RecordsOut += t.RecordsOut
		src := &sources[i]
		for _, c := range t.Connectors {
			switch c.Family {
			case familyCurrentOffset:
				src.offsets += c.Value
				src.hasOffsets = true
				if len(c.Labels) == 2 {
					src.partitions[[2]string{c.Labels[0], c.Labels[1]}] = true
				}
			case familyPendingRecords:
				src.pending += c.Value
				src.hasPending = true
			}
		}
	}
	for i, b := range s.job.ExplicitResourceRequirements() {
		if i >= 0 && i < len(snap.Vertices) {
			snap.Vertices[i].Lower, snap.Vertices[i].Upper = b.Lower, b.Upper
		}
	}
	for i, v := range g.Vertices {
		f := &snap.Vertices[i]
		f.Parallelism = len(f.Busy)
		for _, b := range f.Busy {
			if b < 0 { // a subtask without metrics
				snap.Running = false
			}
		}
		if f.Parallelism == 0 {
			snap.Running = false
		}
		if !v.Head().IsSource() {
			continue
		}
		src := sources[i]
		if src.hasOffsets {
			f.RecordsIn = int64(src.offsets)
			f.Partitions = len(src.partitions)
		} else {
			f.RecordsIn = f.RecordsOut
		}
		if src.hasPending {
			f.Lag = int64(src.pending)
		}
	}
	if !snap.Running {
		// Figures of a job that is not running in full are not used;
		// keep their shape valid.
		for i := range snap.Vertices {
			f := &snap.Vertices[i]
			if f.Parallelism == 0 {
				f.Parallelism, f.Busy = 1, []time.Duration{0}
			}
		}
	}
	return snap, nil
}
