package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/runtime/scaling"
)

// A rescale in place (Flink's adaptive scheduler): the job's parallelism
// changes while it runs. The scaling machine (runtime/scaling) decides
// the parallelism of every vertex from the resource requirements (a
// user's, the autoscaler's), the slots the workers offer and the
// scheduler mode; the job carries its Rescale out by stopping at a
// checkpoint of its own (checkpoint.Coordinator.TriggerStop: aligned,
// the sources read nothing after its barrier, sinks commit it) and
// starting the next attempt from that checkpoint with the graph at the
// new parallelism: keyed state is restored by key groups, operator state
// (Kafka splits, broadcast state, async I/O in flight) redistributed, as
// for a savepoint restored at another parallelism.

// ResourceRequirements are the parallelism bounds of a job's vertices,
// by index in JobGraph.Vertices (Flink's resource requirements).
type ResourceRequirements = scaling.Requirements

// ParallelismBounds are one vertex's (lower and upper bound).
type ParallelismBounds = scaling.Bounds

// RescaleDecision is a rescale the job decided: when, from and to what
// parallelism (by vertex index), why, and how it ended.
type RescaleDecision = scaling.Decision

// ErrRescale is returned (wrapped) when a rescale in place cannot be
// carried out: the job is not running, it has no checkpointing, its stop
// checkpoint failed, or it ended first. The job then carries on at its
// parallelism.
var ErrRescale = errors.New("rescale failed")

// Scheduler errors of the requirements, re-exported.
var (
	ErrInvalidRequirements = scaling.ErrInvalidRequirements
	ErrNotEnoughSlots      = scaling.ErrNotEnoughSlots
	ErrAutoscaleUnchanged  = scaling.ErrUnchanged
)

// SlotOffer is implemented by executors that know the task slots their
// workers offer: the scaling machine bounds the parallelism by them, and
// in the reactive mode follows them.
type SlotOffer interface {
	// Slots is the number of slots the workers offer now, and a channel
	// closed when that changes.
	Slots() (int, <-chan struct{})
}

// Parallelism is every vertex's parallelism, by index.
func (g *JobGraph) Parallelism() []int {
	out := make([]int, len(g.Vertices))
	for i, v := range g.Vertices {
		out[i] = v.Parallelism
	}
	return out
}

// Rescaled returns the graph with every vertex (by index) at the
// parallelism par: the same chains and edges. A parallelism out of
// [1, max parallelism], or two vertices joined by a forward edge at
// different parallelisms, is an error naming them.
func (g *JobGraph) Rescaled(par []int) (*JobGraph, error) {
	if len(par) != len(g.Vertices) {
		return nil, fmt.Errorf("%w: parallelism of %d vertices for a job of %d", ErrInvalidRequirements, len(par), len(g.Vertices))
	}
	ng := &JobGraph{vertexOf: make(map[*Node]*JobVertex, len(g.vertexOf)), outEdges: g.outEdges, chained: g.chained}
	for i, v := range g.Vertices {
		if p := par[i]; p < 1 || p > v.MaxParallelism {
			return nil, fmt.Errorf("%w: vertex %d (%s): parallelism %d out of [1, %d] (its max parallelism)", ErrInvalidRequirements, i, v.Name, p, v.MaxParallelism)
		}
		nv := *v
		nv.Parallelism = par[i]
		ng.Vertices = append(ng.Vertices, &nv)
	}
	for n, v := range g.vertexOf {
		ng.vertexOf[n] = ng.Vertices[v.ID]
	}
	for _, v := range ng.Vertices {
		for _, e := range v.In {
			if from := ng.vertexOf[e.From]; e.Partitioner == PartitionForward && from.Parallelism != v.Parallelism {
				return nil, fmt.Errorf("%w: vertex %d (%s) at %d and vertex %d (%s) at %d are joined by a forward edge: both need one parallelism",
					ErrInvalidRequirements, from.ID, from.Name, from.Parallelism, v.ID, v.Name, v.Parallelism)
			}
		}
	}
	return ng, nil
}

