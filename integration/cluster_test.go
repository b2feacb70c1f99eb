package integration

// One job on several processes, end to end: the chaos job
// (integration/chaosjob) runs as a coordinator and workers, each its own
// OS process, against the real broker, with RocksDB state and checkpoints
// every 200 ms in a directory they all share. Workers are killed with
// SIGKILL, restarted or not, joined by new ones, or built with another
// plan; whatever happens, the committed output is the output of one run
// with no crash, and every process still alive at the end exits 0.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// A keyed count on a coordinator and three workers of two slots,
// parallelism 6: the records cross processes over TCP, every worker runs
// tasks, checkpoints complete, the output is exactly once (franz-go's
// read_committed consumer and kcat), and the workers exit 0 by themselves
// once the job finished.
func TestClusterExactlyOnce(t *testing.T) {
	const keys, perKey = 16, 200
	ctx := jobContext(t, 90*time.Second)
	adm := kadm.NewClient(newClient(t))
	// 3200 records at 300/s per worker: a few seconds, a dozen checkpoints.
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 300)
	job.backend = "rocksdb"
	c := startChaosCluster(ctx, t, job, "-parallelism", "6")
	for i := range 3 {
		c.startWorker(t, fmt.Sprintf("w%d", i+1))
	}
	c.finish(ctx, t)
	for id, w := range c.workers {
		if !strings.Contains(w.stderr.String(), `msg="tasks deployed"`) {
			t.Errorf("worker %s ran no task: the job should use every worker's slots", id)
		}
		if w.completed() != 0 {
			t.Errorf("worker %s printed %d checkpoint lines: the checkpoint listener runs on the coordinator", id, w.completed())
		}
	}
	if n := c.coord.completed(); n < 3 {
		t.Errorf("the coordinator completed %d checkpoints, want a few", n)
	}
	if r := c.restarts(); r != 0 {
		t.Errorf("the job restarted %d times with nothing killed", r)
	}
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("%d checkpoints, %d committed records", c.coord.completed(), n)
}

// Exactly-once under worker crashes: at least 10 times a random worker is
// killed with SIGKILL while the job runs (after the attempt's first
// checkpoint, a random moment later) and restarted with the same worker
// id once it is gone; each time the coordinator restarts the whole job
// from its latest checkpoint, waiting for the worker's slots. The output
// is exact, the coordinator exits 0 with "job finished" and the last
// process of every worker exits 0.
func TestClusterExactlyOnceUnderWorkerKills(t *testing.T) {
	const keys, perKey, minKills = 16, 150, 10
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx := jobContext(t, 2*time.Minute)
	adm := kadm.NewClient(newClient(t))
	// 2400 records at 100/s per worker: an attempt commits a few hundred
	// milliseconds of it before its kill, so ten kills leave work to do.
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 100)
	job.backend = "rocksdb"
	c := startChaosCluster(ctx, t, job, "-parallelism", "6", "-restarts", "100")
	ids := []string{"w1", "w2", "w3"}
	for _, id := range ids {
		c.startWorker(t, id)
	}
	pause := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	kills := 0
	var killed []string
	for kills < minKills {
		// The attempt runs: it completed a checkpoint since the last
		// restart (or the start).
		if !c.coord.awaitNextCompleted(ctx, t, c.coord.completed()) {
			break
		}
		pause(time.Duration(rng.IntN(300)) * time.Millisecond)
		if strings.Contains(c.coord.stdout.String(), "final checkpoint ") {
			break // the job is finishing: a kill now need not restart it
		}
		id := ids[rng.IntN(len(ids))]
		before := c.restarts()
		c.killWorker(t, id)
		kills++
		killed = append(killed, id)
		c.startWorker(t, id)
		if !c.awaitCoordinator(ctx, t, "a restart after the kill", func(s string) bool {
			return strings.Count(s, "job failed; restarting") > before
		}) {
			break
		}
	}
	if kills < minKills {
		t.Fatalf("the job ended (coordinator: %v, %q) after %d kills, want %d (when it finished: the input is too small for the kills; make it larger or slower)",
			c.coord.cmd.ProcessState, lastLine(c.coord.stdout.String()), kills, minKills)
	}
	c.finish(ctx, t)
	if r := c.restarts(); r < kills {
		t.Errorf("the coordinator restarted the job %d times after %d kills of workers that ran its tasks", r, kills)
	}
	c.checkRestores(t, kills)
	c.checkLossesLogged(t, killed)
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("%d kills, %d restarts, %d processes, %d checkpoints, %d restores on the coordinator, %d committed records",
		kills, c.restarts(), len(c.procs), c.coord.completed(), len(c.coord.restores()), n)
}

