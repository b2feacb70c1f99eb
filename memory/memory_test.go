package memory

import (
	"errors"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

const mib = 1 << 20

// Two shares as a program that imports connectors has (the Kafka
// source's and sink's defaults).
var (
	testIn  = RegisterShare("test.in", "A connector's fetched records.", 0.1)
	testOut = RegisterShare("test.out", "A connector's producer buffers.", 0.05)
)

func near(a, b int64) bool { return a-b <= 2 && b-a <= 2 }

func TestBudgetSplitsTheProcess(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		// Worked out by hand from Flink's rules, in MiB.
		overhead, managed, network, source, sink, heap, goLimit float64
	}{
		{"1000m, defaults", Config{ProcessSize: 1000 * mib},
			100, 360, 90, 90, 45, 315, 1000 - 100 - 270},
		{"128m: overhead and network at their minimums", Config{ProcessSize: 128 * mib, NetworkFraction: 0.01},
			32, 38.4, 4, 9.6, 4.8, 96 - 38.4 - 4 - 9.6 - 4.8, 128 - 32 - 28.8},
		{"managed size and no network minimum", Config{ProcessSize: 400 * mib, ManagedSize: 10 * mib, NetworkMin: ZeroSize, NetworkFraction: 0.01},
			40, 10, 3.6, 36, 18, 360 - 10 - 3.6 - 36 - 18, 400 - 40 - 7.5},
		{"no managed memory, overhead capped", Config{ProcessSize: 20000 * mib, ManagedSize: ZeroSize, OverheadMax: 500 * mib},
			500, 0, 1024, 1950, 975, 19500 - 1024 - 1950 - 975, 20000 - 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.c.Budget()
			if err != nil {
				t.Fatal(err)
			}
			m := func(v float64) int64 { return int64(v * mib) }
			for _, f := range []struct {
				name      string
				got, want int64
			}{
				{"overhead", b.Overhead, m(tc.overhead)}, {"managed", b.Managed, m(tc.managed)},
				{"network", b.Network, m(tc.network)}, {"source share", testIn.Of(b), m(tc.source)},
				{"sink share", testOut.Of(b), m(tc.sink)}, {"task heap", b.TaskHeap, m(tc.heap)},
				{"go limit", b.GoLimit, m(tc.goLimit)},
			} {
				if !near(f.got, f.want) {
					t.Errorf("%s = %d, want %d", f.name, f.got, f.want)
				}
			}
			if sum := b.Overhead + b.Managed + b.Network + testIn.Of(b) + testOut.Of(b) + b.TaskHeap; sum != b.Process {
				t.Errorf("parts sum to %d, process %d", sum, b.Process)
			}
			if !b.Explicit {
				t.Error("an explicit process size is not Explicit")
			}
		})
	}
}

func TestBudgetDefault(t *testing.T) {
	b, err := Config{}.Budget()
	if err != nil {
		t.Fatal(err)
	}
	if b.Explicit || b.Process != 256*mib {
		t.Fatalf("default budget %+v, want 256 MiB, not explicit", b)
	}
	if b.Overhead != 32*mib { // 25.6 MiB raised to the minimum
		t.Errorf("overhead %d", b.Overhead)
	}
}

func TestBudgetRefuses(t *testing.T) {
	for _, c := range []Config{
		{ManagedFraction: 1},
		{NetworkFraction: -0.1},
		{ProcessSize: -5},
		{ProcessSize: 30 * mib}, // all overhead
		{ProcessSize: 100 * mib, ManagedFraction: 0.9, NetworkFraction: 0.2},
		{NetworkMin: 2 << 30},
		{OverheadMin: -7},
		{Fractions: map[string]float64{"test.in": 1}},
		{Fractions: map[string]float64{"test.out": -0.5}},
		{Fractions: map[string]float64{"nobody.declares": 0.1}},
		{ProcessSize: 100 * mib, Fractions: map[string]float64{"test.in": 0.5, "test.out": 0.3}},
	} {
		if b, err := c.Budget(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: budget %+v, err %v; want ErrInvalid", c, b, err)
		}
	}
}

