package state_test

import (
	"io"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/statetest"
)

const benchKeys = 1 << 20 // "1 million keys"

func stringKey(dst []byte, k uint64) []byte {
	return strconv.AppendUint(append(dst, "user-"...), k, 10)
}

var int64Key = statetest.Int64Key

// benchBackend returns a heap backend with a ValueState[int64] holding n
// keys.
func benchBackend(b *testing.B, n int, encode statetest.KeyEncoder) (*state.HeapKeyedBackend, state.ValueState[int64]) {
	b.Helper()
	be, err := state.NewHeapKeyedBackend(state.HeapOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return be, statetest.FillValueState(b, be, n, encode)
}

// benchRMW runs the shared read-modify-write loop on a heap backend.
func benchRMW(b *testing.B, n int, order []uint32, encode statetest.KeyEncoder) {
	be, vs := benchBackend(b, n, encode)
	statetest.BenchValueRMW(b, be, vs, order, encode)
}

var uniform, zipf = statetest.UniformOrder, statetest.ZipfOrder

// BenchmarkHeapValueRMW is the target figure: 1M int64 keys, uniformly at
// random, so nearly every operation misses the CPU caches.
func BenchmarkHeapValueRMW(b *testing.B) {
	benchRMW(b, benchKeys, uniform(benchKeys), int64Key)
}

func BenchmarkHeapValueRMWStringKey(b *testing.B) {
	benchRMW(b, benchKeys, uniform(benchKeys), stringKey)
}

func BenchmarkHeapValueRMWZipf(b *testing.B) {
	benchRMW(b, benchKeys, zipf(benchKeys), int64Key)
}

// BenchmarkHeapValueRMWHotSet is 4096 keys, which stay in cache: the cost
// of the code path without memory stalls.
func BenchmarkHeapValueRMWHotSet(b *testing.B) {
	benchRMW(b, 1<<12, uniform(1<<12), int64Key)
}

// BenchmarkHeapSnapshotSync is the synchronous part of a snapshot of 1M
// keys (then released).
func BenchmarkHeapSnapshotSync(b *testing.B) {
	be, _ := benchBackend(b, benchKeys, int64Key)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := be.Snapshot(int64(i))
		if err != nil {
			b.Fatal(err)
		}
		s.Release()
	}
}

// BenchmarkHeapSnapshotWrite is the asynchronous part: writing 1M keys in
// the canonical format.
func BenchmarkHeapSnapshotWrite(b *testing.B) {
	be, _ := benchBackend(b, benchKeys, int64Key)
	b.ReportAllocs()
	b.ResetTimer()
	var n int64
	for i := 0; i < b.N; i++ {
		s, err := be.Snapshot(int64(i))
		if err != nil {
			b.Fatal(err)
		}
		if n, err = s.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(n)
}

// BenchmarkHeapValueRMWDuringSnapshot is the uniform RMW while a snapshot
// pins the state: the first write of each key copies it into a new layer;
// the snapshot is released and a new one taken every 1M operations.
func BenchmarkHeapValueRMWDuringSnapshot(b *testing.B) {
	be, vs := benchBackend(b, benchKeys, int64Key)
	order := uniform(benchKeys)
	maxPar := be.MaxParallelism()
	var kb []byte
	snap, _ := be.Snapshot(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%benchKeys == benchKeys-1 {
			snap.Release()
			snap, _ = be.Snapshot(int64(i))
		}
		kb = int64Key(kb[:0], uint64(order[i%benchKeys]))
		be.SetCurrentKey(kb, state.KeyGroupFor(kb, maxPar))
		v, _, err := vs.Value()
		if err != nil {
			b.Fatal(err)
		}
		if err := vs.Update(v + 1); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	snap.Release()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
