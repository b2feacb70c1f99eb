package scaling

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"
)

// Flink's defaults of the adaptive scheduler's timing.
const (
	// DefaultCooldown is jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling.
	DefaultCooldown = 30 * time.Second
	// DefaultStabilization is
	// jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout.
	DefaultStabilization = 60 * time.Second
)

// Config is the scheduler's configuration.
type Config struct {
	Mode Mode
	// Cooldown is the least time between a rescale and one the machine
	// decides by itself (reactive); requirements set explicitly do not
	// wait for it.
	Cooldown time.Duration
	// Stabilization is how long the slots must stay the same before the
	// reactive mode follows them.
	Stabilization time.Duration
}

// WithDefaults fills the durations left zero with Flink's defaults.
func (c Config) WithDefaults() Config {
	if c.Cooldown == 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.Stabilization == 0 {
		c.Stabilization = DefaultStabilization
	}
	return c
}

// Decision is a rescale the machine decided, kept for the job's history
// (the REST API and the logs show them).
type Decision struct {
	Time  time.Time
	From  []int
	To    []int
	Cause string
	// Outcome is "" while it is carried out, then "rescaled" or why it
	// failed.
	Outcome string
}

type phase uint8

const (
	phaseRunning   phase = iota
	phaseRescaling       // a Rescale is being carried out
)

// maxHistory bounds the decisions kept.
const maxHistory = 32

// Machine decides a running job's parallelism. Its methods are called
// from one goroutine at a time.
type Machine struct {
	cfg Config
	vs  []Vertex
	// req are the requirements set explicitly (a user's, the REST API's);
	// auto the parallelism the autoscaler decided per vertex, which runs
	// within them (effective) and never replaces them.
	req   Requirements
	auto  map[int]int
	slots int // 0: as many as asked (one process)
	phase phase
	// again: requirements changed while a rescale was in flight; decide
	// again once it is done.
	again      bool
	againCause string
	// slotsChanged: the slots changed since the last decision (reactive),
	// at slotsAt.
	slotsChanged bool
	slotsAt      time.Time
	lastRescale  time.Time
	history      []Decision
	// before are the requirements and parallelism the latest rescale
	// started from (Revert).
	beforeReq  Requirements
	beforeAuto map[int]int
	beforePar  []int
}

// New returns the machine of a job whose vertices are vs (at their
// current parallelism), with slots task slots (0: as many as asked).
func New(cfg Config, vs []Vertex, slots int) *Machine {
	return &Machine{cfg: cfg.WithDefaults(), vs: slices.Clone(vs), slots: slots}
}

// Parallelism is every vertex's parallelism now.
func (m *Machine) Parallelism() []int {
	out := make([]int, len(m.vs))
	for i, v := range m.vs {
		out[i] = v.Parallelism
	}
	return out
}

// Requirements are the requirements in force: the explicit ones, and for
// every other vertex its mode's default (its parallelism, or in the
// reactive mode 1 to its max parallelism).
func (m *Machine) Requirements() Requirements {
	out := Requirements{}
	for i, v := range m.vs {
		if b, ok := m.req[i]; ok {
			out[i] = b
		} else if m.cfg.Mode == Reactive {
			out[i] = Bounds{Lower: 1, Upper: v.MaxParallelism}
		} else {
			out[i] = Bounds{Lower: v.Parallelism, Upper: v.Parallelism}
		}
	}
	return out
}

// SetLimits sets each vertex's Limit (by index; a Kafka source's
// partition count, 0 for none; a negative entry keeps the vertex's). In
// the reactive mode a change is followed as a change of the slots is:
// once stable for the stabilization timeout (Tick).
func (m *Machine) SetLimits(now time.Time, limits []int) []Action {
	changed := false
	for i := range m.vs {
		if i < len(limits) && limits[i] >= 0 && m.vs[i].Limit != limits[i] {
			m.vs[i].Limit, changed = limits[i], true
		}
	}
	if !changed || m.cfg.Mode != Reactive {
		return nil
	}
	m.slotsChanged, m.slotsAt = true, now
	return []Action{Log{slog.LevelInfo, "a source's partitions changed; the job follows once they are stable", []any{
		"limits", limits, "stable_at", now.Add(m.cfg.Stabilization).UTC().Format(time.RFC3339Nano)}}}
}

// History is the rescales decided, oldest first.
func (m *Machine) History() []Decision { return slices.Clone(m.history) }

// Slots is the number of slots the machine knows (0: as many as asked).
func (m *Machine) Slots() int { return m.slots }

