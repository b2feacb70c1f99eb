package rocksdb

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/config"
)

// The RocksDB backend's keys: state.backend.rocksdb.*, and the two
// execution.* keys of what only RocksDB does. Options.Configure reads
// them, Options.Set takes them one by one.
var optionKeys = config.Fields[Options]{
	config.Field(config.String("state.backend.rocksdb.localdir", "RocksDB's working directory.").
		DefaultText("the system's temporary directory"), func(o *Options, v string) { o.Dir = v }),
	config.Field(config.MemorySize("state.backend.rocksdb.block.cache-size",
		"The block cache, with unmanaged memory.").Default(DefaultBlockCacheSize), func(o *Options, v int64) { o.BlockCacheSize = v }),
	config.Field(config.MemorySize("state.backend.rocksdb.block.blocksize", "The data block size.").Default(DefaultBlockSize),
		func(o *Options, v int64) { o.BlockSize = v }),
	config.Field(config.MemorySize("state.backend.rocksdb.writebuffer.size",
		"The memtable size per column family, with unmanaged memory, and a Go write buffer's.").Default(DefaultWriteBufferSize),
		func(o *Options, v int64) { o.WriteBufferSize = v }),
	config.Field(config.Int("state.backend.rocksdb.writebuffer.count", "Memtables per column family.").Default(DefaultWriteBufferCount),
		func(o *Options, v int) { o.WriteBufferCount = v }),
	config.Field(config.List("state.backend.rocksdb.compression.per.level",
		"SST block compression: one for all levels, or one per level (NO_COMPRESSION, SNAPPY_COMPRESSION, LZ4_COMPRESSION, LZ4HC_COMPRESSION, ZSTD_COMPRESSION, ZLIB_COMPRESSION).").
		Default([]string{"SNAPPY_COMPRESSION"}).Check(func(items []string) error {
		_, err := parseCompressions(items)
		return err
	}), func(o *Options, v []string) { o.Compression, _ = parseCompressions(v) }),
	config.Field(config.Choice("state.backend.rocksdb.compaction.style", "The compaction style (Flink's default: LEVEL).", "LEVEL", "UNIVERSAL").
		Default("UNIVERSAL"), func(o *Options, v string) {
		o.CompactionStyle = map[string]CompactionStyle{"LEVEL": LevelCompaction, "UNIVERSAL": UniversalCompaction}[v]
	}),
	config.Field(config.MemorySize("state.backend.rocksdb.compaction.level.target-file-size-base", "The SST size of level 1.").
		Default(DefaultTargetFileSize), func(o *Options, v int64) { o.TargetFileSize = v }),
	config.Field(config.MemorySize("state.backend.rocksdb.compaction.level.max-size-level-base", "The size of level 1.").
		Default(DefaultMaxLevelBase), func(o *Options, v int64) { o.MaxLevelBase = v }),
	config.Field(config.Bool("state.backend.rocksdb.compaction.level.use-dynamic-size", "Dynamic level sizes.").Default(false),
		func(o *Options, v bool) { o.DynamicLevelBytes = v }),
	config.Field(config.Int("state.backend.rocksdb.thread.num", "Background flush and compaction jobs.").Default(DefaultThreads),
		func(o *Options, v int) { o.Threads = v }),
	config.Field(config.Bool("state.backend.rocksdb.use-bloom-filter", "Whole-key bloom filters in SST files (Flink's default: false).").
		Default(true), func(o *Options, v bool) { o.NoBloomFilter = !v }),
	config.Field(config.Float("state.backend.rocksdb.bloom-filter.bits-per-key", "Bits per key of the bloom filters.").
		Default(DefaultBloomBitsPerKey), func(o *Options, v float64) { o.BloomBitsPerKey = v }),
	config.Field(config.Bool("execution.checkpointing.incremental",
		"Incremental RocksDB checkpoints (Flink's default: false); savepoints are always full.").
		Default(true).DeprecatedKeys("state.backend.incremental"), func(o *Options, v bool) { o.DisableIncremental = !v }),
	config.Field(config.Bool("execution.state-recovery.from-local",
		"Keep the local copy of the latest checkpoint, so that a restore on the same machine downloads nothing.").
		Default(false).DeprecatedKeys("state.backend.local-recovery"), func(o *Options, v bool) { o.LocalRecovery = v }),
	config.Field(config.Int("state.backend.rocksdb.checkpoint.transfer.thread.num", "Files uploaded or downloaded at once.").
		Default(DefaultTransferThreads), func(o *Options, v int) { o.TransferThreads = v }),
	config.Field(config.Bool("state.backend.rocksdb.go-write-buffer.enabled",
		"Value, reducing and aggregating states write into a write buffer in Go memory (state.backend.rocksdb.writebuffer.size per state) that checkpoints hand to RocksDB as SST files; false writes them straight into RocksDB's memtables (no Flink equivalent).").
		Default(true), func(o *Options, v bool) { o.NativeMemtable = !v }),
	config.Field(config.Bool("state.backend.changelog.enabled",
		"Changelog checkpoints: a checkpoint of value-like states' writes stores what changed since the last barrier beside the last materialization, without writing RocksDB, flushing it or taking a RocksDB checkpoint; the write buffers go into RocksDB when full and at a materialization.").
		Default(false), func(o *Options, v bool) { o.Changelog = v }),
	config.Field(config.Duration("state.backend.changelog.periodic-materialize.interval",
		"How often a changelog backend takes a RocksDB checkpoint in the background for later checkpoints to build on (Flink's default: 10 min).").
		Default(DefaultMaterializeInterval), func(o *Options, v time.Duration) { o.MaterializeInterval = v }),
	config.Field(config.Bool("state.backend.rocksdb.memory.managed",
		"Size every backend of the process from the managed memory (one shared block cache).").Default(true),
		func(o *Options, v bool) { o.UnmanagedMemory = !v }),
	config.Field(config.Float("state.backend.rocksdb.memory.write-buffer-ratio",
		"The part of the managed memory for memtables, the rest being the block cache.").Default(0.5).
		Check(func(f float64) error {
			if f <= 0 || f >= 1 {
				return errors.New("want a ratio in (0, 1)")
			}
			return nil
		}), func(o *Options, v float64) { o.WriteBufferRatio = v }),
}

// Configure sets the options of the keys c sets (see
// docs/configuration.md), leaving the others; the error names every key
// whose value it refuses.
func (o *Options) Configure(c *config.Configuration) error {
	_, err := optionKeys.Configure(o, c)
	return err
}

// Set sets an option by its key (or a deprecated name of it), with
// Flink's value syntax (memory sizes such as "64mb", "8 mb" or "1gb";
// true or false; enum names such as SNAPPY_COMPRESSION or LEVEL). It
// returns ErrUnknownOption for a key that is not the backend's.
func (o *Options) Set(key, value string) error {
	err := optionKeys.Set(o, key, value)
	if errors.Is(err, config.ErrUnknownKey) {
		return fmt.Errorf("%q: %w", key, ErrUnknownOption)
	}
	return err
}

func parseCompressions(items []string) ([]Compression, error) {
	var out []Compression
	for _, it := range items {
		c, err := ParseCompression(it)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
