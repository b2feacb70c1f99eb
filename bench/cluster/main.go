// Command cluster measures a job on several OS processes against the same
// job in one, and reports the figures rather than asserting
// them.
//
//	go run ./bench/cluster                      # the keyed count, one run of every setup (~25 s on 2 idle cores)
//	go run ./bench/cluster -runs 3 -records 3000000 -setups single,2
//	go run ./bench/cluster -checkpointdemo      # unaligned checkpoints under backpressure, over TCP and in memory
//
// The keyed count: a bounded datagen source of -records records (an int64
// key, one of -keys, and a -payload byte string: 1 KiB by default) ->
// keyBy(key) -> a running count per key in keyed state (heap backend) ->
// a discarding sink, parallelism -parallelism (6) everywhere, an aligned
// checkpoint every -interval (1 s). Its setups run the same job, the same
// total parallelism:
//
//   - single: one process (no --role), every channel in memory;
//   - 1, 2 and 3 workers: a coordinator process and N worker processes of
//     ceil(P/N) slots each. With slot sharing subtask i of every vertex
//     runs in slot i, so the job needs P slots; P = 6 divides evenly over
//     1, 2 and 3 workers (6, 3 and 2 slots), so every worker runs the same
//     share. Channels between tasks of one worker stay in memory, those
//     between workers go over TCP (runtime/network's Transport): with N
//     workers (N-1)/N of the keyed exchange crosses processes.
//
// Every process is this binary again (os.Executable) with --child; the
// checkpoints of a setup go to a directory every process shares, fresh
// for each run. It prints a table: records/s (the records over the job's
// wall time, from the coordinator's deployment of the tasks to the job's
// end; in one process from the start), the wall time of the processes
// (from the first start to the last exit), the checkpoints completed and
// their median and maximum end-to-end duration, the CPU time of all the
// processes, and the peak resident set of every worker (of the one
// process, for single) and of the coordinator (the kernel's ru_maxrss of each exited child: its
// VmHWM, or this driver's peak if that was larger, see usage). The 1-minute load average before each setup
// says how busy the machine was.
//
// With -checkpointdemo it builds examples/checkpointdemo and runs it in
// slow mode with unaligned checkpoints, in one process and on a
// coordinator and two workers of one slot each (parallelism 2: half of
// the keyed exchange between the source and the slow count crosses TCP,
// each way), and prints the median end-to-end duration and persisted
// in-flight data of the checkpoints of each, side by side.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/cluster"
)

// options are the parent's own flags.
type options struct {
	setups  string
	runs    int
	timeout time.Duration
	keep    bool
	cluster []string // -D options for every process of a setup

	demo         bool
	demoBin      string
	demoDuration time.Duration
	demoInterval time.Duration
}

func main() {
	fs := flag.CommandLine
	cc := cluster.Flags(fs)
	var job jobFlags
	job.register(fs)
	child := fs.Bool("child", false, "internal: this is a process of a setup (the parent passes it)")
	var o options
	fs.StringVar(&o.setups, "setups", "single,1,2,3", "keyed count: the setups to run, comma separated: single, or a number of worker processes")
	fs.IntVar(&o.runs, "runs", 1, "how many times every setup runs (rounds of all setups)")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "bound of one setup's run")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (the children's logs and checkpoints)")
	hb := fs.String("cluster-options", "heartbeat.interval=1s,heartbeat.timeout=10s", "cluster options (Flink keys, comma separated) the parent passes to every process of a setup with -D")
	fs.BoolVar(&o.demo, "checkpointdemo", false, "run examples/checkpointdemo (unaligned, slow) in one process and on a coordinator and 2 workers instead")
	fs.StringVar(&o.demoBin, "checkpointdemo-bin", "", "checkpointdemo: a built examples/checkpointdemo (default: go build it)")
	fs.DurationVar(&o.demoDuration, "demo-duration", 30*time.Second, "checkpointdemo: its -duration")
	fs.DurationVar(&o.demoInterval, "demo-interval", 5*time.Second, "checkpointdemo: its -interval (checkpoint interval)")
	flag.Parse()

	if *child {
		if err := runChild(*cc, job); err != nil {
			fmt.Fprintf(os.Stderr, "bench/cluster %s: %v\n", cc.Role, err)
			os.Exit(1)
		}
		return
	}
	for _, kv := range strings.Split(*hb, ",") {
		if kv = strings.TrimSpace(kv); kv != "" {
			o.cluster = append(o.cluster, "-D", kv)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		killAll()
		os.Exit(130)
	}()
	var err error
	if o.demo {
		err = runDemoBench(o)
	} else {
		err = runKeyedCount(o, job)
	}
	if err != nil {
		killAll()
		fmt.Fprintln(os.Stderr, "bench/cluster:", err)
		os.Exit(1)
	}
}

// setup is one way to run the job: workers == 0 is one process.
type setup struct {
	name    string
	workers int
	slots   int // per worker
}

func parseSetups(s string, par int) ([]setup, error) {
	var out []setup
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
		case f == "single":
			out = append(out, setup{name: "single process"})
		default:
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("-setups: %q is neither single nor a number of workers", f)
			}
			slots := (par + n - 1) / n
			name := fmt.Sprintf("%d worker", n)
			if n > 1 {
				name += "s"
			}
			out = append(out, setup{name: fmt.Sprintf("%s x %d slots", name, slots), workers: n, slots: slots})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-setups %q: nothing to run", s)
	}
	return out, nil
}

