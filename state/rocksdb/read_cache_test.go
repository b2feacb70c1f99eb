package rocksdb

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/state"
)

// TestReadCacheServesDrainedValues: once a checkpoint's drain put a
// buffer's entries into RocksDB, reads of them (values and deletions) are
// served by the read cache, not RocksDB: with the entries removed from
// RocksDB behind the backend's back, a read still returns them. A TTL
// state, whose expired entries RocksDB's compaction drops, has no cache.
func TestReadCacheServesDrainedValues(t *testing.T) {
	const keys = 200
	b, v := valueBackend(t)
	want := keyValues{}
	update(t, b, v, keys, 1, 1, 3, want) // every key written, a third deleted
	stor := newDirStorage(t)
	checkpoint(t, b, 1, stor)
	b.NotifyCheckpointComplete(1)
	update(t, b, v, keys, 2, 5, keys+1, want) // newer values in the active buffer
	s := b.states["v"]
	check(t, b.prune(s))
	if len(s.buf.frozen) != 0 {
		t.Fatalf("%d frozen buffers left after the drain", len(s.buf.frozen))
	}
	// Remove everything from RocksDB: only the buffers know the values.
	check(t, b.db.DeleteRangeCF(b.nopts.wo, s.cf, kgBound(0), kgBound(b.maxPar)))
	verifyValues(t, b, v, keys, want, "reads after the drain, RocksDB emptied")

	tb := newTestBackend(t, Options{})
	closeLater(t, tb)
	ttl := state.ValueStateDescriptor[int64]{Name: "t", TTL: state.TTLConfig{TTL: 1 << 40}}
	_, err := state.GetValueState(tb, ttl)
	check(t, err)
	if tb.states["t"].buf.clean != nil {
		t.Fatal("a TTL state has a read cache")
	}
}

// TestReadCacheMatchesAModel: random updates, deletions and reads over
// many checkpoints, incremental and changelog, with write buffers small
// enough that full ones spill into RocksDB and the read cache empties
// often, and drains outside checkpoints (Keys): every read equals a
// model's, and every checkpoint restores to it.
func TestReadCacheMatchesAModel(t *testing.T) {
	for _, changelog := range []bool{false, true} {
		t.Run(fmt.Sprintf("changelog=%v", changelog), func(t *testing.T) {
			const keys, rounds = 3000, 30
			rng := rand.New(rand.NewPCG(7, uint64(len(fmt.Sprint(changelog)))))
			b := newTestBackend(t, Options{WriteBufferSize: minWriteBufferSize, Changelog: changelog})
			closeLater(t, b)
			v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"})
			check(t, err)
			stor := newDirStorage(t)
			want := keyValues{}
			for id := int64(1); id <= rounds; id++ {
				// Some rounds write a few keys, some enough to fill a buffer.
				n := 50 + rng.IntN(100)
				if id%4 == 0 {
					n = 4000
				}
				for range n {
					k := rng.IntN(keys)
					setKey(b, keyName(k))
					if rng.IntN(10) == 0 {
						check(t, v.Clear())
						delete(want, k)
						continue
					}
					got, ok, err := v.Value()
					check(t, err)
					if w, wok := want[k]; ok != wok || got != w {
						t.Fatalf("round %d: key %d = %d %v, want %d %v", id, k, got, ok, w, wok)
					}
					check(t, v.Update(got+int64(id)))
					want[k] = got + int64(id)
				}
				if id%3 == 0 {
					// Listing the keys drains the active buffer on the task
					// goroutine, outside a checkpoint.
					check(t, b.Keys("v", nil, func([]byte, int) error { return nil }))
					verifyValues(t, b, v, keys, want, fmt.Sprintf("reads after the drain of round %d", id))
				}
				h := checkpoint(t, b, id, stor)
				b.NotifyCheckpointComplete(id)
				verifyValues(t, b, v, keys, want, fmt.Sprintf("reads after checkpoint %d", id))
				if id%10 == 0 {
					restoreValues(t, h, stor, keys, want, fmt.Sprintf("restore of checkpoint %d", id))
				}
			}
		})
	}
}
