package filesink_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
)

// The file sink writes exactly once into a directory: each subtask writes
// a checkpoint interval's records to an in-progress file that becomes a
// final file when the checkpoint completes (as Flink's FileSink).
// ReadCommitted reads what is committed.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "filesink-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	env := sluice.NewEnvironment(sluice.WithParallelism(2), sluice.WithLogger(slog.New(slog.DiscardHandler)),
		sluice.WithCheckpointing(100*time.Millisecond, filepath.Join(dir, "checkpoints")))
	words := sluice.FromSource(env, source.FromSlice([]string{"to", "be", "or", "not"}), sluice.NoWatermarks[string](), "words")
	sluice.SinkTo(words, filesink.New(filepath.Join(dir, "out"), codec.JSON[string]{}), sluice.UID("files"))
	if err := env.Execute(context.Background()); err != nil { // a bounded job ends with a final checkpoint
		fmt.Println(err)
		return
	}
	got, err := filesink.ReadCommitted(filepath.Join(dir, "out"), codec.JSON[string]{})
	slices.Sort(got)
	fmt.Println(got, err)
	// Output: [be not or to] <nil>
}
