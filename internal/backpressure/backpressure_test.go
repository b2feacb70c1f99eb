package backpressure

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/runtime"
)

func tm(elapsed, idle, bp time.Duration) runtime.TaskMetrics {
	return runtime.TaskMetrics{Vertex: "v", Subtask: 0, Elapsed: elapsed, IdleTime: idle, BackPressuredTime: bp,
		BusyTime: elapsed - idle - bp}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestSamplerMeasuresBetweenSamples(t *testing.T) {
	s := NewSampler(time.Second)
	// First sample: the whole run so far (1 s idle of 4 s).
	r := s.Rates([]runtime.TaskMetrics{tm(4*time.Second, time.Second, 0)})[0]
	if !near(r.Idle, 250) || !near(r.Busy, 750) || !near(r.BackPressured, 0) {
		t.Fatalf("first sample %+v, want idle 250 busy 750", r)
	}
	// Two more seconds, all of them backpressured.
	r = s.Rates([]runtime.TaskMetrics{tm(6*time.Second, time.Second, 2*time.Second)})[0]
	if !near(r.BackPressured, 1000) || !near(r.Busy, 0) {
		t.Fatalf("window rates %+v, want 1000 ms/s backpressured", r)
	}
	// A window shorter than the minimum keeps the last rates.
	r = s.Rates([]runtime.TaskMetrics{tm(6*time.Second+time.Millisecond, time.Second+time.Millisecond, 2*time.Second)})[0]
	if !near(r.BackPressured, 1000) {
		t.Fatalf("short window %+v, want the previous rates", r)
	}
	// A restarted attempt (elapsed went down) starts over.
	r = s.Rates([]runtime.TaskMetrics{tm(2*time.Second, 2*time.Second, 0)})[0]
	if !near(r.Idle, 1000) {
		t.Fatalf("after restart %+v, want idle 1000", r)
	}
}

func TestLevels(t *testing.T) {
	for _, c := range []struct {
		ratio float64
		want  string
	}{{0, LevelOK}, {0.1, LevelOK}, {0.11, LevelLow}, {0.5, LevelLow}, {0.51, LevelHigh}, {1, LevelHigh}} {
		if got := Level(c.ratio); got != c.want {
			t.Errorf("Level(%v) = %s, want %s", c.ratio, got, c.want)
		}
	}
	if got := WorstLevel(LevelOK, LevelHigh, LevelLow); got != LevelHigh {
		t.Errorf("WorstLevel = %s", got)
	}
}
