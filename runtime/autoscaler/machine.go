package autoscaler

import (
	"fmt"
	"slices"
	"time"
)

// Machine decides a job's per-vertex parallelism from snapshots of its
// metrics. It reads no clock: every time is a snapshot's. It is not safe
// for concurrent use (the Driver serializes it).
type Machine struct {
	cfg  Config
	topo Topology

	// parallelism is what the job runs at since since, the start or
	// rescale that stabilization counts from; nil before the first
	// running snapshot.
	parallelism []int
	since       time.Time
	// history is the samples since stabilization, the oldest being the
	// newest at or before the window's start.
	history []Sample
	// pending is the parallelism of a rescale requested and not yet seen
	// running.
	pending []int
	delayed map[int]*delayedScaleDown
	// resumed is set by Resume until the job runs: its counters restart
	// with it, and the next sample starts a segment of the window rather
	// than the machine over.
	resumed bool
}

// Sample is a snapshot of the metrics window. Fresh is set when the
// job's counters restarted before it without the machine starting over
// (a new leader took the job over): the time since the sample before is
// not measured.
type Sample struct {
	Snapshot
	Fresh bool `json:"fresh,omitempty"`
}

// New returns the machine of a job of that topology.
func New(cfg Config, topo Topology) (*Machine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := topo.Validate(); err != nil {
		return nil, err
	}
	return &Machine{cfg: cfg, topo: topo, delayed: map[int]*delayedScaleDown{}}, nil
}

// Config returns the machine's settings.
func (m *Machine) Config() Config { return m.cfg }

// Topology returns the topology the machine evaluates.
func (m *Machine) Topology() Topology { return m.topo }

// Observe takes a snapshot and evaluates it. A snapshot of a parallelism
// other than the job's, or whose counters went back (the tasks
// restarted), starts over: stabilization counts from it and the window
// is emptied; after Resume, the first snapshot of the job running at
// the parallelism of the state resumed is instead the start of a new
// segment of the window, which the clocks continue over. After a Scale,
// snapshots are not used until the job runs at the new parallelism
// (Rescaling); RescaleFailed ends that wait.
func (m *Machine) Observe(s Snapshot) (Evaluation, error) {
	if len(s.Vertices) != len(m.topo.Vertices) {
		return Evaluation{}, fmt.Errorf("%w: a snapshot of %d vertices for a topology of %d", ErrTopology, len(s.Vertices), len(m.topo.Vertices))
	}
	now := s.Time
	ev := Evaluation{Time: now}
	if !s.Running {
		ev.Outcome = NotRunning
		if !m.resumed {
			m.parallelism = nil // start over once it runs
		}
		return ev, nil
	}
	for i, f := range s.Vertices {
		if f.Parallelism < 1 || len(f.Busy) != f.Parallelism {
			return Evaluation{}, fmt.Errorf("%w: vertex %d %q: parallelism %d with busy times of %d subtasks",
				ErrTopology, i, m.topo.Vertices[i].Name, f.Parallelism, len(f.Busy))
		}
	}
	cur := make([]int, len(s.Vertices))
	for i, f := range s.Vertices {
		cur[i] = f.Parallelism
	}
	fresh := false
	switch {
	case m.pending != nil && slices.Equal(cur, m.pending):
		m.restart(now, cur) // the rescale took effect
	case m.pending != nil && slices.Equal(cur, m.parallelism):
		ev.Outcome = Rescaling
		ev.Parallelism = changes(m.parallelism, m.pending)
		return ev, nil
	case m.parallelism == nil || !slices.Equal(cur, m.parallelism):
		m.restart(now, cur)
	case m.resumed:
		fresh = true // the new leader restarted the job's tasks
	case m.wentBack(s):
		m.restart(now, cur)
	}
	m.resumed = false
	if until := m.since.Add(m.cfg.Stabilization); now.Before(until) {
		ev.Outcome, ev.Until = Stabilizing, until
		return ev, nil
	}
	m.history = append(m.history, Sample{Snapshot: s, Fresh: fresh})
	start := now.Add(-m.cfg.MetricsWindow)
	drop := 0
	for drop+1 < len(m.history) && !m.history[drop+1].Time.After(start) {
		drop++
	}
	m.history = m.history[drop:]
	if measured(m.history) == 0 {
		// Nothing measured since the window's start but a fresh sample:
		// the window starts from it.
		m.history = m.history[len(m.history)-1:]
	}
	if first := m.history[0].Time; first.After(start) || len(m.history) < 2 {
		ev.Outcome, ev.Until = Collecting, first.Add(m.cfg.MetricsWindow)
		return ev, nil
	}
	m.decide(&ev)
	return ev, nil
}

