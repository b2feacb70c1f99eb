package integration

// The life of a job end to end (invariant 6): the chaos job
// (integration/chaosjob) runs as a separate OS process against the real
// broker and is started again after it finished, killed right after it
// finished, shut down with SIGTERM, started fresh in a directory holding
// another run's checkpoints, and started twice at once. Whatever happens
// around it, the committed output is the output of one run with no crash.

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// newKeyedJob creates the input and output topics of a chaos job, writes
// perKey records for each of keys keys to the input, and returns the job.
func newKeyedJob(ctx context.Context, t *testing.T, adm *kadm.Client, keys, perKey int, mode string, rate int) *chaosJob {
	t.Helper()
	in, out := createTopic(ctx, t, adm, 4), createTopic(ctx, t, adm, 4)
	produceKeyed(ctx, t, in, keys, perKey)
	return newChaosJob(t, in, out, mode, rate)
}

// checkJobOutput asserts that the job's committed output holds, for every
// key, the counts 1..perKey once each, with a read_committed consumer and
// with kcat, and returns the number of records. On a failure it logs
// what every run did.
func checkJobOutput(ctx context.Context, t *testing.T, job *chaosJob, keys, perKey int) int {
	t.Helper()
	got := readCommitted(ctx, t, job.out)
	checkExactCounts(t, got, keys, perKey)
	if t.Failed() {
		job.logRuns(t)
		t.FailNow()
	}
	checkKcatAgrees(t, job.out, got)
	return len(got)
}

// runToEnd starts the job again (resuming from its latest checkpoint) and
// fails the test unless the run exits 0.
func runToEnd(ctx context.Context, t *testing.T, job *chaosJob, why string) *chaosRun {
	t.Helper()
	run := job.start(t)
	if code := run.wait(ctx, t); code != 0 {
		job.logRuns(t)
		t.Fatalf("%s: the run exited with status %d, want 0\nstderr (last lines):\n%s", why, code, tail(run.stderr.String(), 30))
	}
	return run
}

// A bounded job that finished is started again with resume, twice: each
// later run says "job already finished" and exits 0 without completing or
// restoring a checkpoint, and the committed output is one run's. This
// fails when the finished job's result is not recorded (its checkpoints
// are gone, so the next run reads the input again from the start: every
// count is committed twice), or when a later run restores and runs
// again. On RocksDB and on the heap backend.
func TestFinishedJobStartedAgain(t *testing.T) {
	for _, backend := range []string{"rocksdb", "heap"} {
		t.Run(backend, func(t *testing.T) {
			const keys, perKey = 8, 100
			ctx := jobContext(t, 2*time.Minute)
			adm := kadm.NewClient(newClient(t))
			job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 0)
			job.backend = backend
			first := runToEnd(ctx, t, job, "the first run")
			if !first.said("job finished") {
				t.Fatalf("the first run exited 0 without saying \"job finished\":\n%s", first.stdout.String())
			}
			for i := 2; i <= 3; i++ {
				run := runToEnd(ctx, t, job, fmt.Sprintf("run %d of the finished job", i))
				if !run.said("job already finished") {
					t.Errorf("run %d of the finished job did not say \"job already finished\" (it said %q): it ran the job again",
						i, lastLine(run.stdout.String()))
				}
				if c, r := run.completedCheckpoints(), run.restores(); len(c) > 0 || len(r) > 0 || strings.Contains(run.stderr.String(), "job started") {
					t.Errorf("run %d of the finished job started tasks, completed checkpoints %v or restored %v, want none of it: it must not run", i, c, r)
				}
			}
			n := checkJobOutput(ctx, t, job, keys, perKey)
			t.Logf("%s: the first run completed %d checkpoints; runs 2 and 3 said %q and %q; %d committed records",
				backend, first.completed(), lastLine(job.runs[1].stdout.String()), lastLine(job.runs[2].stdout.String()), n)
		})
	}
}

