package kafka_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/checkpoint/storage/faultfs"
	"github.com/sluicehq/sluice/codec"
	kafkasink "github.com/sluicehq/sluice/sink/kafka"
	"github.com/sluicehq/sluice/source"
)

// A job whose checkpoints fail after every sink pre-committed (their
// _metadata cannot be written) keeps running: the transactions of the
// aborted checkpoints wait for the next completed one, the writers take
// overflow ids meanwhile instead of waiting for commits that only their
// own task goroutine could run, and the committed output is every record
// exactly once.
func TestJobWithAbortedCheckpoints(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seeds := c.ListenAddrs()
	const records = 4000
	fsys := faultfs.New(storage.OSFS{})
	// Checkpoints 3, 4 and 5 fail once every task has acknowledged.
	fsys.Inject(faultfs.Rule{Op: faultfs.OpCreate, PathContains: "_metadata", Skip: 2, Times: 3})
	var aborted, completed int
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := sluice.NewEnvironment(
		sluice.WithParallelism(2),
		sluice.WithLogger(quiet),
		sluice.WithCheckpointing(30*time.Millisecond, t.TempDir()),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.TolerableFailed, c.Timeout = 10, 10*time.Second }),
		sluice.WithCheckpointStorageFS(fsys),
		sluice.WithRestartStrategy(sluice.NoRestart()),
		sluice.WithCheckpointListener(func(s checkpoint.Stats) {
			switch s.Status {
			case checkpoint.StatusCompleted:
				completed++
			case checkpoint.StatusFailed:
				aborted++
			}
		}),
	)
	// Two seconds of input: room for the three failed checkpoints and a
	// completed one even when the machine is loaded (at three times the
	// rate the job sometimes ended first).
	gen := source.NewDatagen(func(i int64) string { return fmt.Sprint("r", i) },
		source.DatagenCount(records), source.DatagenRate(records/2))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[string](), "gen", sluice.UID("gen"))
	snk, err := kafkasink.NewSink(seeds, kafkasink.ValueSerializer("out", codec.String{}),
		kafkasink.Guarantee(kafkasink.ExactlyOnce), kafkasink.TransactionalIDPrefix("job"),
		kafkasink.TransactionTimeout(5*time.Minute), kafkasink.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	sluice.SinkTo(s, snk, sluice.UID("kafka"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Execute(ctx); err != nil {
		t.Fatalf("job failed: %v", err)
	}
	if aborted < 3 || completed < 1 {
		t.Fatalf("%d checkpoints failed and %d completed; want at least 3 and 1", aborted, completed)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("out"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	n := 0
	for n < records {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d committed records: %v", n, records, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; n++ })
	}
	for i := range records {
		if k := fmt.Sprint("r", i); seen[k] != 1 {
			t.Errorf("record %s committed %d times, want once", k, seen[k])
		}
	}
	// Nothing more is committed (a duplicate would show past the count)
	// and nothing is left open.
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if s, _ := stable.Lookup("out", e.Partition); s.Offset != e.Offset {
			t.Errorf("partition %d: last stable offset %d, end %d: a transaction is still open", e.Partition, s.Offset, e.Offset)
		}
	})
	if len(seen) != records || n != records {
		t.Fatalf("%d records, %d distinct, want %d", n, len(seen), records)
	}
	// The writers took overflow ids while the aborted checkpoints'
	// transactions waited.
	ds, err := adm.DescribeTransactions(ctx, "job-0-2", "job-1-2")
	if err != nil && len(ds) == 0 {
		t.Fatal(err)
	}
	used := 0
	for _, d := range ds {
		if d.Err == nil {
			used++
		}
	}
	if used == 0 {
		t.Fatalf("no overflow id was used (%+v); the test did not exercise the pool overflow", ds)
	}
}
