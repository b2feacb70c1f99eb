package autoscaler

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// A machine resumed while it waits for the rescale it asked for goes on
// waiting (the job under the new leader still runs at the old
// parallelism), and starts over once the job runs at the new one.
func TestResumeWaitsForTheRescaleAskedFor(t *testing.T) {
	s := newSim(t)
	var decided Evaluation
	for range 30 {
		s.step(10 * time.Second)
		ev, err := s.m.Observe(s.snapshot())
		if err != nil {
			t.Fatal(err)
		}
		if ev.Outcome == Scale {
			decided = ev
			break
		}
	}
	if decided.Outcome != Scale {
		t.Fatal("the simulated job never scaled")
	}
	st := s.m.State()
	if !slices.Equal(st.Pending, []int{8}) {
		t.Fatalf("the state waits for %v, want [8]", st.Pending)
	}
	m, err := New(s.m.Config(), s.topo)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Resume(roundTrip(t, st)); err != nil {
		t.Fatal(err)
	}
	s.m = m
	s.apply(nil, 10*time.Second) // the new leader restarts the job at 1
	s.step(10 * time.Second)
	if ev, _ := m.Observe(s.snapshot()); ev.Outcome != Rescaling {
		t.Fatalf("the resumed machine, the job at 1: %v, want rescaling", ev)
	}
	s.apply(decided.Parallelism, 10*time.Second)
	s.step(10 * time.Second)
	if ev, _ := m.Observe(s.snapshot()); ev.Outcome != Stabilizing {
		t.Fatalf("the resumed machine, the job at 8: %v, want stabilizing", ev)
	}
}

// A state that does not fit the machine's topology is refused and
// changes nothing.
func TestResumeRefusesAStateOfAnotherTopology(t *testing.T) {
	s := newSim(t)
	for range 12 {
		s.step(10 * time.Second)
		if _, err := s.m.Observe(s.snapshot()); err != nil {
			t.Fatal(err)
		}
	}
	st := s.m.State()
	st.Samples[1].Vertices[0].Busy = nil
	m, _ := New(s.m.Config(), s.topo)
	if err := m.Resume(st); err == nil {
		t.Fatal("a state whose sample has no busy times was resumed")
	}
	if m.State().Parallelism != nil || m.resumed {
		t.Fatalf("a refused state changed the machine: %+v", m.State())
	}
}

// Thinning the window keeps its first and last samples, so the rates
// over it, and marks a sample fresh when a fresh one before it was left
// out.
func TestThinnedKeepsTheWindowsEndsAndItsRestarts(t *testing.T) {
	var st State
	t0 := time.Unix(1000, 0)
	for k := range 100 {
		f := Figures{Parallelism: 1, RecordsIn: int64(k * 10), Busy: []time.Duration{time.Duration(k) * time.Second}, Lag: -1}
		st.Samples = append(st.Samples, Sample{Snapshot: Snapshot{Time: t0.Add(time.Duration(k) * time.Second), Running: true,
			Vertices: []Figures{f}}, Fresh: k == 51})
	}
	th := st.Thinned(10)
	if len(th.Samples) != 10 || th.Samples[0].Time != st.Samples[0].Time || th.Samples[9].Time != st.Samples[99].Time {
		t.Fatalf("thinned to %d samples from %v to %v", len(th.Samples), th.Samples[0].Time, th.Samples[len(th.Samples)-1].Time)
	}
	fresh := 0
	for k, s := range th.Samples {
		if s.Fresh {
			fresh++
			if !s.Time.After(st.Samples[51].Time) && s.Time != st.Samples[51].Time {
				t.Errorf("thinned sample %d at %v is fresh, before the restart", k, s.Time)
			}
		}
	}
	if fresh != 1 {
		t.Errorf("%d thinned samples are fresh, want 1", fresh)
	}
	topo := Topology{Vertices: []Vertex{{Name: "src", Source: true, MaxParallelism: 8}}}
	full, thin := newWindow(DefaultConfig(), topo, st.Samples), newWindow(DefaultConfig(), topo, th.Samples)
	if a, b := full.rate(0, recordsIn), thin.rate(0, recordsIn); a != 10 || b != 10 {
		t.Errorf("the rate over the window is %v, %v thinned; want 10", a, b)
	}
}