// A bounded job killed with SIGKILL right after it finished: at its final
// checkpoint's line, at small random delays after it, and at the log line
// of the job's end. Started again with resume it exits 0 and the
// committed output is exact. This fails when a kill in the window
// between the end of the job and the exit of the process loses the
// job's result: the next run reads the input again.
func TestKillRightAfterFinish(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	points := []struct {
		name  string
		log   string // a stderr text to wait for after the final checkpoint
		delay time.Duration
	}{
		{"final-checkpoint-line", "", 0},
		{"final-checkpoint-line+small", "", time.Duration(1+rng.IntN(4)) * time.Millisecond},
		{"final-checkpoint-line+more", "", time.Duration(5+rng.IntN(15)) * time.Millisecond},
		{"job-ended-log-line", "job ended", 0},
	}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			const keys, perKey = 8, 100
			ctx := jobContext(t, 2*time.Minute)
			adm := kadm.NewClient(newClient(t))
			job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 0)
			run := job.start(t)
			if !run.awaitStdout(ctx, t, "final checkpoint ") {
				job.logRuns(t)
				t.Fatalf("the run ended (%v) without a final checkpoint line", run.cmd.ProcessState)
			}
			at := "the final checkpoint line"
			if p.log != "" {
				if run.awaitStderr(ctx, t, p.log) {
					at = fmt.Sprintf("the log line %q", p.log)
				} else {
					t.Logf("the run ended before logging %q", p.log)
				}
			}
			time.Sleep(p.delay) // the delay is the point of the test, not a wait for a condition
			killed := run.kill(t)
			what := fmt.Sprintf("killed %v after %s", p.delay, at)
			if !killed {
				what = fmt.Sprintf("exited by itself (%v) before the kill %v after %s", run.cmd.ProcessState, p.delay, at)
			}
			again := runToEnd(ctx, t, job, "the run after the kill")
			n := checkJobOutput(ctx, t, job, keys, perKey)
			t.Logf("the first run %s; the next one said %q, restored %v; %d committed records",
				what, lastLine(again.stdout.String()), again.restores(), n)
		})
	}
}

// SIGTERM suspends: the job is shut down with SIGTERM at random moments,
// some right when a checkpoint completes, with checkpoints every 100 ms
// so that many land while one is being written; each time the process
// exits by itself with the suspended status, and the next run resumes
// from a checkpoint no older than the newest the suspended run completed.
// At the end the committed output is exact. This fails when SIGTERM
// cancels the job (its checkpoints deleted: status 5, then a run from
// the start), when the process hangs or is killed instead of exiting, and
// when the next run resumes from an older checkpoint or none. With
// incremental RocksDB checkpoints, aligned and unaligned, and the heap
// backend in mixed mode.
func TestSuspendOnSIGTERM(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	cases := []struct {
		name, backend, mode string
		extra               []string
	}{
		{"rocksdb-incremental-aligned", "rocksdb", "aligned", []string{"-incremental=true"}},
		{"rocksdb-incremental-unaligned", "rocksdb", "unaligned", []string{"-incremental=true"}},
		{"heap-mixed", "heap", "mixed", nil},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			const keys, perKey, suspends = 16, 150, 6
			ctx := jobContext(t, 4*time.Minute)
			adm := kadm.NewClient(newClient(t))
			// 2400 records at 150/s: 16 s of counting, more than six runs
			// use (a second or so each, up to 3.5 s on a loaded machine,
			// where a run that waits for its checkpoint gets further).
			job := newKeyedJob(ctx, t, adm, keys, perKey, c.mode, 150)
			job.backend = c.backend
			job.extra = append([]string{"-interval", "100ms"}, c.extra...)
			var latest int64 // the newest checkpoint a suspended run completed
			atCheckpoint := 0
			run := job.start(t)
			for s := 0; s < suspends; s++ {
				checkResumed(ctx, t, job, run, latest)
				if s%2 == 0 {
					// Right when a checkpoint completes: its commit and
					// the next checkpoint are under way.
					if !run.awaitNextCompleted(ctx, t, run.completed()) {
						job.logRuns(t)
						t.Fatalf("the job ended (%v) before SIGTERM %d of %d; slow it down", run.cmd.ProcessState, s+1, suspends)
					}
					atCheckpoint++
				} else {
					time.Sleep(time.Duration(100+rng.IntN(800)) * time.Millisecond) // a random moment
				}
				if !run.signal(t, syscall.SIGTERM) {
					job.logRuns(t)
					t.Fatalf("the job ended (%v) before SIGTERM %d of %d; slow it down", run.cmd.ProcessState, s+1, suspends)
				}
				run.awaitSuspended(ctx, t)
				latest = max(latest, run.lastCompleted())
				run = job.start(t)
			}
			checkResumed(ctx, t, job, run, latest)
			if code := run.wait(ctx, t); code != 0 {
				job.logRuns(t)
				t.Fatalf("the last run exited with status %d\nstderr:\n%s", code, tail(run.stderr.String(), 40))
			}
			completed := 0
			for _, r := range job.runs {
				completed += r.completed()
			}
			n := checkJobOutput(ctx, t, job, keys, perKey)
			t.Logf("%s: %d suspensions (%d right at a completed checkpoint), %d runs, %d checkpoints completed, %d committed records",
				c.name, suspends, atCheckpoint, len(job.runs), completed, n)
		})
	}
}

