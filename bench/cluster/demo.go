package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// demoLine is what examples/checkpointdemo -json prints per completed
// checkpoint.
type demoLine struct {
	ID                 int64 `json:"id"`
	EndToEndDurationMs int64 `json:"end_to_end_duration_ms"`
	CheckpointedSize   int64 `json:"checkpointed_size"`
	PersistedData      int64 `json:"persisted_data"`
	Unaligned          bool  `json:"unaligned"`
}

// demoRow is one run of the checkpointdemo.
type demoRow struct {
	setup   string
	run     int
	procs   int
	load    string
	cps     []demoLine
	workerE []string // what the workers printed on standard error
	err     error
}

const demoPkg = "github.com/sluicehq/sluice/examples/checkpointdemo"

// demoArgs are the job flags every process of the checkpointdemo gets.
func demoArgs(o options) []string {
	return []string{"-mode", "unaligned", "-slow", "-json", "-duration", o.demoDuration.String(), "-interval", o.demoInterval.String()}
}

func runDemoBench(o options) error {
	work, err := os.MkdirTemp("", "sluice-bench-checkpointdemo-")
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
	bin := o.demoBin
	if bin == "" {
		bin = filepath.Join(work, "checkpointdemo")
		cmd := exec.Command("go", "build", "-o", bin, demoPkg)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		fmt.Printf("go build -o %s %s\n", bin, demoPkg)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build the checkpointdemo (run from inside the module, or give -checkpointdemo-bin): %w", err)
		}
	}
	fmt.Printf("examples/checkpointdemo %s: in one process, and on a coordinator and 2 workers of 1 slot (parallelism 2, TCP between them); %d run(s) each\n",
		strings.Join(demoArgs(o), " "), o.runs)
	fmt.Printf("%d CPUs, load average %s\n\n", runtime.NumCPU(), loadAvg())
	var rows []demoRow
	for run := 1; run <= o.runs; run++ {
		for i, workers := range []int{0, 2} {
			dir := filepath.Join(work, fmt.Sprintf("run%d-setup%d", run, i))
			r := runDemoOnce(bin, dir, o, workers)
			r.run = run
			if r.err != nil {
				failed = true
				fmt.Printf("run %d, %s: FAILED: %v\n", run, r.setup, r.err)
			} else {
				var d, p []string
				for _, c := range r.cps {
					d = append(d, fmt.Sprint(c.EndToEndDurationMs))
					p = append(p, kib(c.PersistedData))
				}
				fmt.Printf("run %d, %s: %d checkpoints, end-to-end ms %s; persisted KiB %s\n", run, r.setup, len(r.cps),
					strings.Join(d, " "), strings.Join(p, " "))
			}
			for _, l := range r.workerE {
				fmt.Printf("    worker stderr: %s\n", clip(l, 240))
			}
			rows = append(rows, r)
		}
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "setup\trun\tprocesses\tcheckpoints\te2e median\te2e min\te2e max\tpersisted median\tpersisted mean\tsize median\tall unaligned\tload\t")
	for _, r := range rows {
		if r.err != nil || len(r.cps) == 0 {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\tFAILED\t\t\t\t\t\t\t%s\t\n", r.setup, r.run, r.procs, len(r.cps), r.load)
			continue
		}
		var d, p, s []int64
		var sum int64
		all := true
		for _, c := range r.cps {
			d = append(d, c.EndToEndDurationMs)
			p = append(p, c.PersistedData)
			s = append(s, c.CheckpointedSize)
			sum += c.PersistedData
			all = all && c.Unaligned
		}
		slices.Sort(d)
		slices.Sort(p)
		slices.Sort(s)
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d ms\t%d ms\t%d ms\t%s KiB\t%s KiB\t%s KiB\t%t\t%s\t\n", r.setup, r.run, r.procs, len(r.cps),
			median(d), d[0], d[len(d)-1], kib(median(p)), kib(sum/int64(len(p))), kib(median(s)), all, r.load)
	}
	w.Flush()
	return nil
}

// runDemoOnce runs the checkpointdemo in one process (workers 0) or on a
// coordinator and workers of one slot each, and collects the coordinator's
// checkpoint lines.
func runDemoOnce(bin, dir string, o options, workers int) (r demoRow) {
	r = demoRow{setup: "single process", procs: 1, load: loadAvg()}
	if workers > 0 {
		r.setup, r.procs = fmt.Sprintf("coordinator + %d workers", workers), workers+1
	}
	cpDir := filepath.Join(dir, "checkpoints")
	logs := filepath.Join(dir, "logs")
	for _, d := range []string{cpDir, logs} {
		if r.err = os.MkdirAll(d, 0o755); r.err != nil {
			return r
		}
	}
	var ps []*proc
	defer func() {
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
		p, err := startProc(bin, logs, name, append(demoArgs(o), args...)...)
		if err == nil {
			ps = append(ps, p)
		}
		return p, err
	}
	var main *proc
	if workers == 0 {
		if main, r.err = start("single"); r.err != nil {
			return r
		}
	} else {
		var addr string
		if addr, r.err = freeLoopbackAddr(); r.err != nil {
			return r
		}
		args := append([]string{"--role", "coordinator", "--listen", addr, "--host", "127.0.0.1", "-checkpoints", cpDir}, o.cluster...)
		if main, r.err = start("coordinator", args...); r.err != nil {
			return r
		}
		if r.err = awaitListening(main, addr, 30*time.Second); r.err != nil {
			return r
		}
		for w := 1; w <= workers; w++ {
			args := append([]string{"--role", "worker", "--coordinator", addr, "--slots", "1", "--data-listen", "127.0.0.1:0",
				"--host", "127.0.0.1", "--worker-id", fmt.Sprintf("w%d", w), "-checkpoints", cpDir}, o.cluster...)
			if _, r.err = start(fmt.Sprintf("w%d", w), args...); r.err != nil {
				return r
			}
		}
	}
	if r.err = waitAll([]*proc{main}, o.demoDuration+time.Minute); r.err != nil {
		return r
	}
	if r.err = waitAll(ps, 30*time.Second); r.err != nil {
		r.err = fmt.Errorf("the workers did not exit within 30 s of the coordinator: %w", r.err)
		return r
	}
	for _, p := range ps {
		if err := p.exitErr(); err != nil && r.err == nil {
			r.err = fmt.Errorf("%s: %v", p.name, err)
		}
		if p != main {
			r.workerE = append(r.workerE, p.tail(20)...)
		}
	}
	for _, l := range main.stdout() {
		var c demoLine
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			continue
		}
		r.cps = append(r.cps, c)
	}
	if r.err == nil && len(r.cps) == 0 {
		r.err = fmt.Errorf("no checkpoint completed in %v", o.demoDuration)
	}
	return r
}

func median(s []int64) int64 { return s[len(s)/2] }

func kib(n int64) string { return fmt.Sprintf("%.1f", float64(n)/1024) }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
