package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime/network"
)

// TaskSpec is one task of a job as every process that compiles the same
// plan sees it: tasks are numbered vertex by vertex, subtask by subtask,
// so a coordinator and its workers agree on every task id without
// exchanging the graph.
type TaskSpec struct {
	ID      checkpoint.TaskID
	Vertex  *JobVertex
	Subtask int
	// Name is "<vertex name> (<subtask+1>/<parallelism>)", as logs say.
	Name string
	// Upstream are the tasks whose output this task reads.
	Upstream []checkpoint.TaskID
}

// Tasks returns the job's tasks in id order.
func (g *JobGraph) Tasks() []TaskSpec {
	first := map[*JobVertex]checkpoint.TaskID{}
	var specs []TaskSpec
	for _, v := range g.Vertices {
		first[v] = checkpoint.TaskID(len(specs))
		for i := 0; i < v.Parallelism; i++ {
			specs = append(specs, TaskSpec{
				ID: checkpoint.TaskID(len(specs)), Vertex: v, Subtask: i,
				Name: fmt.Sprintf("%s (%d/%d)", v.Name, i+1, v.Parallelism),
			})
		}
	}
	for i := range specs {
		s := &specs[i]
		for _, e := range s.Vertex.In {
			prod := g.vertexOf[e.From]
			for pi := 0; pi < prod.Parallelism; pi++ {
				if e.Partitioner != PartitionForward || pi == s.Subtask {
					s.Upstream = append(s.Upstream, first[prod]+checkpoint.TaskID(pi))
				}
			}
		}
	}
	return specs
}

// Slots is the number of slots the job needs with slot sharing (one slot
// holds one subtask of every vertex): its highest parallelism.
func (g *JobGraph) Slots() int {
	n := 0
	for _, v := range g.Vertices {
		n = max(n, v.Parallelism)
	}
	return n
}

// Fingerprint identifies the job graph: its vertices (names, uids,
// parallelism, chains), edges (partitioners) and the record types that
// cross them. Two processes that built the plan from the same code with
// the same configuration have the same fingerprint; a worker whose
// fingerprint differs from the coordinator's runs other code and is
// refused.
func (g *JobGraph) Fingerprint() string {
	var b strings.Builder
	for _, v := range g.Vertices {
		fmt.Fprintf(&b, "v%d p=%d maxp=%d\n", v.ID, v.Parallelism, v.MaxParallelism)
		for _, n := range v.Nodes {
			fmt.Fprintf(&b, " n %q uid=%q keyed=%t", n.Name, n.UID, n.Keyed)
			if n.Out != nil {
				fmt.Fprintf(&b, " out=%s", reflect.TypeOf(n.Out.Codec()))
			}
			b.WriteByte('\n')
		}
		for _, e := range v.Out {
			fmt.Fprintf(&b, " e %q -> %q %s in=%d\n", e.From.Name, e.To.Name, e.Partitioner, e.InputIndex)
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// PartitionID names the result partition of producer task on the out-edge
// number edge of its vertex, in one attempt of a job: what a remote
// consumer requests from the producer's process.
func PartitionID(job string, attempt int, producer checkpoint.TaskID, edge int) string {
	return fmt.Sprintf("%s/%d/%d/%d", job, attempt, producer, edge)
}

// Exchange carries the channels between tasks that run in different
// processes: the data plane of a job on several hosts. Channels between
// tasks of one process stay in memory (network.Connect).
type Exchange interface {
	// Publish makes partition p, produced by a task of this process,
	// readable by remote consumers under id.
	Publish(id string, p *network.ResultPartition)
	// Unpublish withdraws what Publish offered (the attempt ended).
	Unpublish(id string)
	// ConnectRemote wires channel ch of gate g to subpartition sub of the
	// partition id, served by the process that runs task producer. It is
	// wiring done before the task runs; the connection may come later,
	// and its failure fails the channel.
	ConnectRemote(g *network.InputGate, ch int, producer checkpoint.TaskID, id string, sub int) error
}
