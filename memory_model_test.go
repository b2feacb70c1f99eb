package sluice

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"

	// The Kafka connectors declare the taskmanager.memory.kafka.* keys
	// (their memory_share.go); a program that uses them links them.
	_ "github.com/sluicehq/sluice/sink/kafka"
	_ "github.com/sluicehq/sluice/source/kafka"
)

// The taskmanager.memory.* keys reach the memory configuration, in
// Flink's units; Execute's installMemory makes their budget the
// process's.
func TestMemoryKeys(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	c := NewConfiguration()
	for k, v := range map[string]string{
		"taskmanager.memory.process.size":          "1g",
		"taskmanager.memory.managed.fraction":      "0.25",
		"taskmanager.memory.network.fraction":      "0.05",
		"taskmanager.memory.network.min":           "8m",
		"taskmanager.memory.network.max":           "64mb",
		"taskmanager.memory.jvm-overhead.fraction": "0.2",
		"taskmanager.memory.jvm-overhead.min":      "16 mb",
		"taskmanager.memory.jvm-overhead.max":      "2g",
		"taskmanager.memory.kafka.source.fraction": "0.15",
		"taskmanager.memory.kafka.sink.fraction":   "0",
	} {
		if err := c.Set(k, v); err != nil {
			t.Fatalf("Set(%s, %s): %v", k, v, err)
		}
	}
	e := NewEnvironment(WithConfiguration(c))
	if len(e.errs) > 0 {
		t.Fatal(e.errs)
	}
	m := e.memory
	if m.ProcessSize != 1<<30 || m.ManagedFraction != 0.25 || m.NetworkFraction != 0.05 || m.NetworkMin != 8<<20 || m.NetworkMax != 64<<20 ||
		m.OverheadFraction != 0.2 || m.OverheadMin != 16<<20 || m.OverheadMax != 2<<30 || m.Fractions["kafka.source"] != 0.15 || m.Fractions["kafka.sink"] <= 0 || m.Fractions["kafka.sink"] > 1e-300 {
		t.Errorf("memory configuration %+v", m)
	}
	old := memory.Current()
	t.Cleanup(func() { memory.Install(old) })
	t.Setenv("GOMEMLIMIT", "off") // installMemory must not touch the test binary's limit
	if err := e.installMemory(); err != nil {
		t.Fatal(err)
	}
	b := memory.Current()
	// 1 GiB: overhead 0.2 → 204.8 MiB; 819.2 MiB past it: managed a
	// quarter, 204.8 MiB; network 0.05 → 40.96 MiB, within [8, 64].
	const mib = 1 << 20
	near := func(got int64, wantMiB float64) bool { d := float64(got) - wantMiB*mib; return d > -2 && d < 2 }
	if !b.Explicit || b.Process != 1<<30 || !near(b.Overhead, 204.8) || !near(b.Managed, 204.8) || !near(b.Network, 40.96) || b.Shares["kafka.sink"] != 0 {
		t.Errorf("installed budget %+v", b)
	}
	for k, v := range map[string]string{
		"taskmanager.memory.process.size":     "0",
		"taskmanager.memory.managed.fraction": "1.5",
		"taskmanager.memory.network.min":      "lots",
	} {
		c := NewConfiguration()
		if err := c.Set(k, v); err != nil {
			continue // refused at once
		}
		if err := NewEnvironment(WithConfiguration(c)).Execute(t.Context()); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s=%s: %v, want an invalid option", k, v, err)
		}
	}
	// A budget that does not add up is refused by Execute.
	err := NewEnvironment(WithProcessMemory(100<<20), WithMemoryConfig(func(c *memory.Config) { c.ManagedFraction = 0.95 })).Execute(t.Context())
	if !errors.Is(err, ErrInvalidOption) || !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("an impossible budget: %v", err)
	}
}

// slotWorker is a worker launcher offering slots task slots, or a
// coordinator (package cluster's, whose tasks never run here).
type slotWorker struct {
	Launcher
	slots       int
	coordinator bool
}

func (w slotWorker) Worker() bool      { return !w.coordinator }
func (w slotWorker) Slots() int        { return w.slots }
func (w slotWorker) Coordinator() bool { return w.coordinator }

