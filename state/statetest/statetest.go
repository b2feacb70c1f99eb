// Package statetest owns the semantic test suite of keyed state backends:
// written once against state.KeyedBackend, run by every backend (heap,
// RocksDB) through Run with a factory, so all backends behave alike. It
// also has the fake clock that drives TTL in tests.
package statetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/state"
)

// Config is what the suite asks of a backend.
type Config struct {
	MaxParallelism int
	// KeyGroups nil means all key groups.
	KeyGroups *state.KeyGroupRange
	Clock     state.Clock
}

// Factory makes a new, empty backend; the suite closes it.
type Factory func(t testing.TB, cfg Config) state.KeyedBackend

// FakeClock is a Clock that moves only when told.
type FakeClock struct{ nanos atomic.Int64 }

// NewFakeClock returns a clock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	c := &FakeClock{}
	c.nanos.Store(start.UnixNano())
	return c
}

// Now implements state.Clock.
func (c *FakeClock) Now() time.Time { return time.Unix(0, c.nanos.Load()) }

// Advance moves the clock forward.
func (c *FakeClock) Advance(d time.Duration) { c.nanos.Add(int64(d)) }

// Run runs the whole suite against backends from f.
func Run(t *testing.T, f Factory) {
	s := &suite{f: f}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Value", s.testValue},
		{"List", s.testList},
		{"Map", s.testMap},
		{"Reducing", s.testReducing},
		{"Aggregating", s.testAggregating},
		{"Namespaces", s.testNamespaces},
		{"Keys", s.testKeys},
		{"TTLValue", s.testTTLValue},
		{"TTLList", s.testTTLList},
		{"TTLMap", s.testTTLMap},
		{"TTLSnapshot", s.testTTLSnapshot},
		{"SnapshotWhileMutating", s.testSnapshotWhileMutating},
		{"OverlappingSnapshots", s.testOverlappingSnapshots},
		{"RandomizedSnapshots", s.testRandomizedSnapshots},
		{"RestoreAllKinds", s.testRestoreAllKinds},
		{"RestoreCarriesUnregistered", s.testRestoreCarriesUnregistered},
		{"Rescale", s.testRescale},
		{"Incompatible", s.testIncompatible},
		{"CorruptSnapshot", s.testCorruptSnapshot},
	} {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct{ f Factory }

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *suite) backend(t testing.TB, cfg Config) state.KeyedBackend {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = NewFakeClock(t0)
	}
	b := s.f(t, cfg)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

// setKey makes the string key k current.
func setKey(b state.KeyedBackend, k string) {
	kb := []byte(k)
	b.SetCurrentKey(kb, state.KeyGroupFor(kb, b.MaxParallelism()))
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantValue[T comparable](t testing.TB, h state.ValueState[T], want T, wantOK bool) {
	t.Helper()
	v, ok, err := h.Value()
	if err != nil {
		t.Fatal(err)
	}
	if ok != wantOK || v != want {
		t.Fatalf("Value() = %v, %v; want %v, %v", v, ok, want, wantOK)
	}
}

func wantList[T comparable](t testing.TB, h state.ListState[T], want ...T) {
	t.Helper()
	got, err := h.Get()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("list Get() = %v; want %v", got, want)
	}
}

func snapshotBytes(t testing.TB, b state.KeyedBackend, id int64) []byte {
	t.Helper()
	snap, err := b.Snapshot(id)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return buf.Bytes()
}

