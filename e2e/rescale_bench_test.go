package e2e

// The time to rescale a job with a large RocksDB state in place (issue
// 28's figure; measured, not asserted, and skipped unless
// SLUICE_BENCH_RESCALE_MIB is set):
//
//	SLUICE_BENCH_RESCALE_MIB=1024 SLUICE_BENCH_DIR=/dev/shm \
//	    go test -count=1 -v -run TestBenchRescaleRocksDBState ./e2e
//
// A keyed vertex at parallelism 2 holds SLUICE_BENCH_RESCALE_MIB MiB of
// RocksDB state (1 KiB values of distinct keys), with incremental
// checkpoints on local files (under SLUICE_BENCH_DIR, default the test's
// temporary directory); once a checkpoint holds it all, the vertex is
// rescaled in place to 4 while records flow. Logged, per phase: the stop
// checkpoint (the rescale asked to its checkpoint completed), the restore
// (the stop checkpoint to the new attempt's state restored, its key
// groups redistributed, with the restore's own figures) and the first
// record (to the first record counted at parallelism 4).

import (
	"context"
	"encoding/binary"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// bigValues keeps a 1 KiB value per key.
type bigValues struct {
	v       state.ValueState[[]byte]
	built   *atomic.Int64
	par     int
	firstAt *atomic.Int64 // unix nanos of the first record at parallelism 4
}

func (b *bigValues) Open(ctx *sluice.OperatorContext) error {
	var err error
	b.v, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[[]byte]{Name: "v"})
	b.par = ctx.Parallelism
	return err
}

func (b *bigValues) ProcessElement(ctx *sluice.KeyedContext[int64], i int64, _ sluice.Collector[int64]) error {
	if b.par == 4 {
		b.firstAt.CompareAndSwap(0, time.Now().UnixNano())
	}
	b.built.Add(1)
	val := make([]byte, 1024) // incompressible: an xorshift stream seeded by the record
	x := uint64(i)*0x9E3779B97F4A7C15 | 1
	for k := 0; k < len(val); k += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(val[k:], x)
	}
	return b.v.Update(val)
}

func TestBenchRescaleRocksDBState(t *testing.T) {
	v := os.Getenv("SLUICE_BENCH_RESCALE_MIB")
	if v == "" {
		t.Skip("a benchmark: set SLUICE_BENCH_RESCALE_MIB (the state's size in MiB)")
	}
	mib, err := strconv.Atoi(v)
	if err != nil || mib < 1 {
		t.Fatalf("SLUICE_BENCH_RESCALE_MIB=%q: want a positive number of MiB", v)
	}
	root := t.TempDir()
	if d := os.Getenv("SLUICE_BENCH_DIR"); d != "" {
		if root, err = os.MkdirTemp(d, "sluice-bench-rescale-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(root) })
	}
	keys := int64(mib) * 1024
	var (
		built, firstAt atomic.Int64
		mu             sync.Mutex
		completedAt    = map[int64]time.Time{}
		lastCompleted  atomic.Int64
		restores       = make(chan sluice.RestoreInfo, 4)
	)
	env := sluice.NewEnvironment(sluice.WithParallelism(2), sluice.WithJobName("rescale-bench"),
		sluice.WithCheckpointing(2*time.Second, root+"/checkpoints"),
		sluice.WithStateBackend(rocksdb.Factory(root+"/state", rocksdb.Options{})),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				mu.Lock()
				completedAt[s.ID] = time.Now()
				mu.Unlock()
				lastCompleted.Store(s.ID)
				t.Logf("checkpoint %d: %d bytes checkpointed in %v", s.ID, s.CheckpointedSize, s.EndToEndDuration)
			}
		}),
		sluice.WithRestoreListener(func(r sluice.RestoreInfo) { restores <- r }))
	gen := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }), sluice.NoWatermarks[int64](), "gen", sluice.UID("gen"))
	// Past the records that build the state the source slows to about
	// 1000 records per second per subtask (chained to it: no buffers of
	// slow records for the barriers to wait behind), so that records
	// still flow during the rescale without growing the state much.
	var emitted atomic.Int64
	gen = sluice.Map(gen, func(i int64) (int64, error) {
		if emitted.Add(1) > keys {
			time.Sleep(time.Millisecond)
		}
		return i, nil
	}, sluice.Name("pace"))
	vals := sluice.Process[int64, int64, int64](sluice.KeyBy(gen, func(i int64) int64 { return i % keys }),
		&bigValues{built: &built, firstAt: &firstAt}, sluice.Name("values"), sluice.UID("values"))
	sluice.SinkTo(vals, sink.NewDiscard[int64](), sluice.Name("discard"))
	start := time.Now()
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); <-job.Done() }()
	const values = 1 // the values and discard vertex
	await := func(what string, limit time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			select {
			case <-job.Done():
				t.Fatalf("the job ended (%v) waiting for %s", job.Wait(), what)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s in %v", what, limit)
			}
		}
	}
	await("state built", 30*time.Minute, func() bool { return built.Load() >= keys })
	t.Logf("%d MiB of state (%d keys of 1 KiB) built in %v", mib, keys, time.Since(start).Round(time.Millisecond))
	after := lastCompleted.Load()
	await("a checkpoint of the whole state", 10*time.Minute, func() bool { return lastCompleted.Load() > after+1 }) // one begun after the build

	asked := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := job.Rescale(ctx, sluice.ResourceRequirements{values: {Lower: 4, Upper: 4}}); err != nil {
		t.Fatalf("rescale to 4: %v", err)
	}
	await("a record at parallelism 4", time.Minute, func() bool { return firstAt.Load() != 0 })
	var r sluice.RestoreInfo
	for r.Attempt == 0 {
		r = <-restores
	}
	mu.Lock()
	stopped := completedAt[r.CheckpointID] // the stop checkpoint, which the rescale restores
	mu.Unlock()
	restored := r.Start.Add(r.StateRestore)
	first := time.Unix(0, firstAt.Load())
	t.Logf("rescale 2 -> 4 of %d MiB of RocksDB state: %v to the first record at 4", mib, first.Sub(asked).Round(time.Millisecond))
	t.Logf("  stop checkpoint %d: %v", r.CheckpointID, stopped.Sub(asked).Round(time.Millisecond))
	t.Logf("  restore (stop checkpoint to state restored): %v, of which the state restore %v (%d MiB read)",
		restored.Sub(stopped).Round(time.Millisecond), r.StateRestore.Round(time.Millisecond), r.RestoredSize>>20)
	t.Logf("  first record after the restore: %v", first.Sub(restored).Round(time.Millisecond))
}
