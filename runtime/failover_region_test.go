package runtime_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/datadriven"
	"github.com/sluicehq/sluice/runtime"
)

// TestFailoverRegions runs testdata/failover_regions.txt: a graph per
// case, compiled, and its failover regions, each as its tasks
// (<vertex>#<subtask>).
//
//	regions [chaining]
//	<name> <parallelism> [<input>:<forward|default|rebalance|hash|broadcast>...]
//
// A node without inputs is a source, one that nothing reads a sink.
func TestFailoverRegions(t *testing.T) {
	parts := map[string]runtime.Partitioner{
		"forward": runtime.PartitionForward, "default": runtime.PartitionDefault, "rebalance": runtime.PartitionRebalance,
		"hash": runtime.PartitionHash, "broadcast": runtime.PartitionBroadcast,
	}
	datadriven.RunTest(t, "testdata/failover_regions.txt", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "regions" {
			d.Fatalf(t, "unknown command")
		}
		b := &planBuilder{}
		nodes := map[string]*runtime.Node{}
		consumed := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				d.Fatalf(t, "line %q: want <name> <parallelism> [inputs]", line)
			}
			par, err := strconv.Atoi(f[1])
			if err != nil {
				d.Fatalf(t, "line %q: %v", line, err)
			}
			if len(f) == 2 {
				nodes[f[0]] = b.source(f[0], par)
				continue
			}
			n := b.op(f[0], par)
			for _, in := range f[2:] {
				from, p, _ := strings.Cut(in, ":")
				part, ok := parts[p]
				if nodes[from] == nil || !ok {
					d.Fatalf(t, "line %q: input %q", line, in)
				}
				var kh any
				if part == runtime.PartitionHash {
					kh = keyHash
				}
				b.p.Connect(nodes[from], n, part, 0, kh)
				consumed[from] = true
			}
			nodes[f[0]] = n
		}
		for name, n := range nodes {
			if !consumed[name] {
				n.Out = nil // a sink
			}
		}
		cfg := runtime.DefaultConfig()
		cfg.Chaining = d.Has("chaining")
		g, err := runtime.Compile(&b.p, cfg)
		if err != nil {
			return "error: " + err.Error()
		}
		tasks := g.Tasks()
		var out []string
		for _, r := range g.FailoverRegions() {
			var names []string
			for _, id := range r {
				s := tasks[id]
				names = append(names, fmt.Sprintf("%s#%d", s.Vertex.Name, s.Subtask))
			}
			out = append(out, "["+strings.Join(names, " ")+"]")
		}
		return strings.Join(out, "\n")
	})
}
