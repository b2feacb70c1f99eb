package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseFlink reads bench/flinknexmark's result lines among the JVM's
// other output, and refuses a result line it cannot read.
func TestParseFlink(t *testing.T) {
	out := "some log line\nflink query=q11 events=5000000 wall_s=23.500 cpu_s=113.100\n" +
		"flink query=q0 events=1000 wall_s=2 cpu_s=4\n"
	res, err := parseFlink(out)
	if err != nil {
		t.Fatal(err)
	}
	q11 := res["q11"]
	if len(res) != 2 || q11.events != 5_000_000 || q11.wall != 23.5 || q11.cpu != 113.1 {
		t.Fatalf("parsed %+v", res)
	}
	if got := res["q0"].perCore(); got != 0.25 {
		t.Fatalf("q0: %v K/s/core, want 0.25", got)
	}
	for _, bad := range []string{"flink query=q1 events=x wall_s=1 cpu_s=1", "flink query=q1 wall_s", "flink events=3 wall_s=1"} {
		if _, err := parseFlink(bad); err == nil || !strings.Contains(err.Error(), "result line") {
			t.Errorf("%q: err %v, want a result line error", bad, err)
		}
	}
}

// TestFlinkResultsFile: the figures -flink-results saves are the ones a
// later run reads, and a run with other events, parallelism or checkpoint
// interval, or a query the file lacks, is refused, naming the file.
func TestFlinkResultsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flink.txt")
	o := options{cfg: DefaultConfig(), parallelism: 2, interval: 10 * time.Second}
	o.cfg.Events = 5000
	saved := map[string]flinkResult{"q5": {events: 5000, wall: 2.5, cpu: 4.25}, "q11": {events: 5000, wall: 1, cpu: 1.5}}
	if err := saveFlink(path, saved, o); err != nil {
		t.Fatal(err)
	}
	sel := func(names ...string) []query {
		var qs []query
		for _, q := range queries {
			for _, n := range names {
				if q.name == n {
					qs = append(qs, q)
				}
			}
		}
		return qs
	}
	got, err := loadFlink(path, sel("q5", "q11", "q6"), o)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range saved {
		if g := got[n]; g.events != want.events || g.wall != want.wall || g.cpu != want.cpu || g.parallelism != 2 || g.intervalMs != 10000 {
			t.Errorf("%s: read %+v, saved %+v at parallelism 2, 10 s", n, g, want)
		}
	}
	other := o
	other.parallelism = 4
	if _, err := loadFlink(path, sel("q5"), other); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("parallelism 4 against a file of 2: err %v, want one naming %s", err, path)
	}
	other = o
	other.cfg.Events = 6000
	if _, err := loadFlink(path, sel("q5"), other); err == nil || !strings.Contains(err.Error(), "5000 events") {
		t.Errorf("6000 events against a file of 5000: err %v", err)
	}
	if _, err := loadFlink(path, sel("q0"), o); err == nil || !strings.Contains(err.Error(), "no result for q0") {
		t.Errorf("q0, not in the file: err %v", err)
	}
}
