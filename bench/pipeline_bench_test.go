package bench

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

var quiet = sluice.WithLogger(slog.New(slog.DiscardHandler))

// counter counts records per key in a plain Go map and emits the count.
type counter struct{ counts map[int64]int64 }

func (c *counter) ProcessElement(_ *sluice.KeyedContext[int64], r source.Record, out sluice.Collector[int64]) error {
	if c.counts == nil {
		c.counts = make(map[int64]int64, 1<<14)
	}
	n := c.counts[r.Key] + 1
	c.counts[r.Key] = n
	out.Collect(n)
	return nil
}

func run(b *testing.B, env *sluice.Environment, want int64, discard *sink.Discard[int64]) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	if err := env.Execute(ctx); err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	if got := discard.Count(); got != want {
		b.Fatalf("discard sink counted %d records, want %d", got, want)
	}
	b.ReportMetric(float64(want)/el.Seconds(), "records/s")
}

// BenchmarkKeyedCount is the runtime's first benchmark: datagen of 100-byte
// records over 10,000 keys -> keyBy -> running count in a Go map ->
// discard, parallelism 2. The checkpointed variant takes an aligned
// checkpoint every second: compare the two records/s figures.
func BenchmarkKeyedCount(b *testing.B) {
	b.Run("checkpoints=off", func(b *testing.B) { keyedCount(b) })
	b.Run("checkpoints=1s", func(b *testing.B) {
		keyedCount(b, sluice.WithCheckpointing(time.Second, b.TempDir()))
	})
}

func keyedCount(b *testing.B, opts ...sluice.Option) {
	keyedCountWith(b, 10_000, &counter{}, opts...)
}

// keyedCountWith runs datagen of 100-byte records over keys keys ->
// keyBy -> fn -> discard at parallelism 2, for b.N records.
func keyedCountWith(b *testing.B, keys int, fn sluice.KeyedProcessFunction[int64, source.Record, int64], opts ...sluice.Option) {
	b.ReportAllocs()
	env := sluice.NewEnvironment(append([]sluice.Option{sluice.WithParallelism(2), quiet}, opts...)...)
	gen := source.NewDatagen(source.RandomRecords(1, 100, keys), source.DatagenCount(int64(b.N)))
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "datagen",
		sluice.WithCodec[source.Record](source.RecordCodec{}))
	counts := sluice.Process[int64, source.Record, int64](
		sluice.KeyBy(recs, func(r source.Record) int64 { return r.Key }), fn, sluice.Name("count"))
	d := sink.NewDiscard[int64]()
	sluice.SinkTo(counts, d)
	run(b, env, int64(b.N), d)
}

// BenchmarkMapFilterChain is a chain of maps and filters on one core: no
// network, records pass as Go values.
func BenchmarkMapFilterChain(b *testing.B) {
	b.ReportAllocs()
	env := sluice.NewEnvironment(sluice.WithParallelism(1), quiet)
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(int64(b.N)))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "seq")
	s = sluice.Map(s, func(v int64) (int64, error) { return v * 3, nil })
	s = sluice.Filter(s, func(v int64) (bool, error) { return v >= 0, nil })
	s = sluice.Map(s, func(v int64) (int64, error) { return v + 1, nil })
	s = sluice.Filter(s, func(v int64) (bool, error) { return v != 0, nil })
	d := sink.NewDiscard[int64]()
	sluice.SinkTo(s, d)
	run(b, env, int64(b.N), d)
}

// BenchmarkExchange moves int64 records through one network exchange
// (rebalance, parallelism 1 -> 1): allocs/op is the allocation per record
// on the exchange path.
func BenchmarkExchange(b *testing.B) {
	b.ReportAllocs()
	env := sluice.NewEnvironment(sluice.WithParallelism(1), quiet)
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(int64(b.N)))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "seq")
	d := sink.NewDiscard[int64]()
	sluice.SinkTo(s.Rebalance(), d)
	run(b, env, int64(b.N), d)
}
