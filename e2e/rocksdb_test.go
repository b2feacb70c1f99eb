package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/state"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// Exactly-once under crashes with keyed state in RocksDB and incremental
// checkpoints.
func TestExactlyOnceWithRocksDB(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for i, mode := range []string{"aligned", "unaligned", "aligned-full", "aligned-changelog"} {
		t.Run(mode, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			// aligned-full: full snapshots (a local RocksDB checkpoint
			// read in the asynchronous part) instead of incremental ones.
			// aligned-changelog: changelog checkpoints, materialized in
			// the background every 100 ms (every fifth checkpoint).
			opts := rocksdb.Options{DisableIncremental: mode == "aligned-full",
				Changelog: mode == "aligned-changelog", MaterializeInterval: 100 * time.Millisecond}
			mode, _, _ := strings.Cut(mode, "-")
			const records, keys = 10000, 40
			r := crashCount(t, mode, records, keys, 20*time.Millisecond, 0)
			r.mapCrash, r.opCrash = newCrashes(rng, 2, records), newCrashes(rng, 1, records)
			r.extra = []sluice.Option{sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), opts))}
			r.run(t)
			got := r.output(t)
			checkExactCounts(t, got, expectedCounts(records, keys))
		})
	}
}

// Incremental RocksDB checkpoints: the shared directory holds exactly the
// files the retained checkpoints reference (invariant 3), and a restore at
// another parallelism (2 -> 3) gives every key's count exactly once.
func TestRocksDBIncrementalRetentionAndRescale(t *testing.T) {
	const records, keys = 8000, 30
	out, cpDir, local := t.TempDir(), t.TempDir(), t.TempDir()
	backend := sluice.WithStateBackend(rocksdb.Factory(local, rocksdb.Options{}))
	retain := sluice.WithCheckpointConfig(func(c *checkpoint.Config) {
		c.Retention, c.RetainedCheckpoints = checkpoint.RetainOnCancellation, 2
	})
	// 8000 records at 1500/s: 5 s of input, the five checkpoints and 2000
	// records it waits for before cancelling come well before its end
	// even when the machine is slow.
	env, seen := countJobAt(out, records, keys, 1500, 2, backend, retain, sluice.WithCheckpointing(20*time.Millisecond, cpDir))
	job := startUntil(t, context.Background(), env, "several checkpoints", seen, 5, 2000)
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, sluice.ErrJobCanceled) {
		t.Fatal(err)
	}
	st, err := storage.New(storage.OSFS{}, cpDir, job.ID(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Recover()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	incremental := false
	for _, snap := range rec.Retained {
		want = append(want, snap.Metadata.SharedFiles()...)
		for _, s := range snap.Metadata.Subtasks {
			for _, k := range s.KeyedState {
				incremental = incremental || len(k.Files) > 0
			}
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	entries, err := os.ReadDir(filepath.Join(cpDir, job.ID(), "shared"))
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, e := range entries {
		have = append(have, e.Name())
	}
	if !incremental || len(want) == 0 {
		t.Fatalf("retained checkpoints are not incremental (%d shared files)", len(want))
	}
	if !slices.Equal(have, want) {
		t.Fatalf("shared directory holds %d files, the %d retained checkpoints reference %d:\nhave %v\nwant %v",
			len(have), len(rec.Retained), len(want), have, want)
	}
	env2, _ := countJobAt(out, records, keys, 60000, 3, backend, sluice.WithCheckpointing(20*time.Millisecond, cpDir))
	mustExecute(t, env2)
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

// A savepoint of RocksDB state taken while the job runs, then
// stop-with-savepoint; the job resumed from it on the heap backend
// finishes the input with every count exact. The savepoints are full
// snapshots: with in-place updates, local RocksDB checkpoints read while
// the task goes on updating the same keys.
func TestRocksDBSavepointIntoHeap(t *testing.T) {
	savepointStopResume(t, sluice.WithStateBackend(rocksdb.Factory(t.TempDir(), rocksdb.Options{})))
}

// The subtasks of an attempt are built, their state backends made and
// restored, at the same time, not one after another: each of the four
// counting subtasks' backends is made only once all four are being made
// (one at a time, the first would wait for the others in vain).
func TestSubtasksRestoreInParallel(t *testing.T) {
	const par = 4
	inner := rocksdb.Factory(t.TempDir(), rocksdb.Options{})
	var arrived atomic.Int32
	all := make(chan struct{})
	backend := sluice.WithStateBackend(func(o state.BackendOptions) (state.KeyedBackend, error) {
		if arrived.Add(1) == par {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(testutil.SafetyNet / 4):
			return nil, fmt.Errorf("subtask %d's backend: the other subtasks' backends were not being made at the same time", o.Subtask)
		}
		return inner(o)
	})
	out := t.TempDir()
	env, _ := countJobAt(out, 400, 8, 0, par, backend, sluice.WithCheckpointing(20*time.Millisecond, t.TempDir()))
	if err := env.Execute(testutil.Context(t, 0)); err != nil {
		t.Fatal(err)
	}
}
