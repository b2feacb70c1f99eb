package rocksdb

import (
	"context"
	"flag"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/statetest"
)

// BenchmarkCheckpointCycle is one checkpoint of a counting subtask as the
// exactly-once Kafka job runs it with 100 ms checkpoints (bench/kafkaeo:
// 5003 keys over two subtasks, every key counted about 20 times an
// interval): 2500 int64 keys, each read and updated -rocksdb.cycle.updates
// times, then an incremental checkpoint with the default options (no
// local recovery: the live files) uploaded into POSIX checkpoint storage
// (SST files hard-linked, the commit's fsyncs in parallel), its _metadata
// written and the previous checkpoint discarded, as the runtime does. Besides the wall time per checkpoint it reports the
// process's CPU per checkpoint (user and system, RocksDB's background
// threads too: the drain's SST file, its ingestion, compactions): the
// cost every checkpoint adds to the job's CPU. The sub-benchmark
// "updates" runs the same reads and writes without checkpoints, so the
// difference is the checkpoint's own.
//
//	go test ./state/rocksdb -run XXX -bench CheckpointCycle -benchtime 300x
func BenchmarkCheckpointCycle(b *testing.B) {
	const keys = 2500
	for _, ckpt := range []bool{true, false} {
		name := "checkpoint"
		if !ckpt {
			name = "updates"
		}
		b.Run(name, func(b *testing.B) {
			opts := Options{Dir: b.TempDir(), Changelog: *benchCycleChangelog}
			be := newTestBackend(b, opts)
			defer be.Close()
			vs := statetest.FillValueState(b, be, keys, int64Key)
			store := plainPOSIXStore(b)
			var kb []byte
			maxPar := be.MaxParallelism()
			update := func() {
				for range *benchCycleUpdates {
					for k := range uint64(keys) {
						kb = int64Key(kb[:0], k)
						be.SetCurrentKey(kb, state.KeyGroupFor(kb, maxPar))
						n, _, err := vs.Value()
						if err != nil {
							b.Fatal(err)
						}
						if err := vs.Update(n + 1); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			cycle := func(id int64) {
				update()
				if !ckpt {
					return
				}
				snap, err := be.SnapshotIncremental(id)
				if err != nil {
					b.Fatal(err)
				}
				u := store.checkpoint(b, id)
				h, err := snap.Upload(u)
				if err != nil {
					b.Fatal(err)
				}
				snap.Release()
				store.commit(b, u, h)
				be.NotifyCheckpointComplete(id)
				store.discardPrevious(b)
			}
			// Warm up: compactions settle into their cycle.
			id := int64(1)
			for ; id <= 20; id++ {
				cycle(id)
			}
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				cycle(id)
				id++
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

var benchCycleChangelog = flag.Bool("rocksdb.cycle.changelog", false, "BenchmarkCheckpointCycle: changelog checkpoints (Options.Changelog)")

var benchCycleUpdates = flag.Int("rocksdb.cycle.updates", 20, "BenchmarkCheckpointCycle: updates of every key between two checkpoints")

// processCPU is the user and system CPU time of the process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// plainPOSIXStore is newBenchStore's POSIX storage without its counting
// wrapper, which hides the backend's hard links and deferred syncs: the
// SST files are linked, the commit's fsyncs run in parallel, as in the
// job.
func plainPOSIXStore(b *testing.B) *benchStore {
	b.Helper()
	open := func(location string) (storage.Backend, error) {
		return storage.Open(context.Background(), nil, location, nil)
	}
	root, err := open(storage.JoinLocation(b.TempDir(), benchJob))
	if err != nil {
		b.Fatal(err)
	}
	st, err := storage.NewOnBackend(root, open, benchJob, storage.Options{InlineThreshold: storage.DefaultInlineThreshold})
	if err != nil {
		b.Fatal(err)
	}
	return &benchStore{kind: "posix", st: st, counts: &storageCounts{}, refs: map[string]int{}, shared: map[int64][]string{}}
}
