package state

import (
	"bytes"
	"fmt"
	"maps"
	"sync"
	"testing"
)

// tally counts words in a map it changes in place, as Flink's
// AggregateFunction contract allows.
type tally struct{}

func (tally) CreateAccumulator() map[string]int { return map[string]int{} }
func (tally) Add(w string, acc map[string]int) map[string]int {
	acc[w]++
	return acc
}
func (tally) GetResult(acc map[string]int) map[string]int { return maps.Clone(acc) }
func (tally) Merge(a, b map[string]int) map[string]int {
	for k, v := range b {
		a[k] += v
	}
	return a
}

// TestSnapshotIsolatedFromInPlaceChanges changes accumulators and values
// in place while an asynchronous snapshot writes them (the race detector
// sees a shared map or slice), then restores the snapshot and compares it
// with the state as it was when the snapshot was taken.
func TestSnapshotIsolatedFromInPlaceChanges(t *testing.T) {
	b, err := NewHeapKeyedBackend(HeapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agg, err := GetAggregatingState(b, AggregatingStateDescriptor[string, map[string]int, map[string]int]{Name: "words", Aggregate: tally{}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := GetValueState(b, ValueStateDescriptor[[]int]{Name: "seen"})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 200)
	for i := range keys {
		keys[i] = fmt.Append(nil, "k", i)
	}
	set := func(k []byte) { b.SetCurrentKey(k, KeyGroupFor(k, b.MaxParallelism())) }
	words := []string{"a", "b", "c"}
	update := func(round int) {
		for i, k := range keys {
			set(k)
			if err := agg.Add(words[(i+round)%len(words)]); err != nil {
				t.Fatal(err)
			}
			v, _, err := list.Value()
			if err != nil {
				t.Fatal(err)
			}
			if len(v) > 0 {
				v[0] = round // in place, before the Update
			}
			if err := list.Update(append(v, round)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The plain evaluation: what each key holds after rounds 0..n-1.
	want := func(i, rounds int) (map[string]int, []int) {
		m := map[string]int{}
		var s []int
		for r := range rounds {
			m[words[(i+r)%len(words)]]++
			if len(s) > 0 {
				s[0] = r
			}
			s = append(s, r)
		}
		return m, s
	}

	update(0)
	update(1)
	snap, err := b.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() { _, werr = snap.WriteTo(&out) })
	update(2)
	update(3)
	wg.Wait()
	snap.Release()
	if werr != nil {
		t.Fatal(werr)
	}

	r, err := NewHeapKeyedBackend(HeapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(&out); err != nil {
		t.Fatal(err)
	}
	ragg, err := GetAggregatingState(r, AggregatingStateDescriptor[string, map[string]int, map[string]int]{Name: "words", Aggregate: tally{}})
	if err != nil {
		t.Fatal(err)
	}
	rlist, err := GetValueState(r, ValueStateDescriptor[[]int]{Name: "seen"})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		r.SetCurrentKey(k, KeyGroupFor(k, r.MaxParallelism()))
		wm, ws := want(i, 2)
		got, _, err := ragg.Get()
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, wm) {
			t.Fatalf("key %s: the snapshot holds %v, want %v as when it was taken", k, got, wm)
		}
		gs, _, err := rlist.Value()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(gs) != fmt.Sprint(ws) {
			t.Fatalf("key %s: the snapshot holds %v, want %v as when it was taken", k, gs, ws)
		}
		// The live state went on.
		set(k)
		lm, ls := want(i, 4)
		if got, _, _ := agg.Get(); !maps.Equal(got, lm) {
			t.Fatalf("key %s: live state %v, want %v", k, got, lm)
		}
		if gs, _, _ := list.Value(); fmt.Sprint(gs) != fmt.Sprint(ls) {
			t.Fatalf("key %s: live state %v, want %v", k, gs, ls)
		}
	}
}

// TestListAndMapSnapshotsIsolatedFromInPlaceChanges: list elements and map
// values that hold references, changed in place through what Get and
// Iterate return while an asynchronous snapshot writes them, are the
// snapshot's as they were when it was taken (Flink copies them through
// the element and value serializers).
func TestListAndMapSnapshotsIsolatedFromInPlaceChanges(t *testing.T) {
	b, err := NewHeapKeyedBackend(HeapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lists, err := GetListState(b, ListStateDescriptor[[]int]{Name: "lists"})
	if err != nil {
		t.Fatal(err)
	}
	maps_, err := GetMapState(b, MapStateDescriptor[string, []int]{Name: "maps"})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 100)
	for i := range keys {
		keys[i] = fmt.Append(nil, "k", i)
	}
	set := func(k []byte) { b.SetCurrentKey(k, KeyGroupFor(k, b.MaxParallelism())) }
	for i, k := range keys {
		set(k)
		if err := lists.Add([]int{i, 0}); err != nil {
			t.Fatal(err)
		}
		if err := maps_.Put("a", []int{i, 0}); err != nil {
			t.Fatal(err)
		}
		if err := maps_.Put("b", []int{i, 0}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := b.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	// In place, through every read path, while the snapshot is open.
	for _, k := range keys {
		set(k)
		vs, err := lists.Get()
		if err != nil || len(vs) != 1 {
			t.Fatalf("list of %s: %v, %v", k, vs, err)
		}
		vs[0][1] = 99
		v, ok, err := maps_.Get("a")
		if err != nil || !ok {
			t.Fatalf("map of %s: %v, %v, %v", k, v, ok, err)
		}
		v[1] = 99
		if err := maps_.Iterate(func(key string, v []int) bool {
			if key == "b" {
				v[1] = 99
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if _, err := snap.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	r, err := NewHeapKeyedBackend(HeapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(&out); err != nil {
		t.Fatal(err)
	}
	rlists, err := GetListState(r, ListStateDescriptor[[]int]{Name: "lists"})
	if err != nil {
		t.Fatal(err)
	}
	rmaps, err := GetMapState(r, MapStateDescriptor[string, []int]{Name: "maps"})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		r.SetCurrentKey(k, KeyGroupFor(k, r.MaxParallelism()))
		vs, err := rlists.Get()
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint([][]int{{i, 0}}); fmt.Sprint(vs) != want {
			t.Fatalf("list of %s: the snapshot holds %v, want %s as when it was taken", k, vs, want)
		}
		for _, mk := range []string{"a", "b"} {
			v, _, err := rmaps.Get(mk)
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprint([]int{i, 0}); fmt.Sprint(v) != want {
				t.Fatalf("map of %s, key %s: the snapshot holds %v, want %s as when it was taken", k, mk, v, want)
			}
		}
		// The live state has the changes made in place, as Flink's heap
		// state does.
		set(k)
		if vs, _ := lists.Get(); fmt.Sprint(vs) != fmt.Sprint([][]int{{i, 99}}) {
			t.Fatalf("live list of %s: %v", k, vs)
		}
		if v, _, _ := maps_.Get("b"); fmt.Sprint(v) != fmt.Sprint([]int{i, 99}) {
			t.Fatalf("live map of %s: %v", k, v)
		}
	}
}