// Require sets the requirements (replacing the earlier ones) for cause
// ("resource requirements", "autoscaler"). When they ask for another
// parallelism than the job's, a Rescale follows, at once or, when one is
// in flight, once it is done. Requirements that cannot be met are
// refused and change nothing.
func (m *Machine) Require(now time.Time, req Requirements, cause string) ([]Action, error) {
	if err := Check(m.vs, req); err != nil {
		return nil, err
	}
	return m.set(now, cloneReq(req), m.auto, cause)
}

// Autoscale sets the parallelism the autoscaler decided for the vertices
// of par (by index; the others keep theirs). Each runs at it within the
// requirements set explicitly (clamped into a vertex's bounds), which it
// does not replace: a later Require narrows it again. It is carried out
// as Require's (cause "autoscaler").
func (m *Machine) Autoscale(now time.Time, par map[int]int) ([]Action, error) {
	auto := maps.Clone(m.auto)
	if auto == nil {
		auto = map[int]int{}
	}
	for i, p := range par {
		if i < 0 || i >= len(m.vs) {
			return nil, fmt.Errorf("%w: vertex %d: the job has %d vertices", ErrInvalidRequirements, i, len(m.vs))
		}
		if p < 1 || p > m.vs[i].MaxParallelism {
			return nil, fmt.Errorf("%w: vertex %d (%s): parallelism %d out of [1, %d] (its max parallelism)",
				ErrInvalidRequirements, i, m.vs[i].Name, p, m.vs[i].MaxParallelism)
		}
		auto[i] = p
	}
	acts, err := m.set(now, m.req, auto, "autoscaler")
	if err == nil && m.phase == phaseRunning {
		// Clamped into the bounds (set meanwhile), the decision asks for
		// the parallelism the job runs at: no rescale follows, which the
		// autoscaler must hear of rather than wait for one.
		return acts, fmt.Errorf("%w: %v", ErrUnchanged, m.Parallelism())
	}
	return acts, err
}

// ErrUnchanged: the autoscaler's decision, within the vertices' bounds,
// asks for the parallelism the job runs at; it is kept, and no rescale
// follows.
var ErrUnchanged = errors.New("the autoscaler's decision, within the resource requirements' bounds, is the parallelism the job runs at")

// set makes req and auto the machine's and rescales to what they ask
// for, unless they cannot be met (nothing changes then).
func (m *Machine) set(now time.Time, req Requirements, auto map[int]int, cause string) ([]Action, error) {
	target, err := Target(m.vs, effective(m.vs, req, auto), m.slots, m.cfg.Mode)
	if err != nil {
		return nil, err
	}
	prevReq, prevAuto := m.req, m.auto
	m.req, m.auto = req, auto
	if m.phase == phaseRescaling {
		m.again, m.againCause = true, cause
		return []Action{Log{slog.LevelInfo, "rescale requested; it follows the rescale in progress", []any{"cause", cause, "parallelism", target}}}, nil
	}
	acts := m.decide(now, target, cause)
	if m.phase == phaseRescaling {
		m.beforeReq, m.beforeAuto = prevReq, prevAuto
	}
	return acts, nil
}

// effective are the requirements the job runs at: req, and for a vertex
// the autoscaler decided, its decision clamped into the vertex's bounds
// in req (1 to its max parallelism without).
func effective(vs []Vertex, req Requirements, auto map[int]int) Requirements {
	if len(auto) == 0 {
		return req
	}
	out := cloneReq(req)
	if out == nil {
		out = Requirements{}
	}
	for i, p := range auto {
		b, ok := req[i]
		if !ok {
			b = Bounds{Lower: 1, Upper: vs[i].MaxParallelism}
		}
		p = min(max(p, b.Lower), b.Upper)
		out[i] = Bounds{Lower: p, Upper: p}
	}
	return out
}

// Target is the parallelism the requirements in force (the explicit ones
// and the autoscaler's decisions within them) ask for with the slots
// there are.
func (m *Machine) Target() ([]int, error) {
	return Target(m.vs, effective(m.vs, m.req, m.auto), m.slots, m.cfg.Mode)
}

// Autoscaled is the parallelism the autoscaler decided, by vertex index
// (Autoscale); nil when it decided none.
func (m *Machine) Autoscaled() map[int]int { return maps.Clone(m.auto) }

