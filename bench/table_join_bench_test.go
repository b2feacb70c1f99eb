package bench

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
	"github.com/sluicehq/sluice/table"
)

// tableKeys is the size of the benchmarks' table.
const tableKeys = 1 << 20

// lookup is a record of the joined stream: an id and the table key it
// looks up.
type lookup struct {
	ID, Key int64
}

// BenchmarkStreamTableJoin is a stream-table join with a table of 1 M keys
// on RocksDB (incremental checkpoints every second), parallelism 2: the
// table's 1 M upserts and b.N stream records (each looking up a key,
// spread over the table) go through table.StreamLeftJoin, and through the
// same join hand-written as a keyed co-process (a value state per key).
// records/s counts both inputs' records.
//
//	go test -run '^$' -bench StreamTableJoin -benchtime 2000000x ./bench/
func BenchmarkStreamTableJoin(b *testing.B) {
	b.Run("join=table", func(b *testing.B) {
		streamTableJoin(b, func(s *sluice.Stream[lookup], t *sluice.Stream[table.Change[int64, int64]]) *sluice.Stream[int64] {
			return table.StreamLeftJoin(s, func(l lookup) int64 { return l.Key }, table.FromChangelog(t),
				func(l lookup, v *int64) (int64, error) {
					if v == nil {
						return -1, nil
					}
					return *v, nil
				}, sluice.UID("join"))
		})
	})
	b.Run("join=keyed-coprocess", func(b *testing.B) {
		streamTableJoin(b, func(s *sluice.Stream[lookup], t *sluice.Stream[table.Change[int64, int64]]) *sluice.Stream[int64] {
			return sluice.KeyedCoProcess(sluice.ConnectKeyed(
				sluice.KeyBy(s, func(l lookup) int64 { return l.Key }),
				sluice.KeyBy(t, func(c table.Change[int64, int64]) int64 { return c.Key })),
				sluice.KeyedCoProcessFunction[int64, lookup, table.Change[int64, int64], int64](&handJoin{}), sluice.UID("join"))
		})
	})
}

func streamTableJoin(b *testing.B, join func(*sluice.Stream[lookup], *sluice.Stream[table.Change[int64, int64]]) *sluice.Stream[int64]) {
	b.ReportAllocs()
	env := sluice.NewEnvironment(sluice.WithParallelism(2), quiet,
		sluice.WithCheckpointing(time.Second, b.TempDir()),
		sluice.WithStateBackend(rocksdb.Factory(b.TempDir(), rocksdb.Options{})))
	changes := sluice.FromSource(env, source.NewDatagen(func(i int64) table.Change[int64, int64] { return table.Upsert(i, 2*i) },
		source.DatagenCount(tableKeys)), sluice.NoWatermarks[table.Change[int64, int64]](), "table")
	stream := sluice.FromSource(env, source.NewDatagen(func(i int64) lookup { return lookup{ID: i, Key: i * 7919 % tableKeys} },
		source.DatagenCount(int64(b.N))), sluice.NoWatermarks[lookup](), "stream")
	d := sink.NewDiscard[int64]()
	sluice.SinkTo(join(stream, changes), d)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	if err := env.Execute(ctx); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	if got := d.Count(); got != int64(b.N) {
		b.Fatalf("joined %d records, want %d", got, b.N)
	}
	b.ReportMetric(float64(int64(b.N)+tableKeys)/el.Seconds(), "records/s")
}

// handJoin is the stream-table left join as a user writes it by hand.
type handJoin struct {
	value state.ValueState[int64]
}

func (h *handJoin) Open(ctx *sluice.OperatorContext) error {
	var err error
	h.value, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "table"})
	return err
}

func (h *handJoin) ProcessElement1(_ *sluice.KeyedContext[int64], _ lookup, out sluice.Collector[int64]) error {
	v, ok, err := h.value.Value()
	if err != nil {
		return err
	}
	if !ok {
		v = -1
	}
	out.Collect(v)
	return nil
}

func (h *handJoin) ProcessElement2(_ *sluice.KeyedContext[int64], c table.Change[int64, int64], _ sluice.Collector[int64]) error {
	if c.Delete {
		return h.value.Clear()
	}
	return h.value.Update(c.Value)
}
