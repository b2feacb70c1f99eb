package rocksdb

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/state"
)

// ErrUnknownOption is returned by Options.Set for a key it does not know.
var ErrUnknownOption = fmt.Errorf("unknown RocksDB state backend option: %w", state.ErrUnknownBackendOption)

// Compression is the block compression of SST files.
type Compression string

// The compressions Debian's librocksdb is built with.
const (
	NoCompression     Compression = "none"
	SnappyCompression Compression = "snappy"
	LZ4Compression    Compression = "lz4"
	LZ4HCCompression  Compression = "lz4hc"
	ZSTDCompression   Compression = "zstd"
	ZlibCompression   Compression = "zlib"
)

// CompactionStyle is RocksDB's compaction style.
type CompactionStyle string

// The compaction styles.
const (
	LevelCompaction     CompactionStyle = "level"
	UniversalCompaction CompactionStyle = "universal"
)

// Defaults of Options: Flink's, except
//   - the block cache: Flink sizes it from managed memory (hundreds of MiB
//     per slot by default) and uses its fixed 8 MiB only when memory is
//     unmanaged; 64 MiB is a middle ground for a backend without a memory
//     manager;
//   - universal compaction (Flink: level) and bloom filters (Flink: off),
//     which make incremental checkpoints of randomly updated state about
//     half as large; see Options.CompactionStyle;
//   - incremental checkpoints on (Flink: off), as the design asks.
const (
	DefaultBlockCacheSize   = 64 << 20  // state.backend.rocksdb.block.cache-size
	DefaultBlockSize        = 4 << 10   // state.backend.rocksdb.block.blocksize
	DefaultWriteBufferSize  = 64 << 20  // state.backend.rocksdb.writebuffer.size
	DefaultWriteBufferCount = 2         // state.backend.rocksdb.writebuffer.count
	DefaultThreads          = 2         // state.backend.rocksdb.thread.num
	DefaultTargetFileSize   = 64 << 20  // state.backend.rocksdb.compaction.level.target-file-size-base
	DefaultMaxLevelBase     = 256 << 20 // state.backend.rocksdb.compaction.level.max-size-level-base
	DefaultBloomBitsPerKey  = 10.0      // state.backend.rocksdb.bloom-filter.bits-per-key
	DefaultTransferThreads  = 4         // state.backend.rocksdb.checkpoint.transfer.thread.num
	// DefaultMaterializeInterval: state.backend.changelog.periodic-materialize.interval.
	DefaultMaterializeInterval = 10 * time.Second
	DefaultCompression         = SnappyCompression
	DefaultCompactionStyle     = UniversalCompaction // state.backend.rocksdb.compaction.style
)

