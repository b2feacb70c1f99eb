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
// -process-memory SIZE sets taskmanager.memory.process.size (as Flink's
// local mini-cluster is given its memory): the Go limit comes from it and
// the GC percent is memory.DefaultGCPercent. The line printed gives the
// process's CPU seconds and records per CPU second beside the wall rate.
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
	"github.com/sluicehq/sluice/config"
)

func main() {
	records := flag.Int64("records", 30_000_000, "records to generate")
	parallelism := flag.Int("parallelism", 2, "parallelism of every operator")
	interval := flag.Int64("checkpoint-interval-ms", 0, "checkpoint interval in ms (0: no checkpoints)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the job to this file")
	procMem := flag.String("process-memory", "", "taskmanager.memory.process.size, e.g. 512m (unset: the default budget)")
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
	var processSize int64
	if *procMem != "" {
		n, err := config.ParseMemorySize(*procMem)
		if err != nil {
			fmt.Fprintln(os.Stderr, "keyedcount: -process-memory:", err)
			os.Exit(2)
		}
		processSize = n
	}
	if err := run(*records, *parallelism, time.Duration(*interval)*time.Millisecond, processSize); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "keyedcount:", err)
		os.Exit(1)
	}
}

func run(records int64, parallelism int, interval time.Duration, processSize int64) error {
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
	if processSize > 0 {
		opts = append(opts, sluice.WithProcessMemory(processSize))
	}
	env := sluice.NewEnvironment(opts...)
	discard := bench.KeyedCountStrings(env, records)
	start, cpu0 := time.Now(), bench.ProcessCPUTime().Seconds()
	if err := env.Execute(context.Background()); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	secs, cpu := time.Since(start).Seconds(), bench.ProcessCPUTime().Seconds()-cpu0
	if got := discard.Count(); got != records {
		return fmt.Errorf("the discard sink counted %d records, want %d", got, records)
	}
	fmt.Printf("sluice records=%d parallelism=%d seconds=%.3f records/s=%.0f cpu_s=%.3f records/cpu_s=%.0f\n",
		records, parallelism, secs, float64(records)/secs, cpu, float64(records)/cpu)
	return nil
}
