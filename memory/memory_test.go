package memory

import (
	"errors"
	"runtime/debug"
	"testing"
)

const mib = 1 << 20

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
				{"network", b.Network, m(tc.network)}, {"kafka source", b.KafkaSource, m(tc.source)},
				{"kafka sink", b.KafkaSink, m(tc.sink)}, {"task heap", b.TaskHeap, m(tc.heap)},
				{"go limit", b.GoLimit, m(tc.goLimit)},
			} {
				if !near(f.got, f.want) {
					t.Errorf("%s = %d, want %d", f.name, f.got, f.want)
				}
			}
			if sum := b.Overhead + b.Managed + b.Network + b.KafkaSource + b.KafkaSink + b.TaskHeap; sum != b.Process {
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
	} {
		if b, err := c.Budget(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: budget %+v, err %v; want ErrInvalid", c, b, err)
		}
	}
}

func TestShares(t *testing.T) {
	b := Budget{KafkaSource: 64 * mib, KafkaSink: 16 * mib, Managed: 80 * mib}
	r := b.KafkaReaderShare(4) // 16 MiB each
	if r.MaxBufferedBytes != 8*mib || r.FetchMaxBytes != 512<<10 || r.FetchMaxPartitionBytes != 256<<10 || r.MaxBufferedRecords != 8*mib/RecordOverhead {
		t.Errorf("reader share %+v", r)
	}
	// A large share keeps franz-go's limits.
	if r := (Budget{KafkaSource: 1 << 40}).KafkaReaderShare(1); r.FetchMaxBytes != 50<<20 || r.FetchMaxPartitionBytes != 1<<20 {
		t.Errorf("large reader share %+v", r)
	}
	p := b.KafkaProducerShare(8) // 2 MiB each
	if p.MaxBufferedBytes != 2*mib || p.MaxBufferedRecords != 2*mib/RecordOverhead || p.BatchMaxBytes != 512<<10 {
		t.Errorf("producer share %+v", p)
	}
	// Native 60 MiB: 30 of memtables over 3 backends, 30 of cache; Go
	// part 20 MiB over 3 backends, two buffers each.
	d := b.RocksDBShare(3, 0.5)
	if d.BlockCache != 30*mib || d.DBWriteBuffer != 10*mib || d.WriteBuffer != 20*mib/3/2 {
		t.Errorf("rocksdb share %+v", d)
	}
	if d := b.RocksDBShare(1, 0.8); d.BlockCache != 12*mib || d.DBWriteBuffer != 48*mib || d.WriteBuffer != 10*mib {
		t.Errorf("rocksdb share with ratio 0.8 %+v", d)
	}
}

func TestApplyGoLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(prev)
	explicit, _ := Config{ProcessSize: 1 << 30}.Budget()
	implicit, _ := Config{}.Budget()
	none := func(string) string { return "" }
	if got := ApplyGoLimit(implicit, none); got != -1 || debug.SetMemoryLimit(-1) != prev {
		t.Errorf("a default budget set the limit (%d)", got)
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

func TestInstall(t *testing.T) {
	b, _ := Config{ProcessSize: 512 * mib}.Budget()
	old := Install(b)
	defer Install(old)
	if Current() != b {
		t.Errorf("Current %+v, want %+v", Current(), b)
	}
}
