package integration

import (
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// jobContext bounds a job test well below `go test`'s own timeout. The
// chaos job's binary is built (once per run) before the bound starts:
// after a change to the code its build is a rebuild of what depends on
// the change, over a minute under load, which ate the first chaos test's
// bound (TestReactiveModeCluster ran out of its two minutes waiting for
// a coordinator that had just started).
func jobContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	chaosJobBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Exactly-once under crashes: the job runs as a separate process that the
// test kills with SIGKILL, at least 30 times per checkpoint mode, and
// restarts each time from its latest checkpoint: mid-run at random
// moments, during shutdown (SIGTERM, then SIGKILL a moment later, before
// the process exits), right after the job finished (at its final
// checkpoint's line and a few milliseconds after), and while a run of the
// finished job starts again. The kills are spread over episodes, each a
// bounded job of its own that ends with a run that exits 0. Counts live
// in RocksDB (or $SLUICE_IT_STATE_BACKEND), checkpoints come every
// 200 ms; in every other episode the job takes RocksDB changelog
// checkpoints (state.backend.changelog.enabled), which its runs restore.
// After each episode a read_committed consumer (and kcat) sees
// for every key the counts 1..n exactly once each, in order. In aligned,
// unaligned and mixed modes. This fails when any kill loses or repeats a
// committed record: a crash between a checkpoint and its commit, a
// shutdown that deletes the checkpoint the next run needs, a finished
// job that forgets it finished.
func TestExactlyOnceUnderKills(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for i, mode := range []string{"aligned", "unaligned", "mixed"} {
		t.Run(mode, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			// Most episodes land 4-8 kills; a fast machine (or job) ends
			// more runs before their kill, so up to 10 episodes.
			const minKills, maxEpisodes = 30, 10
			ctx := jobContext(t, 4*time.Minute)
			adm := kadm.NewClient(newClient(t))
			var f chaosFigures
			for f.episodes < maxEpisodes && f.kills() < minKills {
				chaosEpisode(ctx, t, adm, rng, mode, &f)
			}
			if f.kills() < minKills {
				t.Fatalf("%d episodes landed only %d kills, want %d: the runs end too soon; slow them down", f.episodes, f.kills(), minKills)
			}
			if f.segments == 0 && os.Getenv("SLUICE_IT_STATE_BACKEND") != "heap" {
				t.Fatalf("the changelog episodes left no changelog segment for a run to restore: they took no changelog checkpoint")
			}
			t.Logf("%s: %d kills (%d mid-run, %d during shutdown, %d after the job finished, %d while a run restarted), "+
				"%d SIGTERMs the exit beat the kill to, %d episodes, %d runs, %d checkpoints completed (%d in-flight bytes persisted), %d committed records, "+
				"%d changelog segments left for the next run",
				mode, f.kills(), f.midRun, f.shutdown, f.afterFinish, f.restarting, f.suspended, f.episodes, f.runs, f.completed, f.persisted, f.committed, f.segments)
		})
	}
}

// chaosFigures are what TestExactlyOnceUnderKills did.
type chaosFigures struct {
	midRun, shutdown, afterFinish, restarting int // kills that hit a live process
	suspended                                 int // SIGTERMs after which the process exited before the SIGKILL
	episodes, runs, completed, committed      int
	persisted                                 int64
	// segments counts the changelog segments the checkpoint directory
	// held when a run of a changelog episode ended, for the next to
	// restore.
	segments int
}

// changelogSegments counts the RocksDB changelog segments in the shared
// files under dir.
func changelogSegments(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a checkpoint deleted meanwhile
		}
		if !d.IsDir() && strings.Contains(d.Name(), "-changelog-") {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return n
}

func (f *chaosFigures) kills() int { return f.midRun + f.shutdown + f.afterFinish + f.restarting }