// scalingVertices describes the graph's vertices to the scaling machine:
// vertices joined by forward edges that are not chained share a group.
func (g *JobGraph) scalingVertices() []scaling.Vertex {
	vs := make([]scaling.Vertex, len(g.Vertices))
	group := make([]int, len(g.Vertices)) // union-find by smallest index
	for i := range group {
		group[i] = i
	}
	find := func(i int) int {
		for group[i] != i {
			i = group[i]
		}
		return i
	}
	joined := make([]bool, len(g.Vertices))
	for _, v := range g.Vertices {
		for _, e := range v.In {
			if e.Partitioner != PartitionForward {
				continue
			}
			a, b := find(g.vertexOf[e.From].ID), find(v.ID)
			group[max(a, b)] = min(a, b)
			joined[g.vertexOf[e.From].ID], joined[v.ID] = true, true
		}
	}
	for i, v := range g.Vertices {
		vs[i] = scaling.Vertex{Name: v.Name, Parallelism: v.Parallelism, MaxParallelism: v.MaxParallelism}
		if joined[i] {
			vs[i].Group = find(i) + 1
		}
	}
	return vs
}

// rescalePlan is the rescale an attempt stops for: the graph the next
// attempt runs.
type rescalePlan struct {
	graph *JobGraph
	to    []int
	// stopped is the checkpoint the attempt stopped at, once it did.
	stopped int64
}

// jobScaling is a job's part of rescaling: the machine and the callers
// waiting for a parallelism.
type jobScaling struct {
	mu      sync.Mutex
	m       *scaling.Machine
	waiters []*rescaleWaiter
	// wake tells watchSlots to ask the machine when it is next due.
	wake chan struct{}
	// pub writes the scaling state for a coordinator taking over.
	pub scalingPublisher
}

// nudge wakes watchSlots: the machine's phase changed.
func (s *jobScaling) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

type rescaleWaiter struct {
	want []int
	done chan error
}

// ErrReactiveNeedsCluster: the reactive mode follows the task slots of a
// cluster's workers; a job wholly in one process has none to follow.
var ErrReactiveNeedsCluster = errors.New("scheduler-mode reactive needs a cluster: the job's parallelism follows the task slots its workers offer")

// checkScaling refuses a scheduler configuration the job cannot follow.
func checkScaling(cfg Config) error {
	if cfg.Scaling.Cooldown < 0 || cfg.Scaling.Stabilization < 0 {
		return fmt.Errorf("%w: the scheduler's cooldown (%v) and stabilization timeout (%v) must not be negative",
			checkpoint.ErrInvalidConfig, cfg.Scaling.Cooldown, cfg.Scaling.Stabilization)
	}
	if cfg.Scaling.Mode != scaling.Reactive {
		return nil
	}
	if _, ok := cfg.Executor.(SlotOffer); !ok {
		return fmt.Errorf("%w: %w", checkpoint.ErrInvalidConfig, ErrReactiveNeedsCluster)
	}
	if !cfg.Checkpoint.Enabled() {
		return fmt.Errorf("%w: scheduler-mode reactive rescales at checkpoints; the job has none (execution.checkpointing.interval)", checkpoint.ErrInvalidConfig)
	}
	return nil
}

// newScaling makes the job's scaling machine and, on a cluster, follows
// the slots its workers offer until the job ends.
func (j *Job) newScaling() {
	o, ok := j.cfg.Executor.(SlotOffer)
	slots := 0
	if ok {
		slots, _ = o.Slots()
	}
	vs := j.Graph().scalingVertices() // the plan's, or the parallelism resumed (resumeScaling)
	if j.cfg.Scaling.Mode == scaling.Reactive {
		for i, l := range j.partitionLimits() {
			vs[i].Limit = max(l, 0)
		}
	}
	j.scaling.m = scaling.New(j.cfg.Scaling, vs, slots)
	j.scaling.wake = make(chan struct{}, 1)
	if ok {
		go j.watchSlots(o)
	}
}

// watchSlots tells the scaling machine the slots the workers offer each
// time they change, and wakes it when it asked (the reactive mode
// follows the slots once they are stable).
func (j *Job) watchSlots(o SlotOffer) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		n, changed := o.Slots()
		var limits []int
		if j.cfg.Scaling.Mode == scaling.Reactive {
			limits = j.partitionLimits() // partitions added since are followed
		}
		now := time.Now()
		s := &j.scaling
		// While the job restarts its failover decides the parallelism
		// (failoverGraph); the running attempt nudges the watch after.
		restarting := j.Status() == JobRestarting
		s.mu.Lock()
		acts := s.m.SetSlots(now, n)
		if limits != nil {
			acts = append(acts, s.m.SetLimits(now, limits)...)
		}
		if !restarting {
			acts = append(acts, s.m.Tick(now)...)
		}
		at, wake := s.m.NextWakeup()
		s.mu.Unlock()
		wake = wake && !restarting
		j.carryOutScaling(acts)
		var due <-chan time.Time
		if wake {
			timer.Reset(time.Until(at))
			due = timer.C
		}
		select {
		case <-changed:
		case <-due:
		case <-s.wake:
		case <-j.done:
			return
		}
		if wake && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// partitionsTimeout bounds the time a source takes to tell its partitions.