// checkResumed waits until run has reported its restore (or ended) and
// fails the test unless its first attempt restored a checkpoint at least
// as new as latest, the newest checkpoint the suspended runs before it
// completed (none when latest is 0).
func checkResumed(ctx context.Context, t *testing.T, job *chaosJob, run *chaosRun, latest int64) {
	t.Helper()
	if latest == 0 {
		return
	}
	// A restore is reported once every task has replayed its in-flight
	// data, which may be after a checkpoint or two.
	run.awaitStdout(ctx, t, "restored from checkpoint ")
	rs := run.restores()
	switch {
	case len(rs) == 0:
		job.logRuns(t)
		t.Fatalf("run %d did not resume (it ended: %v): the suspended run before it had completed checkpoint %d, which SIGTERM must keep",
			len(job.runs), run.cmd.ProcessState, latest)
	case rs[0].ID < latest:
		job.logRuns(t)
		t.Fatalf("run %d resumed from checkpoint %d, older than checkpoint %d, which the suspended run before it completed",
			len(job.runs), rs[0].ID, latest)
	}
}

// A fresh run (-fresh: WithFreshStart, no restore path) of a job whose
// checkpoint directory holds another run's checkpoints: run 1 is killed
// mid-run, leaving completed checkpoints; run 2, started fresh and
// writing to a new output topic, fails once and restarts in the process,
// either at its first record (before any checkpoint of its own) or after
// a second of counting (after some). It must never restore run 1's
// checkpoints: every restore it reports is of a checkpoint it completed
// itself (at the path it wrote), its restart after its own checkpoints
// restores the newest of them, and its output holds every count from 1,
// as one run's. This fails when the restart picks the newest checkpoint
// in the directory that is not its own, run 1's: its counts then go on
// from run 1's state.
func TestFreshRunIgnoresOtherRunsCheckpoints(t *testing.T) {
	for _, c := range []struct {
		name   string
		failAt int // the record of run 2 at which it fails once
	}{
		// Its first record comes well before its first checkpoint.
		{"failure-before-its-own-checkpoints", 1},
		// 300 records at 300/s: a second, several checkpoint intervals.
		{"failure-after-its-own-checkpoints", 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			const keys, perKey = 8, 150
			ctx := jobContext(t, 2*time.Minute)
			adm := kadm.NewClient(newClient(t))
			job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 300)
			first := job.killedRun(ctx, t, 2)
			left := metadataFiles(t, job.checkpoints)
			if len(left) == 0 {
				t.Fatalf("run 1 completed checkpoints %v but left no _metadata under %s: nothing to ignore", first.completedCheckpoints(), job.checkpoints)
			}
			job.out = createTopic(ctx, t, adm, 4)
			second := job.start(t, "-fresh", "-fail-once-after", strconv.Itoa(c.failAt), "-restarts", "3")
			if code := second.wait(ctx, t); code != 0 {
				job.logRuns(t)
				t.Fatalf("run 2 exited with status %d\nstderr (last lines):\n%s", code, tail(second.stderr.String(), 30))
			}
			failed := slices.IndexFunc(strings.Split(second.stdout.String(), "\n"), func(l string) bool { return strings.HasPrefix(l, "injected failure") })
			if failed < 0 || !strings.Contains(second.stderr.String(), "job failed; restarting") {
				job.logRuns(t)
				t.Fatal("run 2 did not fail and restart: the test shows nothing")
			}
			own := second.completedCheckpoints()
			var ownBefore int64 // the newest checkpoint run 2 completed before its failure
			for _, o := range own {
				if o.Line < failed {
					ownBefore = max(ownBefore, o.ID)
				}
			}
			restores := second.restores()
			for _, r := range restores {
				mine := slices.ContainsFunc(own, func(o checkpointLine) bool { return o.ID == r.ID && o.Path == r.Path && o.Line < r.Line })
				if !mine {
					job.logRuns(t)
					t.Fatalf("run 2 (fresh) restored checkpoint %d at %s, which it had not completed itself; run 1 completed %v",
						r.ID, r.Path, first.completedCheckpoints())
				}
			}
			if ownBefore > 0 && (len(restores) == 0 || restores[0].ID < ownBefore) {
				job.logRuns(t)
				t.Fatalf("run 2 completed checkpoint %d before its failure, but its restart restored %v", ownBefore, restores)
			}
			n := checkJobOutput(ctx, t, job, keys, perKey)
			t.Logf("run 1 completed %d checkpoints (%d _metadata files left); run 2 failed after completing %d of its own (newest %d), then restored %v; %d committed records",
				first.completed(), len(left), len(slices.DeleteFunc(slices.Clone(own), func(o checkpointLine) bool { return o.Line > failed })), ownBefore, restores, n)
		})
	}
}

