package scaling

import (
	"slices"
	"testing"
	"time"
)

// A machine a new leader made resumes the last leader's requirements and
// autoscaler decisions: they are its own (read back, and bounding what
// follows), and when they ask for another parallelism than the job
// resumed at (the last leader died between its decision and the
// rescale's first checkpoint), the rescale is decided once the job runs.
func TestResumeKeepsTheLastLeadersDecisions(t *testing.T) {
	vs := []Vertex{{Name: "src", Parallelism: 2, MaxParallelism: 128}, {Name: "count", Parallelism: 2, MaxParallelism: 128}}
	now := time.UnixMilli(1000)

	m := New(Config{}, vs, 0)
	m.Resume(now, Requirements{1: {Lower: 2, Upper: 6}}, map[int]int{1: 2, 5: 3})
	if got := m.Autoscaled(); len(got) != 1 || got[1] != 2 {
		t.Fatalf("autoscaled %v after Resume, want the decision for vertex 1 only (vertex 5 is not the job's)", got)
	}
	if got := m.ExplicitRequirements(); got[1] != (Bounds{Lower: 2, Upper: 6}) {
		t.Fatalf("requirements %v after Resume, want vertex 1 within [2,6]", got)
	}
	if acts := m.Running(now, []int{2, 2}); hasRescale(acts) {
		t.Fatalf("the job resumed at what the decisions ask for, yet Running decided %v", acts)
	}

	m = New(Config{}, vs, 0)
	m.Resume(now, nil, map[int]int{1: 4})
	acts := m.Running(now, []int{2, 2})
	var r *Rescale
	for _, a := range acts {
		if x, ok := a.(Rescale); ok {
			r = &x
		}
	}
	if r == nil || !slices.Equal(r.To, []int{2, 4}) || r.Cause != "resumed from the last leader" {
		t.Fatalf("Running after a Resume to 4 decided %v, want a rescale to [2 4] caused by the resume", acts)
	}
}

func hasRescale(acts []Action) bool {
	return slices.ContainsFunc(acts, func(a Action) bool { _, ok := a.(Rescale); return ok })
}
