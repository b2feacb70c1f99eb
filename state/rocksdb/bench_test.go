package rocksdb

import (
	"encoding/binary"
	"flag"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/statetest"
)

const benchKeys = 1 << 20 // "1 million keys"

var int64Key = statetest.Int64Key

// benchBackend returns a backend with a ValueState[int64] holding n keys.
func benchBackend(b *testing.B, n int, opts Options) (*Backend, state.ValueState[int64]) {
	b.Helper()
	be := newTestBackend(b, opts)
	b.Cleanup(func() { be.Close() })
	return be, statetest.FillValueState(b, be, n, int64Key)
}

// benchRMW runs the read-modify-write loop every backend shares
// (statetest.BenchValueRMW), so the figure compares with the heap's.
func benchRMW(b *testing.B, n int, order []uint32, opts Options) {
	be, vs := benchBackend(b, n, opts)
	statetest.BenchValueRMW(b, be, vs, order, int64Key)
}

var uniform, zipf = statetest.UniformOrder, statetest.ZipfOrder

// BenchmarkRocksDBValueRMW is the target figure: 1M int64 keys, uniformly
// at random, default options: the keys fit in the value state's write
// buffer (64 MiB), so the loop runs in Go (write_buffer.go); the
// benchmarks below measure RocksDB's own read and write path. Run it with
// -benchtime 10000000x for the steady state.
func BenchmarkRocksDBValueRMW(b *testing.B) {
	benchRMW(b, benchKeys, uniform(benchKeys), Options{})
}

// BenchmarkRocksDBValueRMWSmallBuffer is BenchmarkRocksDBValueRMW with a
// 4 MiB write buffer, which holds about a tenth of the keys: most reads
// go to RocksDB's SST files (through its block cache), and the buffer
// spills every few hundred thousand operations.
func BenchmarkRocksDBValueRMWSmallBuffer(b *testing.B) {
	benchRMW(b, benchKeys, uniform(benchKeys), Options{WriteBufferSize: 4 << 20})
}

// BenchmarkRocksDBValueRMWNative is BenchmarkRocksDBValueRMW with the value
// state in RocksDB's hash memtable, updated in place
// (Options.NativeMemtable). Debian's librocksdb is built with assertions
// on; for the figure on a release build of the same RocksDB version run it
// under scripts/with-release-rocksdb.
func BenchmarkRocksDBValueRMWNative(b *testing.B) {
	benchRMW(b, benchKeys, uniform(benchKeys), Options{NativeMemtable: true})
}

func BenchmarkRocksDBValueRMWZipf(b *testing.B) {
	benchRMW(b, benchKeys, zipf(benchKeys), Options{})
}

// BenchmarkRocksDBValueRMWSkipList is BenchmarkRocksDBValueRMWNative with
// RocksDB's default (skip-list) memtable for the value state.
func BenchmarkRocksDBValueRMWSkipList(b *testing.B) {
	benchRMW(b, benchKeys, uniform(benchKeys), Options{NativeMemtable: true, SkipListMemtable: true})
}

// BenchmarkRocksDBValueRMWHotSet is 4096 keys: the cost of the code path.
func BenchmarkRocksDBValueRMWHotSet(b *testing.B) {
	benchRMW(b, 1<<12, uniform(1<<12), Options{})
}

var (
	benchStateSize   = flag.String("rocksdb.state", "1gb", "BenchmarkIncrementalCheckpoint: state size (a memory size: 256mb, 1gb)")
	benchCheckpoints = flag.Int("rocksdb.checkpoints", 20, "BenchmarkIncrementalCheckpoint: checkpoints after the first")
	benchChange      = flag.Float64("rocksdb.change", 0.01, "BenchmarkIncrementalCheckpoint: fraction of the keys changed between checkpoints")
	benchNative      = flag.Bool("rocksdb.native", false, "BenchmarkIncrementalCheckpoint: Options.NativeMemtable (the value state in RocksDB's hash memtable, which the synchronous part's flush sorts)")
	benchSkipList    = flag.Bool("rocksdb.skiplist", false, "BenchmarkIncrementalCheckpoint: Options.NativeMemtable with SkipListMemtable (the flush sorts nothing)")
	benchSpillLog    = flag.Bool("rocksdb.spilllog", false, "BenchmarkIncrementalCheckpoint: log each write buffer's ingest (entries; sort, SST write, finish and ingest times) at debug level")
	benchSettle      = flag.Bool("rocksdb.settle", true, "BenchmarkIncrementalCheckpoint: wait for compactions to finish before each checkpoint, as a checkpoint interval longer than a compaction does")
)

// settle waits (up to a minute) until RocksDB runs no flush or compaction
// for five polls in a row.
func settle(b *testing.B, be *Backend) {
	idle := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, _ := be.db.GetIntProperty("rocksdb.num-running-compactions")
		f, _ := be.db.GetIntProperty("rocksdb.num-running-flushes")
		if c+f > 0 {
			idle = 0
		} else if idle++; idle == 5 {
			return
		}
	}
	b.Logf("compactions still busy after a minute")
}

