package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testjob"
	sluiceruntime "github.com/sluicehq/sluice/runtime"
)

// sluice checkpoint takes a checkpoint now and prints where it is: the
// one the job's statistics list as completed, on disk.
func TestCheckpointCommand(t *testing.T) {
	s := serve(t, testjob.Options{Name: "manual", Rate: 2000, Interval: time.Hour})
	testjob.Await(t, "every task running", func() bool {
		n := 0
		for _, m := range s.run.Job.Metrics() {
			if m.Status.String() == "RUNNING" {
				n++
			}
		}
		return n == 4
	})
	code, out, errs := s.sluice(t, "checkpoint", "manual")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	m := regexp.MustCompile(`^checkpoint (\d+) of job manual stored in (\S+)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("printed %q", out)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	st, ok := s.run.Job.CheckpointStats()
	if !ok || st.LatestCompleted == nil || st.LatestCompleted.ID != id || filepath.Dir(st.LatestCompleted.Path) != m[2] {
		t.Fatalf("printed checkpoint %d at %s; the job's latest completed is %+v", id, m[2], st.LatestCompleted)
	}
	if _, err := os.Stat(filepath.Join(m[2], "_metadata")); err != nil {
		t.Fatal(err)
	}
	// --full and --output json: the next one, as JSON.
	code, out, errs = s.sluice(t, "checkpoint", "manual", "--full", "--output", "json")
	var res struct {
		JID          string `json:"jid"`
		CheckpointID int64  `json:"checkpointId"`
		Location     string `json:"location"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.CheckpointID <= id || res.JID != s.id {
		t.Fatalf("exit %d, printed %q (%s)", code, out, errs)
	}
}

// stableCheckpoint takes a checkpoint of a job whose periodic interval is
// far away, so that none subsumes it during the test, and returns its
// statistics.
func stableCheckpoint(t *testing.T, s *served) checkpoint.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testjob.SafetyNet)
	defer cancel()
	var res sluiceruntime.CheckpointResult
	testjob.Await(t, "a checkpoint on request", func() bool {
		var err error
		res, err = s.run.Job.TriggerCheckpoint(ctx, false)
		return err == nil
	})
	// The listener hears of the checkpoint once its completion is
	// notified, which may be after TriggerCheckpoint returns.
	var found checkpoint.Stats
	testjob.Await(t, fmt.Sprintf("checkpoint %d among the completed ones", res.ID), func() bool {
		for _, cs := range s.run.Completed() {
			if cs.ID == res.ID {
				found = cs
				return true
			}
		}
		return false
	})
	return found
}

// sluice savepoint --dispose deletes a savepoint through the server, and
// by itself when no server answers; it refuses a checkpoint.
func TestSavepointDispose(t *testing.T) {
	s := serve(t, testjob.Options{Name: "disposer", Rate: 2000, Interval: time.Hour})
	chk := stableCheckpoint(t, s)
	take := func() string {
		code, out, errs := s.sluice(t, "savepoint", "disposer", "--dir", t.TempDir(), "--output", "json")
		var res struct{ Location string }
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Location == "" {
			t.Fatalf("savepoint: exit %d, %q %s", code, out, errs)
		}
		return res.Location
	}
	sp := take()
	code, out, errs := s.sluice(t, "savepoint", "--dispose", sp)
	if code != 0 || !strings.Contains(out, "disposed of by the server") {
		t.Fatalf("dispose: exit %d, %q %s", code, out, errs)
	}
	if _, err := os.Stat(sp); !os.IsNotExist(err) {
		t.Fatalf("savepoint %s after disposal: %v", sp, err)
	}
	if code, _, errs := s.sluice(t, "savepoint", "--dispose", filepath.Dir(chk.Path)); code != exitError || !strings.Contains(errs, "not a savepoint") {
		t.Fatalf("dispose a checkpoint: exit %d, %s", code, errs)
	}
	// No server: the command does it itself.
	sp = take()
	var stdout, stderr strings.Builder
	code = run(t.Context(), []string{"--address", "127.0.0.1:1", "savepoint", "--dispose", sp}, &stdout, &stderr, func(string) string { return "" })
	if code != 0 || !strings.Contains(stdout.String(), "locally") {
		t.Fatalf("dispose without a server: exit %d, %q %s", code, stdout.String(), stderr.String())
	}
	if _, err := os.Stat(sp); !os.IsNotExist(err) {
		t.Fatalf("savepoint %s after local disposal: %v", sp, err)
	}
	if code, _, _ := s.sluice(t, "savepoint", "disposer", "extra", "--dispose", sp); code != exitUsage {
		t.Fatalf("--dispose with a job: exit %d, want usage", code)
	}
}

