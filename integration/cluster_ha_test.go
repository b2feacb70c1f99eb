package integration

// High availability of a job on several processes, end to end:
// the chaos job (integration/chaosjob) runs as two coordinators and two
// workers, each its own OS process, against the real broker and a real
// etcd embedded in the test process. The coordinators campaign for the
// job in etcd; the standby blocks until it leads, then resumes the job
// from the checkpoint etcd's pointer names, with no resume option (none is
// given to any process); the workers find the leader in etcd and
// follow it. Every completed checkpoint moves the job's pointer in etcd
// with a write fenced by the leader's epoch before any sink commits, so a
// former leader that wakes up after its lease is gone commits nothing,
// records no result and deletes nothing. Whatever happens to the leader,
// the committed output is the output of one run with no crash.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/checkpoint/storage"
	"github.com/sluicehq/sluice/cluster/ha"
	_ "github.com/sluicehq/sluice/cluster/ha/etcd" // the test reads etcd through ha.Open
	"github.com/sluicehq/sluice/internal/etcdtest"
)

// A keyed count (Kafka to Kafka, exactly once, RocksDB, checkpoints every
// 200 ms) on two HA coordinators and two workers of two slots
// (parallelism 4). Once the leader has completed checkpoints it is
// killed with SIGKILL. The standby, which printed nothing while it stood
// by, is elected once the leader's lease expires, restores the latest
// checkpoint (at least the leader's last completed one), the workers
// register with it, its checkpoints resume and the job finishes; every
// process exits 0, the job's result is the standby's run, and the
// committed output is exact (read_committed and kcat).
func TestClusterHACoordinatorKilled(t *testing.T) {
	const keys, perKey = 16, 120
	ctx := jobContext(t, 75*time.Second)
	adm := kadm.NewClient(newClient(t))
	// 1920 records at 100/s per worker: about ten seconds of work, so the
	// standby has most of it to do after the takeover.
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 100)
	job.backend = "rocksdb"
	c := startHACluster(t, job, "-parallelism", "4")
	leader := c.startCoordinator(ctx, t, "coordinator A")
	epochA := c.awaitLeader(ctx, t, leader)
	standby := c.startCoordinator(ctx, t, "coordinator B")
	workers := []*haProc{c.startWorker(t, "w1"), c.startWorker(t, "w2")}
	leader.run.awaitCompleted(ctx, t, 2)
	c.step(t, "coordinator A completed %d checkpoints", leader.run.completed())
	c.checkStandingBy(ctx, t, leader, standby)
	oldRun := c.runIDOf(ctx, t, leader)

	lastOfA := leader.run.lastCompleted()
	if !leader.run.kill(t) {
		t.Fatalf("coordinator A ended by itself (%v, %q) before its SIGKILL: the input is too small",
			leader.run.cmd.ProcessState, lastLine(leader.run.stdout.String()))
	}
	c.step(t, "SIGKILL coordinator A after its checkpoint %d", lastOfA)

	epochB := c.awaitTakeover(ctx, t, standby, epochA)
	restored := c.awaitRestore(ctx, t, standby, lastOfA)
	if !standby.run.awaitNextCompleted(ctx, t, 0) {
		t.Fatalf("coordinator B ended (%v, %q) before it completed a checkpoint", standby.run.cmd.ProcessState, lastLine(standby.run.stdout.String()))
	}
	first := standby.run.completedCheckpoints()[0]
	c.step(t, "coordinator B completed checkpoint %d", first.ID)
	if first.ID <= restored {
		t.Errorf("coordinator B's first checkpoint is %d, not above the checkpoint %d it restored", first.ID, restored)
	}
	newRun := c.runIDOf(ctx, t, standby)
	if newRun == oldRun {
		t.Fatalf("coordinator B's checkpoints carry coordinator A's run id %s", oldRun)
	}

	c.finish(ctx, t, standby, workers)
	c.step(t, "coordinator B finished the job; the workers exited")
	c.checkFollowed(t, workers, standby)
	c.checkRecorded(ctx, t, standby, newRun)
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("leader epoch %d killed after checkpoint %d; standby epoch %d restored checkpoint %d and completed %d checkpoints; %d committed records",
		epochA, lastOfA, epochB, restored, standby.run.completed(), n)
}

