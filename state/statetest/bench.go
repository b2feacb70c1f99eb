package statetest

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// KeyEncoder encodes key number k into dst, as a codec would.
type KeyEncoder func(dst []byte, k uint64) []byte

// Int64Key encodes k as the Int codec does: eight bytes, big endian.
func Int64Key(dst []byte, k uint64) []byte { return binary.BigEndian.AppendUint64(dst, k) }

// FillValueState registers a ValueState[int64] named "count" on be and
// writes 1 for keys 0..n-1.
func FillValueState(tb testing.TB, be state.KeyedBackend, n int, encode KeyEncoder) state.ValueState[int64] {
	tb.Helper()
	vs, err := state.GetValueState(be, state.ValueStateDescriptor[int64]{Name: "count", Codec: codec.Int[int64]{}})
	if err != nil {
		tb.Fatal(err)
	}
	var kb []byte
	for k := range uint64(n) {
		kb = encode(kb[:0], k)
		be.SetCurrentKey(kb, state.KeyGroupFor(kb, be.MaxParallelism()))
		if err := vs.Update(1); err != nil {
			tb.Fatal(err)
		}
	}
	return vs
}

// BenchValueRMW measures a keyed read-modify-write of vs as the runtime
// drives it per record: encode the key, hash it to its key group,
// SetCurrentKey, Value, Update. order is the sequence of key numbers
// visited (cycled); every key must exist. It reports ops/s. Every backend
// runs this same loop, so their figures compare.
func BenchValueRMW(b *testing.B, be state.KeyedBackend, vs state.ValueState[int64], order []uint32, encode KeyEncoder) {
	maxPar := be.MaxParallelism()
	var kb []byte
	b.ReportAllocs()
	b.ResetTimer()
	j := 0 // i modulo len(order), without a division per operation
	for i := 0; i < b.N; i++ {
		kb = encode(kb[:0], uint64(order[j]))
		if j++; j == len(order) {
			j = 0
		}
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

// UniformOrder is every key number below n once, in a fixed random order.
func UniformOrder(n int) []uint32 {
	o := make([]uint32, n)
	for i := range o {
		o[i] = uint32(i)
	}
	rand.New(rand.NewPCG(1, 1)).Shuffle(n, func(i, j int) { o[i], o[j] = o[j], o[i] })
	return o
}

// ZipfOrder is n draws from a Zipf distribution (s = 1.1) over n keys: a
// few hot keys and a long tail, as real streams have.
func ZipfOrder(n int) []uint32 {
	z := rand.NewZipf(rand.New(rand.NewPCG(2, 2)), 1.1, 1, uint64(n-1))
	o := make([]uint32, n)
	for i := range o {
		o[i] = uint32(z.Uint64())
	}
	return o
}