func (s *suite) restored(t testing.TB, cfg Config, snaps ...[]byte) state.KeyedBackend {
	t.Helper()
	b := s.backend(t, cfg)
	rs := make([]io.Reader, len(snaps))
	for i, snap := range snaps {
		rs[i] = bytes.NewReader(snap)
	}
	if err := b.Restore(rs...); err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *suite) testValue(t *testing.T) {
	b := s.backend(t, Config{})
	h := must[state.ValueState[int64]](t)(state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"}))
	if _, _, err := h.Value(); !errors.Is(err, state.ErrNoCurrentKey) {
		t.Fatalf("Value without a current key: %v, want ErrNoCurrentKey", err)
	}
	setKey(b, "a")
	wantValue(t, h, 0, false)
	check(t, h.Update(1))
	wantValue(t, h, 1, true)
	setKey(b, "b")
	wantValue(t, h, 0, false)
	check(t, h.Update(20))
	setKey(b, "a")
	wantValue(t, h, 1, true)
	v, _, _ := h.Value()
	check(t, h.Update(v+1))
	wantValue(t, h, 2, true)
	// A second handle of the same state sees and makes the same changes.
	h2 := must[state.ValueState[int64]](t)(state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"}))
	wantValue(t, h2, 2, true)
	check(t, h2.Update(3))
	wantValue(t, h, 3, true)
	check(t, h.Clear())
	wantValue(t, h2, 0, false)
	setKey(b, "b")
	wantValue(t, h, 20, true)

	// Long keys (beyond any inline key size) behave the same.
	long := strings.Repeat("k", 40)
	setKey(b, long)
	wantValue(t, h, 0, false)
	check(t, h.Update(40))
	setKey(b, long+"x")
	wantValue(t, h, 0, false)
	setKey(b, long)
	wantValue(t, h, 40, true)
	check(t, h.Clear())
	wantValue(t, h, 0, false)

	// Struct values through the JSON codec.
	type point struct{ X, Y int }
	hp := must[state.ValueState[point]](t)(state.GetValueState(b, state.ValueStateDescriptor[point]{Name: "p"}))
	check(t, hp.Update(point{1, 2}))
	wantValue(t, hp, point{1, 2}, true)

	// A key group outside the range is refused.
	r := state.KeyGroupRange{Start: 0, End: 9}
	b2 := s.backend(t, Config{MaxParallelism: 128, KeyGroups: &r})
	h3 := must[state.ValueState[int64]](t)(state.GetValueState(b2, state.ValueStateDescriptor[int64]{Name: "v"}))
	b2.SetCurrentKey([]byte("x"), 50)
	if err := h3.Update(1); !errors.Is(err, state.ErrNoCurrentKey) {
		t.Fatalf("Update in key group 50 outside %v: %v, want ErrNoCurrentKey", r, err)
	}
}

func (s *suite) testList(t *testing.T) {
	b := s.backend(t, Config{})
	h := must[state.ListState[string]](t)(state.GetListState(b, state.ListStateDescriptor[string]{Name: "l"}))
	setKey(b, "a")
	wantList(t, h)
	check(t, h.Add("1"))
	check(t, h.Add("2"))
	check(t, h.AddAll([]string{"3", "4"}))
	check(t, h.AddAll(nil))
	wantList(t, h, "1", "2", "3", "4")
	got, _ := h.Get()
	got[0] = "changed"
	wantList(t, h, "1", "2", "3", "4")
	setKey(b, "b")
	wantList(t, h)
	check(t, h.Add("b1"))
	setKey(b, "a")
	check(t, h.Update([]string{"9"}))
	wantList(t, h, "9")
	check(t, h.Update(nil))
	wantList(t, h)
	check(t, h.Add("x"))
	check(t, h.Clear())
	wantList(t, h)
	setKey(b, "b")
	wantList(t, h, "b1")

	// Merging namespaces: target keeps its elements, sources follow in
	// order and are cleared.
	setKey(b, "m")
	for ns, vals := range map[string][]string{"A": {"a1", "a2"}, "B": {"b1"}, "T": {"t0"}} {
		h.SetNamespace([]byte(ns))
		check(t, h.AddAll(vals))
	}
	check(t, h.MergeNamespaces([]byte("T"), [][]byte{[]byte("A"), []byte("B"), []byte("empty")}))
	h.SetNamespace([]byte("T"))
	wantList(t, h, "t0", "a1", "a2", "b1")
	h.SetNamespace([]byte("A"))
	wantList(t, h)
	h.SetNamespace([]byte("B"))
	wantList(t, h)
}

func (s *suite) testMap(t *testing.T) {
	b := s.backend(t, Config{})
	h := must[state.MapState[string, int]](t)(state.GetMapState(b, state.MapStateDescriptor[string, int]{Name: "m"}))
	setKey(b, "a")
	if empty := must[bool](t)(h.IsEmpty()); !empty {
		t.Fatal("new map not empty")
	}
	if _, ok, err := h.Get("x"); ok || err != nil {
		t.Fatalf("Get on empty map: %v %v", ok, err)
	}
	for i := range 10 {
		check(t, h.Put(fmt.Sprint("k", i), i))
	}
	check(t, h.Put("k3", 33))
	if v, ok, err := h.Get("k3"); v != 33 || !ok || err != nil {
		t.Fatalf("Get(k3) = %v %v %v", v, ok, err)
	}
	if ok := must[bool](t)(h.Contains("k9")); !ok {
		t.Fatal("Contains(k9) false")
	}
	check(t, h.Remove("k9"))
	check(t, h.Remove("absent"))
	if ok := must[bool](t)(h.Contains("k9")); ok {
		t.Fatal("Contains(k9) after Remove")
	}
	got := map[string]int{}
	check(t, h.Iterate(func(k string, v int) bool { got[k] = v; return true }))
	want := map[string]int{"k0": 0, "k1": 1, "k2": 2, "k3": 33, "k4": 4, "k5": 5, "k6": 6, "k7": 7, "k8": 8}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Iterate = %v, want %v", got, want)
	}
	n := 0
	check(t, h.IterateKeys(func(string) bool { n++; return n < 3 }))
	if n != 3 {
		t.Fatalf("IterateKeys did not stop: %d calls", n)
	}
	// Removing during iteration.
	check(t, h.IterateKeys(func(k string) bool {
		if k != "k0" {
			check(t, h.Remove(k))
		}
		return true
	}))
	keys := []string{}
	check(t, h.IterateKeys(func(k string) bool { keys = append(keys, k); return true }))
	if !slices.Equal(keys, []string{"k0"}) {
		t.Fatalf("after removing during iteration: %v", keys)
	}
	setKey(b, "b")
	if empty := must[bool](t)(h.IsEmpty()); !empty {
		t.Fatal("other key's map not empty")
	}
	setKey(b, "a")
	check(t, h.Remove("k0"))
	if empty := must[bool](t)(h.IsEmpty()); !empty {
		t.Fatal("map with everything removed not empty")
	}
	check(t, h.Put("z", 1))
	check(t, h.Clear())
	if empty := must[bool](t)(h.IsEmpty()); !empty {
		t.Fatal("cleared map not empty")
	}
}

func sum(a, b int64) int64 { return a + b }

func (s *suite) testReducing(t *testing.T) {
	b := s.backend(t, Config{})
	h := must[state.ReducingState[int64]](t)(state.GetReducingState(b, state.ReducingStateDescriptor[int64]{Name: "r", Reduce: sum}))
	setKey(b, "a")
	if _, ok, _ := h.Get(); ok {
		t.Fatal("empty reducing state has a value")
	}
	for i := int64(1); i <= 3; i++ {
		check(t, h.Add(i))
	}
	if v, ok, err := h.Get(); v != 6 || !ok || err != nil {
		t.Fatalf("Get = %v %v %v, want 6", v, ok, err)
	}
	setKey(b, "b")
	check(t, h.Add(100))
	setKey(b, "a")
	check(t, h.Clear())
	if _, ok, _ := h.Get(); ok {
		t.Fatal("cleared reducing state has a value")
	}
	for ns, v := range map[string]int64{"A": 1, "B": 10, "T": 100} {
		h.SetNamespace([]byte(ns))
		check(t, h.Add(v))
	}
	check(t, h.MergeNamespaces([]byte("T"), [][]byte{[]byte("A"), []byte("B")}))
	h.SetNamespace([]byte("T"))
	if v, _, _ := h.Get(); v != 111 {
		t.Fatalf("merged = %d, want 111", v)
	}
	h.SetNamespace([]byte("A"))
	if _, ok, _ := h.Get(); ok {
		t.Fatal("merged source not cleared")
	}
	// Merging into an empty target.
	h.SetNamespace([]byte("C"))
	check(t, h.Add(5))
	check(t, h.MergeNamespaces([]byte("D"), [][]byte{[]byte("C")}))
	h.SetNamespace([]byte("D"))
	if v, ok, _ := h.Get(); v != 5 || !ok {
		t.Fatalf("merged into empty = %d %v, want 5", v, ok)
	}
	setKey(b, "b")
	h.SetNamespace(nil)
	if v, _, _ := h.Get(); v != 100 {
		t.Fatalf("other key = %d, want 100", v)
	}
}

// Avg is an AggregateFunction: the mean of int64 inputs.
type Avg struct{}

// AvgAcc is Avg's accumulator.
type AvgAcc struct{ Sum, N int64 }

func (Avg) CreateAccumulator() AvgAcc    { return AvgAcc{} }
func (Avg) Add(v int64, a AvgAcc) AvgAcc { return AvgAcc{a.Sum + v, a.N + 1} }
func (Avg) GetResult(a AvgAcc) float64   { return float64(a.Sum) / float64(a.N) }
func (Avg) Merge(a, b AvgAcc) AvgAcc     { return AvgAcc{a.Sum + b.Sum, a.N + b.N} }
func avgDesc() state.AggregatingStateDescriptor[int64, AvgAcc, float64] {
	return state.AggregatingStateDescriptor[int64, AvgAcc, float64]{Name: "avg", Aggregate: Avg{}}
}

func (s *suite) testAggregating(t *testing.T) {
	b := s.backend(t, Config{})
	h := must[state.AggregatingState[int64, float64]](t)(state.GetAggregatingState(b, avgDesc()))
	setKey(b, "a")
	if _, ok, _ := h.Get(); ok {
		t.Fatal("empty aggregating state has a value")
	}
	for _, v := range []int64{1, 2, 6} {
		check(t, h.Add(v))
	}
	if v, ok, err := h.Get(); v != 3 || !ok || err != nil {
		t.Fatalf("Get = %v %v %v, want 3", v, ok, err)
	}
	h.SetNamespace([]byte("w2"))
	check(t, h.Add(11))
	check(t, h.MergeNamespaces([]byte("w3"), [][]byte{nil, []byte("w2")}))
	h.SetNamespace([]byte("w3"))
	if v, _, _ := h.Get(); v != 5 {
		t.Fatalf("merged = %v, want 5", v)
	}
	h.SetNamespace(nil)
	if _, ok, _ := h.Get(); ok {
		t.Fatal("merged default namespace not cleared")
	}
	check(t, h.Clear())
}

func (s *suite) testNamespaces(t *testing.T) {
	b := s.backend(t, Config{})
	h := must[state.ValueState[string]](t)(state.GetValueState(b, state.ValueStateDescriptor[string]{Name: "v"}))
	win := func(start, end int64) []byte {
		return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(start)), uint64(end))
	}
	setKey(b, "k")
	check(t, h.Update("void"))
	for i := int64(0); i < 5; i++ {
		h.SetNamespace(win(i*10, i*10+10))
		wantValue(t, h, "", false)
		check(t, h.Update(fmt.Sprint("w", i)))
	}
	h.SetNamespace([]byte("x")) // short namespace
	check(t, h.Update("short"))
	for i := int64(0); i < 5; i++ {
		h.SetNamespace(win(i*10, i*10+10))
		wantValue(t, h, fmt.Sprint("w", i), true)
	}
	ns := win(20, 30)
	h.SetNamespace(ns)
	ns[0] = 0xff // the handle copied it
	wantValue(t, h, "w2", true)
	check(t, h.Clear())
	wantValue(t, h, "", false)
	h.SetNamespace(nil)
	wantValue(t, h, "void", true)
	h.SetNamespace([]byte{})
	wantValue(t, h, "void", true)
	h.SetNamespace([]byte("x"))
	wantValue(t, h, "short", true)
	setKey(b, "other")
	wantValue(t, h, "", false)
}

