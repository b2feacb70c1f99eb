// Package backpressure turns the cumulative busy, idle and backpressured
// times of tasks into Flink's per-second figures (busyTimeMsPerSecond,
// idleTimeMsPerSecond, backPressuredTimeMsPerSecond) measured between two
// samples, and into Flink's backpressure levels. The metrics collector and
// the HTTP API share it.
package backpressure

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/runtime"
)

// Rates are the milliseconds per second a task spent busy, idle and
// backpressured over the last measured window; they add up to 1000.
type Rates struct {
	Busy, Idle, BackPressured float64
}

// BackPressuredRatio is the share of time the task was backpressured, in
// [0, 1]: what Flink's backpressure endpoint calls "ratio".
func (r Rates) BackPressuredRatio() float64 { return r.BackPressured / 1000 }

// BusyRatio is the share of time the task was busy, in [0, 1].
func (r Rates) BusyRatio() float64 { return r.Busy / 1000 }

// IdleRatio is the share of time the task was idle, in [0, 1].
func (r Rates) IdleRatio() float64 { return r.Idle / 1000 }

// Flink's backpressure levels.
const (
	LevelOK   = "ok"
	LevelLow  = "low"
	LevelHigh = "high"
)

// Level returns Flink's backpressure level for a backpressured ratio: ok
// up to 10 %, low up to 50 %, high above.
func Level(ratio float64) string {
	switch {
	case ratio <= 0.10:
		return LevelOK
	case ratio <= 0.5:
		return LevelLow
	}
	return LevelHigh
}

// WorstLevel returns the highest of the levels.
func WorstLevel(levels ...string) string {
	rank := map[string]int{LevelOK: 0, LevelLow: 1, LevelHigh: 2}
	worst := LevelOK
	for _, l := range levels {
		if rank[l] > rank[worst] {
			worst = l
		}
	}
	return worst
}

// MinWindow is the least task time a window should span: Flink measures
// its per-second figures over about a second too.
const MinWindow = time.Second

type key struct {
	vertex  string
	subtask int
}

type sample struct {
	elapsed, busy, idle, bp time.Duration
}

type entry struct {
	ref   sample // the start of the current window
	rates Rates
	has   bool // rates were measured over a window
}

// Sampler measures rates between calls. A window shorter than its minimum
// keeps the previous rates, so that two scrapes close together (or two
// Prometheus servers) do not measure noise. It is safe for concurrent use.
type Sampler struct {
	min time.Duration
	mu  sync.Mutex
	m   map[key]*entry
}

// NewSampler returns a sampler whose windows last at least min of task
// time.
func NewSampler(min time.Duration) *Sampler {
	return &Sampler{min: min, m: map[key]*entry{}}
}

// Rates returns the rates of each task, in the order of ms. A task seen
// for the first time, or whose attempt restarted, gets its rates since it
// started.
func (s *Sampler) Rates(ms []runtime.TaskMetrics) []Rates {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Rates, len(ms))
	seen := make(map[key]bool, len(ms))
	for i, m := range ms {
		k := key{m.Vertex, m.Subtask}
		seen[k] = true
		cur := sample{elapsed: m.Elapsed, busy: m.BusyTime, idle: m.IdleTime, bp: m.BackPressuredTime}
		e := s.m[k]
		switch {
		case e == nil || cur.elapsed < e.ref.elapsed:
			// First sight, or a new attempt: the whole run so far.
			e = &entry{ref: cur, rates: perSecond(sample{}, cur)}
			s.m[k] = e
		case cur.elapsed-e.ref.elapsed >= s.min && cur.elapsed > e.ref.elapsed:
			e.rates, e.has, e.ref = perSecond(e.ref, cur), true, cur
		case !e.has:
			e.rates = perSecond(sample{}, cur)
		}
		out[i] = e.rates
	}
	for k := range s.m {
		if !seen[k] {
			delete(s.m, k)
		}
	}
	return out
}

// perSecond returns the rates between two samples.
func perSecond(from, to sample) Rates {
	d := to.elapsed - from.elapsed
	if d <= 0 {
		return Rates{Idle: 1000}
	}
	f := func(a, b time.Duration) float64 {
		v := float64(b-a) / float64(d) * 1000
		return min(max(v, 0), 1000)
	}
	r := Rates{Idle: f(from.idle, to.idle), BackPressured: f(from.bp, to.bp)}
	r.Busy = max(1000-r.Idle-r.BackPressured, 0)
	return r
}
