// Package memory owns Sluice's process memory model, after Flink's
// TaskManager memory model: one process budget
// (taskmanager.memory.process.size) split into an overhead outside
// Sluice's accounting, managed memory (RocksDB's one block cache and
// write buffers per process), network buffers, the shares the
// connectors the program imports declare for their clients' buffers
// (RegisterShare: the Kafka source's and sink's), and the rest, the
// task heap; and the Go runtime's soft memory limit (GOMEMLIMIT) derived
// from it, with its GC percent (GOGC).
//
// The runtime installs the budget of the job it runs (Install); the
// connectors and state backends read it (Current) to size what the user
// did not size: RocksDB's shared cache and write buffers here
// (RocksDBShare), the Kafka source's fetch sizes and buffered records and
// the Kafka sink's buffers per producer in the connectors, from their
// shares. Every part is a function of the budget and of the number of
// subtasks sharing it, computed without I/O.
package memory

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync/atomic"
)

// Defaults. Flink's where Flink has the option (its fractions); the sizes
// are smaller than Flink's, whose minimums (network 64 MiB, JVM overhead
// 192 MiB) are for a JVM of gigabytes.
const (
	// DefaultProcessSize sizes the shares when
	// taskmanager.memory.process.size is not set (Flink has no default;
	// its shipped config.yaml says 1728m). Without an explicit size the Go
	// runtime's limit is left alone unless taskmanager.memory.go.limit
	// sets one.
	DefaultProcessSize int64 = 256 << 20
	// DefaultGCPercent is taskmanager.memory.go.gc-percent (GOGC) with an
	// explicit process size: the heap may grow to five times what is live
	// before a collection, up to the Go limit, so a job allocating per
	// record collects a fifth as often as with Go's 100. Without an
	// explicit size the percent is off and the floating limit starts the
	// collections (Budget.GoLimitFloats).
	DefaultGCPercent = 400
	// DefaultManagedFraction is taskmanager.memory.managed.fraction.
	DefaultManagedFraction = 0.4
	// DefaultNetworkFraction is taskmanager.memory.network.fraction.
	DefaultNetworkFraction = 0.1
	// DefaultNetworkMin is taskmanager.memory.network.min (Flink: 64 MiB).
	DefaultNetworkMin int64 = 4 << 20
	// DefaultNetworkMax is taskmanager.memory.network.max (Flink: 1 GiB;
	// Flink 1.x: 1 GiB, Flink 2: unbounded).
	DefaultNetworkMax int64 = 1 << 30
	// DefaultOverheadFraction is taskmanager.memory.jvm-overhead.fraction:
	// for Sluice, the memory the Go runtime does not account (the
	// program's text, C libraries' own allocations, cgo threads' stacks).
	DefaultOverheadFraction = 0.1
	// DefaultOverheadMin is taskmanager.memory.jvm-overhead.min (Flink:
	// 192 MiB).
	DefaultOverheadMin int64 = 32 << 20
	// DefaultOverheadMax is taskmanager.memory.jvm-overhead.max.
	DefaultOverheadMax int64 = 1 << 30
	// DefaultGoLimitBase and DefaultGoLimitPerSlot make the Go limit of
	// the default budget (neither taskmanager.memory.process.size nor
	// taskmanager.memory.go.limit set): the base and as much again per
	// task slot of the process (Config.Slots), at most its task heap,
	// before it floats above LiveHeapHeadroom times the live heap
	// (Budget.GoLimitFloats). The default budget sizes the shares of a
	// process nobody sized, and most of it goes unused by a small job:
	// its task heap (78 MiB with the Kafka connectors) as the limit, with
	// the collector off below it, let the exactly-once Kafka job's heap
	// grow to 90 MiB over a live heap of 15-30 MiB, 113-116 MiB of RSS.
	// 32 MiB for that job's two slots (parallelism 2 in one process)
	// holds it under 70 MB of RSS (issue 32); a one-slot cluster worker,
	// which runs half of it over a live heap of 3-6 MiB, takes 28 MiB:
	// 55-56 MiB of RSS instead of 59-62 for the same CPU (24 MiB was
	// 52-53 MiB, but at 15% more CPU: twice the collections). A job
	// whose live heap is above half of it collects as with Go's
	// GOGC=100.
	DefaultGoLimitBase    int64 = 24 << 20
	DefaultGoLimitPerSlot int64 = 4 << 20
	// DefaultGoLimitPerHeapSlot replaces DefaultGoLimitPerSlot when the
	// process runs a whole job whose keyed state is on the Go heap
	// (Config.HeapState: the heap backend, the default; not a cluster
	// worker, whose default has a goal of its own) in a program that
	// links RocksDB all the same (else DefaultGoLimitPerHeapOnlySlot): a
	// slot then has no RocksDB instance whose native memory (memtables,
	// table readers) shares the process's RSS with the Go heap, so the
	// default budget gives the Go heap that room instead, 38 MiB for two
	// slots. The exactly-once Kafka job with the heap backend peaks at
	// 60-61 MiB of RSS with it (the RocksDB job 59-60 with 32 MiB), with
	// a third fewer collections and 2-4 % less CPU a record than with 32
	// MiB (issue 32; docs/performance.md).
	DefaultGoLimitPerHeapSlot int64 = 7 << 20
	// DefaultGoLimitPerHeapOnlySlot replaces DefaultGoLimitPerHeapSlot
	// when, besides, the program links no state backend but the heap one
	// (Config.HeapOnlyProgram: no state/rocksdb, the root package's
	// default). A program that links RocksDB has its shared libraries'
	// pages resident whichever backend its job runs (librocksdb 6.2
	// MiB, libstdc++ and libm 1.7 MiB, and a larger binary: 9-10 MiB of
	// the exactly-once Kafka job's heap-backend RSS, 59-60 MiB against
	// 50-51 MiB without them); a program without them gives that room to
	// the Go heap, 46 MiB for two slots: the job then peaks at 58-59 MiB
	// with a third fewer collections and 0-3 % less CPU a record (issue
	// 32; docs/performance.md).
	DefaultGoLimitPerHeapOnlySlot int64 = 11 << 20
)