func collectKeys(t testing.TB, b state.KeyedBackend, name string, ns []byte) []string {
	t.Helper()
	var keys []string
	err := b.Keys(name, ns, func(k []byte, kg int) error {
		if want := state.KeyGroupFor(k, b.MaxParallelism()); kg != want {
			t.Errorf("key %q reported in key group %d, want %d", k, kg, want)
		}
		keys = append(keys, string(k))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

func (s *suite) testKeys(t *testing.T) {
	b := s.backend(t, Config{})
	h := must[state.ValueState[int]](t)(state.GetValueState(b, state.ValueStateDescriptor[int]{Name: "v"}))
	var want, wantNS []string
	for i := range 100 {
		k := fmt.Sprintf("key-%03d", i)
		setKey(b, k)
		h.SetNamespace(nil)
		check(t, h.Update(i))
		want = append(want, k)
		if i%10 == 0 {
			h.SetNamespace([]byte("ns"))
			check(t, h.Update(i))
			wantNS = append(wantNS, k)
		}
	}
	setKey(b, "deleted")
	h.SetNamespace(nil)
	check(t, h.Update(1))
	check(t, h.Clear())
	if got := collectKeys(t, b, "v", nil); !slices.Equal(got, want) {
		t.Fatalf("Keys(void) = %v, want %v", got, want)
	}
	if got := collectKeys(t, b, "v", []byte("ns")); !slices.Equal(got, wantNS) {
		t.Fatalf("Keys(ns) = %v, want %v", got, wantNS)
	}
	if err := b.Keys("nope", nil, func([]byte, int) error { return nil }); !errors.Is(err, state.ErrUnknownState) {
		t.Fatalf("Keys of an unknown state: %v", err)
	}
	// fn may change state: clear every key in the namespace.
	h.SetNamespace([]byte("ns"))
	err := b.Keys("v", []byte("ns"), func(k []byte, kg int) error {
		b.SetCurrentKey(k, kg)
		return h.Clear()
	})
	check(t, err)
	if got := collectKeys(t, b, "v", []byte("ns")); len(got) != 0 {
		t.Fatalf("after clearing: %v", got)
	}
	if got := collectKeys(t, b, "v", nil); !slices.Equal(got, want) {
		t.Fatalf("Keys(void) after clearing ns = %d keys, want %d", len(got), len(want))
	}
	stop := errors.New("stop")
	if err := b.Keys("v", nil, func([]byte, int) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Keys did not return fn's error: %v", err)
	}
}

func ttl(d time.Duration, u state.TTLUpdateType, v state.TTLVisibility) state.TTLConfig {
	return state.TTLConfig{TTL: d, UpdateType: u, Visibility: v}
}

func (s *suite) testTTLValue(t *testing.T) {
	clk := NewFakeClock(t0)
	b := s.backend(t, Config{Clock: clk})
	write := must[state.ValueState[int]](t)(state.GetValueState(b, state.ValueStateDescriptor[int]{Name: "w", TTL: ttl(10*time.Second, state.OnCreateAndWrite, state.NeverReturnExpired)}))
	read := must[state.ValueState[int]](t)(state.GetValueState(b, state.ValueStateDescriptor[int]{Name: "r", TTL: ttl(10*time.Second, state.OnReadAndWrite, state.NeverReturnExpired)}))
	ret := must[state.ValueState[int]](t)(state.GetValueState(b, state.ValueStateDescriptor[int]{Name: "x", TTL: ttl(10*time.Second, state.OnCreateAndWrite, state.ReturnExpiredIfNotCleanedUp)}))
	red := must[state.ReducingState[int64]](t)(state.GetReducingState(b, state.ReducingStateDescriptor[int64]{Name: "red", Reduce: sum, TTL: ttl(10*time.Second, state.OnCreateAndWrite, state.NeverReturnExpired)}))
	setKey(b, "a")
	check(t, write.Update(1))
	check(t, read.Update(2))
	check(t, ret.Update(3))
	check(t, red.Add(5))
	clk.Advance(9 * time.Second)
	wantValue(t, write, 1, true) // a read does not refresh OnCreateAndWrite
	wantValue(t, read, 2, true)  // ... but does OnReadAndWrite
	clk.Advance(time.Second)     // 10s after the write
	wantValue(t, write, 0, false)
	wantValue(t, read, 2, true) // read 1s ago
	wantValue(t, ret, 3, true)  // expired, returned once
	wantValue(t, ret, 0, false) // ... and cleaned up
	check(t, red.Add(7))        // the expired 5 is gone: starts over
	if v, _, _ := red.Get(); v != 7 {
		t.Fatalf("reducing after expiry = %d, want 7", v)
	}
	clk.Advance(9 * time.Second)
	wantValue(t, read, 2, true)
	clk.Advance(10 * time.Second)
	wantValue(t, read, 0, false)
	check(t, write.Update(4)) // a write restarts the TTL
	clk.Advance(9 * time.Second)
	wantValue(t, write, 4, true)
	if got := collectKeys(t, b, "w", nil); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("Keys with a live entry = %v", got)
	}
	clk.Advance(time.Second)
	if got := collectKeys(t, b, "w", nil); len(got) != 0 {
		t.Fatalf("Keys lists expired entries: %v", got)
	}
}

func (s *suite) testTTLList(t *testing.T) {
	clk := NewFakeClock(t0)
	b := s.backend(t, Config{Clock: clk})
	h := must[state.ListState[int]](t)(state.GetListState(b, state.ListStateDescriptor[int]{Name: "l", TTL: ttl(10*time.Second, state.OnCreateAndWrite, state.NeverReturnExpired)}))
	hr := must[state.ListState[int]](t)(state.GetListState(b, state.ListStateDescriptor[int]{Name: "lr", TTL: ttl(10*time.Second, state.OnReadAndWrite, state.NeverReturnExpired)}))
	setKey(b, "a")
	check(t, h.Add(1))
	check(t, hr.Add(1))
	clk.Advance(5 * time.Second)
	check(t, h.AddAll([]int{2, 3}))
	check(t, hr.Add(2))
	clk.Advance(4 * time.Second)
	wantList(t, h, 1, 2, 3)
	wantList(t, hr, 1, 2) // refreshes both
	clk.Advance(time.Second)
	wantList(t, h, 2, 3) // element 1 expired alone
	wantList(t, hr, 1, 2)
	clk.Advance(5 * time.Second)
	wantList(t, h)
	// Merging drops expired elements.
	h.SetNamespace([]byte("A"))
	check(t, h.Add(10))
	clk.Advance(6 * time.Second)
	h.SetNamespace([]byte("B"))
	check(t, h.Add(20))
	clk.Advance(5 * time.Second)
	check(t, h.MergeNamespaces([]byte("T"), [][]byte{[]byte("A"), []byte("B")}))
	h.SetNamespace([]byte("T"))
	wantList(t, h, 20)
}

func (s *suite) testTTLMap(t *testing.T) {
	clk := NewFakeClock(t0)
	b := s.backend(t, Config{Clock: clk})
	h := must[state.MapState[string, int]](t)(state.GetMapState(b, state.MapStateDescriptor[string, int]{Name: "m", TTL: ttl(10*time.Second, state.OnCreateAndWrite, state.NeverReturnExpired)}))
	hr := must[state.MapState[string, int]](t)(state.GetMapState(b, state.MapStateDescriptor[string, int]{Name: "mr", TTL: ttl(10*time.Second, state.OnReadAndWrite, state.NeverReturnExpired)}))
	setKey(b, "a")
	check(t, h.Put("old", 1))
	check(t, hr.Put("x", 1))
	check(t, hr.Put("y", 2))
	clk.Advance(6 * time.Second)
	check(t, h.Put("new", 2))
	if _, ok, _ := hr.Get("x"); !ok { // refreshes x only
		t.Fatal("x missing")
	}
	clk.Advance(4 * time.Second)
	if _, ok, _ := h.Get("old"); ok {
		t.Fatal("expired entry returned by Get")
	}
	if ok, _ := h.Contains("new"); !ok {
		t.Fatal("live entry not contained")
	}
	var keys []string
	check(t, hr.IterateKeys(func(k string) bool { keys = append(keys, k); return true }))
	if !slices.Equal(keys, []string{"x"}) {
		t.Fatalf("OnReadAndWrite map keys = %v, want [x]", keys)
	}
	keys = nil
	check(t, h.Iterate(func(k string, _ int) bool { keys = append(keys, k); return true }))
	if !slices.Equal(keys, []string{"new"}) {
		t.Fatalf("map keys = %v, want [new]", keys)
	}
	if empty, _ := h.IsEmpty(); empty {
		t.Fatal("map with a live entry is empty")
	}
	clk.Advance(6 * time.Second)
	if empty, _ := h.IsEmpty(); !empty {
		t.Fatal("map with only expired entries is not empty")
	}
}

func (s *suite) testTTLSnapshot(t *testing.T) {
	clk := NewFakeClock(t0)
	b := s.backend(t, Config{Clock: clk})
	desc := state.ValueStateDescriptor[int]{Name: "v", TTL: ttl(10*time.Second, state.OnCreateAndWrite, state.NeverReturnExpired)}
	ldesc := state.ListStateDescriptor[int]{Name: "l", TTL: desc.TTL}
	mdesc := state.MapStateDescriptor[int, int]{Name: "m", TTL: desc.TTL}
	h := must[state.ValueState[int]](t)(state.GetValueState(b, desc))
	l := must[state.ListState[int]](t)(state.GetListState(b, ldesc))
	m := must[state.MapState[int, int]](t)(state.GetMapState(b, mdesc))
	setKey(b, "early")
	check(t, h.Update(1))
	check(t, l.Add(1))
	check(t, m.Put(1, 1))
	clk.Advance(5 * time.Second)
	setKey(b, "late")
	check(t, h.Update(2))
	check(t, l.Add(2))
	check(t, m.Put(2, 2))
	setKey(b, "early")
	check(t, l.Add(3))
	check(t, m.Put(3, 3))
	clk.Advance(6 * time.Second) // "early" writes at t0 expired
	snap := snapshotBytes(t, b, 1)
	r := s.restored(t, Config{Clock: clk}, snap)
	h2 := must[state.ValueState[int]](t)(state.GetValueState(r, desc))
	l2 := must[state.ListState[int]](t)(state.GetListState(r, ldesc))
	m2 := must[state.MapState[int, int]](t)(state.GetMapState(r, mdesc))
	if got := collectKeys(t, r, "v", nil); !slices.Equal(got, []string{"late"}) {
		t.Fatalf("restored keys = %v, want [late]: expired entries must not be snapshotted", got)
	}
	setKey(r, "late")
	wantValue(t, h2, 2, true)
	setKey(r, "early")
	wantList(t, l2, 3)
	if _, ok, _ := m2.Get(1); ok {
		t.Fatal("expired map entry restored")
	}
	if v, ok, _ := m2.Get(3); !ok || v != 3 {
		t.Fatal("live map entry not restored")
	}
	// Restored entries keep their timestamps.
	clk.Advance(4 * time.Second) // "late" written 10s ago
	setKey(r, "late")
	wantValue(t, h2, 0, false)
}

// fill writes n keys "k<i>" with value i (plus a list and a map entry).
func fill(t testing.TB, b state.KeyedBackend, n int) (state.ValueState[int64], state.ListState[int64], state.MapState[string, int64]) {
	v := must[state.ValueState[int64]](t)(state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v"}))
	l := must[state.ListState[int64]](t)(state.GetListState(b, state.ListStateDescriptor[int64]{Name: "l"}))
	m := must[state.MapState[string, int64]](t)(state.GetMapState(b, state.MapStateDescriptor[string, int64]{Name: "m"}))
	for i := range n {
		setKey(b, fmt.Sprint("k", i))
		check(t, v.Update(int64(i)))
		check(t, l.Add(int64(i)))
		check(t, m.Put("e", int64(i)))
	}
	return v, l, m
}

func (s *suite) testSnapshotWhileMutating(t *testing.T) {
	const n = 3000
	b := s.backend(t, Config{})
	v, l, m := fill(t, b, n)
	snap, err := b.Snapshot(1)
	check(t, err)
	// The asynchronous part runs while the task goes on mutating.
	var buf bytes.Buffer
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, werr = snap.WriteTo(&buf)
	}()
	for i := range n {
		setKey(b, fmt.Sprint("k", i))
		switch i % 4 {
		case 0:
			check(t, v.Update(int64(-i)))
			check(t, l.Add(-1))
			check(t, m.Put("e", -1))
			check(t, m.Put("f", -1))
		case 1:
			check(t, v.Clear())
			check(t, l.Clear())
			check(t, m.Remove("e"))
		case 2:
			check(t, l.Update([]int64{7}))
		}
	}
	for i := n; i < n+500; i++ {
		setKey(b, fmt.Sprint("k", i))
		check(t, v.Update(int64(i)))
	}
	wg.Wait()
	check(t, werr)
	snap.Release()

	// The snapshot is the state as of the synchronous part.
	r := s.restored(t, Config{}, buf.Bytes())
	rv, rl, rm := fill(t, r, 0)
	for i := range n + 500 {
		setKey(r, fmt.Sprint("k", i))
		if i >= n {
			wantValue(t, rv, 0, false)
			continue
		}
		wantValue(t, rv, int64(i), true)
		wantList(t, rl, int64(i))
		if e, ok, _ := rm.Get("e"); !ok || e != int64(i) {
			t.Fatalf("k%d: map e = %d %v, want %d", i, e, ok, i)
		}
		if ok, _ := rm.Contains("f"); ok {
			t.Fatalf("k%d: map has f, put after the snapshot", i)
		}
	}
	// The backend has the new state.
	for i := range n {
		setKey(b, fmt.Sprint("k", i))
		switch i % 4 {
		case 0:
			wantValue(t, v, int64(-i), true)
			wantList(t, l, int64(i), -1)
		case 1:
			wantValue(t, v, 0, false)
			wantList(t, l)
			if empty, _ := m.IsEmpty(); !empty {
				t.Fatalf("k%d: map not empty", i)
			}
		case 2:
			wantList(t, l, 7)
		default:
			wantValue(t, v, int64(i), true)
			wantList(t, l, int64(i))
		}
	}
	if got := collectKeys(t, b, "v", nil); len(got) != n+500-n/4 {
		t.Fatalf("backend has %d keys, want %d", len(got), n+500-n/4)
	}
}

func (s *suite) testOverlappingSnapshots(t *testing.T) {
	b := s.backend(t, Config{})
	v, _, _ := fill(t, b, 200)
	set := func(val int64) {
		for i := range 200 {
			setKey(b, fmt.Sprint("k", i))
			check(t, v.Update(val))
		}
	}
	verify := func(snap []byte, want int64) {
		t.Helper()
		r := s.restored(t, Config{}, snap)
		rv, _, _ := fill(t, r, 0)
		for i := range 200 {
			setKey(r, fmt.Sprint("k", i))
			wantValue(t, rv, want, true)
		}
	}
	set(1)
	s1, err := b.Snapshot(1)
	check(t, err)
	set(2)
	s2, err := b.Snapshot(2)
	check(t, err)
	set(3)
	// Abandoned snapshot: released without writing.
	s3, err := b.Snapshot(3)
	check(t, err)
	s3.Release()
	set(4)
	var b2 bytes.Buffer
	_, err = s2.WriteTo(&b2) // the later one first
	check(t, err)
	set(5)
	var b1 bytes.Buffer
	_, err = s1.WriteTo(&b1)
	check(t, err)
	s1.Release()
	s2.Release()
	verify(b1.Bytes(), 1)
	verify(b2.Bytes(), 2)
	set(6)
	verify(snapshotBytes(t, b, 4), 6)
	for i := range 200 {
		setKey(b, fmt.Sprint("k", i))
		wantValue(t, v, 6, true)
	}
}

func (s *suite) testRestoreAllKinds(t *testing.T) {
	b := s.backend(t, Config{})
	v := must[state.ValueState[string]](t)(state.GetValueState(b, state.ValueStateDescriptor[string]{Name: "v"}))
	l := must[state.ListState[string]](t)(state.GetListState(b, state.ListStateDescriptor[string]{Name: "l"}))
	m := must[state.MapState[int, string]](t)(state.GetMapState(b, state.MapStateDescriptor[int, string]{Name: "m"}))
	r := must[state.ReducingState[int64]](t)(state.GetReducingState(b, state.ReducingStateDescriptor[int64]{Name: "r", Reduce: sum}))
	a := must[state.AggregatingState[int64, float64]](t)(state.GetAggregatingState(b, avgDesc()))
	long := []byte(strings.Repeat("n", 30))
	for i := range 50 {
		setKey(b, fmt.Sprint("key", i))
		for _, ns := range [][]byte{nil, []byte("w"), long} {
			for _, h := range []state.KeyedState{v, l, m, r, a} {
				h.SetNamespace(ns)
			}
			check(t, v.Update(fmt.Sprint(i, string(ns))))
			check(t, l.AddAll([]string{"x", fmt.Sprint(i)}))
			check(t, m.Put(i, "a"))
			check(t, m.Put(-i-1, "b"))
			check(t, r.Add(int64(i)))
			check(t, r.Add(1))
			check(t, a.Add(int64(i)))
			check(t, a.Add(int64(i+2)))
		}
	}
	snap := snapshotBytes(t, b, 7)
	b2 := s.restored(t, Config{}, snap)
	v2 := must[state.ValueState[string]](t)(state.GetValueState(b2, state.ValueStateDescriptor[string]{Name: "v"}))
	l2 := must[state.ListState[string]](t)(state.GetListState(b2, state.ListStateDescriptor[string]{Name: "l"}))
	m2 := must[state.MapState[int, string]](t)(state.GetMapState(b2, state.MapStateDescriptor[int, string]{Name: "m"}))
	r2 := must[state.ReducingState[int64]](t)(state.GetReducingState(b2, state.ReducingStateDescriptor[int64]{Name: "r", Reduce: sum}))
	a2 := must[state.AggregatingState[int64, float64]](t)(state.GetAggregatingState(b2, avgDesc()))
	for i := range 50 {
		setKey(b2, fmt.Sprint("key", i))
		for _, ns := range [][]byte{nil, []byte("w"), long} {
			for _, h := range []state.KeyedState{v2, l2, m2, r2, a2} {
				h.SetNamespace(ns)
			}
			wantValue(t, v2, fmt.Sprint(i, string(ns)), true)
			wantList(t, l2, "x", fmt.Sprint(i))
			got := map[int]string{}
			check(t, m2.Iterate(func(k int, v string) bool { got[k] = v; return true }))
			if len(got) != 2 || got[i] != "a" || got[-i-1] != "b" {
				t.Fatalf("key%d: map = %v", i, got)
			}
			if x, _, _ := r2.Get(); x != int64(i+1) {
				t.Fatalf("key%d: reducing = %d, want %d", i, x, i+1)
			}
			if x, _, _ := a2.Get(); x != float64(i+1) {
				t.Fatalf("key%d: aggregating = %v, want %d", i, x, i+1)
			}
		}
	}
	metas := b2.States()
	if len(metas) != 5 {
		t.Fatalf("restored backend has %d states registered, want 5", len(metas))
	}
	// A snapshot of the restored backend is the same state again.
	b3 := s.restored(t, Config{}, snapshotBytes(t, b2, 8))
	v3 := must[state.ValueState[string]](t)(state.GetValueState(b3, state.ValueStateDescriptor[string]{Name: "v"}))
	setKey(b3, "key7")
	v3.SetNamespace(long)
	wantValue(t, v3, "7"+string(long), true)
}

func (s *suite) testRestoreCarriesUnregistered(t *testing.T) {
	b := s.backend(t, Config{})
	fill(t, b, 20)
	// Registers only "v": "l" and "m" must survive into the next snapshot.
	b2 := s.restored(t, Config{}, snapshotBytes(t, b, 1))
	v2 := must[state.ValueState[int64]](t)(state.GetValueState(b2, state.ValueStateDescriptor[int64]{Name: "v"}))
	setKey(b2, "k3")
	check(t, v2.Update(33))
	b3 := s.restored(t, Config{}, snapshotBytes(t, b2, 2))
	v3, l3, _ := fill(t, b3, 0)
	setKey(b3, "k3")
	wantValue(t, v3, 33, true)
	wantList(t, l3, 3)
	setKey(b3, "k19")
	wantList(t, l3, 19)
}

// testRescale takes a keyed state through parallelism 2 -> 3 -> 1 -> 4:
// after each restore every key is in exactly one subtask, with its value.
func (s *suite) testRescale(t *testing.T) {
	const maxPar, n = 32, 1000
	vd := state.ValueStateDescriptor[int64]{Name: "v"}
	ld := state.ListStateDescriptor[int64]{Name: "l"}
	// Start: parallelism 2, key i has value i and list [i].
	var snaps [][]byte
	for idx := range 2 {
		r := state.RangeFor(maxPar, 2, idx)
		b := s.backend(t, Config{MaxParallelism: maxPar, KeyGroups: &r})
		v := must[state.ValueState[int64]](t)(state.GetValueState(b, vd))
		l := must[state.ListState[int64]](t)(state.GetListState(b, ld))
		for i := range n {
			k := []byte(fmt.Sprint("key", i))
			kg := state.KeyGroupFor(k, maxPar)
			if !r.Contains(kg) {
				continue
			}
			b.SetCurrentKey(k, kg)
			check(t, v.Update(int64(i)))
			check(t, l.Add(int64(i)))
		}
		snaps = append(snaps, snapshotBytes(t, b, 1))
	}
	step := 0
	for _, p := range []int{3, 1, 4} {
		step++
		seen := make(map[string]int)
		var next [][]byte
		for idx := range p {
			r := state.RangeFor(maxPar, p, idx)
			b := s.backend(t, Config{MaxParallelism: maxPar, KeyGroups: &r})
			// Give each subtask the old snapshots that overlap its range,
			// as the runtime does, in reverse order for good measure.
			var mine []io.Reader
			for j := len(snaps) - 1; j >= 0; j-- {
				old := state.RangeFor(maxPar, len(snaps), j)
				if old.Start <= r.End && r.Start <= old.End {
					mine = append(mine, bytes.NewReader(snaps[j]))
				}
			}
			check(t, b.Restore(mine...))
			v := must[state.ValueState[int64]](t)(state.GetValueState(b, vd))
			l := must[state.ListState[int64]](t)(state.GetListState(b, ld))
			for _, k := range collectKeys(t, b, "v", nil) {
				seen[k]++
				if !r.Contains(state.KeyGroupFor([]byte(k), maxPar)) {
					t.Fatalf("step %d: subtask %d/%d has key %s outside its range", step, idx, p, k)
				}
				var i int
				if _, err := fmt.Sscanf(k, "key%d", &i); err != nil {
					t.Fatal(err)
				}
				setKey(b, k)
				want := int64(i + (step-1)*n)
				wantValue(t, v, want, true)
				wantList(t, l, int64(i))
				check(t, v.Update(want+n)) // changes carried to the next step
			}
			next = append(next, snapshotBytes(t, b, int64(step+1)))
		}
		if len(seen) != n {
			t.Fatalf("step %d (parallelism %d): %d distinct keys, want %d", step, p, len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("step %d: key %s in %d subtasks", step, k, c)
			}
		}
		snaps = next
	}
}

// FlakyCodec is an int64 codec that fails to decode when Fail is set. Its
// identity (type) does not depend on Fail, so it stands for a codec that
// claims compatibility and cannot read the data.
type FlakyCodec struct{ Fail bool }

func (FlakyCodec) Append(dst []byte, v int64) ([]byte, error) {
	return codec.Int[int64]{}.Append(dst, v)
}

func (c FlakyCodec) Decode(src []byte) (int64, error) {
	if c.Fail {
		return 0, errors.New("flaky codec refuses")
	}
	return codec.Int[int64]{}.Decode(src)
}

func (s *suite) testIncompatible(t *testing.T) {
	b := s.backend(t, Config{})
	_ = must[state.ValueState[int64]](t)(state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "counts", Codec: codec.Int[int64]{}}))
	wantRefused := func(err error, what string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), `"counts"`) {
			t.Fatalf("%s: error %v, want one naming the state \"counts\"", what, err)
		}
	}
	_, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "counts", Codec: codec.JSON[int64]{}})
	wantRefused(err, "same name, other codec")
	if !errors.Is(err, state.ErrIncompatibleState) {
		t.Fatalf("other codec: %v, want ErrIncompatibleState", err)
	}
	_, err = state.GetListState(b, state.ListStateDescriptor[int64]{Name: "counts", Codec: codec.Int[int64]{}})
	wantRefused(err, "same name, other kind")
	_, err = state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "counts", Codec: codec.Int[int64]{}, TTL: state.TTLConfig{TTL: time.Hour}})
	wantRefused(err, "same name, TTL switched on")
	if _, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: ""}); !errors.Is(err, state.ErrInvalidDescriptor) {
		t.Fatalf("nameless descriptor: %v", err)
	}
	if _, err := state.GetReducingState(b, state.ReducingStateDescriptor[int64]{Name: "r"}); !errors.Is(err, state.ErrInvalidDescriptor) {
		t.Fatalf("reducing without Reduce: %v", err)
	}

	// Restored with another codec.
	fb := s.backend(t, Config{})
	fh := must[state.ValueState[int64]](t)(state.GetValueState(fb, state.ValueStateDescriptor[int64]{Name: "counts", Codec: FlakyCodec{}}))
	setKey(fb, "a")
	check(t, fh.Update(5))
	snap := snapshotBytes(t, fb, 1)
	r1 := s.restored(t, Config{}, snap)
	_, err = state.GetValueState(r1, state.ValueStateDescriptor[int64]{Name: "counts", Codec: codec.Int[int64]{}})
	wantRefused(err, "restored with another codec")
	if !errors.Is(err, state.ErrIncompatibleState) {
		t.Fatalf("restored with other codec: %v, want ErrIncompatibleState", err)
	}
	// Restored with a codec that cannot decode the data: refused when
	// registering or at the latest when read.
	r2 := s.restored(t, Config{}, snap)
	h, err := state.GetValueState(r2, state.ValueStateDescriptor[int64]{Name: "counts", Codec: FlakyCodec{Fail: true}})
	if err == nil {
		setKey(r2, "a")
		_, _, err = h.Value()
	}
	wantRefused(err, "restored data the codec cannot decode")
}