// Resume gives a machine made for a job a new leader took over the
// requirements and autoscaler decisions the last leader had (vertices
// out of range, or requirements its vertices cannot meet, are left
// aside). When they ask for another parallelism than the job resumes at,
// the rescale is decided once the job runs (Running).
func (m *Machine) Resume(now time.Time, req Requirements, auto map[int]int) []Action {
	if err := Check(m.vs, req); err != nil {
		return []Action{Log{slog.LevelWarn, "the requirements of the last leader do not fit the job; left aside", []any{"err", err}}}
	}
	m.req = cloneReq(req)
	m.auto = map[int]int{}
	for i, p := range auto {
		if i >= 0 && i < len(m.vs) && p >= 1 && p <= m.vs[i].MaxParallelism {
			m.auto[i] = p
		}
	}
	if target, err := m.Target(); err == nil && !slices.Equal(target, m.Parallelism()) {
		m.again, m.againCause = true, "resumed from the last leader"
	}
	return nil
}

// ExplicitRequirements are the requirements set explicitly (Require),
// without the defaults of the other vertices nor the autoscaler's
// decisions: the bounds the autoscaler decides within.
func (m *Machine) ExplicitRequirements() Requirements { return cloneReq(m.req) }

// decide starts a rescale to target unless the job runs at it already.
func (m *Machine) decide(now time.Time, target []int, cause string) []Action {
	from := m.Parallelism()
	if slices.Equal(target, from) {
		return []Action{Log{slog.LevelInfo, "the job already runs at the parallelism asked for", []any{"cause", cause, "parallelism", from}}}
	}
	m.phase = phaseRescaling
	m.beforeReq, m.beforeAuto, m.beforePar = m.req, m.auto, from
	m.record(Decision{Time: now, From: from, To: slices.Clone(target), Cause: cause})
	return []Action{Rescale{From: from, To: slices.Clone(target), Cause: cause}}
}

func (m *Machine) record(d Decision) {
	m.history = append(m.history, d)
	if len(m.history) > maxHistory {
		m.history = slices.Delete(m.history, 0, len(m.history)-maxHistory)
	}
}

// outcome sets the outcome of the latest decision.
func (m *Machine) outcome(s string) {
	if n := len(m.history); n > 0 && m.history[n-1].Outcome == "" {
		m.history[n-1].Outcome = s
	}
}

// SetSlots says how many slots the workers offer now. In the reactive
// mode the job follows them once they stayed so for the stabilization
// timeout (Tick).
func (m *Machine) SetSlots(now time.Time, n int) []Action {
	if n == m.slots {
		return nil
	}
	old := m.slots
	m.slots = n
	if m.cfg.Mode != Reactive {
		return nil
	}
	m.slotsChanged, m.slotsAt = true, now
	return []Action{Log{slog.LevelInfo, "task slots changed; the job follows once they are stable", []any{
		"slots", n, "before", old, "stable_at", now.Add(m.cfg.Stabilization).UTC().Format(time.RFC3339Nano)}}}
}

// NextWakeup is when Tick is next due.
func (m *Machine) NextWakeup() (time.Time, bool) {
	if m.cfg.Mode != Reactive || !m.slotsChanged || m.phase != phaseRunning {
		return time.Time{}, false
	}
	at := m.slotsAt.Add(m.cfg.Stabilization)
	if !m.lastRescale.IsZero() {
		if c := m.lastRescale.Add(m.cfg.Cooldown); c.After(at) {
			at = c
		}
	}
	return at, true
}

// Tick decides what is due: in the reactive mode, following slots that
// have been stable for the stabilization timeout, no sooner than the
// cooldown after the last rescale.
func (m *Machine) Tick(now time.Time) []Action {
	at, ok := m.NextWakeup()
	if !ok || now.Before(at) {
		return nil
	}
	m.slotsChanged = false
	target, err := m.Target()
	if err != nil {
		return []Action{Log{slog.LevelWarn, "the job cannot follow the task slots", []any{"slots", m.slots, "err", err}}}
	}
	return m.decide(now, target, fmt.Sprintf("reactive: %d slots", m.slots))
}

// Running says an attempt of the job runs at parallelism: the rescale in
// flight is done, or a failover or the start deployed it. Requirements
// set meanwhile are decided now.
func (m *Machine) Running(now time.Time, parallelism []int) []Action {
	for i := range m.vs {
		if i < len(parallelism) {
			m.vs[i].Parallelism = parallelism[i]
		}
	}
	var acts []Action
	if m.phase == phaseRescaling {
		m.phase, m.lastRescale = phaseRunning, now
		m.outcome("rescaled")
		acts = append(acts, Log{slog.LevelInfo, "the job runs at its new parallelism", []any{"parallelism", parallelism}})
	}
	if m.again {
		m.again = false
		target, err := m.Target()
		if err != nil {
			return append(acts, Log{slog.LevelWarn, "the requirements set during the rescale cannot be met", []any{"err", err}})
		}
		acts = append(acts, m.decide(now, target, m.againCause)...)
	}
	return acts
}