// ErrInvalid is matched by the errors of Config.Budget.
var ErrInvalid = errors.New("memory: invalid configuration")

// Config is the memory configuration of a process by Flink's keys. A zero
// field takes its default; a negative fraction or size is refused.
type Config struct {
	// ProcessSize is taskmanager.memory.process.size: all the memory of
	// the process. 0: DefaultProcessSize, and no Go limit.
	ProcessSize int64
	// ManagedFraction is taskmanager.memory.managed.fraction of the
	// Sluice memory (the process less the overhead); ManagedSize
	// (taskmanager.memory.managed.size) overrides it. Set ManagedSize to
	// ZeroSize for none.
	ManagedFraction float64
	ManagedSize     int64
	// NetworkFraction, NetworkMin, NetworkMax are
	// taskmanager.memory.network.{fraction,min,max}.
	NetworkFraction        float64
	NetworkMin, NetworkMax int64
	// OverheadFraction, OverheadMin, OverheadMax are
	// taskmanager.memory.jvm-overhead.{fraction,min,max}.
	OverheadFraction         float64
	OverheadMin, OverheadMax int64
	// GoLimit is taskmanager.memory.go.limit: the Go runtime's soft
	// memory limit (GOMEMLIMIT); 0 derives it from the budget
	// (Budget.GoLimit), ZeroSize sets none.
	GoLimit int64
	// Slots is the number of task slots of the process
	// (taskmanager.numberOfTaskSlots of a cluster worker; the whole job's
	// highest parallelism when one process runs it, as in Flink's
	// MiniCluster), by which the default budget's Go limit grows
	// (DefaultGoLimitPerSlot); 0 is 2.
	Slots int
	// HeapState says the process runs a whole job (not a cluster
	// worker) whose keyed state is all on the Go heap (the heap backend):
	// the default budget's Go limit then grows by
	// DefaultGoLimitPerHeapSlot a slot rather than DefaultGoLimitPerSlot.
	// The root package sets it from the job's state backend.
	HeapState bool
	// HeapOnlyProgram says, besides HeapState, that the program links no
	// state backend but the heap one (no package registered a
	// state.backend.type: RocksDB's registers rocksdb), so no native
	// backend's library pages share the process's RSS: the default
	// budget's Go limit then grows by DefaultGoLimitPerHeapOnlySlot a
	// slot. The root package sets it from the registered backend types.
	HeapOnlyProgram bool
	// GCPercent is taskmanager.memory.go.gc-percent (GOGC): 0 is
	// DefaultGCPercent with an explicit ProcessSize, off under the
	// default budget's floating limit (Budget.GoLimitFloats) and 100 with
	// only GoLimit set; a
	// negative value turns the proportional trigger off (GOGC=off), which
	// leaves the Go limit to start collections.
	GCPercent int
	// Fractions are the fractions of the Sluice memory of the shares
	// connectors declare (RegisterShare), by share name ("kafka.source":
	// taskmanager.memory.kafka.source.fraction); a share missing or 0
	// takes its default. A name no imported package declares is refused.
	Fractions map[string]float64
}

