package rocksdb

import (
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/statetest"
)

// countEntries counts the stored entries of a state, expired or not.
func countEntries(t testing.TB, b *Backend, name string) int {
	t.Helper()
	ro := newIterOptions()
	defer ro.Destroy()
	it := b.db.NewIteratorCF(ro, b.states[name].cf)
	defer it.Close()
	n := 0
	for it.SeekToFirst(); it.Valid(); it.Next() {
		n++
	}
	check(t, it.Err())
	return n
}

// TestTTLCompactionFilter: compactions drop expired values, map entries and
// lists whose elements have all expired, and keep the rest.
func TestTTLCompactionFilter(t *testing.T) {
	clk := statetest.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	b := newTestBackend(t, Options{Clock: clk})
	closeLater(t, b)
	ttl := state.TTLConfig{TTL: 10 * time.Second}
	v, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "v", TTL: ttl})
	check(t, err)
	l, err := state.GetListState(b, state.ListStateDescriptor[int64]{Name: "l", TTL: ttl})
	check(t, err)
	m, err := state.GetMapState(b, state.MapStateDescriptor[string, int64]{Name: "m", TTL: ttl})
	check(t, err)
	for i := range 100 {
		setKey(b, keyName(i))
		check(t, v.Update(int64(i)))
		check(t, l.Add(int64(i)))
		check(t, m.Put("a", int64(i)))
	}
	clk.Advance(6 * time.Second)
	for i := range 10 { // rewritten later: live at the compaction
		setKey(b, keyName(i))
		check(t, v.Update(int64(i)))
		check(t, l.Add(int64(i))) // a second list entry, live
		check(t, m.Put("b", int64(i)))
	}
	clk.Advance(5 * time.Second) // the first writes expired
	check(t, b.drainAll())       // value states: from the write buffers into RocksDB
	for _, name := range []string{"v", "l", "m"} {
		b.db.CompactRangeCF(b.states[name].cf, grocksdb.Range{})
	}
	if n := countEntries(t, b, "v"); n != 10 {
		t.Errorf("value entries after compaction: %d, want 10", n)
	}
	if n := countEntries(t, b, "l"); n != 10 {
		t.Errorf("list entries after compaction: %d, want 10 (the live appends)", n)
	}
	if n := countEntries(t, b, "m"); n != 10 {
		t.Errorf("map entries after compaction: %d, want 10", n)
	}
	setKey(b, keyName(3))
	if got, err := l.Get(); err != nil || len(got) != 1 || got[0] != 3 {
		t.Fatalf("list of key 3 = %v %v, want [3]", got, err)
	}
	// After an incremental restore, the filter works on the restored
	// column families.
	stor := newDirStorage(t)
	h := checkpoint(t, b, 1, stor)
	r := newTestBackend(t, Options{Clock: clk})
	closeLater(t, r)
	check(t, r.RestoreIncremental([]*IncrementalHandle{h}, stor.download))
	clk.Advance(20 * time.Second)
	r.db.CompactRangeCF(r.states["v"].cf, grocksdb.Range{})
	if n := countEntries(t, r, "v"); n != 0 {
		t.Errorf("restored value entries after expiry and compaction: %d, want 0", n)
	}
	// A state without TTL keeps everything.
	p, err := state.GetValueState(b, state.ValueStateDescriptor[int64]{Name: "plain"})
	check(t, err)
	check(t, p.Update(1))
	check(t, b.drainAll())
	clk.Advance(time.Hour)
	b.db.CompactRangeCF(b.states["plain"].cf, grocksdb.Range{})
	if n := countEntries(t, b, "plain"); n != 1 {
		t.Fatalf("entries of a state without TTL after compaction: %d", n)
	}
}
