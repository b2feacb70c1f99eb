package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalidPlan is returned (wrapped) when a plan cannot run; the message
// names the operator and the cause.
var ErrInvalidPlan = errors.New("invalid plan")

// JobVertex is one operator chain: the nodes that run together in one Task
// per subtask, records passing between them as Go values.
type JobVertex struct {
	ID             int
	Name           string // "Source: gen -> Map -> Filter"
	Nodes          []*Node
	Parallelism    int
	MaxParallelism int
	// In are the network edges into the chain's head; Out the network
	// edges leaving any node of the chain.
	In, Out []*Edge
	// sides are the side output nodes of the chain's operators.
	sides []*Node
}

// Head returns the chain's first node.
func (v *JobVertex) Head() *Node { return v.Nodes[0] }

// JobGraph is a compiled Plan.
type JobGraph struct {
	Vertices []*JobVertex
	vertexOf map[*Node]*JobVertex
	outEdges map[*Node][]*Edge
	chained  map[*Edge]bool
}

// VertexOf returns the vertex a node runs in.
func (g *JobGraph) VertexOf(n *Node) *JobVertex { return g.vertexOf[n] }

// Chained reports whether an edge runs inside a chain (no network).
func (g *JobGraph) Chained(e *Edge) bool { return g.chained[e] }

func (g *JobGraph) String() string {
	var b strings.Builder
	for _, v := range g.Vertices {
		fmt.Fprintf(&b, "%d %s p=%d", v.ID, v.Name, v.Parallelism)
		for _, e := range v.In {
			fmt.Fprintf(&b, " <-%s- %d", e.Partitioner, g.vertexOf[e.From].ID)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func invalid(n *Node, format string, args ...any) error {
	return fmt.Errorf("%w: operator %q: %s", ErrInvalidPlan, n.Name, fmt.Sprintf(format, args...))
}

// Compile resolves parallelism and partitioners and chains operators:
// an edge is chained when it is forward, both ends have the same
// parallelism, the target has no other input, chaining is on and neither
// end disabled it.
func Compile(p *Plan, cfg Config) (*JobGraph, error) {
	if len(p.Nodes) == 0 {
		return nil, fmt.Errorf("%w: no operators", ErrInvalidPlan)
	}
	hasSink := false
	uids := map[string]string{}
	for _, n := range p.Nodes {
		if n.UID != "" {
			if prev, dup := uids[n.UID]; dup {
				return nil, invalid(n, "uid %q is already used by operator %q", n.UID, prev)
			}
			uids[n.UID] = n.Name
		}
		if n.IsSide() {
			n.Parallelism, n.MaxParallelism = n.SideOf.Parallelism, n.SideOf.MaxParallelism
			continue
		}
		if n.Parallelism == 0 {
			n.Parallelism = cfg.Parallelism
		}
		if n.MaxParallelism == 0 {
			n.MaxParallelism = cfg.MaxParallelism
		}
		if n.Parallelism < 1 {
			return nil, invalid(n, "parallelism %d must be at least 1", n.Parallelism)
		}
		if n.MaxParallelism < n.Parallelism {
			return nil, invalid(n, "parallelism %d exceeds max parallelism %d", n.Parallelism, n.MaxParallelism)
		}
		if n.Out == nil {
			hasSink = true
		}
		if n.IsSource() && len(n.Inputs) > 0 {
			return nil, invalid(n, "a source cannot have inputs")
		}
		if !n.IsSource() && len(n.Inputs) == 0 {
			return nil, invalid(n, "has no input")
		}
	}
	if !hasSink {
		return nil, fmt.Errorf("%w: no sink: add SinkTo to the pipeline", ErrInvalidPlan)
	}
	g := &JobGraph{vertexOf: map[*Node]*JobVertex{}, outEdges: map[*Node][]*Edge{}, chained: map[*Edge]bool{}}
	for _, n := range p.Nodes {
		for _, e := range n.Inputs {
			if e.From.ID >= n.ID {
				return nil, invalid(n, "input %q is not defined before it", e.From.Name)
			}
			switch e.Partitioner {
			case PartitionDefault:
				if e.From.Parallelism == n.Parallelism {
					e.Partitioner = PartitionForward
				} else {
					e.Partitioner = PartitionRebalance
				}
			case PartitionForward:
				if e.From.Parallelism != n.Parallelism {
					return nil, invalid(n, "forward partitioning does not allow a change of parallelism (%q has %d, %q has %d): use Rebalance",
						e.From.Name, e.From.Parallelism, n.Name, n.Parallelism)
				}
			case PartitionHash:
				if e.KeyHash == nil {
					return nil, invalid(n, "hash edge from %q has no key function", e.From.Name)
				}
			}
			g.outEdges[e.From] = append(g.outEdges[e.From], e)
		}
	}
	for _, n := range p.Nodes {
		if n.IsSide() {
			// A side output runs in its parent's chain.
			v := g.vertexOf[n.SideOf]
			g.vertexOf[n] = v
			v.sides = append(v.sides, n)
			continue
		}
		var v *JobVertex
		if len(n.Inputs) == 1 && cfg.Chaining {
			e := n.Inputs[0]
			if e.Partitioner == PartitionForward && !n.DisableChaining && !e.From.DisableChaining &&
				e.From.Parallelism == n.Parallelism && e.From.Out != nil {
				g.chained[e] = true
				v = g.vertexOf[e.From]
			}
		}
		if v == nil {
			v = &JobVertex{ID: len(g.Vertices), Parallelism: n.Parallelism, MaxParallelism: n.MaxParallelism}
			v.In = append(v.In, n.Inputs...)
			g.Vertices = append(g.Vertices, v)
		}
		v.Nodes = append(v.Nodes, n)
		g.vertexOf[n] = v
	}
	for _, v := range g.Vertices {
		names := make([]string, len(v.Nodes))
		for i, n := range v.Nodes {
			names[i] = n.Name
		}
		for _, n := range append(slices.Clip(v.Nodes), v.sides...) {
			for _, e := range g.outEdges[n] {
				if !g.chained[e] {
					v.Out = append(v.Out, e)
				}
			}
		}
		v.Name = strings.Join(names, " -> ")
	}
	return g, nil
}