const partitionsTimeout = 10 * time.Second

// partitionLimits is, by vertex index, the partition count of every
// vertex whose head is a partitioned source (Node.Partitions: a Kafka
// source), 0 for the others: the reactive mode runs such a vertex at no
// more parallelism (and the vertices it forwards to, which keep its
// parallelism). A source that cannot tell is logged and -1: its bound
// stays what it was.
func (j *Job) partitionLimits() []int {
	out := make([]int, len(j.base.Vertices))
	for i, v := range j.base.Vertices {
		h := v.Head()
		if h.Partitions == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), partitionsTimeout)
		n, err := h.Partitions(ctx)
		cancel()
		if err != nil {
			j.logger.Warn("the reactive mode cannot read the source's partitions; its bound stays as it was", "vertex", v.Name, "err", err)
			out[i] = -1
			continue
		}
		out[i] = n
	}
	return out
}

// SetResourceRequirements sets the job's resource requirements (Flink's
// PUT /jobs/:jobid/resource-requirements): every vertex's parallelism
// bounds, by vertex index; a vertex left out keeps its parallelism (in
// the reactive mode: follows the slots). When they ask for another
// parallelism than the job runs at, the job rescales in place in the
// background: it stops at a checkpoint of its own and runs on from it at
// the new parallelism (ResourceRequirements and Graph show it; Rescale
// waits for it). Bounds out of [1, max parallelism], or lower bounds the
// slots cannot meet, are refused (ErrInvalidRequirements,
// ErrNotEnoughSlots) and change nothing.
func (j *Job) SetResourceRequirements(req ResourceRequirements) error {
	return j.SetResourceRequirementsBy(req, "resource requirements")
}

// SetResourceRequirementsBy is SetResourceRequirements on behalf of
// cause, which the rescale it starts records (RescaleHistory). The
// requirements replace the explicit ones; the autoscaler does not use
// it (Autoscale keeps the user's bounds).
func (j *Job) SetResourceRequirementsBy(req ResourceRequirements, cause string) error {
	_, err := j.require(req, cause, false)
	return err
}

// ResourceRequirements are the requirements in force: those set, and
// for every other vertex its default (its parallelism, or in the
// reactive mode from 1 to its max parallelism).
func (j *Job) ResourceRequirements() ResourceRequirements {
	if j.scaling.m == nil {
		return nil
	}
	j.scaling.mu.Lock()
	defer j.scaling.mu.Unlock()
	return j.scaling.m.Requirements()
}

// RescaleHistory is the job's rescales, oldest first (the latest 32).
func (j *Job) RescaleHistory() []RescaleDecision {
	if j.scaling.m == nil {
		return nil
	}
	j.scaling.mu.Lock()
	defer j.scaling.mu.Unlock()
	return j.scaling.m.History()
}

// Rescale sets the requirements as SetResourceRequirements does and waits
// until the job runs at the parallelism they ask for, ctx ends, or the
// rescale failed (ErrRescale: the job carries on at its parallelism).
func (j *Job) Rescale(ctx context.Context, req ResourceRequirements) error {
	w, err := j.require(req, "resource requirements", true)
	if err != nil || w == nil {
		return err
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		j.dropWaiter(w)
		return ctx.Err()
	}
}

// UniformRequirements asks for parallelism p for every vertex (its max
// parallelism where that is lower: a vertex that cannot run in parallel
// stays at 1).
func (g *JobGraph) UniformRequirements(p int) ResourceRequirements {
	req := ResourceRequirements{}
	for i, v := range g.Vertices {
		q := min(p, v.MaxParallelism)
		req[i] = ParallelismBounds{Lower: q, Upper: q}
	}
	return req
}

