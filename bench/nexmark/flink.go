package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// flinkQueries are the queries bench/flinknexmark runs (Flink's Nexmark
// SQL): q6 has none in Flink's benchmark.
var flinkQueries = map[string]bool{"q0": true, "q1": true, "q2": true, "q3": true, "q4": true, "q5": true, "q7": true, "q8": true, "q11": true}

// flinkResult is one query's run on Flink, as bench/flinknexmark prints
// it: wall and process CPU seconds.
type flinkResult struct {
	events    int64
	wall, cpu float64
	// parallelism and intervalMs are what the run used, in the lines
	// -flink-results saves (0: not said, as bench/flinknexmark's own).
	parallelism int
	intervalMs  int64
}

func (f flinkResult) perCore() float64 {
	if f.cpu <= 0 {
		return 0
	}
	return float64(f.events) / f.cpu / 1000
}

// runFlink runs the selected queries that Flink has on the Flink side
// (java -jar jar) in one JVM, with the options Sluice ran with, and
// parses its lines "flink query=q11 events=N wall_s=X cpu_s=Y".
func runFlink(jar string, selected []query, o options) (map[string]flinkResult, error) {
	var names []string
	for _, q := range selected {
		if n := q.flinkName(); flinkQueries[n] && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return map[string]flinkResult{}, nil
	}
	if _, err := os.Stat(jar); err != nil {
		return nil, fmt.Errorf("-flink: %w (build it: cd bench/flinknexmark && mvn -q package)", err)
	}
	args := []string{"-jar", jar, "-query", strings.Join(names, ","), "-events", strconv.FormatInt(o.cfg.Events, 10),
		"-parallelism", strconv.Itoa(o.parallelism), "-checkpoint-interval-ms", strconv.FormatInt(o.interval.Milliseconds(), 10)}
	if o.dir != "" {
		args = append(args, "-dir", o.dir)
	}
	fmt.Fprintf(os.Stderr, "flink: java %s\n", strings.Join(args, " "))
	cmd := exec.Command("java", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("-flink: java -jar %s: %w\n%s", jar, err, out.String())
	}
	res, err := parseFlink(out.String())
	if err != nil {
		return nil, fmt.Errorf("-flink: %w", err)
	}
	for _, n := range names {
		if _, ok := res[n]; !ok {
			return nil, fmt.Errorf("-flink: no result for %s in the output:\n%s", n, out.String())
		}
	}
	return res, nil
}

// parseFlink reads bench/flinknexmark's result lines, ignoring others.
func parseFlink(out string) (map[string]flinkResult, error) {
	res := map[string]flinkResult{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "flink" {
			continue
		}
		var name string
		var r flinkResult
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("result line %q: field %q is not key=value", sc.Text(), f)
			}
			var err error
			switch k {
			case "query":
				name = v
			case "events":
				r.events, err = strconv.ParseInt(v, 10, 64)
			case "wall_s":
				r.wall, err = strconv.ParseFloat(v, 64)
			case "cpu_s":
				r.cpu, err = strconv.ParseFloat(v, 64)
			case "parallelism":
				r.parallelism, err = strconv.Atoi(v)
			case "checkpoint_interval_ms":
				r.intervalMs, err = strconv.ParseInt(v, 10, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("result line %q: %s: %w", sc.Text(), k, err)
			}
		}
		if name == "" || r.events <= 0 || r.wall <= 0 {
			return nil, fmt.Errorf("result line %q: want query, events and wall_s", sc.Text())
		}
		res[name] = r
	}
	return res, nil
}

// saveFlink writes Flink's results as result lines that parseFlink reads,
// with the parallelism and checkpoint interval of the run, for a later
// -flink-results.
func saveFlink(path string, res map[string]flinkResult, o options) error {
	var b strings.Builder
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		r := res[n]
		fmt.Fprintf(&b, "flink query=%s events=%d wall_s=%.3f cpu_s=%.3f parallelism=%d checkpoint_interval_ms=%d\n",
			n, r.events, r.wall, r.cpu, o.parallelism, o.interval.Milliseconds())
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("-flink-results: %w", err)
	}
	return nil
}

// loadFlink reads the Flink results an earlier -flink run saved with
// -flink-results, and checks that they are for the selected queries with
// the events, parallelism and checkpoint interval of this run.
func loadFlink(path string, selected []query, o options) (map[string]flinkResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-flink-results: %w", err)
	}
	res, err := parseFlink(string(data))
	if err != nil {
		return nil, fmt.Errorf("-flink-results %s: %w", path, err)
	}
	for _, q := range selected {
		n := q.flinkName()
		if !flinkQueries[n] {
			continue
		}
		r, ok := res[n]
		switch {
		case !ok:
			return nil, fmt.Errorf("-flink-results %s: no result for %s: run -flink with -query %s and -flink-results first", path, n, n)
		case r.events != o.cfg.Events || r.parallelism != o.parallelism || r.intervalMs != o.interval.Milliseconds():
			return nil, fmt.Errorf("-flink-results %s: %s ran %d events at parallelism %d with %d ms checkpoints, this run %d events at %d with %d ms",
				path, n, r.events, r.parallelism, r.intervalMs, o.cfg.Events, o.parallelism, o.interval.Milliseconds())
		}
	}
	return res, nil
}
