package sluice

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/memory"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/state"
)

// ErrInsufficientNetworkBuffers fails a job whose partitions and gates
// require more network buffers than the process's network memory holds
// (Budget.Network / taskmanager.memory.segment-size); the error gives the
// figures and the keys to raise. Only with an explicit
// taskmanager.memory.process.size: without one the network buffers are
// not bounded.
var ErrInsufficientNetworkBuffers = network.ErrInsufficientNetworkBuffers

// WithProcessMemory sets taskmanager.memory.process.size: the memory of
// the whole process, which Execute splits (package memory) into an
// overhead, managed memory for RocksDB, network buffers, the shares of
// the connectors the program imports (the Kafka clients' buffers) and
// the task heap, and from which it sets the Go runtime's soft limit
// (debug.SetMemoryLimit) unless $GOMEMLIMIT is set, with a GC percent of
// memory.DefaultGCPercent unless $GOGC is set.
// Without it the shares are those of memory.DefaultProcessSize and,
// unless taskmanager.memory.go.limit or $GOMEMLIMIT sets a limit, the Go
// limit is memory.DefaultGoLimit of the process's task slots (24 MiB and
// 4 MiB a slot: 32 MiB for a job of parallelism 2 in one process, 28 MiB
// for a one-slot cluster worker), and memory.DefaultHeapGoLimit (24 MiB
// and 7 MiB a slot: 38 MiB at parallelism 2) for a process that runs
// the whole job with its keyed state on the heap (the default backend),
// whose slots have no RocksDB memory beside the Go heap, and
// memory.DefaultHeapOnlyGoLimit (24 MiB and 11 MiB a slot: 46 MiB at
// parallelism 2) when, besides, the program links no other state
// backend (no state/rocksdb, whose library's pages are resident
// whichever backend the job runs); or that
// budget's task heap if less; raised to twice the live heap when that is
// more (memory.Budget.GoLimitFloats), with the GC percent off: a small
// job collects when its heap reaches the limit, a large one as Go's
// GOGC=100 would. memory.Config.Slots set by WithMemoryConfig overrides
// the process's slots.
func WithProcessMemory(bytes int64) Option {
	return func(e *Environment) {
		if bytes <= 0 {
			e.addErr(fmt.Errorf("%w: taskmanager.memory.process.size must be positive, got %d", ErrInvalidOption, bytes))
			return
		}
		e.memory.ProcessSize = bytes
	}
}

// WithMemoryConfig edits the memory configuration (the
// taskmanager.memory.* keys); see memory.Config.
func WithMemoryConfig(edit func(c *memory.Config)) Option {
	return func(e *Environment) { edit(&e.memory) }
}

// installMemory computes the process's budget, installs it for the
// connectors and backends, and sets the Go limit from an explicit
// process size.
func (e *Environment) installMemory() error {
	c := e.memory
	slots, wholeJob := e.processSlots()
	if c.Slots == 0 {
		c.Slots = slots
	}
	c.HeapState = wholeJob && e.keyedStateOnHeap()
	c.HeapOnlyProgram = c.HeapState && len(linkedBackendTypes()) == 0
	b, err := c.Budget()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	memory.Install(b)
	limit := memory.ApplyGoLimit(b, os.Getenv)
	gcPercent := memory.ApplyGCPercent(b, os.Getenv)
	e.cfg.Network.Pool = processNetworkPool(b, e.cfg.Network.BufferSize)
	if l := e.cfg.Logger; l != nil {
		attrs := []any{slog.Int64("process", b.Process), slog.Bool("explicit", b.Explicit),
			slog.Int64("managed", b.Managed), slog.Int64("network", b.Network),
			slog.Int("network.buffers", network.BuffersFor(b.Network, e.cfg.Network.BufferSize))}
		// The connectors' shares, by name ("kafka.source", "kafka.sink").
		for _, name := range slices.Sorted(maps.Keys(b.Shares)) {
			attrs = append(attrs, slog.Int64(name, b.Shares[name]))
		}
		l.Debug("memory budget", append(attrs, slog.Int64("task.heap", b.TaskHeap), slog.Int64("go.limit", limit), slog.Int("go.gc-percent", gcPercent))...)
	}
	return nil
}