// Autoscale is the autoscaler's decision: each vertex of par (by index)
// runs at its parallelism there, clamped into the bounds the resource
// requirements set explicitly give it (1 to its max parallelism
// without); the others keep theirs. The requirements themselves do not
// change: GET resource-requirements shows the user's bounds, and bounds
// set later narrow the decision again. The rescale, when one follows, is
// carried out in the background as SetResourceRequirements' (cause
// "autoscaler"); when none does (the decision, clamped into the bounds,
// is the parallelism the job runs at), the error matches
// ErrAutoscaleUnchanged.
func (j *Job) Autoscale(par map[int]int) error {
	_, err := j.scale(func(m *scaling.Machine, now time.Time) ([]scaling.Action, error) { return m.Autoscale(now, par) }, false)
	return err
}

// ExplicitResourceRequirements are the bounds set explicitly
// (SetResourceRequirements, PUT resource-requirements), without the
// defaults of the other vertices: the bounds the autoscaler decides
// within. Nil when none were set.
func (j *Job) ExplicitResourceRequirements() ResourceRequirements {
	if j.scaling.m == nil {
		return nil
	}
	j.scaling.mu.Lock()
	defer j.scaling.mu.Unlock()
	return j.scaling.m.ExplicitRequirements()
}

// Autoscaled is the parallelism the autoscaler decided (Autoscale), by
// vertex index, before the bounds of the requirements; nil when it
// decided none.
func (j *Job) Autoscaled() map[int]int {
	if j.scaling.m == nil {
		return nil
	}
	j.scaling.mu.Lock()
	defer j.scaling.mu.Unlock()
	return j.scaling.m.Autoscaled()
}

// require hands requirements to the machine and carries out what it
// decides; with wait, it returns a waiter for the parallelism asked (nil
// when the job runs at it already).
func (j *Job) require(req ResourceRequirements, cause string, wait bool) (*rescaleWaiter, error) {
	return j.scale(func(m *scaling.Machine, now time.Time) ([]scaling.Action, error) { return m.Require(now, req, cause) }, wait)
}

// scale makes a change of the machine's requirements (set) and carries
// out what it decides; with wait, it returns a waiter for the
// parallelism they ask for (nil when the job runs at it already).
func (j *Job) scale(set func(*scaling.Machine, time.Time) ([]scaling.Action, error), wait bool) (*rescaleWaiter, error) {
	if j.scaling.m == nil {
		return nil, fmt.Errorf("%w: the job is not running here", ErrRescale)
	}
	if !j.cfg.Checkpoint.Enabled() {
		return nil, fmt.Errorf("%w: a rescale in place restores a checkpoint; the job has no checkpointing (execution.checkpointing.interval): %w", ErrRescale, ErrNoCheckpointing)
	}
	select {
	case <-j.done:
		return nil, fmt.Errorf("%w: the job has ended (%s)", ErrRescale, j.Status())
	default:
	}
	now := time.Now()
	s := &j.scaling
	s.mu.Lock()
	acts, err := set(s.m, now)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	var w *rescaleWaiter
	if target, err := s.m.Target(); err == nil && wait && !slices.Equal(target, j.Graph().Parallelism()) {
		w = &rescaleWaiter{want: target, done: make(chan error, 1)}
		s.waiters = append(s.waiters, w)
	}
	s.mu.Unlock()
	j.publishScaling(nil)
	j.carryOutScaling(acts)
	return w, nil
}

func (j *Job) dropWaiter(w *rescaleWaiter) {
	s := &j.scaling
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiters = slices.DeleteFunc(s.waiters, func(x *rescaleWaiter) bool { return x == w })
}

// resolveWaiters answers, s.mu held, the waiters for parallelism par
// (err nil) or, with par nil, every waiter with err.
func (s *jobScaling) resolveWaiters(par []int, err error) {
	s.waiters = slices.DeleteFunc(s.waiters, func(w *rescaleWaiter) bool {
		if par != nil && !slices.Equal(w.want, par) {
			return false
		}
		w.done <- err
		return true
	})
}

// carryOutScaling does what the scaling machine decided.
func (j *Job) carryOutScaling(acts []scaling.Action) {
	for _, a := range acts {
		switch a := a.(type) {
		case scaling.Log:
			j.logger.Log(context.Background(), a.Level, a.Msg, a.Attrs...)
		case scaling.Rescale:
			// Not on the caller's goroutine (the REST handler, the
			// attempt's): the stop checkpoint may wait for the attempt.
			go j.startRescale(a)
		default:
			panic(fmt.Sprintf("runtime: scaling action %s out of place", a))
		}
	}
}