// RescaleFailed ends the wait for a requested rescale that will not
// happen: the job stabilizes again from now before the next decision.
func (m *Machine) RescaleFailed(now time.Time) {
	if m.pending == nil {
		return
	}
	m.pending = nil
	if m.parallelism != nil {
		m.restart(now, m.parallelism)
	}
}

// restart starts over at parallelism p from now.
func (m *Machine) restart(now time.Time, p []int) {
	m.parallelism, m.since, m.history, m.pending, m.resumed = p, now, nil, nil, false
}

// wentBack reports whether a counter of s is below the last snapshot's:
// the tasks restarted.
func (m *Machine) wentBack(s Snapshot) bool {
	if len(m.history) == 0 {
		return false
	}
	last := m.history[len(m.history)-1]
	for i, f := range s.Vertices {
		l := last.Vertices[i]
		if f.RecordsIn < l.RecordsIn || f.RecordsOut < l.RecordsOut {
			return true
		}
		for k := range f.Busy {
			if f.Busy[k] < l.Busy[k] {
				return true
			}
		}
	}
	return false
}

// decide evaluates the full window into ev (Flink's ScalingExecutor).
func (m *Machine) decide(ev *Evaluation) {
	w := newWindow(m.cfg, m.topo, m.history)
	ev.Vertices, ev.Backlog = w.evaluate()
	for i := range ev.Vertices {
		e := &ev.Vertices[i]
		scaleVertex(m.cfg, m.topo.Vertices[i], e)
		switch e.Change {
		case ScaleDown:
			m.delay(ev.Time, e)
			if e.NewParallelism == e.Parallelism {
				e.Change = NoChange
			}
		default:
			delete(m.delayed, i)
		}
	}
	m.keepForwardEqual(ev.Vertices)
	next := make([]int, len(ev.Vertices))
	anyOutside := false
	for i, e := range ev.Vertices {
		next[i] = e.NewParallelism
		if e.NewParallelism != e.Parallelism && outside(e) {
			anyOutside = true
		}
	}
	changed := changes(m.parallelism, next)
	switch {
	case len(changed) == 0:
		ev.Outcome = Steady
	case !anyOutside:
		ev.Outcome = WithinTarget
	case !m.cfg.ScalingEnabled:
		ev.Outcome, ev.Parallelism = Recommend, changed
	default:
		ev.Outcome, ev.Parallelism = Scale, changed
		m.pending = next
		clear(m.delayed)
	}
}

// keepForwardEqual gives the vertices a forward edge joins the largest
// new parallelism among them (within the smallest of their bounds): a
// forward edge needs both ends at one parallelism.
func (m *Machine) keepForwardEqual(es []VertexEvaluation) {
	group := make([]int, len(es))
	for i := range group {
		group[i] = i
	}
	root := func(i int) int {
		for group[i] != i {
			i = group[i]
		}
		return i
	}
	joined := false
	for i, v := range m.topo.Vertices {
		for _, in := range v.Inputs {
			if in.Ship == Forward {
				group[root(i)] = root(in.From)
				joined = true
			}
		}
	}
	if !joined {
		return
	}
	best, bound := map[int]int{}, map[int]int{}
	for i, e := range es {
		r := root(i)
		best[r] = max(best[r], e.NewParallelism)
		if b, ok := bound[r]; !ok || e.MaxParallelism < b {
			bound[r] = e.MaxParallelism
		}
	}
	for i := range es {
		e := &es[i]
		r := root(i)
		p := min(best[r], max(bound[r], e.Parallelism))
		if p != e.NewParallelism {
			e.Reason = fmt.Sprintf("forward edge: %d like the vertices it joins", p)
			e.NewParallelism = p
		}
		switch {
		case p > e.Parallelism:
			e.Change = ScaleUp
		case p < e.Parallelism:
			e.Change = ScaleDown
		default:
			e.Change = NoChange
		}
	}
}

// changes is the vertices whose parallelism differs in next, with it.
func changes(cur, next []int) map[int]int {
	out := map[int]int{}
	for i := range next {
		if next[i] != cur[i] {
			out[i] = next[i]
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
