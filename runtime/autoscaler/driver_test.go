package autoscaler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// simSource is the MetricsSource of a simulated job: every read advances
// it by a tick.
type simSource struct {
	s       *sim
	every   time.Duration
	running bool
}

func (f *simSource) Snapshot(context.Context) (Snapshot, error) {
	f.s.step(f.every)
	snap := f.s.snapshot()
	snap.Running = f.running
	return snap, nil
}

// newSim is a job whose source, at Flink's defaults but for a short
// window and stabilization, needs more subtasks than its 8 partitions:
// one reads 1000 records/s, the producers write 2500/s.
func newSim(t *testing.T) *sim {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MetricsWindow, cfg.Stabilization = time.Minute, 30*time.Second
	topo := Topology{Vertices: []Vertex{{Name: "src", MaxParallelism: 128, Source: true}}}
	m, err := New(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return &sim{m: m, topo: topo, vs: []*simVertex{{p: 1, cap: 1000, ratio: 1, partitions: 8, busy: make([]float64, 1)}},
		rates: []float64{2500}}
}

func TestDriverAppliesDecisionsAndLogsTheirFigures(t *testing.T) {
	s := newSim(t)
	var logs bytes.Buffer
	var calls []map[int]int
	apply := false
	rescaler := RescalerFunc(func(_ context.Context, p map[int]int) error {
		calls = append(calls, p)
		if apply {
			s.apply(p, 0)
		}
		return nil
	})
	d := NewDriver(s.m, &simSource{s: s, every: 10 * time.Second, running: true}, rescaler,
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	ctx := context.Background()
	var outcomes []Outcome
	for range 20 {
		ev, err := d.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, ev.Outcome)
		if ev.Outcome == Scale {
			break
		}
	}
	if len(calls) != 1 || calls[0][0] != 8 {
		t.Fatalf("rescales %v after outcomes %v, want one to {0:8}", calls, outcomes)
	}
	if got := d.LastDecision(); got.Outcome != Scale || got.Parallelism[0] != 8 || got.Vertices[0].Change != ScaleUp {
		t.Fatalf("last decision %v", got)
	}
	line := logs.String()
	for _, want := range []string{"autoscaler rescales the job", "outcome=scale", "parallelism={0:8}", "0.name=src", "0.parallelism=1",
		"0.new=8", "0.trueProcessingRate=1000", "0.lag=", "0.maxParallelism=8"} {
		if !strings.Contains(line, want) {
			t.Errorf("log has no %q:\n%s", want, line)
		}
	}
	// The rescaler returned before the job runs at 8: the machine waits.
	ev, err := d.Step(ctx)
	if err != nil || ev.Outcome != Rescaling || ev.Parallelism[0] != 8 {
		t.Fatalf("while the rescale is pending: %v, %v", ev, err)
	}
	s.apply(calls[0], 0)
	if ev, err = d.Step(ctx); err != nil || ev.Outcome != Stabilizing {
		t.Fatalf("once the job runs at 8: %v, %v", ev, err)
	}
	if d.Rescales() != 1 || len(calls) != 1 {
		t.Fatalf("rescales %d, calls %v", d.Rescales(), calls)
	}
}

func TestDriverRescaleFailureStabilizesAgain(t *testing.T) {
	s := newSim(t)
	failed := errors.New("no slots")
	var logs bytes.Buffer
	d := NewDriver(s.m, &simSource{s: s, every: 10 * time.Second, running: true},
		RescalerFunc(func(context.Context, map[int]int) error { return failed }),
		slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	for range 20 {
		ev, err := d.Step(ctx)
		if ev.Outcome != Scale {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.Is(err, failed) {
			t.Fatalf("a failed rescale returned %v", err)
		}
		next, err := d.Step(ctx)
		if err != nil || next.Outcome != Stabilizing {
			t.Fatalf("after a failed rescale: %v, %v", next, err)
		}
		if !strings.Contains(logs.String(), "autoscaler rescale failed") || !strings.Contains(logs.String(), "no slots") {
			t.Fatalf("the failure is not logged:\n%s", logs.String())
		}
		return
	}
	t.Fatal("no rescale")
}

// TestDriverRunStepsOnEveryTick runs the loop on ticks the test sends:
// each is a step, a job that is not running is never rescaled, and the
// loop ends when the ticks end.
func TestDriverRunStepsOnEveryTick(t *testing.T) {
	s := newSim(t)
	src := &simSource{s: s, every: 10 * time.Second}
	rescaled := 0
	d := NewDriver(s.m, src, RescalerFunc(func(context.Context, map[int]int) error { rescaled++; return nil }), slog.New(slog.DiscardHandler))
	ticks := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(context.Background(), ticks)
	}()
	for range 30 {
		ticks <- time.Time{}
	}
	close(ticks)
	<-done
	if got := d.Last(); got.Outcome != NotRunning || rescaled != 0 {
		t.Fatalf("a job not running: last %v, %d rescales", got, rescaled)
	}
	if s.now != 30*10*time.Second {
		t.Fatalf("the source was read for %v, want 30 ticks", s.now)
	}
}

// TestRestartedTasksStartOver: counters that go back (the tasks
// restarted, a failover) empty the window and stabilize again.
func TestRestartedTasksStartOver(t *testing.T) {
	s := newSim(t)
	src := &simSource{s: s, every: 10 * time.Second, running: true}
	var ev Evaluation
	for ev.Outcome != Collecting {
		snap, _ := src.Snapshot(context.Background())
		var err error
		if ev, err = s.m.Observe(snap); err != nil {
			t.Fatal(err)
		}
	}
	s.vs[0].in, s.vs[0].busy = 0, []float64{0}
	snap, _ := src.Snapshot(context.Background())
	ev, err := s.m.Observe(snap)
	if err != nil || ev.Outcome != Stabilizing || !ev.Until.Equal(snap.Time.Add(30*time.Second)) {
		t.Fatalf("after the counters went back: %v, %v", ev, err)
	}
}
