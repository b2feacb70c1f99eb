package integration

// A real network partition of a worker: the partition job
// (integration/partitionjob, no Kafka) runs as a coordinator and three
// workers, each its own OS process; worker a runs in a network namespace
// of its own, joined to the host by a veth pair, the others on the host.
// Once checkpoints complete the test takes the namespace's end of the
// veth down: a no longer reaches anyone, and no one reaches a (packets
// to it are dropped, the established connections hang rather than
// break). The coordinator must declare a lost by its heartbeat timeout
// and restart the job, on the other workers' slots when they are enough
// or waiting for slots when they are not, the tasks of the partitioned
// attempt on the other workers exiting although their connections to a
// hang. Once the link is up again a registers again (its own session
// timed out too, or, with a long heartbeat timeout of its own, it learns
// from the coordinator's end of the stream that it was lost), or exits
// by itself when the job ended without it. The job finishes, the
// committed output is exactly once, and every process exits 0.
//
// Network namespaces need root and iproute2's `ip netns`: without them
// the test skips, except under CI=true as root, where a failing `ip
// netns` is a failure.

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
)

// The partitioned worker: a, in the network namespace; b and c on the
// host.
const partitionedWorker = "a"

var partitionLost = regexp.MustCompile(`msg="worker lost" .*\bworker=` + partitionedWorker + ` tasks=(\d+)`)

// Worker a cut off the network: with parallelism 4 on three workers of
// two slots the job restarts on b's and c's four slots while a is away;
// with parallelism 6 it needs a's slots and waits for a to come back;
// with parallelism 4 and a heartbeat timeout of a minute on a, the link
// heals while a's tasks of the partitioned attempt still run beside the
// attempt that replaced them.
func TestClusterNetworkPartition(t *testing.T) {
	ipPath := requireNetns(t)
	bin := partitionJobBinary(t)
	for _, tc := range []partitionCase{
		{name: "spare slots", parallelism: 4},
		{name: "waits for the partitioned worker", parallelism: 6, waits: true},
		{name: "healed before the worker noticed", parallelism: 4, unaware: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			partitionEpisode(t, ipPath, bin, tc)
		})
	}
}

// partitionCase is one way to partition worker a.
type partitionCase struct {
	name        string
	parallelism int
	// waits: the job needs a's slots (b's and c's are not enough), so it
	// waits for a to come back.
	waits bool
	// unaware: a's own heartbeat.timeout is a minute, so a does not
	// notice the partition: the link heals once the job runs on without
	// a, with a's tasks of the partitioned attempt still running (they
	// share the file system with the attempt that replaced them); a
	// learns that it was lost from the coordinator's end of the stream.
	// Otherwise the link heals once a's own session timed out.
	unaware bool
}