// chaosEpisode runs one bounded job through its kills to the end and
// checks its output.
func chaosEpisode(ctx context.Context, t *testing.T, adm *kadm.Client, rng *rand.Rand, mode string, f *chaosFigures) {
	const keys, perKey, midRunKills = 16, 100, 6
	f.episodes++
	// 1600 records at 400/s: 4 s of counting, so that six runs of at most
	// 1.2 s, each spending part of it starting, leave work to the last.
	job := newKeyedJob(ctx, t, adm, keys, perKey, mode, 400)
	if f.episodes%2 == 0 {
		job.extra = []string{"-changelog"}
	}
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	// endedBy checks how a run that ended before its SIGKILL ended: 0
	// (finished) or, after a SIGTERM, suspended.
	endedBy := func(run *chaosRun, sigterm bool) {
		t.Helper()
		code := run.wait(ctx, t)
		if code != 0 && (!sigterm || code != chaosExitSuspended) {
			job.logRuns(t)
			t.Fatalf("episode %d: a run ended by itself with %v (want 0, or %d after SIGTERM)\nstderr (last lines):\n%s",
				f.episodes, run.cmd.ProcessState, chaosExitSuspended, tail(run.stderr.String(), 30))
		}
	}
	run := job.start(t)
	finished := false
	for k := 0; k < midRunKills && !finished; k++ {
		// A random moment, from the process' start-up (restore,
		// re-commit, abort of lingering transactions) to well into its
		// processing.
		pause(time.Duration(150+rng.IntN(1000)) * time.Millisecond)
		if rng.IntN(2) == 0 {
			// During shutdown: SIGTERM, and SIGKILL before it exits (a
			// suspension takes a few tens of milliseconds).
			if run.signal(t, syscall.SIGTERM) {
				pause(time.Duration(rng.IntN(25)) * time.Millisecond)
				if run.kill(t) {
					f.shutdown++
				} else {
					f.suspended++
					endedBy(run, true)
				}
			} else {
				finished = true
				endedBy(run, false)
			}
		} else if run.kill(t) {
			f.midRun++
		} else {
			finished = true
			endedBy(run, false)
		}
		if len(job.extra) > 0 {
			f.segments += changelogSegments(t, job.checkpoints)
		}
		run = job.start(t)
	}
	if !finished {
		// Right after the job finished: at its final checkpoint's line
		// or a few milliseconds later, as the commit, the job's result
		// and the clean-up go on.
		if run.awaitStdout(ctx, t, "final checkpoint ") {
			pause(time.Duration(rng.IntN(30)) * time.Millisecond)
		}
		if run.kill(t) {
			f.afterFinish++
		} else {
			endedBy(run, false)
		}
		run = job.start(t)
	}
	if rng.IntN(2) == 0 {
		// A run of the finished job (or of its final checkpoint) killed
		// as it starts.
		pause(time.Duration(rng.IntN(150)) * time.Millisecond)
		if run.kill(t) {
			f.restarting++
		} else {
			endedBy(run, false)
		}
		run = job.start(t)
	}
	if code := run.wait(ctx, t); code != 0 {
		job.logRuns(t)
		t.Fatalf("episode %d: the last run exited with status %d\nstderr:\n%s", f.episodes, code, tail(run.stderr.String(), 40))
	}
	f.runs += len(job.runs)
	for _, r := range job.runs {
		f.completed += r.completed()
		f.persisted += r.persisted()
	}
	got := readCommitted(ctx, t, job.out)
	checkExactCounts(t, got, keys, perKey)
	if t.Failed() {
		job.logRuns(t)
		t.Fatalf("episode %d: after the last run: open transaction on the output: %v; ongoing transactions of the job: %v",
			f.episodes, openTransaction(ctx, t, adm, job.out), ongoingTransactions(ctx, t, adm, job.prefix))
	}
	checkKcatAgrees(t, job.out, got)
	f.committed += len(got)
}