func (s *suite) testCorruptSnapshot(t *testing.T) {
	b := s.backend(t, Config{})
	fill(t, b, 100)
	snap := snapshotBytes(t, b, 1)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"flipped byte", func() []byte { c := slices.Clone(snap); c[len(c)/2] ^= 0x40; return c }()},
		{"truncated", snap[:len(snap)-10]},
		{"empty", nil},
		{"not a snapshot", []byte("hello, world, this is not a snapshot")},
	} {
		r := s.backend(t, Config{})
		err := r.Restore(bytes.NewReader(tc.data))
		if !errors.Is(err, state.ErrCorruptSnapshot) {
			t.Errorf("%s: Restore = %v, want ErrCorruptSnapshot", tc.name, err)
		}
	}
	// Another max parallelism is refused.
	r := s.backend(t, Config{MaxParallelism: 64})
	if err := r.Restore(bytes.NewReader(snap)); !errors.Is(err, state.ErrRestore) {
		t.Errorf("other max parallelism: %v, want ErrRestore", err)
	}
	// The same key groups from two snapshots are refused.
	r = s.backend(t, Config{})
	if err := r.Restore(bytes.NewReader(snap), bytes.NewReader(snap)); !errors.Is(err, state.ErrRestore) {
		t.Errorf("key groups in two snapshots: %v, want ErrRestore", err)
	}
}
