package rocksdb

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// -rocksdb.change of the keys rewritten before each, uploading into
// checkpoint storage (-rocksdb.storage: posix or s3, see benchStore) with
// a _metadata per checkpoint and a retention of one checkpoint. It reports
// what each checkpoint uploaded against what it references, the
// synchronous part's duration, the asynchronous part's (the upload), the
// objects and bytes it wrote to storage, and how long a restore of the
// last checkpoint takes from the local copy (local recovery) and by
// download (after Recover, which the runtime runs first and which reads
// every file to verify it); then a summary line, medians of the
// incremental checkpoints, and what storage holds against what the
// retained checkpoint references. Run it with -benchtime 1x (and -v for
// more than 5 checkpoints: go test keeps the first 10 lines of a
// benchmark's log):
//
//	go test ./state/rocksdb -run XXX -bench IncrementalCheckpoint -benchtime 1x -rocksdb.state=1gb
//	scripts/with-s3 go test ./state/rocksdb -run XXX -bench IncrementalCheckpoint -benchtime 1x -rocksdb.state=1gb -rocksdb.storage=s3
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
	store := newBenchStore(b, *benchStorage)
	b.ResetTimer()
	var h *IncrementalHandle
	var ratios, syncs []float64
	var asyncs, written, objects []float64 // of the incremental checkpoints
	var first counts
	var firstAsync time.Duration
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
		before := store.counts.load()
		snap, err := be.SnapshotIncremental(id)
		if err != nil {
			b.Fatal(err)
		}
		u := store.checkpoint(b, id)
		upStart := time.Now()
		h, err = snap.Upload(u)
		if err != nil {
			b.Fatal(err)
		}
		up := time.Since(upStart)
		snap.Release()
		commitStart := time.Now()
		store.commit(b, u, h)
		commit := time.Since(commitStart)
		be.NotifyCheckpointComplete(id)
		wrote := store.counts.load().sub(before)
		discardStart := time.Now()
		store.discardPrevious(b)
		discard := time.Since(discardStart)
		deleted := store.counts.load().sub(before).deletes
		ratio := 100 * float64(h.CheckpointedSize) / float64(h.StateSize)
		b.Logf("checkpoint %2d: sync %4dms, upload %5dms (of which the background drain and RocksDB checkpoint %dms), uploaded %7.1f MiB of %7.1f MiB (%5.1f%%), %d files; wrote %d objects, %.1f MiB (with _metadata, commit %dms); discard of the previous %dms, %d objects",
			id, snap.SyncDuration.Milliseconds(), up.Milliseconds(), snap.LocalDuration.Milliseconds(), float64(h.CheckpointedSize)/(1<<20), float64(h.StateSize)/(1<<20), ratio, len(h.Files),
			wrote.objects, float64(wrote.bytes)/(1<<20), commit.Milliseconds(), discard.Milliseconds(), deleted)
		if id == 1 {
			first, firstAsync = wrote, up
		} else {
			ratios = append(ratios, ratio)
			syncs = append(syncs, float64(snap.SyncDuration.Microseconds())/1000)
			asyncs = append(asyncs, float64(up.Microseconds())/1000)
			written = append(written, float64(wrote.bytes)/(1<<20))
			objects = append(objects, float64(wrote.objects))
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
	// Download, as the runtime restores: Recover finds the latest
	// checkpoint in storage (and reads every file it references, to
	// verify it), then the backend downloads its files into another
	// directory.
	before := store.counts.load()
	start = time.Now()
	latest, rh := store.recover(b)
	recoverTime := time.Since(start)
	recovered := store.counts.load().sub(before)
	before = store.counts.load()
	start = time.Now()
	remote := newTestBackend(b, Options{})
	if err := remote.RestoreIncremental([]*IncrementalHandle{rh}, store.download(latest)); err != nil {
		b.Fatal(err)
	}
	downloadRestore := time.Since(start)
	downloaded := store.counts.load().sub(before)
	check(b, remote.Close())
	b.Logf("restore of %.1f MiB: local %v, download %v (%d objects, %.1f MiB read); recover first %v (%d objects, %.1f MiB read)",
		float64(h.StateSize)/(1<<20), localRestore.Round(time.Millisecond), downloadRestore.Round(time.Millisecond),
		downloaded.gets, float64(downloaded.read)/(1<<20), recoverTime.Round(time.Millisecond), recovered.gets, float64(recovered.read)/(1<<20))
	held, referenced, heldBytes := store.checkHeld(b, latest)
	b.Logf("summary, medians of %d incremental checkpoints: storage | sync ms | async ms | MiB/checkpoint | objects/checkpoint | first checkpoint MiB / objects / async ms | recover ms | download restore ms: "+
		"| %s | %.0f | %.0f | %.1f | %.0f | %.1f / %d / %d | %d | %d |; %s holds %d objects (%.1f MiB), the retained checkpoint %d references %d (%d files and its _metadata)",
		len(syncs), store.kind, median(syncs), median(asyncs), median(written), median(objects),
		float64(first.bytes)/(1<<20), first.objects, firstAsync.Milliseconds(), recoverTime.Milliseconds(), downloadRestore.Milliseconds(),
		store.st.JobDir(), held, float64(heldBytes)/(1<<20), latest.Metadata.CheckpointID, referenced, referenced-1)
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
	b.ReportMetric(median(asyncs), "async-ms-median")
	b.ReportMetric(median(written), "ckpt-MiB-median")
	b.ReportMetric(median(objects), "ckpt-objects-median")
	b.ReportMetric(float64(first.bytes)/(1<<20), "first-ckpt-MiB")
	b.ReportMetric(float64(first.objects), "first-ckpt-objects")
	b.ReportMetric(recoverTime.Seconds(), "recover-s")
}

