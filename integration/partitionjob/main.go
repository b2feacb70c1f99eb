// Command partitionjob is the job integration/cluster_partition_test.go
// runs as a coordinator and workers in separate OS processes, some of
// them in a network namespace of their own, to cut a worker off the
// network and heal it again. It needs no Kafka (a process in a network
// namespace cannot reach the host's loopback broker): a bounded, rate
// limited datagen source emits the indexes 0..records-1, a keyed process
// function keeps a running count per key (index % keys) in keyed state,
// and the exactly-once file sink (sink/filesink) writes (key, count)
// records as JSON ({"k":KEY,"c":COUNT}) into -out, committed when the
// checkpoint that covers them completes. Checkpoints go to -checkpoints,
// a directory every process shares (one file system serves every network
// namespace); each run resumes from the job's latest checkpoint.
//
//	partitionjob -checkpoints /tmp/chk -out /tmp/out --role coordinator --listen 10.1.2.1:0
//	partitionjob -checkpoints /tmp/chk -out /tmp/out --role worker \
//	    --coordinator 10.1.2.1:6123 --host 10.1.2.2 --data-listen 10.1.2.2:0 --slots 2 --worker-id a
//
// The cluster flags are cluster.Flags' (--role, --coordinator,
// --listen, --data-listen, --host, --worker-id, --slots and -D key=value
// for Flink's keys such as heartbeat.interval, heartbeat.timeout and
// slot.request.timeout). Every process takes the same job flags (another
// -parallelism is another plan, which the coordinator refuses).
//
// The coordinator prints a line per completed checkpoint ("checkpoint N
// completed: path=DIR"), "restored from checkpoint N attempt=A path=DIR"
// for every restore, and "job finished" (exit status 0) or "job failed"
// (exit status 1, the error on stderr). A worker prints "worker exited"
// (exit status 0) once the job's recorded result says it ended, or
// "worker failed" (exit status 1). Logs go to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

type options struct {
	checkpoints string
	out         string
	records     int64
	keys        int64
	rate        float64
	parallelism int
	restarts    int
	interval    time.Duration
	cluster     cluster.Config
}

func main() {
	var o options
	flag.StringVar(&o.checkpoints, "checkpoints", "", "checkpoint directory, shared by every process")
	flag.StringVar(&o.out, "out", "", "output directory of the file sink, shared by every process")
	flag.Int64Var(&o.records, "records", 2000, "records the source emits over all subtasks")
	flag.Int64Var(&o.keys, "keys", 16, "keys: record i counts for key i % keys")
	flag.Float64Var(&o.rate, "rate", 200, "records per second over all source subtasks (0: no limit)")
	flag.IntVar(&o.parallelism, "parallelism", 4, "parallelism of every operator")
	flag.IntVar(&o.restarts, "restarts", 50, "restarts (fixed delay 200 ms) before the job fails")
	flag.DurationVar(&o.interval, "interval", 200*time.Millisecond, "checkpoint interval")
	cc := cluster.Flags(flag.CommandLine)
	flag.Parse()
	o.cluster = *cc

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, log)
	stop()
	if o.cluster.Role == cluster.RoleWorker {
		if err != nil {
			fmt.Fprintf(os.Stderr, "partitionjob: %v\n", err)
			fmt.Println("worker failed")
			os.Exit(1)
		}
		fmt.Println("worker exited")
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "partitionjob: %v\n", err)
		fmt.Println("job failed")
		os.Exit(1)
	}
	fmt.Println("job finished")
}

// keyCount is one output record.
type keyCount struct {
	Key   int64 `json:"k"`
	Count int64 `json:"c"`
}

// runningCount keeps a count per key in keyed state and emits it with
// every record.
type runningCount struct {
	count state.ValueState[int64]
}

func (r *runningCount) Open(ctx *sluice.OperatorContext) error {
	var err error
	r.count, err = state.GetValueState(ctx.KeyedState, state.ValueStateDescriptor[int64]{Name: "count"})
	return err
}

func (r *runningCount) ProcessElement(ctx *sluice.KeyedContext[int64], _ int64, out sluice.Collector[keyCount]) error {
	n, _, err := r.count.Value()
	if err != nil {
		return err
	}
	n++
	if err := r.count.Update(n); err != nil {
		return err
	}
	out.Collect(keyCount{Key: ctx.Key(), Count: n})
	return nil
}

// run runs the job, or in the worker role the worker's part of it.
func run(ctx context.Context, o options, log *slog.Logger) error {
	if o.checkpoints == "" || o.out == "" {
		return errors.New("-checkpoints and -out are required")
	}
	if o.keys < 1 || o.records < 0 {
		return fmt.Errorf("-keys %d must be positive, -records %d not negative", o.keys, o.records)
	}
	env := sluice.NewEnvironment(
		sluice.WithJobName("partitionjob"),
		cluster.With(o.cluster),
		sluice.WithParallelism(o.parallelism),
		sluice.WithLogger(log),
		sluice.WithBufferTimeout(5*time.Millisecond),
		sluice.WithCheckpointing(o.interval, o.checkpoints),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(o.restarts, 200*time.Millisecond)),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			if s.Status == checkpoint.StatusCompleted {
				fmt.Printf("checkpoint %d completed: path=%s\n", s.ID, s.Path)
			}
		}),
		sluice.WithRestoreListener(func(r sluice.RestoreInfo) {
			fmt.Printf("restored from checkpoint %d attempt=%d path=%s\n", r.CheckpointID, r.Attempt, r.Path)
		}),
	)
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(o.records), source.DatagenRate(o.rate))
	recs := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen", sluice.UID("gen"))
	keys := o.keys
	counts := sluice.Process[int64, int64, keyCount](sluice.KeyBy(recs, func(v int64) int64 { return v % keys }),
		&runningCount{}, sluice.Name("count"), sluice.UID("count"))
	sluice.SinkTo(counts, filesink.New[keyCount](o.out, codec.JSON[keyCount]{}), sluice.Name("files"), sluice.UID("files"))
	if o.cluster.Role == cluster.RoleWorker {
		// A worker has no job handle: Execute runs its tasks until the job
		// ended.
		return env.Execute(ctx)
	}
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		return err
	}
	return job.Wait()
}