func partitionEpisode(t *testing.T, ipPath, bin string, tc partitionCase) {
	parallelism, waits := tc.parallelism, tc.waits
	const keys, records, rate = 16, 2500, 250
	ctx := jobContext(t, 90*time.Second)
	start := time.Now()
	mark := func(format string, args ...any) {
		t.Logf("%6.2fs "+format, append([]any{time.Since(start).Seconds()}, args...)...)
	}
	n := newPartitionNet(t, ipPath)
	mark("network namespace %s: host %s (%s), namespace %s (%s)", n.ns, n.hostIP, n.hostIf, n.nsIP, n.nsIf)

	out := t.TempDir()
	job := []string{
		"-checkpoints", t.TempDir(), "-out", out, "-records", strconv.Itoa(records), "-keys", strconv.Itoa(keys),
		"-rate", strconv.Itoa(rate), "-parallelism", strconv.Itoa(parallelism), "-restarts", "50",
	}
	c := &chaosCluster{workers: map[string]*chaosRun{}, tls: newClusterTLS(t)}
	t.Cleanup(func() {
		if t.Failed() {
			c.logProcs(t)
		}
	})
	startProc := func(name, netns string, args ...string) *chaosRun {
		t.Helper()
		all := append(append(append([]string{}, job...), clusterHeartbeats...), args...)
		r := startPartitionProc(t, bin, n.ip, netns, all...)
		c.procs = append(c.procs, clusterProc{name, r})
		return r
	}
	c.coord = startProc("coordinator", "", append([]string{"-role", "coordinator", "-listen", n.hostIP + ":0", "-host", n.hostIP,
		"-D", "slot.request.timeout=60s"}, c.tls.args("coordinator")...)...)
	m := c.coord.awaitMatch(ctx, t, &c.coord.stderr, listeningAddr)
	if m == nil {
		t.Fatalf("the coordinator ended (%v) before it listened", c.coord.cmd.ProcessState)
	}
	c.addr = m[1]
	startWorker := func(id, netns, host string, args ...string) *chaosRun {
		t.Helper()
		r := startProc("worker "+id, netns, append(append([]string{"-role", "worker", "-coordinator", c.addr, "-slots", "2",
			"-host", host, "-data-listen", host + ":0", "-worker-id", id}, c.tls.args(id)...), args...)...)
		c.workers[id] = r
		return r
	}
	// a registers first, so that the first attempt certainly places tasks
	// on it (the coordinator deploys once the registered workers offer
	// enough slots, on the first two with parallelism 4).
	var aArgs []string
	if tc.unaware {
		aArgs = []string{"-D", "heartbeat.timeout=60s"}
	}
	a := startWorker(partitionedWorker, n.ns, n.nsIP, aArgs...)
	if !c.awaitCoordinator(ctx, t, "the registration of worker a, in the namespace", func(s string) bool {
		return registeredWorker(s, partitionedWorker)
	}) {
		t.Fatalf("the coordinator ended (%v) before worker a registered from the network namespace", c.coord.cmd.ProcessState)
	}
	mark("worker a registered from the namespace")
	startWorker("b", "", n.hostIP)
	startWorker("c", "", n.hostIP)
	// b and c registered too: with parallelism 4 their slots are there for
	// the restart without a.
	for _, id := range []string{"b", "c"} {
		if !c.awaitCoordinator(ctx, t, "the registration of worker "+id, func(s string) bool {
			return registeredWorker(s, id)
		}) {
			t.Fatalf("the coordinator ended (%v) before worker %s registered", c.coord.cmd.ProcessState, id)
		}
	}

	c.coord.awaitCompleted(ctx, t, 2)
	if !a.awaitStderr(ctx, t, `msg="tasks deployed"`) {
		t.Fatalf("worker a ended (%v) without running tasks", a.cmd.ProcessState)
	}
	if c.coord.said("job finished") || c.restarts() != 0 {
		t.Fatalf("before the partition the job finished or restarted (%d restarts): nothing to partition", c.restarts())
	}
	completedBefore := c.coord.completed()
	waitsBefore := strings.Count(c.coord.stderr.String(), `msg="waiting for task slots"`)
	deploysBefore := strings.Count(c.coord.stderr.String(), `msg="deploying attempt"`)
	mark("%d checkpoints completed, worker a runs tasks; partitioning it: %s down", completedBefore, n.nsIf)
	n.setLink(t, "down")

	// The coordinator hears nothing from a for heartbeat.timeout: a is
	// lost, with the tasks it ran, and the attempt fails.
	var lost []string
	if !c.awaitCoordinator(ctx, t, "worker a declared lost", func(s string) bool {
		lost = partitionLost.FindStringSubmatch(s)
		return lost != nil
	}) {
		t.Fatalf("the coordinator ended (%v, %q) without declaring the partitioned worker a lost",
			c.coord.cmd.ProcessState, lastLine(c.coord.stdout.String()))
	}
	if lost[1] == "0" {
		t.Fatalf("the coordinator lost worker a with no task: %s", lost[0])
	}
	mark("the coordinator lost worker a (%s tasks)", lost[1])
	if !c.awaitCoordinator(ctx, t, "the restart after the loss of a", func(s string) bool {
		return strings.Contains(s, "job failed; restarting")
	}) {
		t.Fatalf("the coordinator ended (%v) without restarting the job after a was lost", c.coord.cmd.ProcessState)
	}
	mark("the job restarts")

	if waits {
		// b and c offer 4 of the 6 slots: the restart waits for a.
		if !c.awaitCoordinator(ctx, t, "the wait for a's slots", func(s string) bool {
			return strings.Count(s, `msg="waiting for task slots"`) > waitsBefore
		}) {
			t.Fatalf("the coordinator ended (%v) instead of waiting for slots", c.coord.cmd.ProcessState)
		}
		mark("the coordinator waits for slots")
		if d := strings.Count(c.coord.stderr.String(), `msg="deploying attempt"`); d != deploysBefore {
			t.Fatalf("the coordinator deployed %d attempts while a was away; it has 4 of the 6 slots needed", d-deploysBefore)
		}
	} else {
		// b's and c's 4 slots are enough: the job goes on without a, on
		// workers whose tasks of the partitioned attempt, with their data
		// connections to a hanging, were cancelled and exited.
		if !c.awaitCoordinator(ctx, t, "the attempt deployed without a", func(s string) bool {
			return strings.Count(s, `msg="deploying attempt"`) > deploysBefore
		}) {
			t.Fatalf("the coordinator ended (%v) without deploying the job on the remaining workers", c.coord.cmd.ProcessState)
		}
		if d := c.lastDeployment(); !strings.Contains(d, " workers=2 ") {
			t.Fatalf("the attempt after the loss of a was deployed on other than the 2 remaining workers: %s", d)
		}
		if n := strings.Count(c.coord.stderr.String(), `msg="waiting for task slots"`); n > waitsBefore {
			t.Errorf("the coordinator waited for slots after the loss of a; b's and c's 4 slots are enough")
		}
		completed := c.coord.completed()
		if !c.coord.awaitNextCompleted(ctx, t, completed) {
			t.Fatalf("the coordinator ended (%v, %q) without completing a checkpoint of the attempt without a",
				c.coord.cmd.ProcessState, lastLine(c.coord.stdout.String()))
		}
		mark("a checkpoint completed without a (%d in all)", c.coord.completed())
	}

	const ownLoss = `msg="coordinator lost; cancelling the tasks"`
	if tc.unaware {
		if strings.Contains(a.stderr.String(), ownLoss) {
			t.Fatalf("worker a noticed the partition, with a heartbeat.timeout of a minute")
		}
	} else {
		// a's own heartbeat timeout: it cancels its tasks and tries to
		// register again, in vain while the link is down.
		if !awaitPartitionLogs(ctx, t, a, "worker a's own loss of the coordinator", func(s string) bool {
			return strings.Contains(s, ownLoss)
		}) {
			t.Fatalf("worker a ended (%v) during the partition", a.cmd.ProcessState)
		}
		mark("worker a lost the coordinator")
	}
	sessions := strings.Count(a.stderr.String(), `msg="registered with the coordinator"`)
	mark("healing: %s up (worker a had %d sessions)", n.nsIf, sessions)
	n.setLink(t, "up")

	// Once the link is back a registers again (unaware, it first learns
	// that its session ended), unless the job ended first (possible only
	// with spare slots), in which case it exits by itself.
	registered := awaitPartitionLogs(ctx, t, a, "worker a registered again or exited", func(s string) bool {
		return strings.Count(s, `msg="registered with the coordinator"`) > sessions
	})
	switch {
	case registered:
		mark("worker a registered again")
	case waits:
		t.Fatalf("worker a ended (%v) without registering again, and the job needs its slots", a.cmd.ProcessState)
	default:
		mark("worker a exited (%v) without registering again: the job had ended", a.cmd.ProcessState)
	}
	if registered && !strings.Contains(a.stderr.String(), ownLoss) {
		t.Errorf("worker a registered again without saying that its session with the coordinator was lost")
	}
	completed := c.coord.completed()

	c.finish(ctx, t)
	mark("the job finished; every process exited 0")
	if waits {
		if c.coord.completed() <= completed {
			t.Errorf("no checkpoint completed after worker a came back")
		}
		if d := c.lastDeployment(); !strings.Contains(d, " workers=3 ") {
			t.Errorf("the last attempt was deployed on other than 3 workers: %s", d)
		}
		if got := strings.Count(a.stderr.String(), `msg="tasks deployed"`); got < 2 {
			t.Errorf("worker a ran tasks in %d attempts, want 2: before the partition and after", got)
		}
		if n := strings.Count(c.coord.stderr.String(), `msg="waiting for task slots"`); n <= waitsBefore {
			t.Errorf("the coordinator never waited for slots")
		}
	}
	if r := c.restarts(); r < 1 {
		t.Errorf("the job restarted %d times; the loss of a should restart it", r)
	}
	c.checkRestores(t, 1)
	for _, p := range c.procs {
		if s := p.run.stderr.String(); strings.Contains(s, "cancellation timed out") {
			t.Errorf("%s: tasks outlived the cancellation timeout:\n%s", p.name, grepLines(s, "cancellation timed out"))
		}
	}
	got := checkPartitionOutput(t, out, records, keys)
	mark("%d restarts, %d checkpoints, %d restores, %d committed records; worker a registered %d times",
		c.restarts(), c.coord.completed(), len(c.coord.restores()), got,
		strings.Count(a.stderr.String(), `msg="registered with the coordinator"`))
}

