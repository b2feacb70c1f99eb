package rocksdb_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// The RocksDB backend keeps every keyed operator subtask's state in a
// RocksDB database of its own under the directory (state beyond memory),
// and its checkpoints are incremental: only new SST files are uploaded.
// Flink's state.backend.type: rocksdb; the options are
// state.backend.rocksdb.* (rocksdb.Options).
func ExampleFactory() {
	dir, err := os.MkdirTemp("", "rocksdb-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	env := sluice.NewEnvironment(
		sluice.WithParallelism(2),
		sluice.WithLogger(slog.New(slog.DiscardHandler)),
		sluice.WithStateBackend(rocksdb.Factory(dir+"/state", rocksdb.Options{})),
		sluice.WithCheckpointing(50*time.Millisecond, dir+"/checkpoints"),
	)
	sales := sluice.FromSource(env, source.FromSlice([]int64{3, 10, 4, 20, 5, 30}), sluice.NoWatermarks[int64](), "sales",
		sluice.Parallelism(1)) // one reader: the sales arrive in order
	// A running total per key (odd and even amounts), in RocksDB.
	totals := sluice.Reduce(sluice.KeyBy(sales, func(v int64) bool { return v%2 == 0 }),
		func(acc, v int64) (int64, error) { return acc + v, nil })
	out := sink.NewCollect[int64]()
	sluice.SinkTo(totals, out)
	if err := env.Execute(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	got := out.Values()
	slices.Sort(got)
	fmt.Println(got)
	// Output: [3 8 10 14 34 64]
}
