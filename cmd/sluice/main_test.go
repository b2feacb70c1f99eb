package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testjob"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "t0ken"

// served is a running job behind an httptest server of the API.
type served struct {
	run *testjob.Run
	srv *httptest.Server
	id  string
}

func serve(t *testing.T, o testjob.Options) *served {
	t.Helper()
	run := testjob.Start(t, o)
	a := api.New(api.Options{Token: token, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	id := a.AddJob(run.Job)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		run.Job.Cancel()
		<-run.Job.Done()
		srv.Close()
		a.Close()
	})
	return &served{run: run, srv: srv, id: id}
}

// sluice runs the command line with the server's address and token in
// the environment and returns its exit code and output.
func (s *served) sluice(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	env := map[string]string{"SLUICE_ADDRESS": s.srv.URL, "SLUICE_TOKEN": token}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	code := run(ctx, args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// fields splits a table row at its column gaps (two spaces or more).
func fields(line string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
}

func TestJobsTable(t *testing.T) {
	s := serve(t, testjob.Options{Name: "listed"})
	testjob.Await(t, "every task running", func() bool {
		n := 0
		for _, m := range s.run.Job.Metrics() {
			if m.Status.String() == "RUNNING" {
				n++
			}
		}
		return n == 4
	})
	code, out, errs := s.sluice(t, "jobs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("jobs printed %q", out)
	}
	if h := fields(lines[0]); strings.Join(h, "|") != "ID|NAME|STATE|START|DURATION|TASKS|RESULT" {
		t.Errorf("header %q", h)
	}
	row := fields(lines[1])
	if len(row) != 7 || row[0] != s.id || row[1] != "listed" || row[2] != "RUNNING" || row[5] != "4/4 running" || row[6] != "-" {
		t.Errorf("row %q", row)
	}
}

// The checkpoints table has the checkpointdemo's columns and, for every
// subtask, the figures the checkpoint listener got.
func TestCheckpointsTable(t *testing.T) {
	s := serve(t, testjob.Options{Name: "tabled", Rate: 20000, Interval: 20 * time.Millisecond, Unaligned: true})
	cs := s.run.AwaitCompleted(t, 2)[1]
	code, out, errs := s.sluice(t, "checkpoints", "tabled", "--checkpoint", fmt.Sprint(cs.ID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "job tabled ("+s.id+"), RUNNING: checkpoints completed ") {
		t.Errorf("no header line in\n%s", out)
	}
	wantHead := fmt.Sprintf("checkpoint %d: unaligned checkpoint, COMPLETED, end-to-end %d ms, size %s", cs.ID,
		cs.EndToEndDuration.Milliseconds(), size(cs.CheckpointedSize))
	if !strings.Contains(out, wantHead) || !strings.Contains(out, "path "+filepath.Dir(cs.Path)+"\n") {
		t.Errorf("want %q and the path in\n%s", wantHead, out)
	}
	_, table, ok := strings.Cut(out, "\n\nvertex")
	if !ok {
		t.Fatalf("no table in\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace("vertex"+table), "\n")
	if got := strings.Join(fields(lines[0]), "|"); got != "vertex|sub|start_delay|alignment|sync|async|end_to_end|persisted|unaligned" {
		t.Errorf("header %q", got)
	}
	tasks := append([]checkpoint.TaskStats(nil), cs.Tasks...)
	order := map[string]int{testjob.SourceVertex: 0, testjob.CountVertex: 1}
	sort.Slice(tasks, func(i, j int) bool {
		if tasks[i].Vertex != tasks[j].Vertex {
			return order[tasks[i].Vertex] < order[tasks[j].Vertex]
		}
		return tasks[i].Subtask < tasks[j].Subtask
	})
	if len(lines)-1 != len(tasks) {
		t.Fatalf("%d rows for %d subtasks:\n%s", len(lines)-1, len(tasks), out)
	}
	for i, ts := range tasks {
		f := ts.Figures
		want := []string{ts.Vertex, fmt.Sprint(ts.Subtask), fmt.Sprintf("%d ms", f.StartDelay.Milliseconds()),
			fmt.Sprintf("%d ms", f.Alignment.Milliseconds()), fmt.Sprintf("%d ms", f.Sync.Milliseconds()),
			fmt.Sprintf("%d ms", f.Async.Milliseconds()), fmt.Sprintf("%d ms", ts.EndToEndDuration.Milliseconds()),
			size(f.PersistedData), fmt.Sprint(f.Unaligned)}
		if got := fields(lines[i+1]); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("row %d: %q, want %q", i, got, want)
		}
	}

	// Without --checkpoint: the latest completed one.
	code, out, _ = s.sluice(t, "checkpoints", s.id[:8])
	if code != 0 || !regexp.MustCompile(`\ncheckpoint \d+: unaligned checkpoint, COMPLETED`).MatchString(out) {
		t.Errorf("latest: exit %d\n%s", code, out)
	}
}

// savepoint, inspect of that savepoint, stop, and cancel of another job.
func TestSavepointInspectStopCancel(t *testing.T) {
	s := serve(t, testjob.Options{Name: "operated", Rate: 20000, Interval: 20 * time.Millisecond})
	s.run.AwaitCompleted(t, 1)
	dir := t.TempDir()
	code, out, errs := s.sluice(t, "savepoint", "operated", "--dir", dir)
	if code != 0 {
		t.Fatalf("savepoint: exit %d: %s", code, errs)
	}
	m := regexp.MustCompile(`^savepoint of job operated stored in (\S+)\n$`).FindStringSubmatch(out)
	if m == nil || filepath.Dir(m[1]) != dir {
		t.Fatalf("savepoint printed %q", out)
	}
	code, out, errs = s.sluice(t, "inspect", m[1])
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errs)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`^savepoint \d+ of job "operated"\n`),
		regexp.MustCompile(`\noperator\s+subtask\s+parallelism\s+operator_state\s+keyed_state\s+key_groups\s+keys\s+channel_state\s+committables\s*\n`),
		regexp.MustCompile(`\ncount\s+0\s+2\s+\S+ B\s+\S+ B\s+0-63\s+\d+\s+-\s+0\s*\n`),
		regexp.MustCompile(`\ncount\s+1\s+2\s+\S+ B\s+\S+ B\s+64-127\s+\d+\s+-\s+0\s*\n`),
		regexp.MustCompile(`\ngen\s+0\s+datagen\s+next index \d+ \(reader 0 of 2\)\s*\n`),
		regexp.MustCompile(`\ngen\s+1\s+datagen\s+next index \d+ \(reader 1 of 2\)\s*\n`),
		regexp.MustCompile(`\ncount\s+0\s+count\s+value\s+\d+\s+\d+\s*\n`),
	} {
		if !want.MatchString(out) {
			t.Errorf("inspect output lacks %v:\n%s", want, out)
		}
	}

	code, out, errs = s.sluice(t, "--dir", dir, "stop", "operated")
	if code != 0 || !strings.HasPrefix(out, "job operated stopped; savepoint stored in "+dir) {
		t.Fatalf("stop: exit %d %q %s", code, out, errs)
	}
	if err := s.run.Wait(t); err != nil {
		t.Fatalf("stopped job: %v", err)
	}
	// The stopped job's recorded result, through the API and offline.
	code, out, errs = s.sluice(t, "jobs")
	if code != 0 || !regexp.MustCompile(`\sFINISHED, savepoint `+regexp.QuoteMeta(dir)+`\S+\n`).MatchString(out) {
		t.Fatalf("jobs after the stop: exit %d %q %s", code, out, errs)
	}
	code, out, errs = s.sluice(t, "jobs", "--checkpoint-dir", s.run.Dir)
	if code != 0 || !regexp.MustCompile(`\noperated\s+FINISHED\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+[0-9a-f]{16}\s+-\s+savepoint `).MatchString(out) {
		t.Fatalf("jobs --checkpoint-dir after the stop: exit %d %q %s", code, out, errs)
	}

	c := serve(t, testjob.Options{Name: "cancelled"})
	code, out, errs = c.sluice(t, "cancel", "cancelled")
	if code != 0 || out != fmt.Sprintf("job cancelled (%s) cancelled\n", c.id) {
		t.Fatalf("cancel: exit %d %q %s", code, out, errs)
	}
	if err := c.run.Wait(t); err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("cancelled job: %v", err)
	}
}