// Options configures a Backend. The zero value of every field means its
// default (Dir's is set by Factory); the Flink option each field stands
// for is in its comment, and Set takes those names.
type Options struct {
	// Dir is the subtask's local working directory (Flink:
	// state.backend.rocksdb.localdir plus a per-subtask part). The
	// database lives in Dir/db, local checkpoints in Dir/checkpoints;
	// created if missing. Leave it empty for Factory, which sets it for
	// every subtask under its base directory (and with the
	// state.backend.rocksdb.localdir key, under that one, by default the
	// system's temporary directory); only a Backend made with New itself
	// needs it.
	Dir string
	// MaxParallelism is the number of key groups (at most 32768); 0 means
	// state.DefaultMaxParallelism.
	MaxParallelism int
	// KeyGroups is the range this backend owns; nil means all key groups.
	KeyGroups *state.KeyGroupRange
	// Clock is the time source of TTL; nil means state.SystemClock.
	Clock state.Clock

	// BlockCacheSize in bytes, shared by the column families
	// (state.backend.rocksdb.block.cache-size). Default 64 MiB.
	BlockCacheSize int64
	// BlockSize is the data block size (state.backend.rocksdb.block.blocksize).
	// Default 4 KiB.
	BlockSize int64
	// WriteBufferSize is the memtable size per column family
	// (state.backend.rocksdb.writebuffer.size), and the size of a
	// value-like state's Go write buffer (see NativeMemtable). Default 64
	// MiB.
	WriteBufferSize int64
	// WriteBufferCount is the number of memtables per column family
	// (state.backend.rocksdb.writebuffer.count). Default 2. Go write
	// buffers are always two: the active one and one being written into
	// RocksDB.
	WriteBufferCount int
	// Compression of SST blocks; one value for all levels, or one per level
	// (state.backend.rocksdb.compression.per.level). Default snappy, as
	// Flink.
	Compression []Compression
	// CompactionStyle (state.backend.rocksdb.compaction.style). Default
	// universal, unlike Flink (level): with random updates, leveled
	// compaction rewrites a large part of the state every few checkpoints
	// (every L0 file overlaps all of level 1), so incremental checkpoints
	// upload several times more; universal compaction merges runs of
	// similar size (UniversalMergeWidth at a time) and rewrites each byte
	// fewer times, at the price of more space (up to
	// UniversalMaxSizeAmplification) and more runs to read.
	CompactionStyle CompactionStyle
	// TargetFileSize is the SST size of level 1
	// (state.backend.rocksdb.compaction.level.target-file-size-base).
	// Default 64 MiB.
	TargetFileSize int64
	// MaxLevelBase is the size of level 1
	// (state.backend.rocksdb.compaction.level.max-size-level-base). Default
	// 256 MiB.
	MaxLevelBase int64
	// DynamicLevelBytes (state.backend.rocksdb.compaction.level.use-dynamic-size).
	// Default false.
	DynamicLevelBytes bool
	// UniversalMergeWidth is, with universal compaction, how many sorted
	// runs of similar size are merged at once (RocksDB's min_merge_width,
	// also the compaction trigger): a wider merge rewrites data fewer
	// times, so incremental checkpoints upload less, at the price of more
	// runs to read. Default 8.
	UniversalMergeWidth int
	// UniversalMaxSizeAmplification is, with universal compaction, the
	// percentage of obsolete data over the live data that makes RocksDB
	// compact everything (max_size_amplification_percent). Default 200.
	UniversalMaxSizeAmplification int
	// Threads is the number of background flush and compaction jobs
	// (state.backend.rocksdb.thread.num). Default 2.
	Threads int
	// NoBloomFilter leaves bloom filters out of SST files
	// (state.backend.rocksdb.use-bloom-filter=false). By default, unlike
	// Flink, SST files have a whole-key bloom filter: with universal
	// compaction a read may look into several sorted runs, and the filter
	// skips those without the key.
	NoBloomFilter bool
	// BloomBitsPerKey (state.backend.rocksdb.bloom-filter.bits-per-key).
	// Default 10.
	BloomBitsPerKey float64
	// NativeMemtable makes value, reducing and aggregating states write
	// straight into RocksDB's memtables. By default they write into a
	// write buffer in Go memory (write_buffer.go), WriteBufferSize per
	// state, read before RocksDB: a checkpoint (and a full buffer, in the
	// background) sorts it and hands it to RocksDB as an SST file, which
	// RocksDB ingests. A read-modify-write of a buffered key then never
	// leaves Go, and the synchronous part of a checkpoint sorts a compact
	// array instead of RocksDB's flush sorting its memtable entry by entry.
	// No Flink equivalent; the key is
	// state.backend.rocksdb.go-write-buffer.enabled (false sets it).
	NativeMemtable bool
	// SkipListMemtable makes value, reducing and aggregating states with
	// NativeMemtable use RocksDB's default skip-list memtable instead of a
	// hash-indexed one (hash_linkedlist, whole-key prefix): the hash is
	// several times faster for their point reads and writes, costs 8 bytes
	// of buckets per 64 bytes of write buffer, and sorts the memtable when
	// it is flushed or iterated. No Flink equivalent (Flink's options
	// factory).
	SkipListMemtable bool
	// NoInplaceUpdate turns off in-place updates of value, reducing and
	// aggregating states with NativeMemtable. By default (RocksDB's
	// inplace_update_support), a write of a key the active memtable already
	// holds overwrites its value there when the new value is no longer than
	// the old one, instead of adding a version. The price: RocksDB turns
	// snapshots off for the whole database, so the synchronous part of a
	// full snapshot (savepoints, DisableIncremental) takes a local
	// checkpoint, a flush and hard links as an incremental checkpoint does,
	// instead of a constant-time RocksDB snapshot. No Flink equivalent
	// (Flink's options factory).
	NoInplaceUpdate bool

	// Incremental makes checkpoints incremental (state.backend.incremental).
	// The runtime reads it to choose SnapshotIncremental over Snapshot for
	// checkpoints; savepoints are always full. Default true (unlike Flink):
	// set DisableIncremental to turn it off.
	DisableIncremental bool
	// LocalRecovery keeps the local copy of the latest completed checkpoint
	// so that a restore on the same machine needs no download
	// (execution.state-recovery.from-local). The copy is used only when
	// its files have the sizes and CRC32C the checkpoint recorded.
	// Default false, as Flink. Without it an incremental checkpoint makes
	// no local copy at all: it uploads the SST files from the database's
	// directory (live_checkpoint.go).
	LocalRecovery bool
	// TransferThreads is the number of files uploaded or downloaded at once
	// (state.backend.rocksdb.checkpoint.transfer.thread.num). Default 4.
	TransferThreads int
	// Changelog makes an incremental checkpoint of value-like states'
	// writes alone a changelog checkpoint (state.backend.changelog.enabled,
	// as Flink's changelog state backend): what the write buffers record
	// as changed since the last barrier goes to checkpoint storage as a
	// segment, beside the files of an earlier RocksDB checkpoint (the
	// materialization), and RocksDB is not written at the checkpoint: the
	// buffers keep accumulating across barriers until one fills or a
	// materialization drains them (changelog.go). A materialization is
	// taken in the background every MaterializeInterval; any other write
	// into RocksDB (list and map states, new states, a read of a whole
	// state) makes the next checkpoint a materialization. Default false,
	// as Flink.
	Changelog bool
	// MaterializeInterval is how often a changelog backend takes a
	// RocksDB checkpoint in the background, which later changelog
	// checkpoints build on
	// (state.backend.changelog.periodic-materialize.interval). Default
	// 10 s (Flink's: 10 min): a restore replays, and every checkpoint
	// lists, each segment since the last materialization.
	MaterializeInterval time.Duration

	// UnmanagedMemory turns managed memory off
	// (state.backend.rocksdb.memory.managed=false): the backend then has a
	// block cache of its own of BlockCacheSize and memtables of
	// WriteBufferSize. By default, as Flink, Factory sizes every backend
	// of the process from the managed memory of the process's budget
	// (package memory): one LRU block cache shared by all of them, and
	// each database's memtables (db_write_buffer_size), memtable size and
	// Go write buffers from its share (memory.Budget.RocksDBShare);
	// BlockCacheSize and WriteBufferSize are then ignored, as Flink
	// ignores them.
	UnmanagedMemory bool
	// WriteBufferRatio is the part of the native managed memory for
	// memtables, the rest being the block cache
	// (state.backend.rocksdb.memory.write-buffer-ratio). Default 0.5.
	WriteBufferRatio float64

	// Logger receives the backend's log lines; nil means slog.Default().
	Logger *slog.Logger

	// Set by Factory under managed memory.
	sharedCache   int64 // the capacity of the process's cache to use
	dbWriteBuffer int64
	// maxManifest overrides maxManifestSize (tests).
	maxManifest int64
}