// startRescale stops the current attempt at a checkpoint; the supervisor
// starts the next one from it at the new parallelism (supervise). An
// attempt not running yet (deploying, its tasks starting) is waited for.
func (j *Job) startRescale(r scaling.Rescale) {
	j.logger.Info("rescaling the job in place: stopping at a checkpoint", "from", r.From, "to", r.To, "cause", r.Cause)
	g, err := j.base.Rescaled(r.To)
	if err != nil {
		j.rescaleFailed(err)
		return
	}
	wait := 10 * time.Millisecond
	for {
		err := j.stopForRescale(g, r.To)
		if !errors.Is(err, errNotReady) {
			if err != nil {
				j.rescaleFailed(err)
			}
			return
		}
		select {
		case <-time.After(wait):
			wait = min(2*wait, 500*time.Millisecond)
		case <-j.done:
			return // endScaling answered the waiters
		}
	}
}

// errNotReady: the attempt cannot take its stop checkpoint yet.
var errNotReady = errors.New("the attempt is not running yet")

// stopForRescale triggers the stop checkpoint of the rescale to g on the
// current attempt.
func (j *Job) stopForRescale(g *JobGraph, to []int) error {
	select {
	case <-j.done:
		return fmt.Errorf("the job has ended (%s)", j.Status())
	default:
	}
	a := j.att.Load()
	switch st := j.Status(); {
	case j.isStopping():
		return errors.New("the job is being cancelled or suspended")
	case st == JobRestarting:
		return nil // the failover's restart carries the rescale out
	case a == nil || !a.running.Load():
		return errNotReady
	case a.driver == nil:
		return fmt.Errorf("the job is %s", st)
	}
	a.mu.Lock()
	if a.rescale != nil || a.stopped {
		a.mu.Unlock()
		return errors.New("the job is stopping already")
	}
	a.rescale = &rescalePlan{graph: g, to: to}
	a.mu.Unlock()
	err := a.driver.triggerStop()
	if err == nil {
		return nil
	}
	a.mu.Lock()
	a.rescale = nil
	a.mu.Unlock()
	if errors.Is(err, checkpoint.ErrNoRunningTasks) || errors.Is(err, checkpoint.ErrRegionRestarting) {
		return errNotReady
	}
	return err
}

// rescaleFailed tells the machine that the rescale in flight failed and
// the waiters for it.
func (j *Job) rescaleFailed(cause error) {
	err := fmt.Errorf("%w: %w", ErrRescale, cause)
	s := &j.scaling
	s.mu.Lock()
	acts := s.m.RescaleFailed(time.Now(), cause)
	s.resolveWaiters(nil, err)
	s.mu.Unlock()
	j.carryOutScaling(acts)
	s.nudge()
}

// attemptRunning tells the machine that attempt a runs (deployed, its
// tasks started) and answers the waiters for its parallelism.
func (j *Job) attemptRunning(a *attempt) {
	j.outages.running(time.Now())
	a.running.Store(true) // a failover region may restart from now on
	if j.scaling.m == nil {
		return
	}
	par := a.graph.Parallelism()
	s := &j.scaling
	s.mu.Lock()
	acts := s.m.Running(time.Now(), par)
	s.mu.Unlock()
	j.carryOutScaling(acts)
	s.nudge()
}

// attemptCheckpointed: attempt a completed its first checkpoint. The
// rescale that made it is done (a failure from now on no longer reverts
// it), and the waiters for its parallelism are answered.
func (j *Job) attemptCheckpointed(a *attempt) {
	if a.running.Load() {
		// Also the first checkpoint after a failover region restarted.
		j.outages.checkpointed(time.Now())
	}
	if !a.checkpointed.CompareAndSwap(false, true) {
		return
	}
	if j.scaling.m == nil {
		return
	}
	par := a.graph.Parallelism()
	s := &j.scaling
	s.mu.Lock()
	s.m.Confirmed()
	s.resolveWaiters(par, nil)
	s.mu.Unlock()
	j.publishScaling(par)
}

