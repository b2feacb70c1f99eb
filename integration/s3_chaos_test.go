package integration

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/internal/testutil"
)

// Exactly-once under repeated SIGKILL with the checkpoints on S3: the
// chaos job runs against the real broker with -checkpoints an
// s3:// location on the S3 server of scripts/with-s3, RocksDB state with
// incremental checkpoints (shared files on S3, restored from S3 by every
// run), and is killed with SIGKILL ten times: every other kill right
// after a run resumed and completed a checkpoint of its own (its commit
// and the next checkpoint's uploads under way), the others at a random
// moment from the process' start (listing the job directory, downloading
// the restored checkpoint's files) to well into its processing. Every
// checkpoint the runs complete and every restore is on S3, every run
// that restores restores a checkpoint at least as new as the newest one a
// run before it completed, and the last run finishes with every key's
// counts committed 1..n exactly once each, in order. This fails when a
// kill loses or repeats a committed record, when a checkpoint reported
// complete is not on S3 for the next run (its _metadata or a shared file
// it references missing), or when a run falls back to an older one.
func TestS3ExactlyOnceUnderKills(t *testing.T) {
	loc := testutil.S3Location(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, checkpoints in %s", seed, loc)
	rng := rand.New(rand.NewPCG(seed, 13))
	const keys, perKey, kills = 16, 200, 10
	ctx := jobContext(t, 4*time.Minute)
	adm := kadm.NewClient(newClient(t))
	// 3200 records at 300/s: nearly 11 s of counting, more than ten runs
	// of at most a second of counting each use.
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 300)
	job.checkpoints = loc
	job.backend = "rocksdb"
	job.extra = []string{"-incremental=true"}
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}

	var latest int64 // the newest checkpoint a killed run completed
	atCheckpoint := 0
	run := job.start(t)
	for k := 0; k < kills; k++ {
		if k%2 == 0 {
			// Once it resumed from S3 and completed a checkpoint of
			// its own: the commit of that one and the next
			// checkpoint's uploads are under way.
			checkResumed(ctx, t, job, run, latest)
			if !run.awaitNextCompleted(ctx, t, run.completed()) {
				job.logRuns(t)
				t.Fatalf("the job ended (%v) before kill %d of %d; slow it down", run.cmd.ProcessState, k+1, kills)
			}
			atCheckpoint++
			pause(time.Duration(rng.IntN(100)) * time.Millisecond)
		} else {
			// A random moment, from the start-up (listing the job's
			// directory on S3, downloading the restored checkpoint's
			// files) to well into its processing.
			pause(time.Duration(50+rng.IntN(900)) * time.Millisecond)
		}
		if !run.kill(t) {
			job.logRuns(t)
			t.Fatalf("the job ended (%v) before kill %d of %d; slow it down\nstderr (last lines):\n%s",
				run.cmd.ProcessState, k+1, kills, tail(run.stderr.String(), 30))
		}
		latest = max(latest, run.lastCompleted())
		run = job.start(t)
	}
	checkResumed(ctx, t, job, run, latest)
	if code := run.wait(ctx, t); code != 0 {
		job.logRuns(t)
		t.Fatalf("the last run exited with status %d\nstderr:\n%s", code, tail(run.stderr.String(), 40))
	}

	// Every run, the ones killed before they reported a restore too,
	// restored nothing older than what the runs before it completed, and
	// every checkpoint completed or restored is on S3, under loc.
	var before int64 // the newest checkpoint the runs so far completed
	completed, restored := 0, 0
	for i, r := range job.runs {
		if rs := r.restores(); len(rs) > 0 {
			restored++
			if rs[0].ID < before {
				job.logRuns(t)
				t.Fatalf("run %d restored checkpoint %d, older than checkpoint %d, which a run before it completed", i+1, rs[0].ID, before)
			}
		}
		for _, p := range checkpointPaths(r.stdout.String()) {
			if !strings.HasPrefix(p, loc+"/") {
				job.logRuns(t)
				t.Fatalf("run %d: checkpoint path %s is not under the S3 location %s", i+1, p, loc)
			}
		}
		completed += r.completed()
		before = max(before, r.lastCompleted())
	}
	if latest == 0 || restored < kills/2 {
		job.logRuns(t)
		t.Fatalf("%d of %d runs restored a checkpoint (newest completed before the last run: %d); want at least %d: the kills did not exercise restores from S3",
			restored, len(job.runs), latest, kills/2)
	}
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("%d kills (%d right after a completed checkpoint), %d runs (%d restored from S3), %d checkpoints completed, %d committed records",
		kills, atCheckpoint, len(job.runs), restored, completed, n)
}

// checkpointPaths returns the path= values of the chaos job's checkpoint
// and restore lines in its stdout, as printed (s3:// URLs intact).
func checkpointPaths(stdout string) []string {
	var out []string
	for _, l := range strings.Split(stdout, "\n") {
		if !strings.Contains(l, " completed: ") && !strings.HasPrefix(l, "restored from checkpoint ") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if p, ok := strings.CutPrefix(f, "path="); ok {
				out = append(out, p)
			}
		}
	}
	return out
}