// BenchmarkIncrementalCheckpoint fills a backend with -rocksdb.state of
// incompressible values (200 bytes per key), takes a full first
// checkpoint, then -rocksdb.checkpoints incremental ones with
// -rocksdb.change of the keys rewritten before each, uploading into a
// directory with a retention of one checkpoint. It reports what each
// checkpoint uploaded against what it references, the synchronous part's
// duration, and how long a restore of the last checkpoint takes from the
// local copy (local recovery) and by download. Run it with -benchtime 1x:
//
//	go test ./state/rocksdb -run XXX -bench IncrementalCheckpoint -benchtime 1x -rocksdb.state=1gb
func BenchmarkIncrementalCheckpoint(b *testing.B) {
	size, err := ParseMemorySize(*benchStateSize)
	if err != nil {
		b.Fatal(err)
	}
	const valueSize = 200
	n := int(size / (valueSize + 16))
	dir := b.TempDir()
	opts := Options{NativeMemtable: *benchNative || *benchSkipList, SkipListMemtable: *benchSkipList}
	if *benchSpillLog {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	opts.Dir, opts.LocalRecovery = dir, true
	be := newTestBackend(b, opts)
	vs, err := state.GetValueState(be, state.ValueStateDescriptor[[]byte]{Name: "blob", Codec: codec.Bytes{}})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	val := make([]byte, valueSize)
	var kb []byte
	write := func(k uint64) {
		for i := 0; i < valueSize; i += 8 {
			binary.LittleEndian.PutUint64(val[i:], rng.Uint64())
		}
		kb = int64Key(kb[:0], k)
		be.SetCurrentKey(kb, state.KeyGroupFor(kb, be.MaxParallelism()))
		if err := vs.Update(val); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	for k := range uint64(n) {
		write(k)
	}
	b.Logf("wrote %d keys (%d MiB of values) in %v", n, int64(n)*valueSize>>20, time.Since(start).Round(time.Millisecond))
	// Start from compacted state, as after a restore, so that the figures
	// are those of updates rather than of the initial load.
	start = time.Now()
	if err := be.drainAll(); err != nil {
		b.Fatal(err)
	}
	fo := grocksdb.NewDefaultFlushOptions()
	for _, s := range be.order {
		if err := be.db.FlushCF(s.cf, fo); err != nil {
			b.Fatal(err)
		}
		be.db.CompactRangeCF(s.cf, grocksdb.Range{})
	}
	fo.Destroy()
	settle(b, be)
	b.Logf("flushed and compacted in %v", time.Since(start).Round(time.Millisecond))
	stor := newDirStorage(b)
	reg := newRegistry(stor)
	b.ResetTimer()
	var h *IncrementalHandle
	var ratios, syncs []float64
	for id := int64(1); id <= int64(*benchCheckpoints)+1; id++ {
		if id > 1 {
			for range int(float64(n) * *benchChange) {
				write(uint64(rng.IntN(n)))
			}
		}
		if *benchSettle {
			b.StopTimer()
			settle(b, be)
			b.StartTimer()
		}
		snap, err := be.SnapshotIncremental(id)
		if err != nil {
			b.Fatal(err)
		}
		upStart := time.Now()
		h, err = snap.Upload(stor)
		if err != nil {
			b.Fatal(err)
		}
		up := time.Since(upStart)
		snap.Release()
		be.NotifyCheckpointComplete(id)
		reg.complete(b, []*IncrementalHandle{h})
		ratio := 100 * float64(h.CheckpointedSize) / float64(h.StateSize)
		b.Logf("checkpoint %2d: sync %4dms, upload %5dms, uploaded %7.1f MiB of %7.1f MiB (%5.1f%%), %d files",
			id, snap.SyncDuration.Milliseconds(), up.Milliseconds(), float64(h.CheckpointedSize)/(1<<20), float64(h.StateSize)/(1<<20), ratio, len(h.Files))
		if id > 1 {
			ratios = append(ratios, ratio)
			syncs = append(syncs, float64(snap.SyncDuration.Microseconds())/1000)
		}
	}
	b.StopTimer()
	check(b, be.Close())
	// Local recovery: a new backend on the same directory.
	start = time.Now()
	local := newTestBackend(b, opts)
	if err := local.RestoreIncremental([]*IncrementalHandle{h}, nil); err != nil {
		b.Fatal(err)
	}
	localRestore := time.Since(start)
	check(b, local.Close())
	// Download: another directory.
	start = time.Now()
	remote := newTestBackend(b, Options{})
	if err := remote.RestoreIncremental([]*IncrementalHandle{h}, stor.download); err != nil {
		b.Fatal(err)
	}
	downloadRestore := time.Since(start)
	check(b, remote.Close())
	b.Logf("restore of %.1f MiB: local %v, download %v", float64(h.StateSize)/(1<<20), localRestore.Round(time.Millisecond), downloadRestore.Round(time.Millisecond))
	avg := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	b.ReportMetric(float64(h.StateSize)/(1<<20), "state-MiB")
	b.ReportMetric(avg(ratios), "ckpt-%avg")
	b.ReportMetric(slices.Max(ratios), "ckpt-%max")
	b.ReportMetric(avg(syncs), "sync-ms-avg")
	b.ReportMetric(slices.Max(syncs), "sync-ms-max")
	b.ReportMetric(localRestore.Seconds(), "local-restore-s")
	b.ReportMetric(downloadRestore.Seconds(), "download-restore-s")
}