// Without a process size the Go limit follows the process's task slots
// (a job's highest parallelism in one process, a worker's own slots) and,
// in a process that runs the whole job, where its keyed state is: the
// heap backend (the default) takes the room a RocksDB instance's native
// memory would; a worker keeps its own default.
func TestDefaultGoLimitFollowsTheProcessSlots(t *testing.T) {
	testutil.ClearSluiceEnv(t)
	old := memory.Current()
	t.Cleanup(func() { memory.Install(old) })
	t.Setenv("GOMEMLIMIT", "off") // installMemory must not touch the test binary's limit
	const mib = 1 << 20
	job := func(opts ...Option) *Environment {
		e := NewEnvironment(opts...)
		s := FromSource(e, source.FromSlice([]int{1}), NoWatermarks[int](), "numbers")
		Map(s, func(v int) (int, error) { return v, nil }, Name("wide"), Parallelism(4))
		return e
	}
	native := WithStateBackend(func(o state.BackendOptions) (state.KeyedBackend, error) {
		return state.HeapBackendFactory(o) // a program's own factory: not known to be the heap's
	})
	hashmap := NewConfiguration()
	if err := hashmap.Set("state.backend.type", "hashmap"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  *Environment
		want int64
	}{
		{"one process, parallelism 1 and a vertex of 4", job(WithParallelism(1), native), memory.DefaultGoLimit(4)},
		{"one process, parallelism 1", func() *Environment {
			e := NewEnvironment(WithParallelism(1), native)
			FromSource(e, source.FromSlice([]int{1}), NoWatermarks[int](), "numbers")
			return e
		}(), 28 * mib},
		{"a worker of one slot", job(WithLauncher(slotWorker{slots: 1}), native), 28 * mib},
		{"a coordinator of a job with a vertex of 4", job(WithLauncher(slotWorker{slots: 1, coordinator: true})), memory.DefaultGoLimit(0)},
		{"a worker of one slot, 100m set", job(WithLauncher(slotWorker{slots: 1}), WithMemoryConfig(func(c *memory.Config) { c.GoLimit = 100 * mib })), 100 * mib},
		{"heap backend by default, parallelism 2", func() *Environment {
			e := NewEnvironment(WithParallelism(2))
			FromSource(e, source.FromSlice([]int{1}), NoWatermarks[int](), "numbers")
			return e
		}(), 38 * mib},
		{"heap backend by default, a worker of one slot: its own default", job(WithLauncher(slotWorker{slots: 1})), 28 * mib},
		{"heap backend set, a vertex of 4", job(WithStateBackend(runtime.HeapStateBackend)), memory.DefaultHeapGoLimit(4)},
		{"state.backend.type hashmap, a vertex of 4", job(WithConfiguration(hashmap)), memory.DefaultHeapGoLimit(4)},
	} {
		if err := c.env.installMemory(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := memory.Current().GoLimit; got != c.want {
			t.Errorf("%s: Go limit %d MiB, want %d MiB", c.name, got/mib, c.want/mib)
		}
	}
	// This test binary links RocksDB (configuration_test.go); a program
	// that links no backend but the heap one gives the heap state the
	// room of RocksDB's library too, and only the heap state.
	if !slices.Contains(state.BackendTypes(), "rocksdb") {
		t.Fatal("the test binary links no RocksDB: the cases above are not a program that does")
	}
	linkedBackendTypes = func() []string { return nil }
	t.Cleanup(func() { linkedBackendTypes = state.BackendTypes })
	for _, c := range []struct {
		name string
		env  *Environment
		want int64
	}{
		{"heap-only program, heap backend by default, parallelism 2", func() *Environment {
			e := NewEnvironment(WithParallelism(2))
			FromSource(e, source.FromSlice([]int{1}), NoWatermarks[int](), "numbers")
			return e
		}(), 46 * mib},
		{"heap-only program, state.backend.type hashmap, a vertex of 4", job(WithConfiguration(hashmap)), memory.DefaultHeapOnlyGoLimit(4)},
		{"heap-only program, a program's own factory, a vertex of 4", job(native), memory.DefaultGoLimit(4)},
		{"heap-only program, a worker of one slot: its own default", job(WithLauncher(slotWorker{slots: 1})), 28 * mib},
		{"heap-only program, a coordinator", job(WithLauncher(slotWorker{slots: 1, coordinator: true})), memory.DefaultGoLimit(0)},
	} {
		if err := c.env.installMemory(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := memory.Current().GoLimit; got != c.want {
			t.Errorf("%s: Go limit %d MiB, want %d MiB", c.name, got/mib, c.want/mib)
		}
	}
}
