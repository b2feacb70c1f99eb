package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/testcerts"
)

// clusterTLS is the mutual TLS every cluster test runs with: a CA made for
// the test and a certificate of its own for each process (peerauth's
// security.ssl.internal.*, through the --tls-* flags).
type clusterTLS struct {
	t      *testing.T
	ca     *testcerts.CA
	caFile string
	mu     sync.Mutex
	issued map[string][]string
}

func newClusterTLS(t *testing.T) *clusterTLS {
	t.Helper()
	ca := testcerts.NewTestCA(t, "cluster test CA")
	return &clusterTLS{t: t, ca: ca, caFile: ca.File(t), issued: map[string][]string{}}
}

// args are the flags of process name: its certificate (the same one
// again when the process is restarted), key and the CA.
func (c *clusterTLS) args(name string) []string {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.issued[name]; ok {
		return a
	}
	cert, key := c.ca.MustIssue(c.t, name).Files(c.t)
	a := []string{"-tls-cert", cert, "-tls-key", key, "-tls-ca", c.caFile}
	c.issued[name] = a
	return a
}

// chaosCluster is one chaos job on several processes: a
// coordinator and workers, each a chaosjob process with the job's flags,
// the same args, and its role's.
type chaosCluster struct {
	job   *chaosJob
	tls   *clusterTLS
	args  []string // every process's flags besides the job's: -parallelism, -restarts...
	coord *chaosRun
	addr  string // the coordinator's control address
	// workers holds the live process of each worker id; a killed worker
	// that is not restarted leaves it.
	workers map[string]*chaosRun
	procs   []clusterProc // every process started, in order
}

type clusterProc struct {
	name string
	run  *chaosRun
}

// clusterHeartbeats are the heartbeat options of every process: a worker
// whose process dies is lost at once (its stream breaks); one that stops
// answering is lost within 2 s.
var clusterHeartbeats = []string{"-D", "heartbeat.interval=200ms", "-D", "heartbeat.timeout=2s"}

var listeningAddr = regexp.MustCompile(`msg="coordinator listening".* address=(\S+)`)

// startChaosCluster starts the job's coordinator, listening on a port of
// its choice, and waits for its address. On a failure of the test every
// process's state, stdout and last log lines are logged (after the
// processes were killed).
func startChaosCluster(ctx context.Context, t *testing.T, job *chaosJob, args ...string) *chaosCluster {
	t.Helper()
	c := &chaosCluster{job: job, args: args, workers: map[string]*chaosRun{}, tls: newClusterTLS(t)}
	t.Cleanup(func() {
		if t.Failed() {
			c.logProcs(t)
		}
	})
	coordArgs := []string{"-role", "coordinator", "-listen", "127.0.0.1:0", "-D", "slot.request.timeout=60s"}
	coordArgs = append(append(append(coordArgs, c.tls.args("coordinator")...), clusterHeartbeats...), args...)
	c.coord = job.start(t, coordArgs...)
	c.procs = append(c.procs, clusterProc{"coordinator", c.coord})
	m := c.coord.awaitMatch(ctx, t, &c.coord.stderr, listeningAddr)
	if m == nil {
		t.Fatalf("the coordinator ended (%v) before it listened\nstdout:\n%s\nstderr (last lines):\n%s",
			c.coord.cmd.ProcessState, c.coord.stdout.String(), tail(c.coord.stderr.String(), 30))
	}
	c.addr = m[1]
	if !regexp.MustCompile(`msg="coordinator listening".* authentication="mutual TLS"`).MatchString(c.coord.stderr.String()) {
		t.Fatalf("the coordinator does not say it authenticates its workers with mutual TLS:\n%s", tail(c.coord.stderr.String(), 10))
	}
	return c
}

// startWorker starts worker id with 2 slots, plus args (which come last
// and may override the cluster's).
func (c *chaosCluster) startWorker(t *testing.T, id string, args ...string) *chaosRun {
	t.Helper()
	all := []string{"-role", "worker", "-coordinator", c.addr, "-slots", "2", "-data-listen", "127.0.0.1:0",
		"-host", "127.0.0.1", "-worker-id", id}
	all = append(append(append(append(all, c.tls.args(id)...), clusterHeartbeats...), c.args...), args...)
	r := c.job.start(t, all...)
	c.workers[id] = r
	c.procs = append(c.procs, clusterProc{fmt.Sprintf("worker %s (process %d)", id, len(c.procs)), r})
	return r
}

// killWorker kills worker id with SIGKILL and waits for its process to be
// gone; it fails the test when the process had ended by itself.
func (c *chaosCluster) killWorker(t *testing.T, id string) {
	t.Helper()
	r := c.workers[id]
	if !r.kill(t) {
		t.Fatalf("worker %s ended by itself (%v) before its SIGKILL\nstdout:\n%s\nstderr (last lines):\n%s",
			id, r.cmd.ProcessState, r.stdout.String(), tail(r.stderr.String(), 30))
	}
	delete(c.workers, id)
}