func TestRocksDBShare(t *testing.T) {
	b := Budget{Managed: 80 * mib}
	// Native 60 MiB: 30 of memtables over 3 backends, 30 of cache; Go
	// part 20 MiB over 3 backends, two buffers and a read cache of a
	// quarter of one each.
	d := b.RocksDBShare(3, 0.5)
	if d.BlockCache != 30*mib || d.DBWriteBuffer != 10*mib || d.WriteBuffer != 20*mib/3*4/9 {
		t.Errorf("rocksdb share %+v", d)
	}
	if d := b.RocksDBShare(1, 0.8); d.BlockCache != 12*mib || d.DBWriteBuffer != 48*mib || d.WriteBuffer != 20*mib*4/9 {
		t.Errorf("rocksdb share with ratio 0.8 %+v", d)
	}
}

func TestApplyGoLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	explicit, _ := Config{ProcessSize: 1 << 30}.Budget()
	implicit, _ := Config{}.Budget()
	none := func(string) string { return "" }
	// The default budget's limit is derived from it and floats above the
	// live heap (TestGoLimitFloatsAboveLiveHeap).
	if got := ApplyGoLimit(implicit, none); !implicit.GoLimitFloats || got != implicit.GoLimit || got <= 0 || debug.SetMemoryLimit(-1) < got {
		t.Errorf("a default budget set the limit %d (budget's %d, floats %v), runtime's %d", got, implicit.GoLimit, implicit.GoLimitFloats, debug.SetMemoryLimit(-1))
	}
	if explicit.GoLimitFloats {
		t.Error("an explicit process size's limit floats")
	}
	debug.SetMemoryLimit(prev)
	if own, _ := (Config{GoLimit: 200 * mib}).Budget(); own.GoLimit != 200*mib {
		t.Errorf("taskmanager.memory.go.limit 200m without a process size: limit %d", own.GoLimit)
	}
	debug.SetMemoryLimit(prev)
	off, _ := Config{GoLimit: ZeroSize}.Budget()
	if got := ApplyGoLimit(off, none); got != -1 || debug.SetMemoryLimit(-1) != prev {
		t.Errorf("taskmanager.memory.go.limit 0 set the limit (%d)", got)
	}
	if own, _ := (Config{ProcessSize: 1 << 30, GoLimit: 300 * mib}).Budget(); own.GoLimit != 300*mib {
		t.Errorf("taskmanager.memory.go.limit 300m: limit %d", own.GoLimit)
	}
	if got := ApplyGoLimit(explicit, func(k string) string {
		if k == "GOMEMLIMIT" {
			return "1GiB"
		}
		return ""
	}); got != -1 || debug.SetMemoryLimit(-1) != prev {
		t.Errorf("GOMEMLIMIT set, yet the limit was set (%d)", got)
	}
	if got := ApplyGoLimit(explicit, none); got != explicit.GoLimit || debug.SetMemoryLimit(-1) != explicit.GoLimit {
		t.Errorf("limit %d, runtime's %d, want %d", got, debug.SetMemoryLimit(-1), explicit.GoLimit)
	}
}

// TestGoLimitFloatsAboveLiveHeap: the default budget's limit rises to
// twice a live heap that outgrows it, and comes back down when the heap
// is freed; an explicit budget's limit stays where it was set.
func TestGoLimitFloatsAboveLiveHeap(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	defer floatGoLimit(0)
	none := func(string) string { return "" }
	const base = 16 * mib
	// awaitLimit collects until the runtime's limit satisfies ok (the
	// floor moves after a collection, on the cleanup goroutine).
	awaitLimit := func(what string, ok func(int64) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(debug.SetMemoryLimit(-1)) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the limit is %d", what, debug.SetMemoryLimit(-1))
			}
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	if got := ApplyGoLimit(Budget{GoLimit: base, GoLimitFloats: true}, none); got != base {
		t.Fatalf("applied %d, want %d", got, base)
	}
	live := make([][]byte, 64) // 64 MiB live, four times the base
	for i := range live {
		live[i] = make([]byte, mib)
	}
	awaitLimit("64 MiB live", func(l int64) bool { return l >= LiveHeapHeadroom*64*mib })
	runtime.KeepAlive(live)
	live = nil
	awaitLimit("the heap freed", func(l int64) bool { return l < LiveHeapHeadroom*64*mib })

	// An explicit limit is the user's bound: it does not move.
	if got := ApplyGoLimit(Budget{GoLimit: base}, none); got != base {
		t.Fatalf("applied %d, want %d", got, base)
	}
	live = make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, mib)
	}
	for range 5 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if l := debug.SetMemoryLimit(-1); l != base {
		t.Errorf("an explicit limit moved to %d, want %d", l, base)
	}
	runtime.KeepAlive(live)
}