// A crash after a checkpoint completed and before its commit: the job
// exits in the sink's commit path of checkpoint 3, leaving its
// transactions open; the restarted job restores checkpoint 3, commits
// them, and the output is complete.
func TestJobCrashAfterCheckpointBeforeCommit(t *testing.T) {
	const keys, perKey = 8, 100
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	in, out := createTopic(ctx, t, adm, 4), createTopic(ctx, t, adm, 4)
	produceKeyed(ctx, t, in, keys, perKey)
	job := newChaosJob(t, in, out, "aligned", 300)
	run := job.start(t, "-exit-before-commit", "3")
	if code := run.wait(ctx, t); code != 3 {
		t.Fatalf("the run exited with status %d, want 3 (the injected exit before the commit)\nstderr:\n%s", code, tail(run.stderr.String(), 30))
	}
	if !strings.Contains(run.stdout.String(), "checkpoint 3 completed:") {
		t.Fatalf("checkpoint 3 did not complete before the exit:\n%s", run.stdout.String())
	}
	if !openTransaction(ctx, t, adm, out) {
		t.Fatal("no transaction is open after the exit: checkpoint 3's transactions should be pre-committed and not committed")
	}
	run = job.start(t)
	if code := run.wait(ctx, t); code != 0 {
		t.Fatalf("the restarted run exited with status %d\nstderr:\n%s", code, tail(run.stderr.String(), 40))
	}
	checkExactCounts(t, readCommitted(ctx, t, out), keys, perKey)
}