// maxManifestSize is the size past which RocksDB starts a new MANIFEST
// (the log of the database's files), beginning with a summary of the
// live files. Every incremental checkpoint copies the whole MANIFEST into
// its local checkpoint and uploads it (it is private to the checkpoint):
// with RocksDB's default (1 GiB) it grows by each flush and compaction,
// about 120 bytes each, so with a checkpoint every 50 ms by 2.5 KB a
// second, and an hour in, every checkpoint would copy, fsync and upload
// 9 MB of it. Rolled over at 64 KiB, a checkpoint copies at most that
// plus the summary (about 150 bytes a file).
const maxManifestSize = 64 << 10

// ParseMemorySize parses a memory size as Flink's MemorySize ("64mb",
// "8 mb", "4096").
//
// Deprecated: use config.ParseMemorySize, the one parser of memory sizes.
func ParseMemorySize(s string) (int64, error) { return config.ParseMemorySize(s) }

// ParseCompression parses a compression by its name here ("snappy") or
// Flink's (SNAPPY_COMPRESSION).
func ParseCompression(s string) (Compression, error) {
	n := strings.ToLower(strings.TrimSpace(s))
	n = strings.TrimSuffix(n, "_compression")
	switch n {
	case "no", "none":
		return NoCompression, nil
	case "snappy":
		return SnappyCompression, nil
	case "lz4":
		return LZ4Compression, nil
	case "lz4hc":
		return LZ4HCCompression, nil
	case "zstd":
		return ZSTDCompression, nil
	case "zlib":
		return ZlibCompression, nil
	}
	return "", fmt.Errorf("compression %q: want one of none, snappy, lz4, lz4hc, zstd, zlib", s)
}

