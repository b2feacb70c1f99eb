package integration

// Resuming is the default: the chaos job, a separate OS
// process on the real broker, is started again after a SIGKILL and after
// failing for good, each time with no option at all, and continues from
// its latest checkpoint; the committed output is one run's.

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/checkpoint/storage"
)

// The job is SIGKILLed after two completed checkpoints and started again
// with nothing but its usual flags: it resumes from a checkpoint at least
// as new as the killed run's last, says so in its log, finishes, and the
// committed output is exact (read_committed and kcat). This fails when a
// start without an option begins from no state: the counts start again
// from 1 and the output holds every early count twice.
func TestKilledJobResumesWithNoOption(t *testing.T) {
	const keys, perKey = 8, 150
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 300)
	first := job.killedRun(ctx, t, 2)
	last := first.lastCompleted()
	second := runToEnd(ctx, t, job, "the run after the SIGKILL")
	rs := second.restores()
	if len(rs) == 0 || rs[0].ID < last {
		job.logRuns(t)
		t.Fatalf("run 2 restored %v; the killed run had completed checkpoint %d", rs, last)
	}
	if said := grepLines(second.stderr.String(), "resuming from the job's latest checkpoint"); !strings.Contains(said, "checkpoint="+strconv.FormatInt(rs[0].ID, 10)+" ") {
		job.logRuns(t)
		t.Fatalf("run 2 did not log that it resumes from checkpoint %d: %q", rs[0].ID, said)
	}
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("run 1 killed after checkpoint %d; run 2 resumed from %d; %d committed records", last, rs[0].ID, n)
}

// The job fails for good (an injected failure, no restart strategy: the
// exit of a job whose broker was killed under transaction version 1). Its result
// is FAILED with its latest checkpoint retained (the default retention
// keeps a failed job's checkpoints), and the next start, with no option,
// resumes from that checkpoint and finishes with the exact output. This
// fails when the default retention deletes a failed job's checkpoints:
// every later start is then refused, or begins from nothing.
func TestFailedJobResumesFromItsRetainedCheckpoint(t *testing.T) {
	const keys, perKey = 8, 150
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 300)
	// 600 of 1200 records at 300/s: about ten checkpoints before it fails.
	first := job.start(t, "-fail-once-after", "600")
	if code := first.wait(ctx, t); code != 1 || !first.said("job failed") {
		job.logRuns(t)
		t.Fatalf("run 1 exited with status %d (%q), want 1, \"job failed\"", code, lastLine(first.stdout.String()))
	}
	res, err := storage.ReadJobResult(storage.OSFS{}, filepath.Join(job.checkpoints, "chaosjob"))
	if err != nil || res == nil || res.Status != storage.ResultFailed || !res.Retained || res.LastCheckpoint == 0 {
		job.logRuns(t)
		t.Fatalf("the failed run's result: %+v, %v; want FAILED with its last checkpoint retained", res, err)
	}
	second := runToEnd(ctx, t, job, "the run after the failure")
	if rs := second.restores(); len(rs) == 0 || rs[0].ID != res.LastCheckpoint {
		job.logRuns(t)
		t.Fatalf("run 2 restored %v, want the failed run's last checkpoint %d", rs, res.LastCheckpoint)
	}
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("run 1 failed after checkpoint %d (retained); run 2 resumed from it; %d committed records", res.LastCheckpoint, n)
}