// ZeroSize, as a size of Config, means 0 bytes rather than the default.
const ZeroSize int64 = -1

// Budget is a process's memory split by Config.Budget. Process =
// Overhead + Managed + Network + the Shares + TaskHeap.
type Budget struct {
	// Process is the whole; Explicit says it was configured, which is
	// when GoLimit applies.
	Process  int64
	Explicit bool
	// Overhead is what the Go runtime does not see and Sluice does not
	// bound (program text, C libraries' own allocations).
	Overhead int64
	// Managed is RocksDB's: one block cache (with its write buffers
	// charged to it) per process.
	Managed int64
	// Network is what the network buffers of the process's tasks may
	// take.
	Network int64
	// Shares are the bytes of each share the connectors declared, by
	// name (ConnectorShare.Of): what the Kafka source readers of the process may
	// hold in fetched records (kafka.source), what the Kafka sink
	// producers may buffer (kafka.sink).
	Shares map[string]int64
	// TaskHeap is the rest: operators, heap state, records in flight.
	TaskHeap int64
	// GoLimit is the soft limit of the Go runtime (debug.SetMemoryLimit):
	// everything but the overhead and the native part of managed memory
	// (all of it but ManagedGoFraction), which RocksDB allocates outside
	// Go; or Config.GoLimit. 0: none.
	GoLimit int64
	// GoLimitFloats says GoLimit is the default budget's (neither the
	// process size nor taskmanager.memory.go.limit was set):
	// DefaultGoLimit(slots) (DefaultHeapGoLimit with Config.HeapState,
	// DefaultHeapOnlyGoLimit with Config.HeapOnlyProgram too), or
	// the task heap if that is less, which the heap may fill before a
	// collection (the GC percent is off).
	// ApplyGoLimit keeps the runtime's limit at least LiveHeapHeadroom
	// times the live heap, so a job whose live heap outgrows half of it
	// collects as Go's GOGC=100 does, rather than without end, and a
	// small job holds no more than DefaultGoLimit(slots).
	GoLimitFloats bool
	// GCPercent is the Go runtime's GC percent (debug.SetGCPercent),
	// negative for off.
	GCPercent int
}

func frac(v, d float64) float64 {
	if v == 0 {
		return d
	}
	return v
}

func size(v, d int64) int64 {
	switch {
	case v == 0:
		return d
	case v == ZeroSize:
		return 0
	}
	return v
}

