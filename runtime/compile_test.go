package runtime_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
)

// planBuilder makes plans of placeholder nodes: Compile looks only at the
// shape (sources, outputs, edges, settings), not at what the nodes do.
type planBuilder struct{ p runtime.Plan }

var int64Type = runtime.TypeOf[int64](codec.Int[int64]{})

func (b *planBuilder) source(name string, par int) *runtime.Node {
	return b.p.Add(&runtime.Node{Name: name, UID: name, Parallelism: par, Out: int64Type,
		BuildSource: func(*runtime.SourceContext, any) (runtime.SourceDriver, error) { return nil, errors.New("placeholder") }})
}

func (b *planBuilder) op(name string, par int, inputs ...*runtime.Node) *runtime.Node {
	n := b.p.Add(&runtime.Node{Name: name, UID: name, Parallelism: par, Out: int64Type,
		Build: func(any) (operators.Operator, []any, error) { return nil, nil, errors.New("placeholder") }})
	for _, in := range inputs {
		b.p.Connect(in, n, runtime.PartitionDefault, 0, nil)
	}
	return n
}

func (b *planBuilder) sink(name string, par int, inputs ...*runtime.Node) *runtime.Node {
	n := b.op(name, par, inputs...)
	n.Out = nil
	return n
}

var keyHash = func(v int64, scratch []byte) (uint32, []byte) { return uint32(v), scratch }

// vertices returns the compiled chains as lists of node names.
func vertices(g *runtime.JobGraph) [][]string {
	var out [][]string
	for _, v := range g.Vertices {
		var names []string
		for _, n := range v.Nodes {
			names = append(names, n.Name)
		}
		out = append(out, names)
	}
	return out
}

