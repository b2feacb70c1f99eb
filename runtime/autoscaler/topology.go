package autoscaler

import (
	"errors"
	"fmt"
	"time"
)

// Topology is the shape of a job as the autoscaler sees it: its vertices
// by index (the runtime's JobVertex.ID), inputs before the vertices that
// read them.
type Topology struct {
	Vertices []Vertex
}

// Vertex is one vertex of the job graph (an operator chain).
type Vertex struct {
	Name string
	// MaxParallelism is the vertex's key groups: the largest parallelism
	// it can run at.
	MaxParallelism int
	// Source is true for a vertex whose head is a source.
	Source bool
	Inputs []Input
}

// Input is an edge into a vertex.
type Input struct {
	From int // the index of the producing vertex
	Ship Ship
}

// Ship is how an edge distributes records over the consuming subtasks.
type Ship int

const (
	// Rebalance: round robin or any other that lets both ends have any
	// parallelism.
	Rebalance Ship = iota
	// Hash: by key group; the consumer's parallelism is aligned to a
	// divisor of its max parallelism.
	Hash
	// Forward: subtask i to subtask i; both ends keep the same
	// parallelism.
	Forward
	// Broadcast: every record to every subtask.
	Broadcast
)

func (s Ship) String() string {
	switch s {
	case Hash:
		return "hash"
	case Forward:
		return "forward"
	case Broadcast:
		return "broadcast"
	}
	return "rebalance"
}

// ErrTopology is matched by the error of a topology, or a snapshot, the
// machine cannot use.
var ErrTopology = errors.New("autoscaler: invalid topology")

// Validate refuses a topology whose inputs do not come before their
// vertex, or without a source.
func (t Topology) Validate() error {
	if len(t.Vertices) == 0 {
		return fmt.Errorf("%w: no vertices", ErrTopology)
	}
	for i, v := range t.Vertices {
		if v.MaxParallelism < 1 {
			return fmt.Errorf("%w: vertex %d %q: max parallelism %d", ErrTopology, i, v.Name, v.MaxParallelism)
		}
		if v.Source != (len(v.Inputs) == 0) {
			return fmt.Errorf("%w: vertex %d %q: a source has no inputs, any other vertex has some", ErrTopology, i, v.Name)
		}
		for _, in := range v.Inputs {
			if in.From < 0 || in.From >= i {
				return fmt.Errorf("%w: vertex %d %q: input %d does not come before it", ErrTopology, i, v.Name, in.From)
			}
		}
	}
	return nil
}

// keyed reports whether a vertex reads a hash-partitioned input.
func (v Vertex) keyed() bool {
	for _, in := range v.Inputs {
		if in.Ship == Hash {
			return true
		}
	}
	return false
}

// Snapshot is the figures of every vertex of a job read at one time.
type Snapshot struct {
	Time time.Time `json:"time"`
	// Running is false while a task of the job is not running (starting,
	// restarting, rescaling): its figures are not used.
	Running  bool      `json:"running,omitempty"`
	Vertices []Figures `json:"vertices"` // by vertex index
}

// Figures are a vertex's counters, summed over its subtasks since they
// started: the autoscaler takes rates from their differences.
type Figures struct {
	Parallelism int `json:"parallelism"`
	// RecordsIn are the records the vertex took in; for a source, the
	// records it read (a Kafka source: the progress of its offsets).
	RecordsIn int64 `json:"in"`
	// RecordsOut are the records the vertex sent downstream.
	RecordsOut int64 `json:"out"`
	// Busy is each subtask's time spent processing (neither idle nor
	// backpressured), one per subtask.
	Busy []time.Duration `json:"busy"`
	// Lag is a source's backlog: the records behind the end of what it
	// reads (a Kafka source's pendingRecords); -1 when unknown.
	Lag int64 `json:"lag"`
	// Partitions is the number of partitions a source reads, 0 when
	// unknown; the source runs at no more parallelism.
	Partitions int `json:"partitions,omitempty"`
	// Lower and Upper are the parallelism bounds set for the vertex in
	// the job's resource requirements (PUT resource-requirements), 0 when
	// none are: the autoscaler decides within them.
	Lower int `json:"lower,omitempty"`
	Upper int `json:"upper,omitempty"`
}
