package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// The demo end to end, as `make demo-cluster` runs it but on less input:
// the binary is built, run without --role (the parent, which starts etcd,
// the broker and the coordinator and worker processes, and SIGKILLs a
// worker), and must exit 0 with the exactly-once verdict after a restart
// from a checkpoint.
func TestDemoEndToEnd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "clustercount")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--repeat", "300", "--interval", "200ms", "--timeout", "2m")
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("the demo ran %.1fs:\n%s", time.Since(start).Seconds(), out.String())
	if err != nil {
		t.Fatalf("the demo failed: %v", err)
	}
	for _, want := range []string{
		`SIGKILL worker w2 \(pid \d+\), mid-run`,
		`worker w2 lost`,
		`worker w3 registered`,
		`attempt [1-9]\d*: \d+ tasks placed on 2 workers, restoring checkpoint \d+`,
		`job FINISHED after [1-9]\d* restart`,
		`every process has exited with status 0`,
		`output is exactly once: 36000 records, 70 keys`,
	} {
		if !regexp.MustCompile(want).Match(out.Bytes()) {
			t.Errorf("the demo's output has no line matching %q", want)
		}
	}
}