// registeredWorker reports whether the coordinator's logs say worker id
// registered.
func registeredWorker(logs, id string) bool {
	return regexp.MustCompile(`msg="worker registered" .*\bworker=` + regexp.QuoteMeta(id) + ` `).MatchString(logs)
}

// awaitPartitionLogs waits until cond holds for r's logs and reports
// true, or false when r ended first.
func awaitPartitionLogs(ctx context.Context, t *testing.T, r *chaosRun, what string, cond func(stderr string) bool) bool {
	t.Helper()
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
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// partitionNet is a network namespace joined to the host by a veth pair:
// hostIf (hostIP/30) on the host, nsIf (nsIP/30, with lo up) in ns. Both
// ends' connected /30 routes are all the routing there is.
type partitionNet struct {
	ip           string // the ip command
	ns           string
	hostIf, nsIf string
	hostIP, nsIP string
}

// requireNetns returns the path of `ip` when this process may create
// network namespaces: it runs as root and `ip netns add` works (tried on
// a namespace of its own, deleted at once). Otherwise the test skips,
// or fails under CI=true as root.
func requireNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: run the tests as root (CI does) for the network partition tests")
	}
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s; under CI=true as root the network partition tests never skip", msg)
		}
		t.Skip(msg)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/ip"); serr != nil {
			unavailable("no ip command (iproute2): %v", err)
		}
		ip = "/usr/sbin/ip"
	}
	probe := randomName("sluice-probe-")
	if out, err := exec.Command(ip, "netns", "add", probe).CombinedOutput(); err != nil {
		unavailable("`ip netns add` fails (%v: %s): network namespaces are unavailable here", err, bytes.TrimSpace(out))
	}
	if out, err := exec.Command(ip, "netns", "delete", probe).CombinedOutput(); err != nil {
		t.Fatalf("ip netns delete %s: %v: %s", probe, err, bytes.TrimSpace(out))
	}
	return ip
}