// The leader paused past its lease: coordinator A is stopped with SIGSTOP
// while it leads. The workers' heartbeat timeout drops their sessions
// with it; once its lease expires the standby B is elected, restores the
// latest checkpoint, the workers follow it and it completes a checkpoint
// of its own. Then A is woken with SIGCONT, still believing it leads, with
// the workers' acknowledgements and its own timers pending: it must find
// out that it lost the leadership (its lease is gone, its fenced writes
// fail), complete no checkpoint, commit nothing and exit without
// recording a result. B finishes the job; the job's recorded result (the
// job-result file and the result in etcd) is B's run, etcd's checkpoint
// pointer is B's last checkpoint, and the committed output is exact.
func TestClusterHACoordinatorPausedPastItsLease(t *testing.T) {
	const keys, perKey = 16, 120
	ctx := jobContext(t, 75*time.Second)
	adm := kadm.NewClient(newClient(t))
	job := newKeyedJob(ctx, t, adm, keys, perKey, "aligned", 100)
	job.backend = "rocksdb"
	c := startHACluster(t, job, "-parallelism", "4")
	leader := c.startCoordinator(ctx, t, "coordinator A")
	epochA := c.awaitLeader(ctx, t, leader)
	standby := c.startCoordinator(ctx, t, "coordinator B")
	workers := []*haProc{c.startWorker(t, "w1"), c.startWorker(t, "w2")}
	leader.run.awaitCompleted(ctx, t, 2)
	c.step(t, "coordinator A completed %d checkpoints", leader.run.completed())
	c.checkStandingBy(ctx, t, leader, standby)
	oldRun := c.runIDOf(ctx, t, leader)

	lastOfA := leader.run.lastCompleted()
	if !leader.run.signal(t, syscall.SIGSTOP) {
		t.Fatalf("coordinator A ended by itself (%v, %q) before its SIGSTOP: the input is too small",
			leader.run.cmd.ProcessState, lastLine(leader.run.stdout.String()))
	}
	c.step(t, "SIGSTOP coordinator A after its checkpoint %d", lastOfA)

	epochB := c.awaitTakeover(ctx, t, standby, epochA)
	restored := c.awaitRestore(ctx, t, standby, lastOfA)
	if !standby.run.awaitNextCompleted(ctx, t, 0) {
		t.Fatalf("coordinator B ended (%v, %q) before it completed a checkpoint", standby.run.cmd.ProcessState, lastLine(standby.run.stdout.String()))
	}
	c.step(t, "coordinator B completed checkpoint %d", standby.run.completedCheckpoints()[0].ID)
	newRun := c.runIDOf(ctx, t, standby)
	if newRun == oldRun {
		t.Fatalf("coordinator B's checkpoints carry coordinator A's run id %s", oldRun)
	}
	if standby.run.ended() {
		t.Fatalf("coordinator B ended (%v, %q) before coordinator A woke up: the input is too small to wake A while B runs",
			standby.run.cmd.ProcessState, lastLine(standby.run.stdout.String()))
	}

	// Nothing A printed or logged before this point counts against it.
	completedBefore := leader.run.completed()
	stderrBefore := len(leader.run.stderr.String())
	if !leader.run.signal(t, syscall.SIGCONT) {
		t.Fatalf("coordinator A ended (%v) while stopped", leader.run.cmd.ProcessState)
	}
	c.step(t, "SIGCONT coordinator A")
	code := leader.run.wait(ctx, t)
	c.step(t, "coordinator A exited with status %d, %q", code, lastLine(leader.run.stdout.String()))
	woke := leader.run.stderr.String()[stderrBefore:]
	switch {
	case code == 1 && leader.run.said("job failed"), code == chaosExitSuspended && leader.run.said("job suspended"):
	default:
		t.Errorf("the former leader exited with %v, %q; want status 1 and \"job failed\" or status %d and \"job suspended\"",
			leader.run.cmd.ProcessState, lastLine(leader.run.stdout.String()), chaosExitSuspended)
	}
	if n := leader.run.completed(); n != completedBefore {
		t.Errorf("the former leader completed %d checkpoints after it woke up: %v", n-completedBefore, leader.run.completedCheckpoints()[completedBefore:])
	}
	if strings.Contains(woke, `msg="checkpoint completed"`) {
		t.Errorf("the former leader logged a completed checkpoint after it woke up:\n%s", grepLines(woke, `msg="checkpoint completed"`))
	}
	t.Logf("the former leader's log after it woke up (warnings and errors):\n%s", tail(grepLevels(woke), 15))
	lost := strings.Contains(woke, "lost the job's leadership")
	fenced := strings.Contains(woke, ha.ErrFenced.Error())
	if !lost && !fenced {
		t.Errorf("the former leader's logs after it woke up say neither that it lost the leadership nor that a write was fenced:\n%s", tail(woke, 30))
	}
	// B may have finished meanwhile; any result recorded so far is B's.
	if res := c.readResult(t); res != nil && res.RunID != newRun {
		t.Fatalf("the job's result %s was recorded by run %s, not by coordinator B's run %s (coordinator A's is %s)", res, res.RunID, newRun, oldRun)
	}
	c.checkFenced(ctx, t, epochB)

	c.finish(ctx, t, standby, workers)
	c.step(t, "coordinator B finished the job; the workers exited")
	c.checkFollowed(t, workers, standby)
	c.checkRecorded(ctx, t, standby, newRun)
	c.logLeftovers(t, oldRun)
	n := checkJobOutput(ctx, t, job, keys, perKey)
	t.Logf("leader epoch %d stopped after checkpoint %d; standby epoch %d restored checkpoint %d and completed %d checkpoints; "+
		"the former leader woke up (lost=%t fenced=%t, %q) and completed none; %d committed records",
		epochA, lastOfA, epochB, restored, standby.run.completed(), lost, fenced, lastLine(leader.run.stdout.String()), n)
}