func (c Compression) native() (grocksdb.CompressionType, error) {
	switch c {
	case NoCompression:
		return grocksdb.NoCompression, nil
	case SnappyCompression, "":
		return grocksdb.SnappyCompression, nil
	case LZ4Compression:
		return grocksdb.LZ4Compression, nil
	case LZ4HCCompression:
		return grocksdb.LZ4HCCompression, nil
	case ZSTDCompression:
		return grocksdb.ZSTDCompression, nil
	case ZlibCompression:
		return grocksdb.ZLibCompression, nil
	}
	return 0, fmt.Errorf("compression %q: want one of none, snappy, lz4, lz4hc, zstd, zlib", string(c))
}

// minWriteBufferSize is the smallest Options.WriteBufferSize.
const minWriteBufferSize = 64 << 10

// inplace reports whether value-like column families update in place.
func (o Options) inplace() bool { return o.NativeMemtable && !o.NoInplaceUpdate }

// withDefaults returns o with defaults filled in, or an error for invalid
// values.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("rocksdb backend: Options.Dir (the working directory) is required")
	}
	if o.MaxParallelism == 0 {
		o.MaxParallelism = state.DefaultMaxParallelism
	}
	if o.MaxParallelism < 1 || o.MaxParallelism > 1<<15 {
		return o, fmt.Errorf("rocksdb backend: max parallelism %d out of [1, 32768]", o.MaxParallelism)
	}
	if o.KeyGroups == nil {
		o.KeyGroups = &state.KeyGroupRange{Start: 0, End: o.MaxParallelism - 1}
	} else {
		r := *o.KeyGroups
		if r.Start < 0 || r.End >= o.MaxParallelism || r.Len() == 0 {
			return o, fmt.Errorf("rocksdb backend: key-group range %v not a non-empty part of [0, %d)", r, o.MaxParallelism)
		}
		o.KeyGroups = &r
	}
	if o.Clock == nil {
		o.Clock = state.SystemClock{}
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.BlockCacheSize, DefaultBlockCacheSize)
	def(&o.BlockSize, DefaultBlockSize)
	def(&o.WriteBufferSize, DefaultWriteBufferSize)
	def(&o.TargetFileSize, DefaultTargetFileSize)
	def(&o.MaxLevelBase, DefaultMaxLevelBase)
	if o.WriteBufferCount == 0 {
		o.WriteBufferCount = DefaultWriteBufferCount
	}
	if o.Threads == 0 {
		o.Threads = DefaultThreads
	}
	if o.TransferThreads == 0 {
		o.TransferThreads = DefaultTransferThreads
	}
	if o.MaterializeInterval == 0 {
		o.MaterializeInterval = DefaultMaterializeInterval
	}
	if o.BloomBitsPerKey == 0 {
		o.BloomBitsPerKey = DefaultBloomBitsPerKey
	}
	if len(o.Compression) == 0 {
		o.Compression = []Compression{DefaultCompression}
	}
	if o.CompactionStyle == "" {
		o.CompactionStyle = DefaultCompactionStyle
	}
	if o.UniversalMergeWidth == 0 {
		o.UniversalMergeWidth = 8
	}
	if o.UniversalMaxSizeAmplification == 0 {
		o.UniversalMaxSizeAmplification = 200
	}
	switch {
	case o.BlockCacheSize < 0, o.BlockSize <= 0, o.WriteBufferSize < minWriteBufferSize, o.WriteBufferCount < 1,
		o.Threads < 1, o.TransferThreads < 1, o.MaterializeInterval < 0, o.TargetFileSize <= 0, o.MaxLevelBase <= 0, o.BloomBitsPerKey <= 0,
		o.UniversalMergeWidth < 2, o.UniversalMaxSizeAmplification < 1:
		return o, fmt.Errorf("rocksdb backend: invalid options %+v", o)
	}
	if (o.SkipListMemtable || o.NoInplaceUpdate) && !o.NativeMemtable {
		return o, errors.New("rocksdb backend: SkipListMemtable and NoInplaceUpdate choose the memtable of value states, which they have only with NativeMemtable")
	}
	if o.CompactionStyle != LevelCompaction && o.CompactionStyle != UniversalCompaction {
		return o, fmt.Errorf("rocksdb backend: compaction style %q", o.CompactionStyle)
	}
	for _, c := range o.Compression {
		if _, err := c.native(); err != nil {
			return o, fmt.Errorf("rocksdb backend: %w", err)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// nativeOptions holds the RocksDB option objects of a database; they must
// outlive it.
type nativeOptions struct {
	db     *grocksdb.Options // database and default column family
	cf     *grocksdb.Options // list and map column families
	vcf    *grocksdb.Options // value, reducing and aggregating column families
	bbto   *grocksdb.BlockBasedTableOptions
	cache  *grocksdb.Cache
	shared *sharedCache // cache is the process's, released rather than destroyed
	ro     *grocksdb.ReadOptions
	wo     *grocksdb.WriteOptions
}

func newNativeOptions(o Options) (*nativeOptions, error) {
	n := &nativeOptions{}
	if o.sharedCache > 0 {
		n.shared = acquireSharedCache(o.sharedCache)
		n.cache = n.shared.cache
	} else {
		n.cache = grocksdb.NewLRUCache(uint64(o.BlockCacheSize))
	}
	n.bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	n.bbto.SetBlockCache(n.cache)
	n.bbto.SetBlockSize(int(o.BlockSize))
	n.bbto.SetFormatVersion(5)
	if !o.NoBloomFilter {
		n.bbto.SetFilterPolicy(grocksdb.NewBloomFilterFull(o.BloomBitsPerKey))
	}
	cf := grocksdb.NewDefaultOptions()
	cf.SetBlockBasedTableFactory(n.bbto)
	cf.SetWriteBufferSize(uint64(o.WriteBufferSize))
	cf.SetMaxWriteBufferNumber(o.WriteBufferCount)
	cf.SetTargetFileSizeBase(uint64(o.TargetFileSize))
	cf.SetMaxBytesForLevelBase(uint64(o.MaxLevelBase))
	cf.SetLevelCompactionDynamicLevelBytes(o.DynamicLevelBytes)
	if o.CompactionStyle == UniversalCompaction {
		cf.SetCompactionStyle(grocksdb.UniversalCompactionStyle)
		u := grocksdb.NewDefaultUniversalCompactionOptions()
		u.SetMinMergeWidth(o.UniversalMergeWidth)
		u.SetMaxSizeAmplificationPercent(o.UniversalMaxSizeAmplification)
		cf.SetUniversalCompactionOptions(u)
		// Sorted runs: compact once a merge is possible, slow writes down
		// only well beyond the runs the merge width leaves.
		cf.SetLevel0FileNumCompactionTrigger(o.UniversalMergeWidth)
		cf.SetLevel0SlowdownWritesTrigger(6 * o.UniversalMergeWidth)
		cf.SetLevel0StopWritesTrigger(8 * o.UniversalMergeWidth)
	}
	if len(o.Compression) == 1 {
		c, _ := o.Compression[0].native()
		cf.SetCompression(c)
	} else {
		var per []grocksdb.CompressionType
		for _, c := range o.Compression {
			nc, _ := c.native()
			per = append(per, nc)
		}
		cf.SetCompressionPerLevel(per)
	}
	// With NativeMemtable, value-like states are read and written by key
	// only in their memtables: a hash table indexes them (one bucket per 64 bytes of write buffer),
	// which makes a read-modify-write several times faster than the skip
	// list on large memtables. Prefix extraction is the whole key (noop).
	// Iterators must then seek in total order (see newIterOptions).
	// (Set through an options string: grocksdb's SetPrefixExtractor frees
	// the transform twice when the options are destroyed.) Updates of their
	// keys happen in place in the active memtable (Options.NoInplaceUpdate).
	var spec []string
	if o.NativeMemtable && !o.SkipListMemtable {
		spec = append(spec, "prefix_extractor=rocksdb.Noop", fmt.Sprintf("memtable={id=hash_linkedlist;bucket_count=%d;log_when_flash=false}", max(o.WriteBufferSize/64, 1024)))
	}
	if o.NativeMemtable && !o.NoInplaceUpdate {
		spec = append(spec, "inplace_update_support=true")
	}
	var vcf *grocksdb.Options
	if len(spec) == 0 {
		vcf = cf.Clone()
	} else {
		var err error
		if vcf, err = grocksdb.GetOptionsFromString(cf, strings.Join(spec, ";")); err != nil {
			cf.Destroy()
			n.bbto.Destroy()
			n.releaseCache()
			return nil, fmt.Errorf("rocksdb backend: value state options: %w", err)
		}
	}
	// Every database the backend closes is deleted after (Close, a
	// restore replacing it): RocksDB's flush of the memtables at close (the
	// writes have no WAL) is work thrown away, on a failover's path (a
	// cancelled task closes its backend before the slot is free).
	// (avoid_flush_during_shutdown has no setter in the C API.)
	db, err := grocksdb.GetOptionsFromString(cf, "avoid_flush_during_shutdown=true")
	if err != nil {
		cf.Destroy()
		vcf.Destroy()
		n.bbto.Destroy()
		n.releaseCache()
		return nil, fmt.Errorf("rocksdb backend: database options: %w", err)
	}
	db.SetCreateIfMissing(true)
	// No syncs of the local files (nosync_env.go); the SST files the
	// spills write (vcf) neither.
	useNoSyncEnv(db)
	useNoSyncEnv(vcf)
	// Hash memtables and in-place updates do not support concurrent
	// writes; there is one writer.
	db.SetAllowConcurrentMemtableWrites(false)
	db.SetMaxBackgroundJobs(o.Threads)
	db.SetMaxManifestFileSize(uint64(cmp.Or(o.maxManifest, maxManifestSize)))
	db.SetInfoLogLevel(grocksdb.WarnInfoLogLevel)
	db.SetKeepLogFileNum(2)
	db.SetMaxLogFileSize(4 << 20)
	// The metadata column family is tiny.
	db.SetWriteBufferSize(256 << 10)
	if o.dbWriteBuffer > 0 {
		// All memtables of the database, under managed memory.
		db.SetDbWriteBufferSize(uint64(o.dbWriteBuffer))
	}
	n.db, n.cf, n.vcf = db, cf, vcf
	n.ro = grocksdb.NewDefaultReadOptions()
	n.wo = grocksdb.NewDefaultWriteOptions()
	// As Flink: durability comes from checkpoints, not from a WAL.
	n.wo.DisableWAL(true)
	return n, nil
}

func (n *nativeOptions) destroy() {
	n.ro.Destroy()
	n.wo.Destroy()
	n.cf.Destroy()
	n.vcf.Destroy()
	n.db.Destroy()
	n.bbto.Destroy()
	n.releaseCache()
}

func (n *nativeOptions) releaseCache() {
	if n.shared != nil {
		n.shared.release()
	} else {
		n.cache.Destroy()
	}
}