// Offline, the jobs of a checkpoint directory: one running (its lock
// holder named), one suspended with its checkpoints.
func TestJobsOfACheckpointDirectory(t *testing.T) {
	s := serve(t, testjob.Options{Name: "running-one", Rate: 20000, Interval: 20 * time.Millisecond})
	s.run.AwaitCompleted(t, 1)
	code, out, errs := s.sluice(t, "jobs", "--checkpoint-dir", s.run.Dir)
	if code != 0 || !regexp.MustCompile(`\nrunning-one\s+RUNNING\s+-\s+-\s+\S+\s+held by pid \d+ on `).MatchString(out) {
		t.Fatalf("jobs --checkpoint-dir of a running job: exit %d %q %s", code, out, errs)
	}
	if code, out, _ := s.sluice(t, "jobs", "--checkpoint-dir", t.TempDir()); code != 0 || !strings.HasPrefix(out, "no job directories in ") {
		t.Fatalf("empty directory: exit %d %q", code, out)
	}
}

func TestErrors(t *testing.T) {
	s := serve(t, testjob.Options{Name: "errors"})
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"checkpoints", "nope"}, 1, `job not found: "nope"`},
		{[]string{"checkpoints", "errors"}, 1, "Checkpointing is not enabled"},
		{[]string{"--token", "wrong", "jobs"}, 1, "401 Unauthorized"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"cancel"}, 2, "takes 1 argument(s), got 0"},
		{[]string{"inspect", t.TempDir()}, 1, "no checkpoint or savepoint found"},
		{[]string{"savepoint", "errors"}, 1, "execution.checkpointing.savepoint-dir"},
	} {
		code, _, errs := s.sluice(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// The usage text never shows the token of $SLUICE_TOKEN (as the --token
// flag's default); the variable still sets the token.
func TestUsageHidesToken(t *testing.T) {
	const secret = "s3cr3t-t0k3n"
	env := map[string]string{"SLUICE_TOKEN": secret}
	for _, args := range [][]string{nil, {"-h"}, {"--no-such-flag"}} {
		var out, errb bytes.Buffer
		run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
		if strings.Contains(out.String()+errb.String(), secret) {
			t.Errorf("sluice %v printed the token:\n%s", args, errb.String())
		}
		if !strings.Contains(errb.String(), "SLUICE_TOKEN") {
			t.Errorf("sluice %v: the usage does not mention SLUICE_TOKEN:\n%s", args, errb.String())
		}
	}
	s := serve(t, testjob.Options{Name: "token-from-env"})
	if code, _, errs := s.sluice(t, "jobs"); code != 0 {
		t.Fatalf("jobs with the token from $SLUICE_TOKEN: exit %d: %s", code, errs)
	}
}
