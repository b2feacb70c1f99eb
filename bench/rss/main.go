// Command rss measures that memory stays flat under backpressure: an
// unbounded datagen source (100-byte records) feeds, through a keyed
// exchange, a sink about 100 times slower than the source. It prints the
// process's resident memory every interval and a final table.
//
//	go run ./bench/rss -duration 60s
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// slowSink sleeps for a millisecond every `every` records: about
// every*1000 records/s, two orders of magnitude below the source.
type slowSink struct {
	every   int
	written atomic.Int64
}

type slowWriter struct {
	s *slowSink
	n int
}

func (s *slowSink) NewWriter(sink.WriterContext) (sink.Writer[source.Record], error) {
	return &slowWriter{s: s}, nil
}

func (w *slowWriter) Write(source.Record, int64) error {
	w.s.written.Add(1)
	if w.n++; w.n == w.s.every {
		w.n = 0
		time.Sleep(time.Millisecond)
	}
	return nil
}
func (w *slowWriter) Flush(bool) error { return nil }
func (w *slowWriter) Close() error     { return nil }

func rssKiB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var kib int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kib)
			return kib
		}
	}
	return -1
}

func main() {
	duration := flag.Duration("duration", 60*time.Second, "how long to run")
	interval := flag.Duration("interval", 10*time.Second, "how often to sample")
	every := flag.Int("every", 50, "the sink sleeps 1 ms every this many records")
	flag.Parse()

	env := sluice.NewEnvironment(sluice.WithParallelism(2), sluice.WithLogger(slog.New(slog.DiscardHandler)))
	gen := source.NewDatagen(source.RandomRecords(7, 100, 10_000))
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[source.Record](), "datagen",
		sluice.WithCodec[source.Record](source.RecordCodec{}))
	keyed := sluice.KeyBy(recs, func(r source.Record) int64 { return r.Key }).Stream()
	snk := &slowSink{every: *every}
	sluice.SinkTo(keyed, sink.Sink[source.Record](snk), sluice.Name("slow-sink"))

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rss:", err)
		os.Exit(1)
	}
	fmt.Printf("%8s %8s %12s %13s %21s\n", "elapsed", "RSS MiB", "Go heap MiB", "sink records", "source backpressured")
	start := time.Now()
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		bp := 0.0
		for _, m := range job.Metrics() {
			if m.Vertex == "datagen" {
				bp += m.BackPressuredRatio() / 2
			}
		}
		fmt.Printf("%8v %8.1f %12.1f %13d %20.0f%%\n", time.Since(start).Round(time.Second),
			float64(rssKiB())/1024, float64(ms.HeapInuse)/(1<<20), snk.written.Load(), 100*bp)
	}
	for {
		select {
		case <-tick.C:
			sample()
			continue
		case <-job.Done():
		}
		break
	}
	if err := job.Wait(); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "rss: job failed:", err)
		os.Exit(1)
	}
}