// The state a driver keeps stays within its bounds however many subtasks
// and samples its window holds, and another driver resumes it: the
// window, the clocks and the count of rescales.
func TestDriverKeepsABoundedStateAnotherResumes(t *testing.T) {
	const vertices, subtasks = 4, 128
	topo := Topology{}
	for i := range vertices {
		v := Vertex{Name: string(rune('a' + i)), MaxParallelism: 128, Source: i == 0}
		if i > 0 {
			v.Inputs = []Input{{From: i - 1}}
		}
		topo.Vertices = append(topo.Vertices, v)
	}
	cfg := DefaultConfig()
	cfg.MetricsWindow, cfg.Stabilization = 15*time.Minute, time.Minute
	now := time.Unix(1_700_000_000, 0)
	var tick int64
	src := sourceFunc(func() Snapshot {
		tick++
		snap := Snapshot{Time: now.Add(time.Duration(tick) * 10 * time.Second), Running: true}
		for range vertices {
			f := Figures{Parallelism: subtasks, RecordsIn: tick * 1000, RecordsOut: tick * 1000, Lag: -1}
			for k := range subtasks {
				f.Busy = append(f.Busy, time.Duration(tick)*5*time.Second+time.Duration(k)*time.Millisecond)
			}
			snap.Vertices = append(snap.Vertices, f)
		}
		return snap
	})
	newDriver := func() *Driver {
		m, err := New(cfg, topo)
		if err != nil {
			t.Fatal(err)
		}
		return NewDriver(m, src, RescalerFunc(func(context.Context, map[int]int) error { return nil }), nil)
	}
	d := newDriver()
	for range 119 { // 20 minutes, the driver's steps but the last
		if _, err := d.m.Observe(src()); err != nil {
			t.Fatal(err)
		}
	}
	var kept [][]byte
	d.KeepState(func(b []byte) { kept = append(kept, b) })
	if _, err := d.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := kept[len(kept)-1]
	if len(last) > maxKeptBytes {
		t.Fatalf("the state kept takes %d bytes, over %d", len(last), maxKeptBytes)
	}
	var st driverState
	if err := json.Unmarshal(last, &st); err != nil {
		t.Fatal(err)
	}
	if n := len(st.Machine.Samples); n < 2 || n > maxKeptSamples {
		t.Fatalf("the state kept holds %d samples, want 2 to %d", n, maxKeptSamples)
	}
	if len(d.m.history) <= len(st.Machine.Samples) {
		t.Fatalf("the window holds %d samples and the state %d: nothing was thinned", len(d.m.history), len(st.Machine.Samples))
	}
	next := newDriver()
	if err := next.Resume(last); err != nil {
		t.Fatal(err)
	}
	if got := next.m.State(); !got.Since.Equal(d.m.since) || len(got.Samples) != len(st.Machine.Samples) ||
		!got.Samples[0].Time.Equal(d.m.history[0].Time) {
		t.Fatalf("resumed since %v with %d samples from %v; the driver had since %v, %d samples from %v", got.Since, len(got.Samples),
			got.Samples[0].Time, d.m.since, len(d.m.history), d.m.history[0].Time)
	}
	// The next leader's job restarts: its counters from 0. The window
	// goes on, nothing starts over.
	tick = 120 + 3
	restarted := sourceFunc(func() Snapshot {
		snap := src()
		for i := range snap.Vertices {
			f := &snap.Vertices[i]
			f.RecordsIn, f.RecordsOut = f.RecordsIn-tick*1000+1000, f.RecordsOut-tick*1000+1000
			for k := range f.Busy {
				f.Busy[k] = 5 * time.Second
			}
		}
		return snap
	})
	next.source = restarted
	ev, err := next.Step(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Outcome != Steady && ev.Outcome != WithinTarget {
		t.Fatalf("the resumed driver's first step: %v, want an evaluation over the window kept", ev.Outcome)
	}
}

type sourceFunc func() Snapshot

func (f sourceFunc) Snapshot(context.Context) (Snapshot, error) { return f(), nil }

func roundTrip(t *testing.T, st State) State {
	t.Helper()
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	return back
}
