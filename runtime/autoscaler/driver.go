package autoscaler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// MetricsSource gives a job's figures as of when it reads them
// (Snapshot.Time). JobSource is the one of a runtime.Job.
type MetricsSource interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Rescaler sets the parallelism of the vertices it is given, by vertex
// index; the others keep theirs. It may return before the job runs at
// it: the machine waits for a snapshot at the new parallelism.
type Rescaler interface {
	Rescale(ctx context.Context, parallelism map[int]int) error
}

// RescalerFunc is a Rescaler of a function.
type RescalerFunc func(ctx context.Context, parallelism map[int]int) error

// Rescale calls f.
func (f RescalerFunc) Rescale(ctx context.Context, parallelism map[int]int) error {
	return f(ctx, parallelism)
}

// Driver runs a Machine: it reads the metrics source on every tick,
// feeds the machine, applies its decisions through the rescaler and logs
// them with the figures that drove them. Last and LastDecision are for
// the REST API and the metrics; they are safe for concurrent use.
type Driver struct {
	m        *Machine
	source   MetricsSource
	rescaler Rescaler
	log      *slog.Logger

	// keep, when set, is given the driver's state after every step that
	// changed it (KeepState); saved is the last it was given.
	keep  func([]byte)
	saved []byte

	mu        sync.Mutex
	last      Evaluation
	decision  Evaluation
	evaluated Evaluation
	rescales  int64
	lastKnown Outcome
}

// NewDriver returns the driver of m; log nil is slog.Default().
func NewDriver(m *Machine, source MetricsSource, rescaler Rescaler, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.Default()
	}
	return &Driver{m: m, source: source, rescaler: rescaler, log: log.With("component", "autoscaler")}
}

// RunEvery runs the driver on a ticker of the interval until ctx ends.
func (d *Driver) RunEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	d.Run(ctx, t.C)
}

// Run takes a step on every tick until ctx ends or ticks closes. A step
// that fails is logged and the next tick tries again.
func (d *Driver) Run(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ticks:
			if !ok {
				return
			}
			if _, err := d.Step(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("autoscaler step failed", "err", err)
			}
		}
	}
}

// Step reads the metrics once, evaluates them and applies the decision.
// A rescale that fails is logged and returned; the machine then
// stabilizes again before the next decision.
func (d *Driver) Step(ctx context.Context) (Evaluation, error) {
	s, err := d.source.Snapshot(ctx)
	if err != nil {
		return Evaluation{}, fmt.Errorf("autoscaler: reading the job's metrics: %w", err)
	}
	ev, err := d.m.Observe(s)
	if err != nil {
		return Evaluation{}, err
	}
	d.record(ev)
	// Kept before the rescale is asked for: a leader that dies between
	// the two leaves its successor waiting for a rescale the job's
	// scaling state does not hold, which Start drops.
	d.save()
	switch ev.Outcome {
	case Scale:
		d.log.LogAttrs(ctx, slog.LevelInfo, "autoscaler rescales the job", ev.LogAttrs()...)
		if err := d.rescaler.Rescale(ctx, ev.Parallelism); err != nil {
			d.m.RescaleFailed(s.Time)
			d.save()
			d.log.LogAttrs(ctx, slog.LevelWarn, "autoscaler rescale failed", slog.Any("err", err),
				slog.String("parallelism", formatParallelism(ev.Parallelism)))
			return ev, fmt.Errorf("autoscaler: rescaling to %s: %w", formatParallelism(ev.Parallelism), err)
		}
	case Recommend:
		d.log.LogAttrs(ctx, slog.LevelInfo, "autoscaler recommends a rescale (job.autoscaler.scaling.enabled is false)", ev.LogAttrs()...)
	default:
		level := slog.LevelDebug
		if d.changed(ev.Outcome) {
			level = slog.LevelInfo
		}
		d.log.LogAttrs(ctx, level, "autoscaler evaluated the job", ev.LogAttrs()...)
	}
	return ev, nil
}

func (d *Driver) record(ev Evaluation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.last = ev
	if ev.Outcome == Scale || ev.Outcome == Recommend {
		d.decision = ev
	}
	if len(ev.Vertices) > 0 {
		d.evaluated = ev
	}
	if ev.Outcome == Scale {
		d.rescales++
	}
}

// changed reports whether the outcome differs from the last step's.
func (d *Driver) changed(o Outcome) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := o != d.lastKnown
	d.lastKnown = o
	return c
}

// Last returns the latest evaluation (zero before the first step).
func (d *Driver) Last() Evaluation {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// LastDecision returns the latest evaluation that rescaled the job or
// recommended it (zero before one).
func (d *Driver) LastDecision() Evaluation {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.decision
}

// LastEvaluated returns the latest evaluation that has every vertex's
// figures (one over a full metrics window; zero before one): the
// metrics show it while the machine stabilizes or collects.
func (d *Driver) LastEvaluated() Evaluation {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.evaluated
}

// Rescales returns how many rescales the driver requested.
func (d *Driver) Rescales() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rescales
}