// haJobID is the job id of the HA tests' chaos jobs: their directory under
// the checkpoints and their keys in etcd.
const haJobID = "ha-chaos"

// haOptions are every process's cluster options: the cluster tests'
// heartbeats (a stopped peer is dropped within 2 s) and a 2 s leader
// lease.
var haOptions = slices.Concat(clusterHeartbeats, []string{"-D", "high-availability.etcd.lease-duration=2s"})

// haCluster is one chaos job on HA coordinators and workers, with the etcd
// they share.
type haCluster struct {
	job   *chaosJob
	args  []string // every process's flags besides the job's
	tls   *clusterTLS
	etcd  []string
	ha    ha.Services // the test's own view of etcd
	start time.Time
	procs []*haProc // every process started, in order
}

// haProc is one process of the cluster.
type haProc struct {
	name string
	run  *chaosRun
	addr string // a coordinator's control address
}

// startHACluster starts an etcd for the job; its processes are started
// with args besides the job's flags. On a failure every process's state,
// stdout and last log lines are logged, after the processes were killed.
func startHACluster(t *testing.T, job *chaosJob, args ...string) *haCluster {
	t.Helper()
	c := &haCluster{job: job, args: args, etcd: etcdtest.Start(t), start: time.Now(), tls: newClusterTLS(t)}
	job.extra = append(job.extra, "-job-id", haJobID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := ha.Open(ctx, ha.Config{Endpoints: c.etcd, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.ha = s
	t.Cleanup(func() {
		_ = s.Close()
		if t.Failed() {
			c.logProcs(t)
		}
	})
	return c
}

// step logs a step of the test with the time since the cluster started.
func (c *haCluster) step(t *testing.T, format string, args ...any) {
	t.Helper()
	args = append([]any{time.Since(c.start).Seconds()}, args...)
	t.Logf("%6.2fs "+format, args...)
}

// startCoordinator starts a coordinator on a port of its own and waits
// until it campaigns for the job.
func (c *haCluster) startCoordinator(ctx context.Context, t *testing.T, name string) *haProc {
	t.Helper()
	p := &haProc{name: name, addr: haFreeAddr(t)}
	all := append([]string{"-role", "coordinator", "-listen", p.addr, "-host", "127.0.0.1", "-etcd", strings.Join(c.etcd, ",")}, haOptions...)
	all = append(all, c.tls.args(name)...)
	p.run = c.job.start(t, append(all, c.args...)...)
	c.procs = append(c.procs, p)
	if !p.run.awaitStderr(ctx, t, "campaigning for the job's leadership") {
		t.Fatalf("%s ended (%v) before it campaigned\nstderr (last lines):\n%s", name, p.run.cmd.ProcessState, tail(p.run.stderr.String(), 30))
	}
	c.step(t, "%s (pid %d, %s) campaigns", name, p.run.cmd.Process.Pid, p.addr)
	return p
}

// startWorker starts worker id with 2 slots; it finds the coordinator in
// etcd.
func (c *haCluster) startWorker(t *testing.T, id string) *haProc {
	t.Helper()
	all := append([]string{"-role", "worker", "-etcd", strings.Join(c.etcd, ","), "-slots", "2",
		"-data-listen", "127.0.0.1:0", "-host", "127.0.0.1", "-worker-id", id}, haOptions...)
	all = append(all, c.tls.args(id)...)
	p := &haProc{name: "worker " + id, run: c.job.start(t, append(all, c.args...)...)}
	c.procs = append(c.procs, p)
	return p
}

// leader reads the job's leader in etcd ("" when there is none).
func (c *haCluster) leader(ctx context.Context, t *testing.T) (string, int64) {
	t.Helper()
	cand, epoch, err := c.ha.Leader(ctx, haJobID)
	if err != nil {
		return "", 0
	}
	return cand, epoch
}

// awaitLeader waits until p logs that it leads and etcd names it the
// leader, and returns its epoch.
func (c *haCluster) awaitLeader(ctx context.Context, t *testing.T, p *haProc) int64 {
	t.Helper()
	if !p.run.awaitStderr(ctx, t, `msg="leading the job"`) {
		t.Fatalf("%s ended (%v) before it led the job\nstderr (last lines):\n%s", p.name, p.run.cmd.ProcessState, tail(p.run.stderr.String(), 30))
	}
	var epoch int64
	await(ctx, t, p.name+" as the leader in etcd", func() bool {
		var cand string
		cand, epoch = c.leader(ctx, t)
		return cand == p.addr
	})
	c.step(t, "%s leads, epoch %d", p.name, epoch)
	return epoch
}

// checkStandingBy fails the test unless the standby has printed nothing
// and etcd names the leader.
func (c *haCluster) checkStandingBy(ctx context.Context, t *testing.T, leader, standby *haProc) {
	t.Helper()
	if out := standby.run.stdout.String(); out != "" || standby.run.ended() {
		t.Fatalf("%s printed %q (ended: %t) while %s leads; a standby runs nothing", standby.name, out, standby.run.ended(), leader.name)
	}
	if s := standby.run.stderr.String(); strings.Contains(s, `msg="leading the job"`) || strings.Contains(s, "coordinator listening") {
		t.Fatalf("%s leads or listens while %s leads:\n%s", standby.name, leader.name, tail(s, 20))
	}
	if cand, _ := c.leader(ctx, t); cand != leader.addr {
		t.Fatalf("etcd names %q the leader, want %s at %s", cand, leader.name, leader.addr)
	}
}

// awaitTakeover waits until the standby leads, in its log and in etcd,
// with an epoch above the former leader's, and returns its epoch.
func (c *haCluster) awaitTakeover(ctx context.Context, t *testing.T, standby *haProc, formerEpoch int64) int64 {
	t.Helper()
	epoch := c.awaitLeader(ctx, t, standby)
	if epoch <= formerEpoch {
		t.Fatalf("%s leads with epoch %d, not above the former leader's %d", standby.name, epoch, formerEpoch)
	}
	return epoch
}

// awaitRestore waits until the standby restored a checkpoint, at least
// atLeast, and returns its id. The standby is given no resume option: it
// must have resumed from the checkpoint etcd's pointer names, and say so.
func (c *haCluster) awaitRestore(ctx context.Context, t *testing.T, standby *haProc, atLeast int64) int64 {
	t.Helper()
	if !standby.run.awaitStdout(ctx, t, "restored from checkpoint ") {
		t.Fatalf("%s ended (%v, %q) without restoring a checkpoint", standby.name, standby.run.cmd.ProcessState, lastLine(standby.run.stdout.String()))
	}
	r := standby.run.restores()[0]
	c.step(t, "%s restored checkpoint %d", standby.name, r.ID)
	if r.ID < max(atLeast, 1) {
		t.Fatalf("%s restored checkpoint %d; the former leader had completed checkpoint %d", standby.name, r.ID, atLeast)
	}
	if said := grepLines(standby.run.stderr.String(), "resuming from the checkpoint the HA store points to"); !strings.Contains(said, fmt.Sprintf("checkpoint=%d ", r.ID)) {
		c.logProcs(t)
		t.Fatalf("%s restored checkpoint %d but did not log resuming from etcd's pointer to it: %q", standby.name, r.ID, said)
	}
	return r.ID
}

// runIDOf reads the run id in the _metadata of the newest checkpoint that
// p completed and that is still there (a newer one discards the older).
func (c *haCluster) runIDOf(ctx context.Context, t *testing.T, p *haProc) string {
	t.Helper()
	var run string
	await(ctx, t, "the run id of "+p.name, func() bool {
		ended := p.run.ended()
		cps := p.run.completedCheckpoints()
		for i := len(cps) - 1; i >= 0; i-- {
			if snap, err := storage.LoadSnapshotMetadata(storage.OSFS{}, cps[i].Path, nil); err == nil {
				run = snap.Metadata.RunID
				return true
			}
		}
		if ended {
			t.Fatalf("%s ended (%v) and none of its checkpoints %v is left to read its run id from", p.name, p.run.cmd.ProcessState, cps)
		}
		return false
	})
	if run == "" {
		t.Fatalf("the checkpoints of %s carry no run id", p.name)
	}
	return run
}

// finish waits for the coordinator to end and fails the test unless it
// exited 0 saying "job finished" and every worker then exited 0 saying
// "worker exited".
func (c *haCluster) finish(ctx context.Context, t *testing.T, coord *haProc, workers []*haProc) {
	t.Helper()
	if code := coord.run.wait(ctx, t); code != 0 || !coord.run.said("job finished") {
		t.Fatalf("%s ended with %v, %q; want exit status 0 and \"job finished\"\nstderr (last lines):\n%s",
			coord.name, coord.run.cmd.ProcessState, lastLine(coord.run.stdout.String()), tail(coord.run.stderr.String(), 40))
	}
	for _, w := range workers {
		if code := w.run.wait(ctx, t); code != 0 || !w.run.said("worker exited") {
			t.Errorf("%s ended with %v, %q; want exit status 0 and \"worker exited\" once the job finished\nstderr (last lines):\n%s",
				w.name, w.run.cmd.ProcessState, lastLine(w.run.stdout.String()), tail(w.run.stderr.String(), 30))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// checkFollowed fails the test unless every worker registered with the
// new leader and ran tasks it deployed.
func (c *haCluster) checkFollowed(t *testing.T, workers []*haProc, leader *haProc) {
	t.Helper()
	for _, w := range workers {
		s := w.run.stderr.String()
		registered := false
		for _, l := range strings.Split(s, "\n") {
			registered = registered || strings.Contains(l, `msg="registered with the coordinator"`) && strings.Contains(l, " coordinator="+leader.addr+" ")
		}
		if !registered {
			t.Errorf("%s never registered with %s at %s:\n%s", w.name, leader.name, leader.addr, grepLines(s, "registered with the coordinator"))
		}
		if !strings.Contains(s, `msg="coordinator lost; cancelling the tasks"`) {
			t.Errorf("%s never lost the former leader", w.name)
		}
		if w.run.completed() != 0 {
			t.Errorf("%s printed checkpoint lines: the checkpoint listener runs on the coordinator", w.name)
		}
	}
	if s := leader.run.stderr.String(); strings.Count(s, `msg="worker registered"`) < len(workers) {
		t.Errorf("%s saw %d worker registrations, want %d:\n%s", leader.name, strings.Count(s, `msg="worker registered"`), len(workers), grepLines(s, "worker registered"))
	}
}

// readResult reads the job's result file (nil when there is none).
func (c *haCluster) readResult(t *testing.T) *storage.JobResult {
	t.Helper()
	res, err := storage.ReadJobResult(storage.OSFS{}, filepath.Join(c.job.checkpoints, haJobID))
	if err != nil {
		t.Fatalf("read the job's result: %v", err)
	}
	return res
}

// checkRecorded fails the test unless the job's recorded result, in its
// directory and in etcd, is run's, finished, and etcd's checkpoint
// pointer is the leader's last completed checkpoint.
func (c *haCluster) checkRecorded(ctx context.Context, t *testing.T, leader *haProc, run string) {
	t.Helper()
	res := c.readResult(t)
	if res == nil {
		t.Fatalf("no job result in %s after the job finished", filepath.Join(c.job.checkpoints, haJobID))
	}
	if res.Status != storage.ResultFinished || res.RunID != run || !res.Clean {
		t.Errorf("the job's result is %s (clean %t), want FINISHED by %s's run %s, clean", res, res.Clean, leader.name, run)
	}
	data, ok, err := c.ha.Result(ctx, haJobID)
	if err != nil || !ok {
		t.Fatalf("the job's result in etcd: %v (found %t)", err, ok)
	}
	var inEtcd storage.JobResult
	if err := json.Unmarshal(data, &inEtcd); err != nil {
		t.Fatalf("the job's result in etcd %q: %v", data, err)
	}
	if inEtcd.RunID != run || inEtcd.Status != storage.ResultFinished {
		t.Errorf("the job's result in etcd is %s, want FINISHED by run %s", &inEtcd, run)
	}
	ptr, ok, err := c.ha.LatestCheckpoint(ctx, haJobID)
	if err != nil || !ok {
		t.Fatalf("the checkpoint pointer in etcd: %v (found %t)", err, ok)
	}
	if last := leader.run.lastCompleted(); ptr.ID != last {
		t.Errorf("etcd's checkpoint pointer is checkpoint %d (%s), want %s's last completed checkpoint %d", ptr.ID, ptr.Path, leader.name, last)
	}
}

// checkFenced fails the test unless the leader in etcd still has the
// epoch it had: the former leader took nothing back.
func (c *haCluster) checkFenced(ctx context.Context, t *testing.T, epoch int64) {
	t.Helper()
	if _, e := c.leader(ctx, t); e != 0 && e != epoch {
		t.Errorf("the job's leader in etcd has epoch %d, want %d (the new leader's) or none", e, epoch)
	}
}

// logLeftovers logs the checkpoints left in the job's directory after
// the job finished, and which run took each: the new leader discards
// what it owns; a former leader's checkpoint is left alone.
func (c *haCluster) logLeftovers(t *testing.T, formerRun string) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(c.job.checkpoints, haJobID, "chk-*"))
	for _, d := range dirs {
		what := "no _metadata"
		if snap, err := storage.LoadSnapshotMetadata(storage.OSFS{}, d, nil); err == nil {
			what = "run " + snap.Metadata.RunID
			if snap.Metadata.RunID == formerRun {
				what += " (the former leader's)"
			}
		}
		t.Logf("left in the job's directory after the job finished: %s: %s", filepath.Base(d), what)
	}
}

// logProcs logs every process of the cluster: how it ended, its stdout
// and its last log lines.
func (c *haCluster) logProcs(t *testing.T) {
	t.Helper()
	for _, p := range c.procs {
		t.Logf("%s %s (%v):\nstdout (last lines):\n%s\nstderr (last lines):\n%s",
			p.name, p.addr, p.run.cmd.ProcessState, tail(p.run.stdout.String(), 12), tail(p.run.stderr.String(), 30))
	}
}

// haFreeAddr returns a loopback address whose port was free a moment ago:
// a coordinator advertises its listen address in etcd, so it cannot pick
// port 0.
func haFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// grepLevels returns the warnings and errors of the log s.
func grepLevels(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.HasPrefix(l, "chaosjob:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