// checkLossesLogged fails the test unless the coordinator logged each of
// kills (a worker id each) exactly once, at INFO, its cause in words, and
// never a gRPC status.
func (c *chaosCluster) checkLossesLogged(t *testing.T, kills []string) {
	t.Helper()
	logs := c.coord.stderr.String()
	want := map[string]int{}
	for _, id := range kills {
		want[id]++
	}
	for id, n := range want {
		re := regexp.MustCompile(`(?m)^.*msg="worker lost" role=coordinator worker=` + regexp.QuoteMeta(id) + ` .*$`)
		lines := re.FindAllString(logs, -1)
		if len(lines) != n {
			t.Errorf("the coordinator logged the loss of worker %s %d times, after %d kills", id, len(lines), n)
		}
		for _, l := range lines {
			if !strings.Contains(l, "level=INFO") || !strings.Contains(l, `cause="connection closed"`) {
				t.Errorf("the loss of a killed worker logged as %s, want INFO with cause \"connection closed\"", l)
			}
		}
	}
	for _, bad := range []string{"rpc error", "code = Canceled", "desc = "} {
		if strings.Contains(logs, bad) {
			t.Errorf("the coordinator logged %q", bad)
		}
	}
}

// restarts counts the coordinator's restarts of the job so far.
func (c *chaosCluster) restarts() int {
	return strings.Count(c.coord.stderr.String(), "job failed; restarting")
}

// awaitCoordinator waits until cond holds for the coordinator's logs and
// reports true, or false when the coordinator ended first.
func (c *chaosCluster) awaitCoordinator(ctx context.Context, t *testing.T, what string, cond func(stderr string) bool) bool {
	t.Helper()
	r := c.coord
	for {
		s, next := r.stderr.next()
		if cond(s) {
			return true
		}
		select {
		case <-next:
		case <-r.done:
			return cond(r.stderr.String())
		case <-ctx.Done():
			t.Fatalf("waiting for the coordinator: %s: %v", what, ctx.Err())
		}
	}
}

// finish waits for the coordinator to end and fails the test unless it
// exited 0 saying "job finished" and every live worker then exited 0
// saying "worker exited".
func (c *chaosCluster) finish(ctx context.Context, t *testing.T) {
	t.Helper()
	if code := c.coord.wait(ctx, t); code != 0 || !c.coord.said("job finished") {
		t.Fatalf("the coordinator ended with %v, %q; want exit status 0 and \"job finished\"\nstderr (last lines):\n%s",
			c.coord.cmd.ProcessState, lastLine(c.coord.stdout.String()), tail(c.coord.stderr.String(), 40))
	}
	for id, w := range c.workers {
		if code := w.wait(ctx, t); code != 0 || !w.said("worker exited") {
			t.Errorf("worker %s ended with %v, %q; want exit status 0 and \"worker exited\" once the job finished\nstderr (last lines):\n%s",
				id, w.cmd.ProcessState, lastLine(w.stdout.String()), tail(w.stderr.String(), 30))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// logProcs logs every process of the cluster: how it ended, its stdout
// and its last log lines.
func (c *chaosCluster) logProcs(t *testing.T) {
	t.Helper()
	for _, p := range c.procs {
		t.Logf("%s (%v):\nstdout (last lines):\n%s\nstderr (last lines):\n%s",
			p.name, p.run.cmd.ProcessState, tail(p.run.stdout.String(), 10), tail(p.run.stderr.String(), 25))
	}
}

// awaitMatch waits until b matches re and returns the submatches, or nil
// when the run ended without a match.
func (r *chaosRun) awaitMatch(ctx context.Context, t *testing.T, b *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	for {
		s, next := b.next()
		if m := re.FindStringSubmatch(s); m != nil {
			return m
		}
		select {
		case <-next:
		case <-r.done:
			return re.FindStringSubmatch(b.String())
		case <-ctx.Done():
			t.Fatalf("waiting for %q from the chaos job: %v\nstdout:\n%s\nstderr (last lines):\n%s",
				re, ctx.Err(), r.stdout.String(), tail(r.stderr.String(), 40))
		}
	}
}

// lastDeployment is the coordinator's last "deploying attempt" log line.
func (c *chaosCluster) lastDeployment() string {
	last := ""
	for _, l := range strings.Split(c.coord.stderr.String(), "\n") {
		if strings.Contains(l, `msg="deploying attempt"`) {
			last = l
		}
	}
	return last
}

// checkRestores fails the test unless the coordinator reported at least
// want restores, each from the latest checkpoint it had completed by then:
// every restart of the job resumes from its latest checkpoint.
func (c *chaosCluster) checkRestores(t *testing.T, want int) {
	t.Helper()
	restores := c.coord.restores()
	if len(restores) < want {
		t.Errorf("the coordinator reported %d restores, want at least %d (one per restart after a checkpoint)", len(restores), want)
	}
	completed := c.coord.completedCheckpoints()
	for _, r := range restores {
		var latest int64
		for _, cp := range completed {
			if cp.Line < r.Line {
				latest = max(latest, cp.ID)
			}
		}
		if r.ID != latest {
			t.Errorf("a restart restored checkpoint %d (line %d of the coordinator's stdout); the latest completed by then was %d", r.ID, r.Line, latest)
		}
	}
}
