package operators

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// TestMergingSetsOfTheListLayoutRestore restores a checkpoint whose
// merging-window sets are in the earlier layout (a list state of pairs
// under mergingSetListName) on the heap and on RocksDB: the sessions in
// flight go on, a record extends the restored session rather than opening
// one of its own, and the list is emptied into the value state.
func TestMergingSetsOfTheListLayoutRestore(t *testing.T) {
	backends := map[string]func(t *testing.T, snapshots ...[]byte) state.KeyedBackend{
		"heap": func(t *testing.T, snapshots ...[]byte) state.KeyedBackend {
			return newBackend(t, nil, snapshots...)
		},
		"rocksdb": func(t *testing.T, snapshots ...[]byte) state.KeyedBackend {
			kb, err := rocksdb.New(rocksdb.Options{Dir: t.TempDir(), MaxParallelism: testMaxPar})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = kb.Close() })
			if len(snapshots) > 0 {
				if err := restoreFrom(kb, snapshots...); err != nil {
					t.Fatal(err)
				}
			}
			return kb
		},
	}
	for name, newKB := range backends {
		t.Run(name, func(t *testing.T) {
			newOp := func(kb state.KeyedBackend, out *recOut[int64], restored bool) *WindowOperator[string, ev, ev, ev] {
				op := NewReduceWindow(WindowConfig[string, ev]{Assigner: SessionWindows{Gap: 10}, KeyOf: func(e ev) string { return e.Key }, KeyCodec: codec.String{}},
					func(a, b ev) (ev, error) { return ev{Key: a.Key, V: a.V + b.V}, nil }, codec.JSON[ev]{}, &evSums{out})
				if err := op.Open(testContext(kb, &fakeClock{}, restored)); err != nil {
					t.Fatal(err)
				}
				return op
			}
			// A session [0,10) of key a and [3,13) of key b, then their
			// sets moved into the list layout, as the earlier version kept
			// them.
			kb := newKB(t)
			op := newOp(kb, &recOut[int64]{}, false)
			for _, e := range []ev{{"a", 1, 0}, {"b", 10, 3}} {
				if err := op.ProcessElement(e, e.T); err != nil {
					t.Fatal(err)
				}
			}
			legacy, err := state.GetListState(kb, state.ListStateDescriptor[windowPair]{Name: mergingSetListName, Codec: windowPairCodec{}})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"a", "b"} {
				if err := op.setKey(k); err != nil {
					t.Fatal(err)
				}
				pairs, ok, err := op.mergeSet.Value()
				if err != nil || !ok || len(pairs) != 1 {
					t.Fatalf("key %s: merging set %v %v %v", k, pairs, ok, err)
				}
				if err := legacy.Update(pairs); err != nil {
					t.Fatal(err)
				}
				if err := op.mergeSet.Clear(); err != nil {
					t.Fatal(err)
				}
			}
			snap := snapshot(t, op.ctx)

			kb2 := newKB(t, snap)
			out := &recOut[int64]{}
			op2 := newOp(kb2, out, true)
			n := 0
			if err := kb2.Keys(mergingSetListName, nil, func([]byte, int) error { n++; return nil }); err != nil || n != 0 {
				t.Fatalf("list layout still holds %d keys (%v)", n, err)
			}
			// a's session grows to [0,15); b's stays [3,13).
			if err := op2.ProcessElement(ev{"a", 2, 5}, 5); err != nil {
				t.Fatal(err)
			}
			if err := op2.ProcessWatermark(MaxWatermark); err != nil {
				t.Fatal(err)
			}
			got := map[int64]int64{}
			for i, v := range out.vals {
				got[out.ts[i]] = v
			}
			want := map[int64]int64{14: 3, 12: 10}
			if len(got) != len(want) || got[14] != 3 || got[12] != 10 {
				t.Fatalf("fired (max timestamp: sum) %v, want %v", got, want)
			}
			if !slices.Equal(out.wms[len(out.wms)-1:], []int64{MaxWatermark}) {
				t.Fatalf("watermarks %v", out.wms)
			}
		})
	}
}

// restoreFrom restores a backend from full snapshots.
func restoreFrom(kb state.KeyedBackend, snapshots ...[]byte) error {
	var rs []io.Reader
	for _, s := range snapshots {
		rs = append(rs, bytes.NewReader(s))
	}
	return kb.Restore(rs...)
}
