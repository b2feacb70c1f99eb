package autoscaler

import (
	"fmt"
	"slices"
	"time"
)

// State is what a Machine needs to go on where it was in another
// process (a coordinator that takes the job over under HA, as Flink's
// autoscaler keeps its collected metrics and scaling history in a
// ConfigMap): the parallelism it counts stabilization from and since
// when, the samples of its metrics window, the rescale it asked for and
// waits to see, and the scale-downs waiting for the scale-down interval.
// Its times are wall-clock times (JSON keeps no monotonic reading): the
// next machine's clock carries them on.
type State struct {
	// Parallelism is the job's at Since, the start or rescale
	// stabilization counts from; nil before the job ran.
	Parallelism []int     `json:"parallelism,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	// Samples are the metrics window's, oldest first.
	Samples []Sample `json:"samples,omitempty"`
	// Pending is the parallelism of a rescale asked for and not yet seen
	// running.
	Pending []int `json:"pending,omitempty"`
	// Delayed are the scale-downs waiting for the scale-down interval, by
	// vertex index.
	Delayed map[int]DelayedScaleDown `json:"delayed,omitempty"`
}

// DelayedScaleDown is a vertex's scale-down waiting for
// job.autoscaler.scale-down.interval: when it was first recommended, and
// the recommendations since that may still be the largest over the
// interval (falling in parallelism).
type DelayedScaleDown struct {
	First           time.Time        `json:"first"`
	Recommendations []Recommendation `json:"recommendations,omitempty"`
}

// Recommendation is a scale-down recommended at a time.
type Recommendation struct {
	At          time.Time `json:"at"`
	Parallelism int       `json:"parallelism"`
}

// State returns the machine's state, for Resume on another machine.
func (m *Machine) State() State {
	st := State{Parallelism: slices.Clone(m.parallelism), Since: m.since, Samples: slices.Clone(m.history), Pending: slices.Clone(m.pending)}
	for i, d := range m.delayed {
		if st.Delayed == nil {
			st.Delayed = map[int]DelayedScaleDown{}
		}
		ds := DelayedScaleDown{First: d.first}
		for _, r := range d.recs {
			ds.Recommendations = append(ds.Recommendations, Recommendation{At: r.at, Parallelism: r.parallelism})
		}
		st.Delayed[i] = ds
	}
	return st
}

// Resume makes st the state of a machine that has observed nothing yet
// (a new leader's): the job's tasks restart with the leader, so the
// first snapshot of the job running at st's parallelism starts a new
// segment of the metrics window instead of the machine over; the
// stabilization and scale-down clocks run on from st's times, and a
// rescale st waits for is still awaited. A state that does not fit the
// machine's topology is refused (ErrTopology) and changes nothing.
func (m *Machine) Resume(st State) error {
	if st.Parallelism == nil {
		return nil // the last machine never saw the job run
	}
	n := len(m.topo.Vertices)
	if err := checkParallelism("its parallelism", st.Parallelism, n); err != nil {
		return err
	}
	if st.Pending != nil {
		if err := checkParallelism("the rescale it waits for", st.Pending, n); err != nil {
			return err
		}
	}
	for k, s := range st.Samples {
		if len(s.Vertices) != n {
			return fmt.Errorf("%w: a state whose sample %d has %d vertices for a topology of %d", ErrTopology, k, len(s.Vertices), n)
		}
		for i, f := range s.Vertices {
			if f.Parallelism != st.Parallelism[i] || len(f.Busy) != f.Parallelism {
				return fmt.Errorf("%w: a state whose sample %d has vertex %d at parallelism %d with busy times of %d subtasks; the state is at %d",
					ErrTopology, k, i, f.Parallelism, len(f.Busy), st.Parallelism[i])
			}
		}
		if k > 0 && s.Time.Before(st.Samples[k-1].Time) {
			return fmt.Errorf("%w: a state whose sample %d is older than the one before", ErrTopology, k)
		}
	}
	for i := range st.Delayed {
		if i < 0 || i >= n {
			return fmt.Errorf("%w: a state with a scale-down of vertex %d for a topology of %d", ErrTopology, i, n)
		}
	}
	m.parallelism, m.since, m.pending = slices.Clone(st.Parallelism), st.Since, slices.Clone(st.Pending)
	m.history = slices.Clone(st.Samples)
	for k := range m.history {
		m.history[k].Running = true
	}
	m.delayed = map[int]*delayedScaleDown{}
	for i, ds := range st.Delayed {
		d := &delayedScaleDown{first: ds.First}
		for _, r := range ds.Recommendations {
			d.recs = append(d.recs, recommendation{at: r.At, parallelism: r.Parallelism})
		}
		m.delayed[i] = d
	}
	m.resumed = true
	return nil
}

func checkParallelism(what string, p []int, n int) error {
	if len(p) != n {
		return fmt.Errorf("%w: a state with %s of %d vertices for a topology of %d", ErrTopology, what, len(p), n)
	}
	if slices.ContainsFunc(p, func(x int) bool { return x < 1 }) {
		return fmt.Errorf("%w: a state with %s %v", ErrTopology, what, p)
	}
	return nil
}

// Thinned returns st with at most n samples (n at least 2): the first
// (the window's start) and the last, and between them samples evenly
// spread. The rates over the window are the same (its counters' growth
// from the first sample to the last); the busiest or idlest subtask's
// share (MAX, MIN) is averaged over longer intervals. A sample kept
// after a fresh one left out is fresh: the interval over the restart is
// still not measured.
func (st State) Thinned(n int) State {
	n = max(n, 2)
	if len(st.Samples) <= n {
		return st
	}
	out := make([]Sample, 0, n)
	last := len(st.Samples) - 1
	prev := -1
	for k := range n {
		idx := k * last / (n - 1)
		s := st.Samples[idx]
		for j := prev + 1; j < idx; j++ {
			s.Fresh = s.Fresh || st.Samples[j].Fresh
		}
		out = append(out, s)
		prev = idx
	}
	st.Samples = out
	return st
}
