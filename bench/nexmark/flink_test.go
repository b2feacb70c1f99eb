package main

import (
	"strings"
	"testing"
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