func TestCompileChaining(t *testing.T) {
	cfg := runtime.DefaultConfig()
	cfg.Parallelism = 2
	cases := []struct {
		name  string
		cfg   func(*runtime.Config)
		build func(b *planBuilder)
		want  [][]string
	}{
		{"forward and equal parallelism chain", nil, func(b *planBuilder) {
			s := b.source("src", 2)
			m := b.op("map", 0, s) // 0: the default parallelism, 2
			f := b.op("filter", 2, m)
			b.sink("sink", 2, f)
		}, [][]string{{"src", "map", "filter", "sink"}}},
		{"different parallelism", nil, func(b *planBuilder) {
			s := b.source("src", 2)
			m := b.op("map", 3, s)
			b.sink("sink", 3, m)
		}, [][]string{{"src"}, {"map", "sink"}}},
		{"keyBy", nil, func(b *planBuilder) {
			s := b.source("src", 2)
			p := b.op("process", 2)
			b.p.Connect(s, p, runtime.PartitionHash, 0, keyHash)
			b.sink("sink", 2, p)
		}, [][]string{{"src"}, {"process", "sink"}}},
		{"rebalance with equal parallelism", nil, func(b *planBuilder) {
			s := b.source("src", 2)
			m := b.op("map", 2)
			b.p.Connect(s, m, runtime.PartitionRebalance, 0, nil)
			b.sink("sink", 2, m)
		}, [][]string{{"src"}, {"map", "sink"}}},
		{"broadcast", nil, func(b *planBuilder) {
			s := b.source("src", 2)
			m := b.op("map", 2)
			b.p.Connect(s, m, runtime.PartitionBroadcast, 0, nil)
			b.sink("sink", 2, m)
		}, [][]string{{"src"}, {"map", "sink"}}},
		{"explicit forward", nil, func(b *planBuilder) {
			s := b.source("src", 2)
			m := b.op("map", 2)
			b.p.Connect(s, m, runtime.PartitionForward, 0, nil)
			b.sink("sink", 2, m)
		}, [][]string{{"src", "map", "sink"}}},
		{"union inputs", nil, func(b *planBuilder) {
			s1 := b.source("src1", 2)
			s2 := b.source("src2", 2)
			m := b.op("map", 2, s1, s2)
			b.sink("sink", 2, m)
		}, [][]string{{"src1"}, {"src2"}, {"map", "sink"}}},
		{"two-input node", nil, func(b *planBuilder) {
			s1 := b.source("src1", 2)
			s2 := b.source("src2", 2)
			co := b.op("co", 2)
			b.p.Connect(s1, co, runtime.PartitionDefault, 0, nil)
			b.p.Connect(s2, co, runtime.PartitionDefault, 1, nil)
			b.sink("sink", 2, co)
		}, [][]string{{"src1"}, {"src2"}, {"co", "sink"}}},
		{"chaining off", func(c *runtime.Config) { c.Chaining = false }, func(b *planBuilder) {
			s := b.source("src", 2)
			m := b.op("map", 2, s)
			b.sink("sink", 2, m)
		}, [][]string{{"src"}, {"map"}, {"sink"}}},
		{"chaining disabled on one operator", nil, func(b *planBuilder) {
			s := b.source("src", 2)
			m := b.op("map", 2, s)
			m.DisableChaining = true
			f := b.op("filter", 2, m)
			b.sink("sink", 2, f)
		}, [][]string{{"src"}, {"map"}, {"filter", "sink"}}},
		{"fan-out chains both branches", nil, func(b *planBuilder) {
			s := b.source("src", 2)
			m1 := b.op("map1", 2, s)
			m2 := b.op("map2", 2, s)
			b.sink("sink1", 2, m1)
			b.sink("sink2", 2, m2)
		}, [][]string{{"src", "map1", "map2", "sink1", "sink2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			var b planBuilder
			tc.build(&b)
			g, err := runtime.Compile(&b.p, c)
			if err != nil {
				t.Fatal(err)
			}
			got := vertices(g)
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("vertices %v, want %v\n%s", got, tc.want, g)
			}
			// Every edge is either chained (inside one vertex) or a network
			// edge listed as an output of its producer's vertex and an
			// input of its consumer's; only forward edges are chained.
			for _, n := range b.p.Nodes {
				for _, e := range n.Inputs {
					from, to := g.VertexOf(e.From), g.VertexOf(e.To)
					if g.Chained(e) {
						if from != to || e.Partitioner != runtime.PartitionForward {
							t.Errorf("edge %s -> %s chained across vertices or not forward (%v)", e.From.Name, e.To.Name, e.Partitioner)
						}
						continue
					}
					if from == to {
						t.Errorf("network edge %s -> %s inside one vertex", e.From.Name, e.To.Name)
					}
					if !slices.Contains(from.Out, e) || !slices.Contains(to.In, e) || to.Head() != e.To {
						t.Errorf("network edge %s -> %s not wired as the vertices' out/in", e.From.Name, e.To.Name)
					}
					if e.Partitioner == runtime.PartitionDefault {
						t.Errorf("edge %s -> %s left with the default partitioner", e.From.Name, e.To.Name)
					}
				}
			}
			for _, v := range g.Vertices {
				for _, n := range v.Nodes {
					if n.Parallelism != v.Parallelism {
						t.Errorf("vertex %q has parallelism %d but its node %q has %d", v.Name, v.Parallelism, n.Name, n.Parallelism)
					}
				}
			}
		})
	}
}

