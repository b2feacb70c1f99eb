// Command keyedcount runs the throughput job measured against Flink once
// and prints its records per second: datagen of 1 KiB strings ->
// keyBy(the 8-byte prefix) -> a running count in keyed value state (heap backend) ->
// discard, parallelism 2 (package bench's KeyedCountStrings). bench/flinkref
// is the same job on Flink's local mini-cluster, so the two can be timed
// side by side as whole processes:
//
//	go build -o /tmp/keyedcount ./bench/keyedcount
//	/usr/bin/time -v /tmp/keyedcount -records 30000000
//	(cd bench/flinkref && mvn -q package) && /usr/bin/time -v java -jar bench/flinkref/target/flinkref.jar -records 30000000
//
// -checkpoint-interval-ms N takes aligned checkpoints every N ms into a
// temporary directory (removed at the end), as the Flink job's flag does.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/bench"
)

func main() {
	records := flag.Int64("records", 30_000_000, "records to generate")
	parallelism := flag.Int("parallelism", 2, "parallelism of every operator")
	interval := flag.Int64("checkpoint-interval-ms", 0, "checkpoint interval in ms (0: no checkpoints)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the job to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "keyedcount:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "keyedcount: cpu profile:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := run(*records, *parallelism, time.Duration(*interval)*time.Millisecond); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "keyedcount:", err)
		os.Exit(1)
	}
}

func run(records int64, parallelism int, interval time.Duration) error {
	opts := []sluice.Option{
		sluice.WithParallelism(parallelism),
		sluice.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	}
	if interval > 0 {
		dir, err := os.MkdirTemp("", "keyedcount-checkpoints-")
		if err != nil {
			return fmt.Errorf("checkpoint directory: %w", err)
		}
		defer os.RemoveAll(dir)
		opts = append(opts, sluice.WithCheckpointing(interval, dir))
	}
	env := sluice.NewEnvironment(opts...)
	discard := bench.KeyedCountStrings(env, records)
	start := time.Now()
	if err := env.Execute(context.Background()); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	secs := time.Since(start).Seconds()
	if got := discard.Count(); got != records {
		return fmt.Errorf("the discard sink counted %d records, want %d", got, records)
	}
	fmt.Printf("sluice records=%d parallelism=%d seconds=%.3f records/s=%.0f\n", records, parallelism, secs, float64(records)/secs)
	return nil
}
