// Command datagen is the first example to run: a bounded datagen source
// feeds a keyed running count (parallelism 2), and the job prints what it
// computed, its throughput and each task's busy, idle and backpressured
// time.
//
//	go run ./examples/datagen -records 2000000 -keys 10000
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// Count is the running count of one key.
type Count struct {
	Key   int64
	Count int64
}

// countPerKey keeps a count per key and emits the new count of the key of
// every record.
type countPerKey struct {
	counts map[int64]int64
}

func (c *countPerKey) ProcessElement(ctx *sluice.KeyedContext[int64], r source.Record, out sluice.Collector[Count]) error {
	if c.counts == nil {
		c.counts = make(map[int64]int64)
	}
	n := c.counts[r.Key] + 1
	c.counts[r.Key] = n
	out.Collect(Count{Key: r.Key, Count: n})
	return nil
}

// latest is a sink that keeps the highest count seen per key.
type latest struct {
	mu     sync.Mutex
	counts map[int64]int64
}

func (l *latest) NewWriter(sink.WriterContext) (sink.Writer[Count], error) { return l, nil }
func (l *latest) Write(c Count, _ int64) error {
	l.mu.Lock()
	if c.Count > l.counts[c.Key] {
		l.counts[c.Key] = c.Count
	}
	l.mu.Unlock()
	return nil
}
func (l *latest) Flush(bool) error { return nil }
func (l *latest) Close() error     { return nil }

func main() {
	records := flag.Int64("records", 2_000_000, "records to generate")
	keys := flag.Int("keys", 10_000, "distinct keys")
	size := flag.Int("size", 100, "payload bytes per record")
	par := flag.Int("parallelism", 2, "parallelism of every operator")
	flag.Parse()

	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	env := sluice.NewEnvironment(sluice.WithParallelism(*par), sluice.WithJobName("datagen-count"))
	gen := source.NewDatagen(source.RandomRecords(42, *size, *keys), source.DatagenCount(*records))
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "datagen",
		sluice.WithCodec[source.Record](source.RecordCodec{}))
	counts := sluice.Process(sluice.KeyBy(recs, func(r source.Record) int64 { return r.Key }),
		sluice.KeyedProcessFunction[int64, source.Record, Count](&countPerKey{}), sluice.Name("count-per-key"))
	out := &latest{counts: map[int64]int64{}}
	sluice.SinkTo(counts, sink.Sink[Count](out), sluice.Name("latest-count"))

	start := time.Now()
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "datagen:", err)
		os.Exit(1)
	}
	err = job.Wait()
	elapsed := time.Since(start)
	if err != nil {
		fmt.Fprintln(os.Stderr, "datagen: job failed:", err)
		os.Exit(1)
	}

	type kc struct{ key, n int64 }
	var all []kc
	var total int64
	for k, n := range out.counts {
		all = append(all, kc{k, n})
		total += n
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].key < all[j].key })
	fmt.Printf("counted %d records over %d keys in %v (%.2f million records/s)\n",
		total, len(all), elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds()/1e6)
	fmt.Println("top keys:")
	for i := 0; i < len(all) && i < 5; i++ {
		fmt.Printf("  key %-6d count %d\n", all[i].key, all[i].n)
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "task\tsub\trecords in\tbusy\tidle\tbackpressured")
	for _, m := range job.Metrics() {
		fmt.Fprintf(w, "%s\t%d\t%d\t%.0f%%\t%.0f%%\t%.0f%%\n", m.Vertex, m.Subtask, m.RecordsIn,
			100*m.BusyRatio(), 100*m.IdleRatio(), 100*m.BackPressuredRatio())
	}
	w.Flush()
	if total != *records {
		fmt.Fprintf(os.Stderr, "datagen: counted %d records, generated %d\n", total, *records)
		os.Exit(1)
	}
}
