package bench

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// stateCounter counts records per key in keyed ValueState, so the state
// backend and its checkpoints are on the path.
type stateCounter struct{ count state.ValueState[int64] }

func (c *stateCounter) Open(ctx *sluice.OperatorContext) error {
	var err error
	c.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (c *stateCounter) ProcessElement(_ *sluice.KeyedContext[int64], _ source.Record, out sluice.Collector[int64]) error {
	n, _, err := c.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := c.count.Update(n); err != nil {
		return err
	}
	out.Collect(n)
	return nil
}

// BenchmarkKeyedStateCount is BenchmarkKeyedCount with the count in keyed
// state, on the heap and the RocksDB backend (incremental checkpoints; with
// the default Go write buffer, and with the value state in RocksDB's own
// hash memtable, updated in place), over 1M keys, with an
// aligned checkpoint every second: the job-level figure of a
// read-modify-write per record, checkpoint pauses included.
func BenchmarkKeyedStateCount(b *testing.B) {
	const keys = 1 << 20
	b.Run("backend=heap", func(b *testing.B) {
		keyedCountWith(b, keys, &stateCounter{}, sluice.WithCheckpointing(time.Second, b.TempDir()))
	})
	b.Run("backend=rocksdb", func(b *testing.B) {
		keyedCountWith(b, keys, &stateCounter{}, sluice.WithCheckpointing(time.Second, b.TempDir()),
			sluice.WithStateBackend(rocksdb.Factory(b.TempDir(), rocksdb.Options{})))
	})
	b.Run("backend=rocksdb-native", func(b *testing.B) {
		keyedCountWith(b, keys, &stateCounter{}, sluice.WithCheckpointing(time.Second, b.TempDir()),
			sluice.WithStateBackend(rocksdb.Factory(b.TempDir(), rocksdb.Options{NativeMemtable: true})))
	})
}