// row is one setup's run.
type row struct {
	setup     setup
	run       int
	load      string
	res       result
	discarded int64
	procsWall time.Duration
	cpu       time.Duration
	workerRSS []int64 // KiB
	coordRSS  int64   // KiB; -1: none
	err       error
}

func (r row) recordsPerSec(records int64) float64 {
	if r.res.JobWallMs <= 0 {
		return 0
	}
	return float64(records) / (r.res.JobWallMs / 1000)
}

func runKeyedCount(o options, job jobFlags) error {
	setups, err := parseSetups(o.setups, job.parallelism)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "sluice-bench-cluster-")
	if err != nil {
		return err
	}
	failed := false
	defer func() {
		if o.keep || failed {
			fmt.Printf("\nwork directory (logs, checkpoints): %s\n", work)
		} else {
			_ = os.RemoveAll(work)
		}
	}()
	fmt.Printf("keyed count: datagen of %d records (int64 key of %d, %d-byte string payload) -> keyBy -> running count in keyed state (heap) -> discard\n",
		job.records, job.keys, job.payload)
	rate := "unlimited"
	if job.rate > 0 {
		rate = fmt.Sprintf("%.0f records/s", job.rate)
	}
	fmt.Printf("parallelism %d, aligned checkpoints every %v, source rate %s; %d CPUs, load average %s; %d run(s) of every setup\n\n",
		job.parallelism, job.interval, rate, runtime.NumCPU(), loadAvg(), o.runs)
	var rows []row
	for run := 1; run <= o.runs; run++ {
		for i, s := range setups {
			dir := filepath.Join(work, fmt.Sprintf("run%d-setup%d", run, i))
			r := runSetup(exe, dir, o, job, s)
			r.run = run
			if r.err != nil {
				failed = true
				fmt.Printf("run %d, %s: FAILED: %v\n", run, s.name, r.err)
			} else {
				fmt.Printf("run %d, %s: %.0f records/s\n", run, s.name, r.recordsPerSec(job.records))
			}
			rows = append(rows, r)
		}
	}
	fmt.Println()
	printTable(rows, job)
	return nil
}

