package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestKtabAgainstMap drives the hash table with random inserts, updates,
// tombstones and removals (which shift entries back) and compares it with
// a Go map after every step.
func TestKtabAgainstMap(t *testing.T) {
	type ref struct {
		v    int
		dead bool
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var tab ktab[int]
	want := map[string]ref{}
	keyOf := func(i int) (ckey, string) {
		var k ckey
		var scratch []byte
		kb := fmt.Appendf(nil, "%d", i)
		if i%7 == 0 { // some long composites
			kb = bytes.Repeat(kb, 8)
		}
		k.set(kb, nil, &scratch)
		return k, string(kb)
	}
	for step := range 20000 {
		i := rng.IntN(3000)
		k, name := keyOf(i)
		switch op := rng.IntN(10); {
		case op < 5:
			v, _ := tab.upsert(&k)
			*v = step
			want[name] = ref{v: step}
		case op < 7:
			tab.setDead(&k)
			want[name] = ref{dead: true}
		default:
			_, had := want[name]
			if got := tab.remove(&k); got != had {
				t.Fatalf("step %d: remove(%s) = %v, want %v", step, name, got, had)
			}
			delete(want, name)
		}
		if step%500 == 0 || step > 19900 {
			for j := range 3000 {
				k, name := keyOf(j)
				v, dead, ok := tab.find(&k)
				r, wok := want[name]
				if ok != wok || (ok && (dead != r.dead || (!dead && *v != r.v))) {
					t.Fatalf("step %d: find(%s) = %v %v %v, want %+v %v", step, name, deref(v), dead, ok, r, wok)
				}
			}
			n := 0
			tab.each(func(_ *ckey, _ []byte, _ *int, _ bool) bool { n++; return true })
			if n != len(want) || tab.len() != len(want) {
				t.Fatalf("step %d: %d entries (len %d), want %d", step, n, tab.len(), len(want))
			}
		}
	}
}

func deref(v *int) any {
	if v == nil {
		return nil
	}
	return *v
}

func TestCompositeRoundTrip(t *testing.T) {
	for _, kl := range []int{0, 1, 7, 8, 14, 15, 40} {
		for _, nl := range []int{0, 1, 5, 16, 127, 128, 300} {
			key := bytes.Repeat([]byte{'k'}, kl)
			ns := bytes.Repeat([]byte{0x80}, nl)
			var k ckey
			var scratch []byte
			k.set(key, ns, &scratch)
			var comp []byte
			if k.hi != 0 {
				var buf [16]byte
				comp = inlineBytes(k.lo, k.hi|deadBit, &buf)
			} else {
				comp = k.long
			}
			gk, gns, err := splitComposite(comp)
			if err != nil || !bytes.Equal(gk, key) || !bytes.Equal(gns, ns) {
				t.Fatalf("key %d, ns %d bytes: split = %q %q %v", kl, nl, gk, gns, err)
			}
		}
	}
}

func layers[V any](t *heapTable[V]) (max int) {
	for _, top := range t.tops {
		n := 0
		for l := top; l != nil; l = l.below {
			n++
		}
		max = maxInt(max, n)
	}
	return max
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// TestLayersMergeAfterRelease: writes during a snapshot go to a new layer;
// once the snapshot is released the next write merges it back.
func TestLayersMergeAfterRelease(t *testing.T) {
	b, _ := NewHeapKeyedBackend(HeapOptions{MaxParallelism: 4})
	h, _ := GetValueState(b, ValueStateDescriptor[int]{Name: "v"})
	tab := b.tables["v"].(*heapTable[cell[int]])
	set := func(k string, v int) {
		b.SetCurrentKey([]byte(k), KeyGroupFor([]byte(k), 4))
		if err := h.Update(v); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		set(fmt.Sprint(i), i)
	}
	s1, _ := b.Snapshot(1)
	s2, _ := b.Snapshot(2)
	for i := range 100 {
		set(fmt.Sprint(i), -i)
	}
	if n := layers(tab); n != 2 {
		t.Fatalf("%d layers during snapshots, want 2", n)
	}
	s1.Release()
	set("0", 0)
	if n := layers(tab); n != 2 {
		t.Fatalf("%d layers with a snapshot still pinning, want 2", n)
	}
	s2.Release()
	for i := range 100 {
		set(fmt.Sprint(i), i*2)
	}
	if n := layers(tab); n != 1 {
		t.Fatalf("%d layers after release and writes, want 1", n)
	}
	for i := range 100 {
		b.SetCurrentKey([]byte(fmt.Sprint(i)), KeyGroupFor([]byte(fmt.Sprint(i)), 4))
		if v, _, _ := h.Value(); v != i*2 {
			t.Fatalf("key %d = %d, want %d", i, v, i*2)
		}
	}
}

// TestSnapshotSyncPartIndependentOfSize: the synchronous part allocates
// the same for a small and a large state (it captures, it does not copy).
func TestSnapshotSyncPartIndependentOfSize(t *testing.T) {
	allocs := func(keys int) float64 {
		b, _ := NewHeapKeyedBackend(HeapOptions{})
		h, _ := GetValueState(b, ValueStateDescriptor[int]{Name: "v"})
		for i := range keys {
			k := fmt.Append(nil, i)
			b.SetCurrentKey(k, KeyGroupFor(k, b.MaxParallelism()))
			_ = h.Update(i)
		}
		return testing.AllocsPerRun(20, func() {
			s, err := b.Snapshot(1)
			if err != nil {
				t.Fatal(err)
			}
			s.Release()
		})
	}
	small, large := allocs(100), allocs(100_000)
	if small != large {
		t.Fatalf("sync part allocates %v for 100 keys, %v for 100000", small, large)
	}
}

type stepClock struct{ ms int64 }

func (c *stepClock) Now() time.Time { return time.UnixMilli(c.ms) }

// TestTTLIncrementalCleanup: expired entries that are never read again
// are removed as other keys are accessed.
func TestTTLIncrementalCleanup(t *testing.T) {
	clk := &stepClock{ms: 1000}
	b, _ := NewHeapKeyedBackend(HeapOptions{MaxParallelism: 4, Clock: clk})
	h, _ := GetValueState(b, ValueStateDescriptor[int]{Name: "v", TTL: TTLConfig{TTL: time.Second}})
	tab := b.tables["v"].(*heapTable[cell[int]])
	size := func() (n int) {
		for _, l := range tab.tops {
			n += l.tab.len()
		}
		return n
	}
	for i := range 500 {
		k := fmt.Append(nil, i)
		b.SetCurrentKey(k, KeyGroupFor(k, 4))
		_ = h.Update(i)
	}
	if n := size(); n != 500 {
		t.Fatalf("%d entries before expiry, want 500", n)
	}
	clk.ms += 2000
	b.SetCurrentKey([]byte("live"), KeyGroupFor([]byte("live"), 4))
	_ = h.Update(1)
	for range 1000 {
		if v, ok, _ := h.Value(); !ok || v != 1 {
			t.Fatal("live entry lost")
		}
	}
	if n := size(); n != 1 {
		t.Fatalf("%d entries after 1000 accesses, want only the live one", n)
	}
}
