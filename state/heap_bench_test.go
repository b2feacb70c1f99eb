package state_test

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

const benchKeys = 1 << 20 // "1 million keys"

type keyEncoder func(dst []byte, k uint64) []byte

func int64Key(dst []byte, k uint64) []byte { return binary.BigEndian.AppendUint64(dst, k) }

func stringKey(dst []byte, k uint64) []byte {
	return strconv.AppendUint(append(dst, "user-"...), k, 10)
}

// benchBackend returns a heap backend with a ValueState[int64] holding n
// keys.
func benchBackend(b *testing.B, n int, encode keyEncoder) (*state.HeapKeyedBackend, state.ValueState[int64]) {
	b.Helper()
	be, err := state.NewHeapKeyedBackend(state.HeapOptions{})
	if err != nil {
		b.Fatal(err)
	}
	vs, err := state.GetValueState(be, state.ValueStateDescriptor[int64]{Name: "count", Codec: codec.Int[int64]{}})
	if err != nil {
		b.Fatal(err)
	}
	var kb []byte
	for k := range uint64(n) {
		kb = encode(kb[:0], k)
		be.SetCurrentKey(kb, state.KeyGroupFor(kb, be.MaxParallelism()))
		if err := vs.Update(1); err != nil {
			b.Fatal(err)
		}
	}
	return be, vs
}

// benchRMW measures a keyed read-modify-write of a ValueState[int64] as
// the runtime drives it per record: encode the key, hash it to its key
// group, SetCurrentKey, Value, Update. order is the sequence of key
// indexes visited (cycled); all keys exist (steady state).
func benchRMW(b *testing.B, n int, order []uint32, encode keyEncoder) {
	be, vs := benchBackend(b, n, encode)
	maxPar := be.MaxParallelism()
	var kb []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		kb = encode(kb[:0], uint64(order[i%len(order)]))
		be.SetCurrentKey(kb, state.KeyGroupFor(kb, maxPar))
		v, ok, err := vs.Value()
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := vs.Update(v + 1); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// uniform is every key once, in random order.
func uniform(n int) []uint32 {
	o := make([]uint32, n)
	for i := range o {
		o[i] = uint32(i)
	}
	rand.New(rand.NewPCG(1, 1)).Shuffle(n, func(i, j int) { o[i], o[j] = o[j], o[i] })
	return o
}

// zipf is n draws from a Zipf distribution (s = 1.1) over n keys: a few
// hot keys and a long tail, as real streams have.
func zipf(n int) []uint32 {
	z := rand.NewZipf(rand.New(rand.NewPCG(2, 2)), 1.1, 1, uint64(n-1))
	o := make([]uint32, n)
	for i := range o {
		o[i] = uint32(z.Uint64())
	}
	return o
}

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
