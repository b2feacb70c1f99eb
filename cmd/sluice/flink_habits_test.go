package main

// The CLI's part of the "Flink habits" suite (the rest
// is e2e/flink_habits_test.go): a job configured as a Flink user
// configures it, with a checkpoint directory and no savepoint directory,
// stops with a savepoint; where there is no directory at all, the error
// names the CLI's flag and the configuration keys.

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjob"
)

// `sluice stop` of a job with a checkpoint directory and no savepoint
// directory stores the savepoint in <checkpoint dir>/savepoints, and the
// job finishes with it.
func TestFlinkHabitStopWithoutSavepointDir(t *testing.T) {
	s := serve(t, testjob.Options{Name: "no-savepoint-dir", Rate: 20000, Interval: 20 * time.Millisecond,
		Options: []sluice.Option{sluice.WithSavepointDir("")}})
	s.run.AwaitCompleted(t, 1)
	code, out, errs := s.sluice(t, "stop", "no-savepoint-dir")
	if code != 0 {
		t.Fatalf("stop without --dir: exit %d: %s", code, errs)
	}
	m := regexp.MustCompile(`^job no-savepoint-dir stopped; savepoint stored in (\S+)\n$`).FindStringSubmatch(out)
	if want := filepath.Join(s.run.Dir, "savepoints"); m == nil || filepath.Dir(m[1]) != want {
		t.Fatalf("stop printed %q; want a savepoint in %s", out, want)
	}
	if err := s.run.Wait(t); err != nil {
		t.Fatalf("stopped job: %v", err)
	}
	if code, out, errs := s.sluice(t, "inspect", m[1]); code != 0 || !strings.HasPrefix(out, "savepoint ") {
		t.Fatalf("inspect %s: exit %d %q %s", m[1], code, out, errs)
	}
}

// A job with neither directory: savepoint and stop fail with an error
// that names --dir and the configuration keys, not the REST request's
// property alone.
func TestFlinkHabitSavepointDirErrors(t *testing.T) {
	s := serve(t, testjob.Options{Name: "no-dirs"})
	for _, cmd := range []string{"savepoint", "stop"} {
		code, _, errs := s.sluice(t, cmd, "no-dirs")
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", cmd, code)
		}
		for _, want := range []string{"--dir DIR", "execution.checkpointing.savepoint-dir", "execution.checkpointing.dir"} {
			if !strings.Contains(errs, want) {
				t.Errorf("%s: error %q does not name %s", cmd, errs, want)
			}
		}
	}
}