// runSetup runs the job once as s says, every process a child.
func runSetup(exe, dir string, o options, job jobFlags, s setup) (r row) {
	r = row{setup: s, load: loadAvg(), coordRSS: -1}
	logs := filepath.Join(dir, "logs")
	job.checkpoints = filepath.Join(dir, "checkpoints")
	for _, d := range []string{logs, job.checkpoints} {
		if r.err = os.MkdirAll(d, 0o755); r.err != nil {
			return r
		}
	}
	begin := time.Now()
	var ps []*proc
	defer func() {
		closeStdin(ps)
		for _, p := range ps {
			p.kill()
			<-p.done
		}
		if r.err != nil {
			for _, p := range ps {
				if t := p.tail(8); len(t) > 0 {
					r.err = fmt.Errorf("%w\n  %s (%v), last lines of %s:\n%s", r.err, p.name, p.exitErr(), p.log, firstLines(t, 8))
				}
			}
		}
	}()
	start := func(name string, args ...string) (*proc, error) {
		p, err := startProc(exe, logs, name, append(append([]string{"--child"}, args...), job.args()...)...)
		if err == nil {
			ps = append(ps, p)
		}
		return p, err
	}
	var main *proc
	if s.workers == 0 {
		if main, r.err = start("single"); r.err != nil {
			return r
		}
	} else {
		var addr string
		if addr, r.err = freeLoopbackAddr(); r.err != nil {
			return r
		}
		args := append([]string{"--role", "coordinator", "--listen", addr, "--host", "127.0.0.1",
			"-D", "slot.request.timeout=60s"}, o.cluster...)
		if main, r.err = start("coordinator", args...); r.err != nil {
			return r
		}
		if r.err = awaitListening(main, addr, 30*time.Second); r.err != nil {
			return r
		}
		for w := 1; w <= s.workers; w++ {
			id := fmt.Sprintf("w%d", w)
			args := append([]string{"--role", "worker", "--coordinator", addr, "--slots", strconv.Itoa(s.slots),
				"--data-listen", "127.0.0.1:0", "--host", "127.0.0.1", "--worker-id", id}, o.cluster...)
			if _, r.err = start(id, args...); r.err != nil {
				return r
			}
		}
	}
	if r.err = waitAll(ps, o.timeout); r.err != nil {
		return r
	}
	r.procsWall = time.Since(begin)
	for _, p := range ps {
		if err := p.exitErr(); err != nil {
			r.err = fmt.Errorf("%s: %v", p.name, err)
		}
		u := p.usage()
		r.cpu += u.cpu
		switch p {
		case main:
			if s.workers == 0 {
				r.workerRSS = append(r.workerRSS, u.maxRSSKiB)
			} else {
				r.coordRSS = u.maxRSSKiB
			}
		default:
			r.workerRSS = append(r.workerRSS, u.maxRSSKiB)
		}
		for _, l := range p.stdout() {
			var res result
			if json.Unmarshal([]byte(l), &res) != nil {
				continue
			}
			switch res.Kind {
			case "result":
				r.res = res
				r.discarded += res.Discarded
			case "worker":
				r.discarded += res.Discarded
			}
		}
	}
	if r.err == nil && r.res.Kind == "" {
		r.err = fmt.Errorf("%s printed no result", main.name)
	}
	if r.err == nil && r.res.Err != "" {
		r.err = fmt.Errorf("the job ended %s: %s", r.res.Status, r.res.Err)
	}
	if r.err == nil && r.discarded != job.records {
		r.err = fmt.Errorf("the discard sinks counted %d records, want %d", r.discarded, job.records)
	}
	return r
}

func printTable(rows []row, job jobFlags) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "setup\trun\tprocesses\trecords/s\tjob wall\tprocesses wall\tcheckpoints\tcp median\tcp max\tCPU (all)\tpeak RSS workers MiB\tcoordinator MiB\tload\t")
	for _, r := range rows {
		procs := 1
		if r.setup.workers > 0 {
			procs = r.setup.workers + 1
		}
		if r.err != nil {
			fmt.Fprintf(w, "%s\t%d\t%d\tFAILED\t\t\t\t\t\t\t\t\t%s\t\n", r.setup.name, r.run, procs, r.load)
			continue
		}
		rss := make([]string, len(r.workerRSS))
		for i, k := range r.workerRSS {
			rss[i] = mib(k)
		}
		coord := "-"
		if r.coordRSS >= 0 {
			coord = mib(r.coordRSS)
		}
		cps := strconv.Itoa(r.res.Checkpoints)
		if r.res.Failed > 0 {
			cps += fmt.Sprintf(" (+%d failed)", r.res.Failed)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%.0f\t%.2fs\t%.2fs\t%s\t%d ms\t%d ms\t%.1fs\t%s\t%s\t%s\t\n",
			r.setup.name, r.run, procs, r.recordsPerSec(job.records), r.res.JobWallMs/1000, r.procsWall.Seconds(),
			cps, r.res.CpMedianMs, r.res.CpMaxMs, r.cpu.Seconds(), strings.Join(rss, " / "), coord, r.load)
	}
	w.Flush()
	// The median of the runs of every setup.
	type agg struct {
		name string
		rps  []float64
	}
	var order []*agg
	by := map[string]*agg{}
	for _, r := range rows {
		a := by[r.setup.name]
		if a == nil {
			a = &agg{name: r.setup.name}
			by[r.setup.name] = a
			order = append(order, a)
		}
		if r.err == nil {
			a.rps = append(a.rps, r.recordsPerSec(job.records))
		}
	}
	if len(rows) > len(order) {
		fmt.Println("\nmedian of the runs:")
		for _, a := range order {
			if len(a.rps) == 0 {
				fmt.Printf("  %-26s no successful run\n", a.name)
				continue
			}
			slices.Sort(a.rps)
			fmt.Printf("  %-26s %8.0f records/s (%d runs)\n", a.name, a.rps[len(a.rps)/2], len(a.rps))
		}
	}
}

func mib(kib int64) string {
	if kib < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f", float64(kib)/1024)
}