// --output json: the read commands print the API's shapes, which decode
// into the API's types with the job's figures.
func TestOutputJSON(t *testing.T) {
	s := serve(t, testjob.Options{Name: "jsoned", Rate: 2000, Interval: time.Hour})
	cs := stableCheckpoint(t, s)
	code, out, errs := s.sluice(t, "jobs", "--output", "json")
	var jobs struct {
		Jobs []struct {
			api.JobDetails
		} `json:"jobs"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].JID != s.id || jobs.Jobs[0].Name != "jsoned" {
		t.Fatalf("jobs: exit %d, %q %s", code, out, errs)
	}
	code, out, errs = s.sluice(t, "checkpoints", "jsoned", "--checkpoint", strconv.FormatInt(cs.ID, 10), "--output", "json")
	var rep checkpointsReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Checkpoint == nil || rep.Checkpoint.ID != cs.ID || len(rep.Subtasks) != 2 {
		t.Fatalf("checkpoints: exit %d, %q %s", code, out, errs)
	}
	if rep.Checkpoint.CheckpointedSize != cs.CheckpointedSize || rep.Checkpoint.CompletedCheckpointFields.ExternalPath != filepath.Dir(cs.Path) {
		t.Fatalf("checkpoint %+v, the listener saw %+v", rep.Checkpoint, cs)
	}
	code, out, errs = s.sluice(t, "inspect", filepath.Dir(cs.Path), "--output", "json")
	var insp struct {
		CheckpointID int64
	}
	if code != 0 || json.Unmarshal([]byte(out), &insp) != nil || insp.CheckpointID != cs.ID {
		t.Fatalf("inspect: exit %d, %q %s", code, out, errs)
	}
	code, out, errs = s.sluice(t, "jobs", "--checkpoint-dir", s.run.Dir, "--output", "json")
	var dirs struct{ Jobs []jobDir }
	if code != 0 || json.Unmarshal([]byte(out), &dirs) != nil || len(dirs.Jobs) != 1 || dirs.Jobs[0].State != "RUNNING" {
		t.Fatalf("jobs --checkpoint-dir: exit %d, %q %s", code, out, errs)
	}
	if code, _, _ := s.sluice(t, "jobs", "--output", "yaml"); code != exitUsage {
		t.Fatalf("--output yaml: exit %d, want usage", code)
	}
}

// sluice version prints the module's version and Go's, from the build
// information (of the test binary here, whose main module is Sluice).
func TestVersion(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build information")
	}
	var stdout, stderr strings.Builder
	if code := run(t.Context(), []string{"version"}, &stdout, &stderr, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := "sluice " + bi.Main.Version + " (" + module + ") " + bi.GoVersion
	if !strings.HasPrefix(stdout.String(), want) {
		t.Fatalf("printed %q, want it to start with %q", stdout.String(), want)
	}
	stdout.Reset()
	run(t.Context(), []string{"version", "--output", "json"}, &stdout, &stderr, func(string) string { return "" })
	var v versionInfo
	if err := json.Unmarshal([]byte(stdout.String()), &v); err != nil || v.GoVersion != bi.GoVersion || v.Version != bi.Main.Version {
		t.Fatalf("json %q: %v", stdout.String(), err)
	}
	// Built into a program that requires Sluice: the required version.
	dep := buildInfo(func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/app", Version: "v1.0.0"},
			Deps: []*debug.Module{{Path: "other", Version: "v9"}, {Path: module, Version: "v0.4.2"}}}, true
	})
	if dep.Version != "v0.4.2" || dep.Main != "example.com/app" || dep.GoVersion != "go1.26.0" {
		t.Fatalf("as a dependency: %+v", dep)
	}
}