func TestCompileResolvesDefaults(t *testing.T) {
	var b planBuilder
	s := b.source("src", 0)
	m := b.op("map", 4, s)
	k := b.op("keyed", 0)
	ke := b.p.Connect(m, k, runtime.PartitionHash, 0, keyHash)
	b.sink("sink", 0, k)
	cfg := runtime.DefaultConfig()
	cfg.Parallelism = 3
	g, err := runtime.Compile(&b.p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Parallelism != 3 || k.Parallelism != 3 || s.MaxParallelism != 128 {
		t.Fatalf("defaults not applied: src p=%d max=%d, keyed p=%d", s.Parallelism, s.MaxParallelism, k.Parallelism)
	}
	if e := m.Inputs[0]; e.Partitioner != runtime.PartitionRebalance {
		t.Fatalf("default partitioner between parallelism 3 and 4 is %v, want REBALANCE", e.Partitioner)
	}
	if ke.Partitioner != runtime.PartitionHash {
		t.Fatalf("hash edge became %v", ke.Partitioner)
	}
	if n := len(g.Vertices); n != 3 {
		t.Fatalf("%d vertices:\n%s", n, g)
	}
	if !strings.Contains(g.String(), "keyed -> sink p=3 <-HASH-") {
		t.Fatalf("graph description:\n%s", g)
	}
}

func TestCompileRefusesInvalidPlans(t *testing.T) {
	cases := []struct {
		name  string
		cfg   func(*runtime.Config)
		build func(b *planBuilder)
		want  []string
	}{
		{"no operators", nil, func(*planBuilder) {}, []string{"no operators"}},
		{"no sink", nil, func(b *planBuilder) {
			b.op("map", 1, b.source("src", 1))
		}, []string{"no sink"}},
		{"forward with different parallelism", nil, func(b *planBuilder) {
			s := b.source("src", 2)
			m := b.op("wide", 3)
			b.p.Connect(s, m, runtime.PartitionForward, 0, nil)
			b.sink("sink", 3, m)
		}, []string{`"wide"`, "forward", `"src" has 2`, `"wide" has 3`}},
		{"duplicate uid", nil, func(b *planBuilder) {
			s := b.source("src", 1)
			m1 := b.op("first", 1, s)
			m2 := b.op("second", 1, m1)
			m1.UID, m2.UID = "same", "same"
			b.sink("sink", 1, m2)
		}, []string{`"second"`, `uid "same"`, `"first"`}},
		{"parallelism above max parallelism", nil, func(b *planBuilder) {
			s := b.source("src", 1)
			m := b.op("wide", 8, s)
			m.MaxParallelism = 4
			b.sink("sink", 8, m)
		}, []string{`"wide"`, "parallelism 8 exceeds max parallelism 4"}},
		{"parallelism 0 without a default", func(c *runtime.Config) { c.Parallelism = 0 }, func(b *planBuilder) {
			b.sink("sink", 1, b.source("src", 0))
		}, []string{`"src"`, "parallelism 0"}},
		{"operator without input", nil, func(b *planBuilder) {
			b.sink("sink", 1, b.source("src", 1))
			b.sink("orphan", 1)
		}, []string{`"orphan"`, "no input"}},
		{"source with an input", nil, func(b *planBuilder) {
			s := b.source("src", 1)
			s2 := b.source("src2", 1)
			b.p.Connect(s, s2, runtime.PartitionDefault, 0, nil)
			b.sink("sink", 1, s2)
		}, []string{`"src2"`, "source cannot have inputs"}},
		{"hash edge without key", nil, func(b *planBuilder) {
			s := b.source("src", 1)
			k := b.op("keyed", 1)
			b.p.Connect(s, k, runtime.PartitionHash, 0, nil)
			b.sink("sink", 1, k)
		}, []string{`"keyed"`, "no key function"}},
		{"input defined later", nil, func(b *planBuilder) {
			s := b.source("src", 1)
			m := b.op("early", 1, s)
			late := b.op("late", 1, s)
			b.p.Connect(late, m, runtime.PartitionDefault, 0, nil)
			b.sink("sink", 1, m)
		}, []string{`"early"`, `"late" is not defined before it`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := runtime.DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			var b planBuilder
			tc.build(&b)
			_, err := runtime.Compile(&b.p, cfg)
			if !errors.Is(err, runtime.ErrInvalidPlan) {
				t.Fatalf("Compile: %v, want ErrInvalidPlan", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			if _, err := runtime.Execute(t.Context(), &b.p, cfg); !errors.Is(err, runtime.ErrInvalidPlan) {
				t.Errorf("Execute accepted the invalid plan: %v", err)
			}
		})
	}
}
