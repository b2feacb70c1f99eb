package bench

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// BenchmarkKeyedStateCount is BenchmarkKeyedCount with the count in keyed
// state (the test job's CountPerKey), on the heap and the RocksDB backend
// (incremental checkpoints; with the default Go write buffer, and with the
// value state in RocksDB's own hash memtable, updated in place), over 1M
// keys, with an aligned checkpoint every second: the job-level figure of a
// read-modify-write per record, checkpoint pauses included.
func BenchmarkKeyedStateCount(b *testing.B) {
	const keys = 1 << 20
	b.Run("backend=heap", func(b *testing.B) {
		keyedCountWith(b, keys, testjob.CountPerKey(0), sluice.WithCheckpointing(time.Second, b.TempDir()))
	})
	b.Run("backend=rocksdb", func(b *testing.B) {
		keyedCountWith(b, keys, testjob.CountPerKey(0), sluice.WithCheckpointing(time.Second, b.TempDir()),
			sluice.WithStateBackend(rocksdb.Factory(b.TempDir(), rocksdb.Options{})))
	})
	b.Run("backend=rocksdb-native", func(b *testing.B) {
		keyedCountWith(b, keys, testjob.CountPerKey(0), sluice.WithCheckpointing(time.Second, b.TempDir()),
			sluice.WithStateBackend(rocksdb.Factory(b.TempDir(), rocksdb.Options{NativeMemtable: true})))
	})
}
