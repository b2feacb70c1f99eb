package e2e

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// networkJob is source -> keyBy (an all-to-all exchange) -> map -> sink at
// parallelism p, with network memory of networkMiB; it returns the sink.
func networkJob(p int, networkMiB int64, input []int64) (*sluice.Environment, *sink.Collect[int64]) {
	env := newEnv(sluice.WithParallelism(p), sluice.WithProcessMemory(256<<20),
		sluice.WithMemoryConfig(func(c *memory.Config) { c.NetworkMin, c.NetworkMax = networkMiB<<20, networkMiB<<20 }))
	s := sluice.FromSource(env, source.FromSlice(input), sluice.NoWatermarks[int64](), "numbers")
	k := sluice.KeyBy(s, func(v int64) int64 { return v % 13 }).Stream()
	m := sluice.Map(k, func(v int64) (int64, error) { return 3*v + 1, nil }, sluice.Name("scale"))
	out := sink.NewCollect[int64]()
	sluice.SinkTo(m, out)
	return env, out
}

// A job whose exchanges require more network buffers than the process's
// network memory holds fails to start with ErrInsufficientNetworkBuffers
// naming the keys to raise; with more network memory the same job runs to
// its exact output, and the buffers it allocates stay within the budget.
// Not parallel: it installs process budgets and counts the process's
// network buffers.
func TestNetworkBuffersBoundedByBudget(t *testing.T) {
	old := memory.Current()
	t.Cleanup(func() { memory.Install(old) })
	t.Setenv("GOMEMLIMIT", "off") // the budget must not set the test binary's Go limit
	input := ints(0, 20000)
	want := make([]int64, len(input))
	for i, v := range input {
		want[i] = 3*v + 1
	}
	cfg := network.DefaultConfig()
	cfg.Pool = network.NewBufferPool(0, 0) // only to ask what a gate owns with a pool
	const p = 4
	// 4 partitions of 4 subpartitions, 4 gates of 4 channels.
	required := p*cfg.PartitionBuffers(p) + p*cfg.GateBuffers(p)

	// 1 MiB: 32 buffers of 32 KiB.
	env, _ := networkJob(p, 1, input)
	err := execute(t, env)
	if !errors.Is(err, sluice.ErrInsufficientNetworkBuffers) {
		t.Fatalf("a job over the network budget: %v, want ErrInsufficientNetworkBuffers", err)
	}
	for _, s := range []string{"taskmanager.memory.network.fraction", "taskmanager.memory.process.size",
		"required " + itoa(int64(required)), "only " + itoa(int64(network.BuffersFor(1<<20, 0))) + " available"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q: %v", s, err)
		}
	}

	// 8 MiB: 256 buffers.
	available := network.BuffersFor(8<<20, 0)
	if available < required {
		t.Fatalf("the test's larger budget %d is below the %d required", available, required)
	}
	env, out := networkJob(p, 8, input)
	before := network.BuffersAllocated()
	mustExecute(t, env)
	allocated := network.BuffersAllocated() - before
	if d := sameMultiset(out.Values(), want); d != "" {
		t.Fatalf("output within the budget: %s", d)
	}
	if allocated > int64(available) || allocated == 0 {
		t.Errorf("the job allocated %d network buffers, budget %d", allocated, available)
	}
	t.Logf("p=%d: required %d buffers, available %d of 1 MiB and %d of 8 MiB; allocated %d", p, required, network.BuffersFor(1<<20, 0), available, allocated)
}
