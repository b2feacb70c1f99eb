// Command clustercount runs Sluice's word count as one job on several OS
// processes, with high availability on etcd, and kills a worker midway:
// the output stays exactly once.
//
//	make demo-cluster                 # or: go run ./examples/clustercount
//
// Without --role it is the demo, the parent. It starts an embedded etcd
// (go.etcd.io/etcd/server/v3/embed) and an embedded Kafka broker
// (franz-go's kfake) in its own process, both on loopback, writes sample
// text to an input topic, and runs this same binary again as separate
// processes: a coordinator, which becomes the job's leader in etcd, and
// two workers of two slots each, for parallelism 4. The job reads the
// lines, splits them into words, counts each word in keyed state and
// writes (word, count) to an output topic in Kafka transactions that
// commit when the checkpoint covering them completes. After a few
// checkpoints the parent SIGKILLs a worker; the coordinator notices,
// restarts the whole job from its latest checkpoint and waits for slots,
// and the parent starts a replacement worker. Once the job has finished
// the parent checks with a read_committed consumer that every word's
// counts 1..n were committed exactly once, stops everything and exits 0
// (1, with the children's last log lines, if anything went wrong). The
// children log JSON lines on their standard output; the parent reads
// them to follow the job and prints a few of them.
//
// With --role coordinator or --role worker it is one process of the job,
// configured by cluster.Flags (--listen, --coordinator, --etcd,
// --slots, -D key=value, ...) and by the job flags (--brokers, --input,
// --output, --checkpoints, ...), which must be the same in every process:
// they all build the same plan.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluicehq/sluice/cluster"
	_ "github.com/sluicehq/sluice/cluster/ha/etcd" // --etcd: the coordinator leads the job in etcd
)

// sampleText is what the demo writes to the input topic, a line per
// record, --repeat times over.
var sampleText = []string{
	"a job on several processes is still one job",
	"the coordinator places every task on a slot of a worker",
	"the workers send records to each other over the network",
	"every process builds the same plan from the same code",
	"the coordinator leads the job with a lease in etcd",
	"a checkpoint is complete when every task has acknowledged it",
	"the sink commits its transaction when the checkpoint completes",
	"a worker killed in the middle loses what it had not committed",
	"the coordinator restarts the whole job from the latest checkpoint",
	"a new worker brings back the slots the job needs",
	"the open transactions of the killed worker are aborted",
	"so a reader of committed records sees every count once",
}

// Shape of the demo.
const (
	partitions     = 4 // of both topics: one per source subtask
	slotsPerWorker = 2
	killAfter      = 3 // completed checkpoints before the kill
)

// demoOptions are the parent's own flags.
type demoOptions struct {
	repeat  int
	timeout time.Duration
}