func randomName(prefix string) string {
	var b [4]byte
	for i := range b {
		b[i] = byte(rand.UintN(256))
	}
	return prefix + hex.EncodeToString(b[:])
}

// newPartitionNet creates the namespace and the veth pair on a random
// 10.X.Y.0/30 that no address or route of the host uses; both are
// deleted at cleanup, also on failure (after the processes in the
// namespace were killed: cleanups run last in, first out).
func newPartitionNet(t *testing.T, ip string) *partitionNet {
	t.Helper()
	suffix := randomName("")
	n := &partitionNet{ip: ip, ns: "sluice-part-" + suffix, hostIf: "slh" + suffix, nsIf: "sln" + suffix}
	n.run(t, "netns", "add", n.ns)
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "netns", "delete", n.ns).CombinedOutput(); err != nil {
			t.Errorf("cleanup: ip netns delete %s: %v: %s", n.ns, err, bytes.TrimSpace(out))
		}
	})
	used := n.run(t, "-4", "addr", "show") + n.run(t, "-4", "route", "show", "table", "all")
	for {
		x, y := 64+rand.IntN(190), rand.IntN(256)
		prefix := fmt.Sprintf("10.%d.%d.", x, y)
		if !strings.Contains(used, prefix) {
			n.hostIP, n.nsIP = prefix+"1", prefix+"2"
			break
		}
	}
	n.run(t, "link", "add", n.hostIf, "type", "veth", "peer", "name", n.nsIf, "netns", n.ns)
	t.Cleanup(func() {
		// Deleting one end deletes the pair; the namespace's deletion
		// (next) would too, once no process is left in it.
		out, err := exec.Command(ip, "link", "delete", n.hostIf).CombinedOutput()
		if err != nil && !bytes.Contains(out, []byte("Cannot find device")) {
			t.Errorf("cleanup: ip link delete %s: %v: %s", n.hostIf, err, bytes.TrimSpace(out))
		}
	})
	n.run(t, "addr", "add", n.hostIP+"/30", "dev", n.hostIf)
	n.run(t, "link", "set", n.hostIf, "up")
	n.run(t, "netns", "exec", n.ns, ip, "link", "set", "lo", "up")
	n.run(t, "netns", "exec", n.ns, ip, "addr", "add", n.nsIP+"/30", "dev", n.nsIf)
	n.setLink(t, "up")
	return n
}

