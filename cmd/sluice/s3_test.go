package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/internal/testutil"
)

// A job checkpointing to S3: a savepoint to an s3:// directory, and
// `sluice inspect` of that savepoint, of a checkpoint and of the job's
// directory (its newest checkpoint), all by s3:// URL.
func TestSavepointAndInspectOnS3(t *testing.T) {
	loc := testutil.S3Location(t)
	s := serve(t, testjob.Options{Name: "ons3", Rate: 20000, Interval: 20 * time.Millisecond,
		Options: []sluice.Option{sluice.WithCheckpointing(20*time.Millisecond, loc+"/checkpoints"),
			// A running job's newest checkpoint stays a while (inspect
			// also looks again when it was subsumed meanwhile).
			sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.RetainedCheckpoints = 3 })}})
	s.run.AwaitCompleted(t, 2)
	code, out, errs := s.sluice(t, "savepoint", "ons3", "--dir", loc+"/savepoints")
	if code != 0 {
		t.Fatalf("savepoint: exit %d: %s", code, errs)
	}
	m := regexp.MustCompile(`^savepoint of job ons3 stored in (s3://\S+)\n$`).FindStringSubmatch(out)
	if m == nil || !strings.HasPrefix(m[1], loc+"/savepoints/savepoint-") {
		t.Fatalf("savepoint printed %q, want a directory under %s/savepoints", out, loc)
	}
	code, out, errs = s.sluice(t, "inspect", m[1])
	if code != 0 || !regexp.MustCompile(`^savepoint \d+ of job "ons3"\n`).MatchString(out) ||
		!regexp.MustCompile(`\ngen\s+0\s+datagen\s+next index \d+ \(reader 0 of 2\)\s*\n`).MatchString(out) {
		t.Fatalf("inspect %s: exit %d\n%s%s", m[1], code, out, errs)
	}
	jobDir := loc + "/checkpoints/" + s.run.Job.ID()
	code, out, errs = s.sluice(t, "inspect", jobDir)
	if code != 0 || !regexp.MustCompile(`^checkpoint \d+ of job "ons3"\n`).MatchString(out) ||
		!strings.Contains(out, jobDir+"/chk-") {
		t.Fatalf("inspect %s: exit %d\n%s%s", jobDir, code, out, errs)
	}
	code, _, errs = s.sluice(t, "inspect", loc+"/nothing-here")
	if code != 1 || !strings.Contains(errs, "no checkpoint or savepoint found") {
		t.Fatalf("inspect of an empty prefix: exit %d: %s", code, errs)
	}
}
