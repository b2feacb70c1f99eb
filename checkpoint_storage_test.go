package sluice_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// s3Objects lists the keys under prefix of the job's storage on S3, as
// the bucket holds them.
func s3Objects(t *testing.T, st *storage.Storage, prefix string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for o, err := range st.Backend().List(t.Context(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = true
	}
	return out
}

// A RocksDB job with incremental checkpoints on S3: suspended midway, the
// bucket holds exactly the shared files its retained checkpoints
// reference (those of discarded checkpoints deleted, none missing);
// resumed from S3 it finishes with every count exact.
func TestS3IncrementalCheckpointsAndResume(t *testing.T) {
	loc := testutil.S3Location(t)
	const records, keys = 12000, 30
	out, local := t.TempDir(), t.TempDir()
	opts := []sluice.Option{
		sluice.WithStateBackend(rocksdb.Factory(local, rocksdb.Options{})),
		sluice.WithCheckpointing(30*time.Millisecond, loc),
		sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.RetainedCheckpoints = 2 }),
		sluice.WithJobID("s3-incremental"),
	}
	env, seen := countJob(out, records, keys, 6000, opts...)
	ctx, suspend := context.WithCancel(context.Background())
	job := startUntil(t, ctx, env, "five checkpoints on S3", seen, 5, 3000)
	suspend()
	if err := job.Wait(); !errors.Is(err, sluice.ErrJobSuspended) {
		t.Fatalf("suspended job: %v", err)
	}

	st, err := storage.New(nil, loc, job.ID(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st.JobDir(), "s3://") {
		t.Fatalf("job directory %s is not on S3", st.JobDir())
	}
	// What the next start does first: uploads of a checkpoint the
	// suspension cut short go.
	if _, err := st.CollectSharedGarbage(); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Recover()
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Retained) != 2 || len(rec.Unusable) != 0 {
		t.Fatalf("recovered %d retained, %d unusable checkpoints; want 2 and 0", len(rec.Retained), len(rec.Unusable))
	}
	referenced := map[string]bool{}
	for _, s := range rec.Retained {
		for _, f := range s.Metadata.SharedFiles() {
			referenced["shared/"+f] = true
		}
	}
	if len(referenced) == 0 {
		t.Fatal("the retained checkpoints reference no shared file: not incremental")
	}
	inBucket := s3Objects(t, st, "shared/")
	if !maps.Equal(inBucket, referenced) {
		t.Fatalf("shared files in the bucket %v, referenced by the retained checkpoints %v",
			slices.Sorted(maps.Keys(inBucket)), slices.Sorted(maps.Keys(referenced)))
	}
	for k := range s3Objects(t, st, "chk-") {
		id := strings.TrimPrefix(strings.Split(k, "/")[0], "chk-")
		if id != "" && !slices.ContainsFunc(rec.Retained, func(s *storage.Snapshot) bool {
			return strings.HasPrefix(k, strings.TrimPrefix(s.Dir, st.JobDir()+"/")+"/")
		}) && !slices.Contains(rec.Orphans, mustAtoi(t, id)) {
			t.Fatalf("object %s belongs to no retained checkpoint", k)
		}
	}

	env2, _ := countJob(out, records, keys, 60000, append(opts, sluice.WithResumeFromLatestCheckpoint())...)
	mustExecute(t, env2)
	got := readCounts(t, out)
	last := map[int64]int64{}
	seenCount := map[KeyCount]int{}
	for _, kc := range got {
		seenCount[kc]++
		last[kc.Key] = max(last[kc.Key], kc.Count)
	}
	for kc, n := range seenCount {
		if n != 1 {
			t.Fatalf("%+v committed %d times", kc, n)
		}
	}
	for k, n := range expectedCounts(records, keys) {
		if last[k] != n {
			t.Errorf("key %d ends at %d, want %d", k, last[k], n)
		}
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