// slotLauncher is a Launcher whose process offers task slots of its own
// (package cluster's worker: taskmanager.numberOfTaskSlots), by which
// the default Go limit grows (memory.DefaultGoLimit), or runs no task
// (package cluster's coordinator).
type slotLauncher interface {
	Launcher
	Slots() int
	Coordinator() bool
}

// processSlots is the number of task slots of this process: a worker's
// own; 0 (the memory default) for a coordinator, which runs no task;
// else the job's highest parallelism (one process runs the whole job,
// as Flink's MiniCluster offers one slot per subtask of its widest
// vertex), and then wholeJob is true.
func (e *Environment) processSlots() (slots int, wholeJob bool) {
	if l, err := e.Launcher(); err == nil && l != nil {
		if s, ok := l.(slotLauncher); ok {
			switch {
			case l.Worker():
				return s.Slots(), false
			case s.Coordinator():
				return 0, false
			}
		}
	}
	n := 0
	for _, node := range e.plan.Nodes {
		if !node.IsSide() {
			n = max(n, cmp.Or(node.Parallelism, e.cfg.Parallelism))
		}
	}
	return max(n, 1), true
}

// keyedStateOnHeap says the job's keyed state backend is the heap one
// (the default, or state.backend.type hashmap: runtime.HeapStateBackend),
// whose state is Go memory and which runs no RocksDB: the default
// budget's Go limit of a process that runs the whole job then takes the
// room RocksDB's native memory would (memory.Config.HeapState). Any other
// factory, RocksDB's or one of the program's own, keeps the limit of a
// process with native state. A cluster worker keeps its own default
// either way: fitted to its 64 MB goal with its larger binary, and a
// one-slot heap-backend worker of the chaos job already peaks at 60-62
// MiB with it (docs/performance.md).
func (e *Environment) keyedStateOnHeap() bool {
	f := e.cfg.StateBackend
	return f == nil || reflect.ValueOf(f).Pointer() == reflect.ValueOf(runtime.HeapStateBackend).Pointer()
}

// linkedBackendTypes lists the state.backend.type values that packages
// of the program registered (state.BackendTypes): RocksDB's package
// registers rocksdb, the heap backend is the engine's own. A program
// that links none has no native backend's library in its RSS, whose
// room the default Go limit of a heap-state job then takes
// (memory.Config.HeapOnlyProgram). A variable for tests.
var linkedBackendTypes = state.BackendTypes

// processBuffers is the process's one pool of network buffers (Flink's
// NetworkBufferPool), shared by every job the process runs.
var processBuffers struct {
	mu   sync.Mutex
	pool *network.BufferPool
}

// processNetworkPool sizes the process's network buffer pool from b, the
// latest budget installed: Network / bufSize buffers. Without an explicit
// process size there is no pool (nil): the network buffers are not
// bounded, as the rest of the budget is not enforced either.
func processNetworkPool(b memory.Budget, bufSize int) *network.BufferPool {
	if !b.Explicit {
		return nil
	}
	if bufSize <= 0 {
		bufSize = network.DefaultBufferSize
	}
	n := network.BuffersFor(b.Network, bufSize)
	processBuffers.mu.Lock()
	defer processBuffers.mu.Unlock()
	if p := processBuffers.pool; p != nil && p.BufferSize() == bufSize {
		p.SetTotal(n)
		return p
	}
	// Another segment size: a pool of its own (one process runs one
	// segment size in practice; Flink has one per TaskManager).
	processBuffers.pool = network.NewBufferPool(n, bufSize)
	return processBuffers.pool
}
