package memory

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/config"
)

// The taskmanager.memory.* keys of the memory model, which
// Config.Configure reads; a share's fraction is declared with the share
// (RegisterShare), once the program imports its connector.
var (
	keyProcessSize = config.MemorySize("taskmanager.memory.process.size",
		"The process's memory budget; unset: the shares and the Go memory limit of "+config.FormatMemorySize(DefaultProcessSize)+".").
		Check(sizeAtLeast(1))
	keyManagedSize = config.MemorySize("taskmanager.memory.managed.size",
		"Managed memory (RocksDB's) as a size, instead of the fraction.")
	keyManagedFraction = fraction("taskmanager.memory.managed.fraction",
		"Managed memory (RocksDB's) of the memory past the overhead.", DefaultManagedFraction)
	keyNetworkFraction  = fraction("taskmanager.memory.network.fraction", "Network memory, within its min and max.", DefaultNetworkFraction)
	keyNetworkMin       = config.MemorySize("taskmanager.memory.network.min", "The least network memory.").Default(DefaultNetworkMin)
	keyNetworkMax       = config.MemorySize("taskmanager.memory.network.max", "The most network memory.").Default(DefaultNetworkMax)
	keyOverheadFraction = fraction("taskmanager.memory.jvm-overhead.fraction",
		"Memory the Go runtime does not account (the program's text, C libraries, cgo stacks), within its min and max.",
		DefaultOverheadFraction)
	keyOverheadMin = config.MemorySize("taskmanager.memory.jvm-overhead.min", "The least overhead.").Default(DefaultOverheadMin)
	keyOverheadMax = config.MemorySize("taskmanager.memory.jvm-overhead.max", "The most overhead.").Default(DefaultOverheadMax)
	keyGoLimit     = config.MemorySize("taskmanager.memory.go.limit",
		"The Go runtime's soft memory limit (GOMEMLIMIT, which wins when set); unset: with taskmanager.memory.process.size, the process less the overhead and RocksDB's native memory, without it "+config.FormatMemorySize(DefaultGoLimitBase)+" and "+config.FormatMemorySize(DefaultGoLimitPerSlot)+" per task slot of the process (a worker's taskmanager.numberOfTaskSlots, else the job's highest parallelism), "+config.FormatMemorySize(DefaultGoLimitPerHeapSlot)+" per slot when one process runs the whole job with its keyed state on the heap (state.backend.type hashmap, the default), "+config.FormatMemorySize(DefaultGoLimitPerHeapOnlySlot)+" per slot if the program also links no other state backend (no state/rocksdb), or the default budget's task heap if less, raised to twice the live heap when that is more; 0: none.")
	keyGCPercent = config.Int("taskmanager.memory.go.gc-percent",
		"The Go runtime's GC percent (GOGC, which wins when set); unset: "+fmt.Sprint(DefaultGCPercent)+
			" with taskmanager.memory.process.size; off under the default budget's limit (neither the size nor taskmanager.memory.go.limit set); else 100; negative: off, collections started by the Go limit only.")
)

func sizeAtLeast(least int64) func(int64) error {
	return func(n int64) error {
		if n < least {
			return fmt.Errorf("%d bytes, want at least %d", n, least)
		}
		return nil
	}
}

func fraction(name, doc string, def float64) *config.Key[float64] {
	return config.Float(name, doc).Default(def).Check(func(f float64) error {
		if f < 0 || f >= 1 {
			return fmt.Errorf("%v: want a fraction in [0, 1)", f)
		}
		return nil
	})
}

// Configure sets the fields of the taskmanager.memory.* keys conf sets,
// leaving the others; a size or fraction of 0 is kept as 0 (ZeroSize,
// the smallest fraction), not as the default.
func (c *Config) Configure(conf *config.Configuration) error {
	var errs []error
	size := func(k *config.Key[int64], dst *int64) {
		n, ok, err := k.Get(conf)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok && n == 0:
			*dst = ZeroSize
		case ok:
			*dst = n
		}
	}
	frac := func(k *config.Key[float64], dst *float64) {
		f, ok, err := k.Get(conf)
		switch {
		case err != nil:
			errs = append(errs, err)
		case ok && f == 0:
			*dst = math.SmallestNonzeroFloat64 // 0 in Config is the default
		case ok:
			*dst = f
		}
	}
	size(keyProcessSize, &c.ProcessSize)
	size(keyManagedSize, &c.ManagedSize)
	frac(keyManagedFraction, &c.ManagedFraction)
	frac(keyNetworkFraction, &c.NetworkFraction)
	size(keyNetworkMin, &c.NetworkMin)
	size(keyNetworkMax, &c.NetworkMax)
	frac(keyOverheadFraction, &c.OverheadFraction)
	size(keyOverheadMin, &c.OverheadMin)
	size(keyOverheadMax, &c.OverheadMax)
	size(keyGoLimit, &c.GoLimit)
	switch n, ok, err := keyGCPercent.Get(conf); {
	case err != nil:
		errs = append(errs, err)
	case ok && n == 0:
		errs = append(errs, fmt.Errorf("taskmanager.memory.go.gc-percent: 0 would collect without pause; want a positive percent, or negative for off"))
	case ok:
		c.GCPercent = n
	}
	errs = append(errs, c.configureShares(conf)...)
	return errors.Join(errs...)
}