// run runs ip with args and returns its output; a failure fails the test.
func (n *partitionNet) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(n.ip, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out)
}

// setLink sets the namespace's end of the veth up or down. Down, the
// namespace has no route out and the host's packets to it are dropped
// (its end has no carrier); up, the kernel adds the connected route back.
func (n *partitionNet) setLink(t *testing.T, state string) {
	t.Helper()
	n.run(t, "netns", "exec", n.ns, n.ip, "link", "set", n.nsIf, state)
}

// startPartitionProc starts the partition job with args, in network
// namespace netns unless it is "" (`ip netns exec` executes the program
// in place, so the process is the job's own). It is killed at cleanup,
// also on failure.
func startPartitionProc(t *testing.T, bin, ip, netns string, args ...string) *chaosRun {
	t.Helper()
	r := &chaosRun{done: make(chan struct{})}
	if netns != "" {
		r.cmd = exec.Command(ip, append([]string{"netns", "exec", netns, bin}, args...)...)
	} else {
		r.cmd = exec.Command(bin, args...)
	}
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start the partition job: %v", err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// partitionJobBinary builds integration/partitionjob into the test's
// temporary directory and returns its path.
func partitionJobBinary(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "partitionjob")
	if out, err := exec.Command("go", "build", "-o", path, "./partitionjob").CombinedOutput(); err != nil {
		t.Fatalf("go build ./integration/partitionjob: %v\n%s", err, out)
	}
	return path
}

// partitionKeyCount is the partition job's output record.
type partitionKeyCount struct {
	Key   int64 `json:"k"`
	Count int64 `json:"c"`
}

// checkPartitionOutput fails the test unless the file sink's committed
// output holds, for every key, the counts 1..n once each (record i counts
// for key i % keys), and returns the number of committed records.
func checkPartitionOutput(t *testing.T, out string, records, keys int64) int {
	t.Helper()
	got, err := filesink.ReadCommitted(out, codec.JSON[partitionKeyCount]{})
	if err != nil {
		t.Fatalf("read the committed output: %v", err)
	}
	seen := map[partitionKeyCount]int{}
	for _, kc := range got {
		seen[kc]++
	}
	bad := 0
	for kc, n := range seen {
		if n != 1 && bad < 5 {
			bad++
			t.Errorf("key %d count %d committed %d times", kc.Key, kc.Count, n)
		}
	}
	for k := range keys {
		want := records / keys
		if k < records%keys {
			want++
		}
		var missing []int64
		for i := int64(1); i <= want; i++ {
			if seen[partitionKeyCount{Key: k, Count: i}] == 0 {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 && bad < 5 {
			bad++
			t.Errorf("key %d: counts %v of 1..%d never committed", k, summarizeMissing(missing), want)
		}
	}
	if int64(len(got)) != records {
		t.Errorf("%d committed records, want %d", len(got), records)
	}
	return len(got)
}

func summarizeMissing(m []int64) string {
	if len(m) > 6 {
		return fmt.Sprintf("%v... (%d)", m[:6], len(m))
	}
	return fmt.Sprint(m)
}