// median is the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkLocalRestore is a subtask's restore of a small state (about
// 30 KB in 9 files, as the failover benchmark's counting subtasks hold)
// from its local copy, as after a worker's process was killed: the
// killed run's database is in the working directory, New discards it,
// RestoreIncremental links the checkpoint's files and opens it.
//
//	go test ./state/rocksdb -run XXX -bench LocalRestore -benchtime 50x
func BenchmarkLocalRestore(b *testing.B) {
	dir := b.TempDir()
	opts := Options{Dir: dir, LocalRecovery: true, Logger: slog.New(slog.DiscardHandler)}
	be := newTestBackend(b, opts)
	stor := newDirStorage(b)
	vals, idx := make([]string, 300), make([]int, 300)
	for i := range vals {
		vals[i], idx[i] = strings.Repeat("v", 100), i
	}
	putAll(b, be, vals, idx)
	var h *IncrementalHandle
	for id := int64(1); id <= 5; id++ {
		putAll(b, be, vals, idx[:50])
		h = checkpoint(b, be, id, stor)
		be.NotifyCheckpointComplete(id)
	}
	check(b, be.Close())
	b.Logf("the checkpoint: %d files, %d bytes", len(h.Files), h.StateSize)
	noDownload := func(ref []byte) (io.ReadCloser, error) { return nil, fmt.Errorf("downloaded %s", ref) }
	// killed leaves the restored database in the working directory, as a
	// killed process does (its locks go with it).
	killed := func(r *Backend) {
		b.StopTimer()
		dbDir := filepath.Join(dir, "db")
		tmp := dbDir + ".kept"
		check(b, os.RemoveAll(tmp))
		check(b, os.MkdirAll(tmp, 0o755))
		entries, err := os.ReadDir(dbDir)
		check(b, err)
		for _, e := range entries {
			if e.Name() != "LOCK" {
				check(b, copyFile(filepath.Join(dbDir, e.Name()), filepath.Join(tmp, e.Name())))
			}
		}
		check(b, r.Close())
		check(b, os.Rename(tmp, dbDir))
		b.StartTimer()
	}
	var news, restores []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		r, err := New(opts)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := r.RestoreIncremental([]*IncrementalHandle{h}, noDownload); err != nil {
			b.Fatal(err)
		}
		news, restores = append(news, t1.Sub(t0)), append(restores, time.Since(t1))
		killed(r)
	}
	b.StopTimer()
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	b.ReportMetric(float64(med(news).Microseconds())/1000, "new-ms")
	b.ReportMetric(float64(med(restores).Microseconds())/1000, "restore-ms")
	b.ReportMetric(float64((med(news)+med(restores)).Microseconds())/1000, "median-ms")
}

// BenchmarkRocksDBValueRMWHotSetNative is BenchmarkRocksDBValueRMWHotSet
// with NativeMemtable: the cost of RocksDB's own read and write path.
func BenchmarkRocksDBValueRMWHotSetNative(b *testing.B) {
	benchRMW(b, 1<<12, uniform(1<<12), Options{NativeMemtable: true})
}