// TestGCPercent: 400 with an explicit process size, off under the default
// budget's floating limit (Go's 100 when $GOMEMLIMIT replaces it), 100
// with only a Go limit set, the key's value when set; GOGC wins; off needs
// a limit.
func TestGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	explicit, _ := Config{ProcessSize: 1 << 30}.Budget()
	implicit, _ := Config{}.Budget()
	own, _ := Config{GCPercent: 250}.Budget()
	limited, _ := Config{GoLimit: 100 * mib}.Budget()
	if explicit.GCPercent != DefaultGCPercent || implicit.GCPercent != -1 || own.GCPercent != 250 || limited.GCPercent != 100 {
		t.Errorf("gc percents %d %d %d %d, want %d -1 250 100", explicit.GCPercent, implicit.GCPercent, own.GCPercent, limited.GCPercent, DefaultGCPercent)
	}
	if !implicit.GoLimitFloats || implicit.GoLimit != 32*mib || implicit.TaskHeap <= implicit.GoLimit {
		t.Errorf("the default budget's limit %d (floats %v), want DefaultGoLimit(2) %d (32 MiB) below its task heap %d, floating",
			implicit.GoLimit, implicit.GoLimitFloats, DefaultGoLimit(2), implicit.TaskHeap)
	}
	// A default budget whose task heap is smaller (most of it managed)
	// keeps the limit within it.
	if small, err := (Config{ManagedFraction: 0.65}).Budget(); err != nil || small.GoLimit != small.TaskHeap || small.GoLimit >= DefaultGoLimit(0) || !small.GoLimitFloats {
		t.Errorf("a default budget of task heap %d: limit %d (floats %v, err %v), want the task heap", small.TaskHeap, small.GoLimit, small.GoLimitFloats, err)
	}
	none := func(string) string { return "" }
	if got := ApplyGCPercent(implicit, func(k string) string {
		if k == "GOMEMLIMIT" {
			return "1GiB"
		}
		return ""
	}); got != 100 || debug.SetGCPercent(100) != 100 {
		t.Errorf("the default budget with GOMEMLIMIT set: percent %d, want 100", got)
	}
	if got := ApplyGCPercent(implicit, none); got != -1 || debug.SetGCPercent(100) != -1 {
		t.Errorf("the default budget: percent %d, want off", got)
	}
	if got := ApplyGCPercent(explicit, func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	}); got != 0 || debug.SetGCPercent(100) != 100 {
		t.Errorf("GOGC set, yet the percent was set (%d)", got)
	}
	if got := ApplyGCPercent(explicit, none); got != DefaultGCPercent || debug.SetGCPercent(100) != DefaultGCPercent {
		t.Errorf("applied %d, want %d", got, DefaultGCPercent)
	}
	if _, err := (Config{GCPercent: -1, GoLimit: ZeroSize}).Budget(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "taskmanager.memory.go.gc-percent") {
		t.Errorf("gc off without a limit: %v", err)
	}
}

func TestInstall(t *testing.T) {
	b, _ := Config{ProcessSize: 512 * mib}.Budget()
	old := Install(b)
	defer Install(old)
	if !reflect.DeepEqual(Current(), b) {
		t.Errorf("Current %+v, want %+v", Current(), b)
	}
}