// revertRescale: the first attempt at a rescale's parallelism failed
// before it completed a checkpoint (a state that does not restore at it,
// a source that cannot rescale): the job restarts at the parallelism it
// had, and the waiters hear why.
func (j *Job) revertRescale(cause error) {
	s := &j.scaling
	s.mu.Lock()
	par, acts := s.m.Revert(time.Now(), cause)
	if g, err := j.base.Rescaled(par); err == nil {
		j.graph.Store(g) // before the waiters hear of it
	}
	s.resolveWaiters(nil, fmt.Errorf("%w: the job failed at its new parallelism and goes back to %v: %w", ErrRescale, par, cause))
	s.mu.Unlock()
	j.publishScaling(nil)
	j.carryOutScaling(acts)
}

// failoverGraph lets the machine pick the parallelism of the attempt that
// follows a failure (the slots there are, the requirements) and makes it
// the job's graph. A checkpoint with in-flight data restores only at its
// own parallelism.
func (j *Job) failoverGraph(r *restoreSnapshot) {
	if j.scaling.m == nil {
		return
	}
	s := &j.scaling
	s.mu.Lock()
	if o, ok := j.cfg.Executor.(SlotOffer); ok {
		// The slots now: a worker lost a moment ago is no longer counted.
		n, _ := o.Slots()
		s.m.SetSlots(time.Now(), n)
	}
	par, acts := s.m.Failover(time.Now(), r == nil || !r.hasChannelState())
	s.mu.Unlock()
	j.carryOutScaling(acts)
	if slices.Equal(par, j.Graph().Parallelism()) {
		return
	}
	g, err := j.base.Rescaled(par)
	if err != nil {
		j.logger.Warn("the restart keeps the job's parallelism", "err", err)
		return
	}
	j.graph.Store(g)
}

// rescaledAttempt is the attempt that follows one stopped for a rescale:
// the graph at the new parallelism, restoring the stop checkpoint (the
// newest the run owns).
func (j *Job) rescaledAttempt(number int, p *rescalePlan, initial *restoreSnapshot) (*attempt, error) {
	j.graph.Store(p.graph)
	owned := j.ownedCheckpoints()
	r, err := j.failoverRestore(owned, initial)
	if err != nil {
		return nil, err
	}
	if r == nil || r.id() != p.stopped {
		restoring := int64(0)
		if r != nil {
			restoring = r.id()
		}
		j.logger.Warn("the rescale restores another checkpoint than the one it stopped at", "stopped_at", p.stopped, "restoring", restoring)
	}
	j.logger.Info("restarting the job at its new parallelism", "parallelism", p.to, "checkpoint", p.stopped)
	a, err := j.newAttempt(number, r, owned)
	if a != nil {
		a.rescaled = true
	}
	return a, err
}

// endScaling answers every waiter once the job has ended.
func (j *Job) endScaling() {
	s := &j.scaling
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resolveWaiters(nil, fmt.Errorf("%w: the job ended (%s)", ErrRescale, j.Status()))
}

// hasChannelState reports whether the snapshot holds in-flight data (an
// unaligned checkpoint), which restores only at its own parallelism.
func (r *restoreSnapshot) hasChannelState() bool {
	for _, st := range r.snap.Metadata.Subtasks {
		if len(st.InputChannelState) > 0 || len(st.OutputChannelState) > 0 {
			return true
		}
	}
	return false
}

// triggerStop triggers the stop checkpoint of a rescale.
func (d *checkpointDriver) triggerStop() error {
	var terr error
	ok := d.call(func() {
		id, acts, err := d.coord.TriggerStop(time.Now())
		if err != nil {
			terr = err
			return
		}
		d.a.job.logger.Info("stop checkpoint triggered for the rescale", "checkpoint", id)
		d.exec(acts)
	})
	if !ok {
		return fmt.Errorf("stop checkpoint: %w", checkpoint.ErrCoordinatorStopped)
	}
	return terr
}

// stopForRescale ends the attempt once its stop checkpoint completed:
// every task gets a stop mail behind the notify-complete mail already
// queued, so sinks commit first.
func (a *attempt) stopForRescale(id int64) {
	a.mu.Lock()
	if a.rescale != nil {
		a.rescale.stopped = id
	}
	a.mu.Unlock()
	a.stopAfterSavepoint()
}

// stopFailed: the stop checkpoint failed; the attempt carries on.
func (a *attempt) stopFailed(err error) {
	a.mu.Lock()
	r := a.rescale
	a.rescale = nil
	a.mu.Unlock()
	if r != nil {
		a.job.rescaleFailed(fmt.Errorf("stop checkpoint: %w", err))
	}
}