// Budget splits the process size as Flink does: the overhead is its
// fraction of the process, clamped to [min, max]; of the rest, the Sluice
// memory, managed memory is its fraction (or its size), network memory
// its fraction clamped to [min, max], the connectors' shares their
// fractions; the task heap what remains, which must not be negative.
func (c Config) Budget() (Budget, error) {
	b := Budget{Process: c.ProcessSize, Explicit: c.ProcessSize != 0}
	if !b.Explicit {
		b.Process = DefaultProcessSize
	}
	fracs := []struct {
		name string
		v    float64
	}{
		{"taskmanager.memory.managed.fraction", c.ManagedFraction},
		{"taskmanager.memory.network.fraction", c.NetworkFraction},
		{"taskmanager.memory.jvm-overhead.fraction", c.OverheadFraction},
	}
	for _, f := range fracs {
		if f.v < 0 || f.v >= 1 || math.IsNaN(f.v) {
			return Budget{}, fmt.Errorf("%w: %s %v: want a fraction in [0, 1)", ErrInvalid, f.name, f.v)
		}
	}
	if b.Process < 0 {
		return Budget{}, fmt.Errorf("%w: taskmanager.memory.process.size %d", ErrInvalid, b.Process)
	}
	for _, s := range []struct {
		name string
		v    int64
	}{
		{"taskmanager.memory.managed.size", c.ManagedSize},
		{"taskmanager.memory.network.min", c.NetworkMin}, {"taskmanager.memory.network.max", c.NetworkMax},
		{"taskmanager.memory.jvm-overhead.min", c.OverheadMin}, {"taskmanager.memory.jvm-overhead.max", c.OverheadMax},
	} {
		if s.v < ZeroSize {
			return Budget{}, fmt.Errorf("%w: %s %d: want a size", ErrInvalid, s.name, s.v)
		}
	}
	clamp := func(v, lo, hi int64, what string) (int64, error) {
		if lo > hi {
			return 0, fmt.Errorf("%w: %s.min %d above %s.max %d", ErrInvalid, what, lo, what, hi)
		}
		return min(max(v, lo), hi), nil
	}
	var err error
	b.Overhead, err = clamp(int64(float64(b.Process)*frac(c.OverheadFraction, DefaultOverheadFraction)),
		size(c.OverheadMin, DefaultOverheadMin), size(c.OverheadMax, DefaultOverheadMax), "taskmanager.memory.jvm-overhead")
	if err != nil {
		return Budget{}, err
	}
	sluice := b.Process - b.Overhead
	if sluice <= 0 {
		return Budget{}, fmt.Errorf("%w: taskmanager.memory.process.size %d leaves nothing past the overhead of %d (taskmanager.memory.jvm-overhead.*)",
			ErrInvalid, b.Process, b.Overhead)
	}
	if c.ManagedSize != 0 {
		b.Managed = size(c.ManagedSize, 0)
	} else {
		b.Managed = int64(float64(sluice) * frac(c.ManagedFraction, DefaultManagedFraction))
	}
	b.Network, err = clamp(int64(float64(sluice)*frac(c.NetworkFraction, DefaultNetworkFraction)),
		size(c.NetworkMin, DefaultNetworkMin), size(c.NetworkMax, DefaultNetworkMax), "taskmanager.memory.network")
	if err != nil {
		return Budget{}, err
	}
	var shared int64
	if b.Shares, shared, err = c.budgetShares(sluice); err != nil {
		return Budget{}, err
	}
	b.TaskHeap = sluice - b.Managed - b.Network - shared
	if b.TaskHeap < 0 {
		return Budget{}, fmt.Errorf("%w: taskmanager.memory.process.size %d: managed %d + network %d + the connectors' shares %d %v exceed the %d past the overhead",
			ErrInvalid, b.Process, b.Managed, b.Network, shared, b.Shares, sluice)
	}
	b.GoLimit = b.Process - b.Overhead - int64(float64(b.Managed)*(1-ManagedGoFraction))
	switch {
	case c.GoLimit == 0 && !b.Explicit:
		// No process size was given: the budget is a default, not the
		// user's bound, and a job whose live heap (heap-backend state)
		// outgrows it must not collect without end: the limit is
		// DefaultGoLimit of the process's slots within the task heap,
		// floating above the live heap (GoLimitFloats).
		limit := DefaultGoLimit(c.Slots)
		switch {
		case c.HeapState && c.HeapOnlyProgram:
			limit = DefaultHeapOnlyGoLimit(c.Slots)
		case c.HeapState:
			limit = DefaultHeapGoLimit(c.Slots)
		}
		b.GoLimit, b.GoLimitFloats = min(b.TaskHeap, limit), true
	case c.GoLimit == ZeroSize:
		b.GoLimit = 0
	case c.GoLimit < ZeroSize:
		return Budget{}, fmt.Errorf("%w: taskmanager.memory.go.limit %d: want a size", ErrInvalid, c.GoLimit)
	case c.GoLimit > 0:
		b.GoLimit = c.GoLimit
	}
	switch {
	case c.GCPercent != 0:
		b.GCPercent = max(c.GCPercent, -1)
	case b.Explicit:
		b.GCPercent = DefaultGCPercent
	case b.GoLimitFloats && b.GoLimit > 0:
		b.GCPercent = -1
	default:
		b.GCPercent = 100
	}
	if b.GCPercent < 0 && b.GoLimit <= 0 {
		return Budget{}, fmt.Errorf("%w: taskmanager.memory.go.gc-percent off with no taskmanager.memory.go.limit: the heap would grow without a bound", ErrInvalid)
	}
	return b, nil
}

// DefaultGoLimit is the default budget's Go limit (before the task heap
// bounds it) for a process of slots task slots (0: 2):
// DefaultGoLimitBase plus DefaultGoLimitPerSlot a slot, 32 MiB for two.
func DefaultGoLimit(slots int) int64 { return slotsLimit(slots, DefaultGoLimitPerSlot) }

// DefaultHeapGoLimit is DefaultGoLimit for a process whose keyed state
// is on the Go heap (Config.HeapState): DefaultGoLimitBase plus
// DefaultGoLimitPerHeapSlot a slot (0: 2), 38 MiB for two.
func DefaultHeapGoLimit(slots int) int64 { return slotsLimit(slots, DefaultGoLimitPerHeapSlot) }