// TestConfigureGoKeys reads taskmanager.memory.go.limit and
// .gc-percent, 0 as no limit, and refuses a percent of 0 naming the key.
func TestConfigureGoKeys(t *testing.T) {
	conf := config.New()
	for k, v := range map[string]string{"taskmanager.memory.go.limit": "0", "taskmanager.memory.go.gc-percent": "200"} {
		if err := conf.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var c Config
	if err := c.Configure(conf); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Budget(); err != nil || b.GoLimit != 0 || b.GCPercent != 200 {
		t.Fatalf("limit %d percent %d (%v), want none and 200", b.GoLimit, b.GCPercent, err)
	}
	if err := conf.Set("taskmanager.memory.go.gc-percent", "0"); err != nil {
		t.Fatal(err)
	}
	if err := c.Configure(conf); err == nil || !strings.Contains(err.Error(), "taskmanager.memory.go.gc-percent") {
		t.Errorf("a percent of 0: %v, want an error naming the key", err)
	}
}

// A connector's share is its fraction of the memory past the overhead,
// read from taskmanager.memory.<name>.fraction once declared; 0 there is
// none, not the default.
func TestConnectorShares(t *testing.T) {
	conf := config.New()
	for k, v := range map[string]string{"taskmanager.memory.process.size": "1000m", ShareKey("test.in"): "0.2", ShareKey("test.out"): "0"} {
		if err := conf.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var c Config
	if err := c.Configure(conf); err != nil {
		t.Fatal(err)
	}
	if c.Fractions["test.in"] != 0.2 || c.Fractions["test.out"] != math.SmallestNonzeroFloat64 {
		t.Fatalf("fractions %v", c.Fractions)
	}
	b, err := c.Budget()
	if err != nil {
		t.Fatal(err)
	}
	if got := testIn.Of(b); !near(got, 180*mib) { // 0.2 of 900 MiB
		t.Errorf("%s share %d, want 180 MiB", testIn.Name(), got)
	}
	if got := testOut.Of(b); got != 0 {
		t.Errorf("%s share %d, want none", testOut.Name(), got)
	}
	err = conf.Set(ShareKey("test.in"), "2")
	if err == nil {
		err = c.Configure(conf)
	}
	if err == nil || !strings.Contains(err.Error(), ShareKey("test.in")) {
		t.Errorf("a fraction of 2: %v, want an error naming the key", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a share declared twice did not panic")
		}
	}()
	RegisterShare("test.in", "again", 0.1)
}

// The default budget's Go limit follows the process's task slots, as a
// Flink TaskManager's memory follows taskmanager.numberOfTaskSlots: a
// one-slot cluster worker runs a part of what a process of four runs.
// An explicit limit or process size does not.
func TestDefaultGoLimitFollowsSlots(t *testing.T) {
	for _, c := range []struct {
		slots int
		want  int64
	}{{0, 32 * mib}, {1, 28 * mib}, {2, 32 * mib}, {4, 40 * mib}} {
		b, err := Config{Slots: c.slots}.Budget()
		if err != nil {
			t.Fatal(err)
		}
		if b.GoLimit != c.want || !b.GoLimitFloats {
			t.Errorf("%d slots: limit %d MiB (floats %v), want %d MiB floating", c.slots, b.GoLimit/mib, b.GoLimitFloats, c.want/mib)
		}
	}
	// Keyed state on the heap: 7 MiB a slot, the room RocksDB's native
	// memory would take; an explicit limit or process size is the same
	// with it as without.
	for _, c := range []struct {
		slots int
		want  int64
	}{{0, 38 * mib}, {1, 31 * mib}, {2, 38 * mib}, {4, 52 * mib}} {
		b, err := Config{Slots: c.slots, HeapState: true}.Budget()
		if err != nil {
			t.Fatal(err)
		}
		if b.GoLimit != c.want || !b.GoLimitFloats || b.GoLimit != min(b.TaskHeap, DefaultHeapGoLimit(c.slots)) {
			t.Errorf("%d slots, heap state: limit %d MiB (floats %v), want %d MiB floating", c.slots, b.GoLimit/mib, b.GoLimitFloats, c.want/mib)
		}
	}
	// A program that links no other backend: 11 MiB a slot, the room of
	// RocksDB's library pages too; HeapOnlyProgram without HeapState (a
	// RocksDB job's, a worker's) changes nothing.
	for _, c := range []struct {
		slots int
		want  int64
	}{{0, 46 * mib}, {1, 35 * mib}, {2, 46 * mib}, {4, 68 * mib}} {
		b, err := Config{Slots: c.slots, HeapState: true, HeapOnlyProgram: true}.Budget()
		if err != nil {
			t.Fatal(err)
		}
		if b.GoLimit != c.want || !b.GoLimitFloats || b.GoLimit != min(b.TaskHeap, DefaultHeapOnlyGoLimit(c.slots)) {
			t.Errorf("%d slots, heap state, heap-only program: limit %d MiB (floats %v), want %d MiB floating", c.slots, b.GoLimit/mib, b.GoLimitFloats, c.want/mib)
		}
		if b, _ := (Config{Slots: c.slots, HeapOnlyProgram: true}).Budget(); b.GoLimit != DefaultGoLimit(c.slots) {
			t.Errorf("%d slots, heap-only program, native state: limit %d MiB, want %d", c.slots, b.GoLimit/mib, DefaultGoLimit(c.slots)/mib)
		}
	}
	if b, _ := (Config{Slots: 1, HeapState: true, HeapOnlyProgram: true, ProcessSize: 1 << 30}).Budget(); b.GoLimit != explicitLimit(t) {
		t.Errorf("one heap slot of a heap-only program with an explicit process size: limit %d, want %d as without", b.GoLimit, explicitLimit(t))
	}
	if b, _ := (Config{Slots: 1, HeapState: true, GoLimit: 100 * mib}).Budget(); b.GoLimit != 100*mib {
		t.Errorf("one heap slot with taskmanager.memory.go.limit 100m: limit %d", b.GoLimit)
	}
	if b, _ := (Config{Slots: 1, HeapState: true, ProcessSize: 1 << 30}).Budget(); b.GoLimit != explicitLimit(t) {
		t.Errorf("one heap slot of an explicit process size: limit %d, want %d as without", b.GoLimit, explicitLimit(t))
	}
	// Many slots: no more than the default budget's task heap.
	if b, _ := (Config{Slots: 1000}).Budget(); b.GoLimit != b.TaskHeap {
		t.Errorf("1000 slots: limit %d, want the task heap %d", b.GoLimit, b.TaskHeap)
	}
	if b, _ := (Config{Slots: 1, GoLimit: 100 * mib}).Budget(); b.GoLimit != 100*mib {
		t.Errorf("one slot with taskmanager.memory.go.limit 100m: limit %d", b.GoLimit)
	}
	explicit, _ := Config{ProcessSize: 1 << 30}.Budget()
	if b, _ := (Config{Slots: 1, ProcessSize: 1 << 30}).Budget(); b.GoLimit != explicit.GoLimit {
		t.Errorf("one slot of an explicit process size: limit %d, want %d as without slots", b.GoLimit, explicit.GoLimit)
	}
}

// explicitLimit is the Go limit of a 1 GiB process.
func explicitLimit(t *testing.T) int64 {
	b, err := Config{ProcessSize: 1 << 30}.Budget()
	if err != nil {
		t.Fatal(err)
	}
	return b.GoLimit
}

// TestFloatingLimitDamped: the floating limit follows the lesser of the
// last two collections' live heaps, so one collection reading high (a
// mark phase stretched by the machine's load) does not float it, two in
// a row do, and a heap that shrinks lowers it at once.
func TestFloatingLimitDamped(t *testing.T) {
	const base = 32 * mib
	for _, c := range []struct {
		name           string
		live, prevLive int64
		want           int64
	}{
		{"first collection, small heap", 10 * mib, -1, base},
		{"first collection, large heap", 20 * mib, -1, 40 * mib},
		{"steady small heap", 15 * mib, 16 * mib, base},
		{"one collection reads high", 29 * mib, 15 * mib, base},
		{"the next reads normal again", 15 * mib, 29 * mib, base},
		{"two in a row read high", 29 * mib, 27 * mib, 54 * mib},
		{"the heap shrinks", 10 * mib, 29 * mib, base},
	} {
		if got := floatingLimit(base, c.live, c.prevLive); got != c.want {
			t.Errorf("%s: live %d MiB after %d MiB: limit %d MiB, want %d MiB", c.name, c.live/mib, c.prevLive/mib, got/mib, c.want/mib)
		}
	}
}