// killedRun starts a run of job and kills it with SIGKILL once it has
// completed n checkpoints; the test fails if it ended before.
func (j *chaosJob) killedRun(ctx context.Context, t *testing.T, n int) *chaosRun {
	t.Helper()
	r := j.start(t)
	r.awaitCompleted(ctx, t, n)
	if !r.kill(t) {
		j.logRuns(t)
		t.Fatalf("run %d ended (%v) before its SIGKILL after %d checkpoints: the input is too small", len(j.runs), r.cmd.ProcessState, n)
	}
	return r
}

// metadataFiles lists the _metadata files under dir.
func metadataFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "_metadata" {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list the checkpoints under %s: %v", dir, err)
	}
	return out
}

// A second process on the same job while the first runs it is refused,
// with an error that names the holder's pid, before it touches anything:
// the first run goes on and finishes with the exact output, and once it
// has exited the job's directory is free again. This fails when two
// processes run one job (both restore and commit, and the second one's
// sink aborts the first one's transactions), and when the refusal does
// not say who holds the job.
func TestSecondProcessOnSameJobRefused(t *testing.T) {
	const keys, perKey = 8, 150
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 300)
	holder := job.start(t)
	holder.awaitCompleted(ctx, t, 1)
	second := job.start(t)
	if x := second.awaitOutput(ctx, t, &second.stderr, "job started"); x != "" {
		second.kill(t)
		job.logRuns(t)
		t.Fatalf("a second process started the job while pid %d runs it", holder.cmd.Process.Pid)
	}
	code := second.wait(ctx, t)
	pid := strconv.Itoa(holder.cmd.Process.Pid)
	var refusal string
	for _, l := range strings.Split(second.stderr.String(), "\n") {
		if strings.HasPrefix(l, "chaosjob: ") {
			refusal = l
		}
	}
	if code != chaosExitLocked || !containsWord(refusal, pid) {
		job.logRuns(t)
		t.Fatalf("the second process exited with status %d and error %q; want status %d (ErrJobLocked) and an error naming the holder, pid %s",
			code, refusal, chaosExitLocked, pid)
	}
	if holder.ended() {
		t.Fatalf("the holder ended (%v) while the second process was refused", holder.cmd.ProcessState)
	}
	if code := holder.wait(ctx, t); code != 0 {
		job.logRuns(t)
		t.Fatalf("the holder exited with status %d after the second process was refused\nstderr (last lines):\n%s", code, tail(holder.stderr.String(), 30))
	}
	after := runToEnd(ctx, t, job, "a run after the holder exited")
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("refused: %s; the holder completed %d checkpoints; the run after it said %q; %d committed records",
		refusal, holder.completed(), lastLine(after.stdout.String()), n)
}

// containsWord reports whether s holds w with no digit or letter right
// before or after it (a pid, not a part of a longer number).
func containsWord(s, w string) bool {
	alnum := func(b byte) bool { return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }
	for i := strings.Index(s, w); i >= 0; {
		end := i + len(w)
		if (i == 0 || !alnum(s[i-1])) && (end == len(s) || !alnum(s[end])) {
			return true
		}
		j := strings.Index(s[i+1:], w)
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}
