package rocksdb

import (
	"sync/atomic"

	"github.com/linxGnu/grocksdb"

	"github.com/sluicehq/sluice/state"
)

// ttlFilter is the compaction filter of a TTL state's column family, as
// Flink's: compactions drop entries that have expired (values, map
// entries, and list entries all of whose elements have expired), so that
// expired state is cleaned up even when it is never read again. Lists
// with some live elements are cleaned when read.
//
// RocksDB calls it from its compaction threads; the state's meta (whose
// TTL a re-registration may change) and clock come through an atomic
// pointer, nil once the database is closed.
type ttlFilter struct {
	cfg atomic.Pointer[ttlFilterConfig]
}

type ttlFilterConfig struct {
	meta  state.StateMeta
	clock state.Clock
}

func (f *ttlFilter) set(m state.StateMeta, clock state.Clock) {
	f.cfg.Store(&ttlFilterConfig{meta: m, clock: clock})
}

// Filter implements grocksdb.CompactionFilter.
func (f *ttlFilter) Filter(_ int, _, val []byte) (remove bool, newVal []byte) {
	c := f.cfg.Load()
	if c == nil || !c.meta.TTL.Enabled() {
		return false, nil
	}
	return !entryLive(c.meta, val, c.clock.Now().UnixMilli()), nil
}

// Name implements grocksdb.CompactionFilter.
func (f *ttlFilter) Name() string { return "sluice.TTLCompactionFilter" }

// SetIgnoreSnapshots implements grocksdb.CompactionFilter (a no-op since
// RocksDB 6.0).
func (f *ttlFilter) SetIgnoreSnapshots(bool) {}

// Destroy implements grocksdb.CompactionFilter.
func (f *ttlFilter) Destroy() {}

var _ grocksdb.CompactionFilter = (*ttlFilter)(nil)