// A transaction left open by a killed run holds read_committed consumers
// back; the restarted job aborts it at startup and the last stable offset
// moves past it (the transaction timeout, 15 minutes, plays no part).
func TestJobAbortsLingeringTransactionAtStartup(t *testing.T) {
	const keys, perKey = 8, 150
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	in, out := createTopic(ctx, t, adm, 4), createTopic(ctx, t, adm, 4)
	produceKeyed(ctx, t, in, keys, perKey)
	job := newChaosJob(t, in, out, "aligned", 300)
	// The run kills itself once subtask 0 has written into the
	// transaction after checkpoint 2's barrier: that transaction is left
	// open, and no commit of subtask 0 can be on its way.
	run := job.start(t, "-kill-in-interval", "2")
	run.wait(ctx, t)
	if ws, ok := run.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the run ended with %v, want killed by SIGKILL\nstderr:\n%s", run.cmd.ProcessState, tail(run.stderr.String(), 30))
	}
	lingering := ongoingTransactions(ctx, t, adm, job.prefix+"-0")
	if len(lingering) == 0 {
		t.Fatal("no transaction of subtask 0 is ongoing after the kill")
	}
	ends, err := adm.ListEndOffsets(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if !openTransaction(ctx, t, adm, out) {
		t.Fatalf("transactions %v are ongoing but none holds the output's last stable offset", lingering)
	}
	run = job.start(t)
	await(ctx, t, "the last stable offsets to pass the killed run's end offsets", func() bool {
		lso, err := adm.ListCommittedOffsets(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		passed := true
		ends.Each(func(e kadm.ListedOffset) {
			if s, _ := lso.Lookup(out, e.Partition); s.Offset < e.Offset {
				passed = false
			}
		})
		return passed
	})
	await(ctx, t, "the abort of the lingering transactions", func() bool {
		return len(stillOngoing(ongoingTransactions(ctx, t, adm, job.prefix), lingering)) == 0
	})
	// The job logs the abort right after the broker has done it.
	await(ctx, t, "the restarted job's log line of the abort", func() bool {
		return strings.Contains(run.stderr.String(), "aborted a lingering transaction")
	})
	if code := run.wait(ctx, t); code != 0 {
		t.Fatalf("the restarted run exited with status %d\nstderr:\n%s", code, tail(run.stderr.String(), 40))
	}
	checkExactCounts(t, readCommitted(ctx, t, out), keys, perKey)
}

// txnInstance is one transaction: its id, producer id and epoch.
type txnInstance struct {
	id    string
	pid   int64
	epoch int16
}

// ongoingTransactions lists the transactions under prefix that are
// ongoing.
func ongoingTransactions(ctx context.Context, t *testing.T, adm *kadm.Client, prefix string) []txnInstance {
	t.Helper()
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatalf("list ongoing transactions: %v", err)
	}
	var ids []string
	for _, id := range listed.TransactionalIDs() {
		if strings.HasPrefix(id, prefix+"-") {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		t.Fatalf("describe transactions %v: %v", ids, err)
	}
	var out []txnInstance
	for _, d := range described.Sorted() {
		if d.Err == nil && d.State == "Ongoing" {
			out = append(out, txnInstance{d.TxnID, d.ProducerID, d.ProducerEpoch})
		}
	}
	return out
}

// stillOngoing returns the transactions of before that are still ongoing
// (same id, producer id and epoch).
func stillOngoing(now, before []txnInstance) []txnInstance {
	var out []txnInstance
	for _, x := range now {
		if slices.Contains(before, x) {
			out = append(out, x)
		}
	}
	return out
}

// The broker restarts during a run: the job fails over (its restart
// strategy restarts it in the process from its latest checkpoint), recovers
// once the broker is back, and the output is still exact.
func TestJobSurvivesBrokerRestart(t *testing.T) {
	restart := brokerRestarter(t)
	const keys, perKey = 16, 150
	ctx := jobContext(t, 3*time.Minute)
	adm := kadm.NewClient(newClient(t))
	in, out := createTopic(ctx, t, adm, 4), createTopic(ctx, t, adm, 4)
	produceKeyed(ctx, t, in, keys, perKey)
	job := newChaosJob(t, in, out, "aligned", 300)
	// A checkpoint cannot complete while the broker is away (the sinks
	// cannot flush), so with a 2 s checkpoint timeout and no tolerable
	// failures the job fails over during the restart, and its restart
	// strategy brings it back.
	run := job.start(t, "-restarts", "60", "-checkpoint-timeout", "2s")
	run.awaitCompleted(ctx, t, 3)
	before := run.completed()
	restart(ctx)
	if code := run.wait(ctx, t); code != 0 {
		t.Fatalf("the job exited with status %d after the broker restart\nstderr:\n%s", code, tail(run.stderr.String(), 40))
	}
	failovers := strings.Count(run.stderr.String(), "job failed; restarting")
	if failovers == 0 {
		t.Errorf("the job did not fail over during the broker restart")
	}
	if run.completed() <= before {
		t.Fatalf("no checkpoint completed after the broker restart (%d before, %d in all)", before, run.completed())
	}
	t.Logf("checkpoints completed: %d before the broker restart, %d in all; the job failed over %d times", before, run.completed(), failovers)
	got := readCommitted(ctx, t, out)
	checkExactCounts(t, got, keys, perKey)
	checkKcatAgrees(t, out, got)
}

// brokerRestarter returns a function that restarts the test broker with
// scripts/kafka restart: possible when KAFKA_BROKERS is the broker that
// scripts/kafka runs (from KAFKA_RUN_DIR, as scripts/with-kafka sets it).
// Otherwise the test is skipped, or fails under CI=true.
func brokerRestarter(t *testing.T) func(context.Context) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "scripts", "kafka"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script, "status").Output()
	want := "KAFKA_BROKERS=" + strings.Join(brokers(t), ",")
	if err != nil || !strings.Contains(string(out), want) {
		msg := "KAFKA_BROKERS is not a broker scripts/kafka runs from KAFKA_RUN_DIR (scripts/kafka status: " +
			strings.TrimSpace(string(out)) + "), so the test cannot restart it; run it under scripts/with-kafka or `make test-integration`"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return func(ctx context.Context) {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, script, "restart")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/kafka restart: %v\n%s", err, out)
		}
		t.Logf("the broker restarted in %v", time.Since(start).Round(100*time.Millisecond))
	}
}
