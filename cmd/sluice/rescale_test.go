package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testjob"
)

// sluice rescale: without a parallelism it prints every vertex's bounds
// (GET /jobs/:jobid/resource-requirements); with one and --vertex it
// rescales that vertex in place (PUT) and returns once the job runs at
// it, which the table then shows; a vertex the job lacks is a usage
// error naming it.
func TestRescaleCommand(t *testing.T) {
	s := serve(t, testjob.Options{Name: "elastic", Rate: 5000, Interval: 20 * time.Millisecond})
	s.run.AwaitCompleted(t, 1)
	code, out, errs := s.sluice(t, "rescale", "elastic")
	if code != 0 {
		t.Fatalf("rescale (print): exit %d: %s", code, errs)
	}
	row := regexp.MustCompile(`\n([0-9a-f]{32})\s+` + regexp.QuoteMeta(testjob.CountVertex) + `\s+2\s+2\s+2\s+128\s*\n`)
	m := row.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rescale printed no row of the count at 2:\n%s", out)
	}
	count := m[1]
	code, out, errs = s.sluice(t, "rescale", "elastic", "3", "--vertex", count)
	if code != 0 || !regexp.MustCompile(`^job elastic rescaled to 3 in \S+\n$`).MatchString(out) {
		t.Fatalf("rescale 3: exit %d %q %s", code, out, errs)
	}
	if p := s.run.Job.Graph().Vertices[1].Parallelism; p != 3 {
		t.Fatalf("the count runs at %d after the rescale, want 3", p)
	}
	_, out, _ = s.sluice(t, "rescale", "elastic")
	if !regexp.MustCompile(regexp.QuoteMeta(count) + `\s+` + regexp.QuoteMeta(testjob.CountVertex) + `\s+3\s+3\s+3\s+128\s*\n`).MatchString(out) {
		t.Fatalf("after the rescale the table shows:\n%s", out)
	}
	if !regexp.MustCompile(`\s` + regexp.QuoteMeta(testjob.SourceVertex) + `\s+2\s+2\s+2\s+`).MatchString(out) {
		t.Fatalf("the source was not asked to rescale, yet the table shows:\n%s", out)
	}
	code, _, errs = s.sluice(t, "rescale", "elastic", "3", "--vertex", strings.Repeat("0", 32))
	if code != exitUsage || !strings.Contains(errs, "has no vertex "+strings.Repeat("0", 32)) {
		t.Fatalf("rescale of a vertex the job lacks: exit %d %s", code, errs)
	}
	if st := s.run.Job.Status().String(); st != "RUNNING" || s.run.Job.Restarts() != 0 {
		t.Fatalf("job %s after %d restarts, want RUNNING without any", st, s.run.Job.Restarts())
	}
}