// RescaleFailed says the rescale in flight failed (its stop checkpoint
// failed): the job carries on at its parallelism. In the reactive mode
// the machine tries again after the cooldown.
func (m *Machine) RescaleFailed(now time.Time, err error) []Action {
	if m.phase != phaseRescaling {
		return nil
	}
	m.phase, m.lastRescale = phaseRunning, now
	m.outcome("failed: " + err.Error())
	if m.cfg.Mode == Reactive {
		m.slotsChanged, m.slotsAt = true, now
	}
	acts := []Action{Log{slog.LevelWarn, "rescale failed; the job carries on at its parallelism", []any{"parallelism", m.Parallelism(), "err", err}}}
	if m.again {
		m.again = false
		if target, terr := m.Target(); terr == nil {
			acts = append(acts, m.decide(now, target, m.againCause)...)
		}
	}
	return acts
}

// Revert says the job could not run at the parallelism of the latest
// rescale (its first attempt there failed before a checkpoint, a state
// that does not restore at it): the job goes back to the parallelism and
// requirements it had before, and the decision's outcome says why.
func (m *Machine) Revert(now time.Time, err error) ([]int, []Action) {
	if m.beforePar == nil {
		return m.Parallelism(), nil
	}
	for i := range m.vs {
		m.vs[i].Parallelism = m.beforePar[i]
	}
	m.req, m.auto = cloneReq(m.beforeReq), maps.Clone(m.beforeAuto)
	m.phase, m.lastRescale, m.again = phaseRunning, now, false
	if n := len(m.history); n > 0 {
		m.history[n-1].Outcome = "reverted: " + err.Error()
	}
	par := m.beforePar
	m.beforePar, m.beforeReq, m.beforeAuto = nil, nil, nil
	return slices.Clone(par), []Action{Log{slog.LevelWarn, "the job cannot run at the parallelism of its rescale; it goes back to the one before",
		[]any{"parallelism", par, "err", err}}}
}

// Confirmed says the job completed a checkpoint at its parallelism: a
// later failure no longer reverts the rescale.
func (m *Machine) Confirmed() { m.beforePar, m.beforeReq, m.beforeAuto = nil, nil, nil }

// Failover is the parallelism of the attempt that follows a failure:
// what the requirements ask for with the slots there are, so that in the
// reactive mode a worker that left scales the job down; the job's
// parallelism when rescale is false (the checkpoint to restore holds
// in-flight data, which restores only at its own parallelism) or when
// the requirements cannot be met (the job then waits for slots). A
// rescale in flight is over: the failover carries it out.
func (m *Machine) Failover(now time.Time, rescale bool) ([]int, []Action) {
	cur := m.Parallelism()
	if m.phase == phaseRescaling {
		m.phase, m.lastRescale = phaseRunning, now
		m.outcome("interrupted by a failure; the restart carries it out")
		m.again = false
	}
	if !rescale {
		return cur, nil
	}
	target, err := m.Target()
	if err != nil {
		return cur, []Action{Log{slog.LevelInfo, "the restart keeps the job's parallelism: the requirements cannot be met with the slots there are", []any{"err", err}}}
	}
	if slices.Equal(target, cur) {
		return cur, nil
	}
	m.slotsChanged = false
	m.record(Decision{Time: now, From: cur, To: slices.Clone(target), Cause: fmt.Sprintf("failover: %d slots", m.slots), Outcome: "restarted"})
	return target, []Action{Log{slog.LevelInfo, "the restart rescales the job to the slots there are", []any{"from", cur, "to", target, "slots", m.slots}}}
}

// String describes the machine's state, for scenario tests.
func (m *Machine) String() string {
	s := fmt.Sprintf("mode=%s slots=%d parallelism=%v", m.cfg.Mode, m.slots, m.Parallelism())
	if m.phase == phaseRescaling {
		s += " rescaling"
	}
	if len(m.req) > 0 {
		s += " requirements=" + m.req.String()
	}
	if len(m.auto) > 0 {
		s += " autoscaler=" + formatAuto(m.auto)
	}
	if at, ok := m.NextWakeup(); ok {
		s += fmt.Sprintf(" wakeup=%d", at.UnixMilli())
	}
	return s
}

func (r Requirements) String() string {
	s := "{"
	for k, i := range slices.Sorted(maps.Keys(r)) {
		if k > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%s", i, r[i])
	}
	return s + "}"
}

func formatAuto(auto map[int]int) string {
	s := "{"
	for k, i := range slices.Sorted(maps.Keys(auto)) {
		if k > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%d", i, auto[i])
	}
	return s + "}"
}

func cloneReq(r Requirements) Requirements {
	if r == nil {
		return nil
	}
	return maps.Clone(r)
}