// A worker killed and not restarted. With parallelism 4 on three workers
// of two slots the job restarts at once on the four slots of the other
// two. With parallelism 6 the job waits for slots, and resumes when a new
// worker (a fourth id) joins. Both outputs are exact.
func TestClusterWorkerLost(t *testing.T) {
	const keys, perKey = 16, 120
	for _, tc := range []struct {
		name        string
		parallelism string
		join        bool // the job needs the slots of a new worker
	}{
		{"spare slots", "4", false},
		{"waits for a new worker", "6", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 0))
			ctx := jobContext(t, 90*time.Second)
			adm := kadm.NewClient(newClient(t))
			// 1920 records at 150/s per worker: the loss lands mid-run.
			job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 150)
			job.backend = "rocksdb"
			c := startChaosCluster(ctx, t, job, "-parallelism", tc.parallelism, "-restarts", "10")
			ids := []string{"w1", "w2", "w3"}
			for _, id := range ids {
				c.startWorker(t, id)
			}
			c.coord.awaitCompleted(ctx, t, 2)
			// A worker that runs tasks, so that its loss fails the attempt
			// (with p=4 the first attempt may be deployed on the first two
			// workers that registered).
			var running []string
			for _, id := range ids {
				if strings.Contains(c.workers[id].stderr.String(), `msg="tasks deployed"`) {
					running = append(running, id)
				}
			}
			if len(running) < 2 {
				t.Fatalf("workers %v run tasks after 2 checkpoints; want at least 2 of %v", running, ids)
			}
			id := running[rng.IntN(len(running))]
			waits := strings.Count(c.coord.stderr.String(), `msg="waiting for task slots"`)
			c.killWorker(t, id)
			if !c.awaitCoordinator(ctx, t, "the restart after the loss of "+id, func(s string) bool {
				return strings.Contains(s, "job failed; restarting")
			}) {
				t.Fatalf("the coordinator ended (%v, %q) without restarting the job after worker %s was killed",
					c.coord.cmd.ProcessState, lastLine(c.coord.stdout.String()), id)
			}
			if tc.join {
				if !c.awaitCoordinator(ctx, t, "the wait for slots", func(s string) bool {
					return strings.Count(s, `msg="waiting for task slots"`) > waits
				}) {
					t.Fatalf("the coordinator ended (%v, %q) instead of waiting for slots", c.coord.cmd.ProcessState, lastLine(c.coord.stdout.String()))
				}
				completed := c.coord.completed()
				w4 := c.startWorker(t, "w4")
				c.finish(ctx, t)
				if c.coord.completed() <= completed {
					t.Errorf("no checkpoint completed after worker w4 joined")
				}
				if !strings.Contains(w4.stderr.String(), `msg="tasks deployed"`) {
					t.Errorf("the new worker w4 ran no task")
				}
				if d := c.lastDeployment(); !strings.Contains(d, " workers=3 ") {
					t.Errorf("the last attempt was deployed on other than 3 workers: %s", d)
				}
			} else {
				completed := c.coord.completed()
				c.finish(ctx, t)
				if c.coord.completed() <= completed {
					t.Errorf("no checkpoint completed after worker %s was lost", id)
				}
				if n := strings.Count(c.coord.stderr.String(), `msg="waiting for task slots"`); n > waits {
					t.Errorf("the coordinator waited for slots after the loss (%d waits, %d before); the other workers' 4 slots are enough", n, waits)
				}
				if d := c.lastDeployment(); !strings.Contains(d, " workers=2 ") {
					t.Errorf("the last attempt was deployed on other than the 2 remaining workers: %s", d)
				}
			}
			c.checkRestores(t, 1)
			n := checkJobOutput(ctx, t, job, keys, perKey)
			t.Logf("worker %s lost; %d restarts, %d checkpoints, %d committed records", id, c.restarts(), c.coord.completed(), n)
		})
	}
}

// A worker built with another plan (the same chaosjob with another
// -parallelism) is refused: it exits 1 with an error naming both plans'
// fingerprints and different code, and the coordinator goes on: with a
// worker of the right plan the job finishes and the output is exact.
func TestClusterRefusesWorkerOfOtherCode(t *testing.T) {
	const keys, perKey = 8, 50
	ctx := jobContext(t, 60*time.Second)
	adm := kadm.NewClient(newClient(t))
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 0)
	job.backend = "rocksdb"
	c := startChaosCluster(ctx, t, job, "-parallelism", "2")
	odd := c.startWorker(t, "odd", "-parallelism", "3")
	if code := odd.wait(ctx, t); code != 1 || !odd.said("worker failed") {
		t.Fatalf("the worker of another plan ended with %v, %q; want exit status 1 and \"worker failed\"",
			odd.cmd.ProcessState, lastLine(odd.stdout.String()))
	}
	delete(c.workers, "odd")
	for _, want := range []string{"fingerprint", "different code"} {
		if !strings.Contains(odd.stderr.String(), want) {
			t.Errorf("the refused worker's error does not say %q:\n%s", want, tail(odd.stderr.String(), 10))
		}
	}
	if !c.awaitCoordinator(ctx, t, "the refusal's log line", func(s string) bool {
		return strings.Contains(s, "worker registration refused")
	}) {
		t.Fatalf("the coordinator ended (%v) after the refusal", c.coord.cmd.ProcessState)
	}
	if c.coord.completed() != 0 {
		t.Fatalf("the coordinator completed a checkpoint with no worker of its plan")
	}
	c.startWorker(t, "w1")
	c.finish(ctx, t)
	checkJobOutput(ctx, t, job, keys, perKey)
}