func main() {
	fs := flag.CommandLine
	cc := cluster.Flags(fs)
	var job jobFlags
	job.register(fs)
	var opts demoOptions
	fs.IntVar(&opts.repeat, "repeat", 800, "demo: how many times the sample text is written to the input")
	fs.DurationVar(&opts.timeout, "timeout", 60*time.Second, "demo: bound of the whole demo")
	exitWithParent := fs.Bool("exit-with-parent", false, "child: stop when standard input closes (the parent passes it)")
	flag.Parse()

	if cc.Role != cluster.RoleSingle {
		if err := runProcess(*cc, job, *exitWithParent); err != nil {
			fmt.Fprintf(os.Stderr, "clustercount %s: %v\n", cc.Role, err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	if err := runDemo(ctx, job, opts); err != nil {
		fmt.Fprintf(os.Stderr, "\nclustercount: FAILED after %.1fs: %v\n", time.Since(start).Seconds(), err)
		stop()
		os.Exit(1)
	}
	fmt.Printf("Done in %.1fs.\n", time.Since(start).Seconds())
}

// demo is the parent's state while it follows the job.
type demo struct {
	start  time.Time
	cs     *children
	out    *committedReader
	total  int             // (word, count) records the output must hold
	expect map[string]bool // the children whose exit is no error now

	registered  map[string]bool
	checkpoints int
	killed      bool
	shownAfter  int   // checkpoint lines printed after the kill
	restoreFrom int64 // the checkpoint the current attempt restores
	ended       *event
}

// say prints a line of the demo: the time since it began, who, what.
func (d *demo) say(who, format string, args ...any) {
	fmt.Printf("%5.1fs  %-11s %s\n", time.Since(d.start).Seconds(), who, fmt.Sprintf(format, args...))
}

// runDemo is the parent: it sets up etcd, the broker and the input, runs
// the job's processes through their phases and checks the output. Every
// child is killed and the temporary directory removed on every way out
// (the directory is kept, and the children's last log lines printed,
// after a failure).
func runDemo(ctx context.Context, job jobFlags, opts demoOptions) (err error) {
	if opts.repeat < 1 {
		return errors.New("--repeat must be at least 1")
	}
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	d := &demo{start: time.Now(), expect: map[string]bool{}, registered: map[string]bool{}}
	fmt.Println("Sluice on several processes: word count, Kafka -> Kafka, exactly once, on a coordinator and two workers")
	fmt.Println("(separate OS processes of this binary), high availability on etcd; a worker is SIGKILLed midway.")
	fmt.Println()

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "sluice-clustercount-")
	if err != nil {
		return err
	}
	keep := false
	defer func() {
		if keep {
			fmt.Fprintf(os.Stderr, "clustercount: the children's logs are in %s\n", filepath.Join(work, "logs"))
		} else {
			_ = os.RemoveAll(work)
		}
	}()
	for _, sub := range []string{"etcd", "checkpoints", "logs", "tls"} {
		if err := os.MkdirAll(filepath.Join(work, sub), 0o755); err != nil {
			return err
		}
	}

	// Phase 1: etcd, the broker, the topics and the input.
	etcd, endpoint, err := startEtcd(filepath.Join(work, "etcd"))
	if err != nil {
		return err
	}
	defer etcd.Close()
	d.say("etcd", "embedded etcd serving at %s", endpoint)
	kafka, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("start the embedded broker: %w", err)
	}
	defer kafka.Close()
	seeds := kafka.ListenAddrs()
	suffix := randomSuffix()
	job.brokers = strings.Join(seeds, ",")
	job.input, job.output = "clustercount-input-"+suffix, "clustercount-output-"+suffix
	job.txnPrefix = "clustercount-" + suffix
	job.checkpoints = filepath.Join(work, "checkpoints")
	if err := createTopics(ctx, seeds, partitions, job.input, job.output); err != nil {
		return err
	}
	var lines []string
	want := map[string]int64{}
	for range opts.repeat {
		for _, l := range sampleText {
			lines = append(lines, l)
			for _, w := range words(l) {
				want[w]++
				d.total++
			}
		}
	}
	if err := writeInput(ctx, seeds, job.input, partitions, lines); err != nil {
		return err
	}
	d.say("kafka", "embedded Kafka broker (kfake) at %s: wrote %d lines (%d words) to %s", job.brokers, len(lines), d.total, job.input)
	d.out, err = readCommitted(ctx, seeds, job.output)
	if err != nil {
		return err
	}
	defer d.out.close()

	// Phase 2: the coordinator, then two workers.
	d.cs = newChildren(exe, filepath.Join(work, "logs"))
	defer d.cs.stopAll()
	defer func() {
		// After a failure the children's logs tell why; after an
		// interrupt (Ctrl-C) nothing needs telling.
		if err != nil && !errors.Is(err, context.Canceled) {
			keep = true
			d.dumpLogs()
		}
	}()
	coordAddr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	// Mutual TLS between the processes: a CA made for the demo, and a
	// certificate of its own for each process (in production: files from
	// a Secret, or cert-manager's; see deploy/kubernetes).
	tlsArgs, err := demoCertificates(filepath.Join(work, "tls"), "coordinator", "w1", "w2", "w3")
	if err != nil {
		return err
	}
	d.say("demo", "mutual TLS between the processes: a CA made for the demo, a certificate per process in %s", filepath.Join(work, "tls"))
	cluster := []string{
		"--etcd", endpoint,
		"-D", "high-availability.etcd.path.root=/clustercount-" + suffix,
		"-D", "heartbeat.interval=200ms", "-D", "heartbeat.timeout=3s", "-D", "slot.request.timeout=30s",
	}
	coord, err := d.cs.start("coordinator", append(append(append([]string{"--role", "coordinator", "--listen", coordAddr, "--host", "127.0.0.1"},
		cluster...), tlsArgs["coordinator"]...), job.args()...)...)
	if err != nil {
		return err
	}
	fmt.Println()
	d.say("demo", "started the coordinator (pid %d); checkpoints go to %s", coord.cmd.Process.Pid, job.checkpoints)
	if err := d.until(ctx, "the coordinator to lead the job", 30*time.Second, func(e event) bool {
		return e.from == "coordinator" && e.msg() == "leading the job"
	}); err != nil {
		return err
	}
	startWorker := func(id string) error {
		w, err := d.cs.start(id, append(append(append([]string{"--role", "worker", "--worker-id", id, "--coordinator", coordAddr,
			"--slots", fmt.Sprint(slotsPerWorker), "--data-listen", "127.0.0.1:0", "--host", "127.0.0.1"}, cluster...), tlsArgs[id]...), job.args()...)...)
		if err != nil {
			return err
		}
		d.say("demo", "started worker %s (pid %d, %d slots)", id, w.cmd.Process.Pid, slotsPerWorker)
		return nil
	}
	for _, id := range []string{"w1", "w2"} {
		if err := startWorker(id); err != nil {
			return err
		}
	}
	if err := d.until(ctx, "both workers to register", 30*time.Second, func(event) bool {
		return d.registered["w1"] && d.registered["w2"]
	}); err != nil {
		return err
	}
	if err := d.until(ctx, fmt.Sprintf("%d checkpoints and some committed output", killAfter), 30*time.Second, func(event) bool {
		return d.checkpoints >= killAfter && d.out.records() > 0
	}); err != nil {
		return err
	}

	// Phase 3: kill a worker; the coordinator restarts the job, a new
	// worker brings the slots back.
	victim := d.cs.get("w2")
	d.expect["w2"] = true
	if err := victim.kill(); err != nil {
		return fmt.Errorf("kill w2: %w", err)
	}
	d.killed = true
	fmt.Println()
	d.say("demo", "SIGKILL worker w2 (pid %d), mid-run: %d of %d counts committed so far", victim.cmd.Process.Pid, d.out.records(), d.total)
	if err := d.until(ctx, "the coordinator to notice the lost worker", 30*time.Second, func(e event) bool {
		return e.from == "coordinator" && e.msg() == "worker lost" && e.str("worker") == "w2"
	}); err != nil {
		return err
	}
	// The restarted attempt waits for slots; wait for it to say so, but
	// not long.
	if err := d.until(ctx, "the coordinator to wait for slots", 5*time.Second, func(e event) bool {
		return e.from == "coordinator" && e.msg() == "waiting for task slots"
	}); err != nil && !errors.Is(err, errTimeout) {
		return err
	}
	if err := startWorker("w3"); err != nil {
		return err
	}
	if err := d.until(ctx, "the replacement worker to register", 30*time.Second, func(event) bool {
		return d.registered["w3"]
	}); err != nil {
		return err
	}

	// Phase 4: the job runs to its end; every process exits by itself.
	d.expect["coordinator"], d.expect["w1"], d.expect["w3"] = true, true, true
	left := []string{"coordinator", "w1", "w3"}
	if err := d.until(ctx, "the job to finish and every process to exit", 60*time.Second, func(event) bool {
		for _, n := range left {
			select {
			case <-d.cs.get(n).done:
			default:
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	for _, n := range left {
		if c := d.cs.get(n); c.err != nil {
			return fmt.Errorf("%s: %s", n, c.exitedWith())
		}
	}
	if d.ended == nil {
		return errors.New("the coordinator exited without reporting the job's end")
	}
	if s := d.ended.str("status"); s != "FINISHED" {
		return fmt.Errorf("the job ended %s: %s", s, d.ended.str("err"))
	}
	if d.ended.num("restarts") < 1 {
		return errors.New("the job did not restart after the worker was killed")
	}
	d.say("demo", "every process has exited with status 0")

	// Phase 5: the committed output, as a read_committed consumer sees it.
	deadline := time.Now().Add(15 * time.Second)
	for d.out.records() < d.total && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	// Anything past the expected records (a count committed twice) would
	// be visible by now; read a moment longer to see it.
	time.Sleep(time.Second)
	d.out.close()
	if err := d.out.check(want); err != nil {
		return err
	}
	fmt.Println()
	d.say("check", "output is exactly once: %d records, %d keys (every word's counts 1..n, each once, in order)", d.total, len(want))
	return nil
}

// errTimeout is until's error when the time is up.
var errTimeout = errors.New("timed out")

// until consumes the children's events, printing the notable ones, until
// done says so (done sees every event after it is shown) or the timeout.
// A child that exits without being expected to is an error.
func (d *demo) until(ctx context.Context, what string, timeout time.Duration, done func(event) bool) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case e := <-d.cs.events:
			d.show(e)
			if done(e) {
				return nil
			}
			if e.exited && !d.expect[e.from] {
				return fmt.Errorf("%s exited while waiting for %s (%s)", e.from, what, d.cs.get(e.from).exitedWith())
			}
		case <-t.C:
			return fmt.Errorf("%w after %v waiting for %s", errTimeout, timeout, what)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// show prints what a newcomer should see of an event.
func (d *demo) show(e event) {
	if e.exited {
		if e.err == nil {
			d.say(e.from, "exited (status 0)")
		} else {
			d.say(e.from, "exited (%v)", e.err)
		}
		return
	}
	if e.from != "coordinator" {
		switch e.msg() {
		case "the job has ended; worker exits":
			d.say(e.from, "the job has ended; worker exits")
		}
		return
	}
	switch e.msg() {
	case "leading the job":
		d.say("coordinator", "leads job %s (elected in etcd, epoch %d)", e.str("job_id"), e.num("epoch"))
	case "coordinator listening":
		d.say("coordinator", "listening at %s (workers authenticated by %s); the job needs %d slots", e.str("address"), e.str("authentication"), e.num("slots_needed"))
	case "worker registered":
		d.registered[e.str("worker")] = true
		d.say("coordinator", "worker %s registered: %d slots, data plane at %s", e.str("worker"), e.num("slots"), e.str("data"))
	case "job started":
		d.restoreFrom = e.num("restored_from")
	case "deploying attempt":
		from := "from no checkpoint (a fresh start)"
		if d.restoreFrom > 0 {
			from = fmt.Sprintf("restoring checkpoint %d", d.restoreFrom)
		}
		d.say("coordinator", "attempt %d: %d tasks placed on %d workers, %s", e.num("attempt"), e.num("tasks"), e.num("workers"), from)
	case msgCheckpoint:
		d.checkpoints++
		if d.killed {
			d.shownAfter++
			if d.shownAfter > 2 {
				if d.shownAfter == 3 {
					d.say("coordinator", "(the next checkpoints are not shown)")
				}
				return
			}
		}
		d.say("coordinator", "checkpoint %d completed in %dms (state %s); %d of %d counts committed so far",
			e.num("checkpoint"), e.num("duration_ms"), size(e.num("state_bytes")), d.out.records(), d.total)
	case "worker lost":
		d.say("coordinator", "worker %s lost (it ran %d tasks): %s", e.str("worker"), e.num("tasks"), e.str("cause"))
	case "job failed; restarting":
		d.say("coordinator", "job failed; restart %d from the latest checkpoint in %v", e.num("attempt"), time.Duration(e.num("delay")))
	case "waiting for task slots":
		d.say("coordinator", "waiting for task slots: %d needed, %d offered by %d workers", e.num("needed"), e.num("offered"), e.num("workers"))
	case msgJobEnded:
		d.ended = &e
		d.say("coordinator", "job %s after %d restart(s), %d checkpoints completed", e.str("status"), e.num("restarts"), e.num("checkpoints"))
	}
}

// dumpLogs prints the last lines of every child's log, after a failure.
func (d *demo) dumpLogs() {
	d.cs.mu.Lock()
	all := append([]*child(nil), d.cs.all...)
	d.cs.mu.Unlock()
	for _, c := range all {
		fmt.Fprintf(os.Stderr, "\n--- %s (%s), last lines of %s:\n", c.name, c.exitedWith(), c.log)
		for _, l := range c.tail(15) {
			fmt.Fprintln(os.Stderr, clip(l, 300))
		}
	}
}

func size(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/1024)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