// DefaultHeapOnlyGoLimit is DefaultHeapGoLimit for a program that links
// no state backend but the heap one (Config.HeapOnlyProgram):
// DefaultGoLimitBase plus DefaultGoLimitPerHeapOnlySlot a slot (0: 2),
// 46 MiB for two.
func DefaultHeapOnlyGoLimit(slots int) int64 { return slotsLimit(slots, DefaultGoLimitPerHeapOnlySlot) }

// slotsLimit is DefaultGoLimitBase plus perSlot for each of slots (0: 2).
func slotsLimit(slots int, perSlot int64) int64 {
	if slots <= 0 {
		slots = 2
	}
	return DefaultGoLimitBase + int64(slots)*perSlot
}

// Share is n-th part of total, at least least.
func Share(total int64, n int, least int64) int64 {
	return max(total/int64(max(n, 1)), least)
}

var current atomic.Pointer[Budget]

// Install makes b the process's budget, which Current returns. It
// returns the one it replaces.
func Install(b Budget) Budget {
	old := Current()
	current.Store(&b)
	return old
}

// Current is the budget the runtime installed, or the default one.
func Current() Budget {
	if b := current.Load(); b != nil {
		return *b
	}
	b, _ := Config{}.Budget()
	return b
}

// ApplyGoLimit sets the Go runtime's soft memory limit to b.GoLimit
// unless the GOMEMLIMIT environment variable (the user's own limit,
// which wins) is set or the limit is off; getenv is os.Getenv. The limit
// of the default budget (b.GoLimitFloats) is kept at least
// LiveHeapHeadroom times the live heap from then on. It returns the limit
// set, or -1 when it set none.
func ApplyGoLimit(b Budget, getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" || b.GoLimit <= 0 {
		floatGoLimit(0)
		return -1
	}
	if b.GoLimitFloats {
		floatGoLimit(b.GoLimit)
		return b.GoLimit
	}
	floatGoLimit(0)
	debug.SetMemoryLimit(b.GoLimit)
	return b.GoLimit
}

// ApplyGCPercent sets the Go runtime's GC percent to b.GCPercent unless
// the GOGC environment variable (the user's own, which wins) is set, and
// returns the percent set (negative: off), or 0 when it set none. Under
// the default budget's floating limit with $GOMEMLIMIT set (the limit
// is the user's, not the floating one) the percent is Go's 100.
func ApplyGCPercent(b Budget, getenv func(string) string) int {
	if getenv("GOGC") != "" || b.GCPercent == 0 {
		return 0
	}
	if b.GoLimitFloats && getenv("GOMEMLIMIT") != "" {
		debug.SetGCPercent(100)
		return 100
	}
	debug.SetGCPercent(b.GCPercent)
	return b.GCPercent
}

// ManagedGoFraction is the part of managed memory a RocksDB backend keeps
// in Go: its Go write buffers (state/rocksdb write_buffer.go). The rest
// is native: the block cache and the memtables.
const ManagedGoFraction = 0.25

// DefaultWriteBufferRatio is state.backend.rocksdb.memory.write-buffer-ratio:
// the part of the native managed memory for memtables, the rest is the
// block cache (Flink charges the memtables to the cache; the C API of the
// librocksdb Sluice links has no write buffer manager, so the two are
// split instead).
const DefaultWriteBufferRatio = 0.5

// RocksDB is how the RocksDB backends of a process are sized from
// managed memory.
type RocksDB struct {
	// BlockCache is the capacity of the one LRU cache of the process.
	BlockCache int64
	// DBWriteBuffer is each database's db_write_buffer_size: all its
	// memtables.
	DBWriteBuffer int64
	// WriteBuffer is the size of a column family's memtable and of a
	// state's Go write buffer.
	WriteBuffer int64
}

// RocksDBShare sizes backends backends sharing b.Managed, with
// writeBufferRatio (0: DefaultWriteBufferRatio) of the native part for
// memtables.
func (b Budget) RocksDBShare(backends int, writeBufferRatio float64) RocksDB {
	if writeBufferRatio <= 0 || writeBufferRatio >= 1 {
		writeBufferRatio = DefaultWriteBufferRatio
	}
	native := int64(float64(b.Managed) * (1 - ManagedGoFraction))
	goPart := b.Managed - native
	memtables := int64(float64(native) * writeBufferRatio)
	db := Share(memtables, backends, 1<<20)
	return RocksDB{
		BlockCache:    max(native-memtables, 1<<20),
		DBWriteBuffer: db,
		// Two memtables per column family; per state two Go buffers
		// and a read cache of a quarter of one (state/rocksdb
		// cleanCacheSize), each backend with a few states.
		WriteBuffer: max(min(db/2, Share(goPart, backends, 0)*4/9), 64<<10),
	}
}
