package runtime

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sync"
)

// ScalingState is what a coordinator taking over a job needs to resume
// its scaling where the last leader left it (Flink keeps a job's
// resource requirements in its HA store with the job graph, and the
// Kubernetes operator's autoscaler its parallelism overrides): the
// parallelism the job last completed a checkpoint at, the resource
// requirements set explicitly and the autoscaler's decisions within
// them. Config.PublishScaling stores it each time it changes;
// Config.PublishedScaling reads it when a run resumes from a checkpoint.
type ScalingState struct {
	// Parallelism is every vertex's (by index), that of the latest
	// attempt that completed a checkpoint.
	Parallelism []int `json:"parallelism"`
	// Requirements are the bounds set explicitly (PUT
	// resource-requirements), by vertex index.
	Requirements ResourceRequirements `json:"requirements,omitempty"`
	// Autoscaled is the parallelism the autoscaler decided, by vertex
	// index.
	Autoscaled map[int]int `json:"autoscaled,omitempty"`
	// Autoscaler is the autoscaler's own state (Job.SetAutoscalerState:
	// its metrics window, its stabilization and scale-down clocks), which
	// the job keeps without reading.
	Autoscaler json.RawMessage `json:"autoscaler,omitempty"`
}

func (s ScalingState) equal(o ScalingState) bool {
	return slices.Equal(s.Parallelism, o.Parallelism) && maps.Equal(s.Requirements, o.Requirements) && maps.Equal(s.Autoscaled, o.Autoscaled) &&
		bytes.Equal(s.Autoscaler, o.Autoscaler)
}

// scalingPublisher writes the job's ScalingState when it changed, one
// write at a time, in the order of the changes.
type scalingPublisher struct {
	mu        sync.Mutex
	confirmed []int // the parallelism of the latest attempt that checkpointed
	last      *ScalingState
	// autoscaler is the autoscaler's latest state (SetAutoscalerState);
	// resumed the one the job resumed with.
	autoscaler, resumed []byte
}

// publishScaling stores the scaling state through Config.PublishScaling
// when it changed; confirmed, when not nil, is the parallelism of an
// attempt that has just completed its first checkpoint. A failed write
// is logged: the next change writes again, and a leader that lost its
// leadership is ending anyway.
func (j *Job) publishScaling(confirmed []int) {
	if j.cfg.PublishScaling == nil || j.scaling.m == nil {
		return
	}
	p := &j.scaling.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	if confirmed != nil {
		p.confirmed = slices.Clone(confirmed)
	}
	if p.confirmed == nil {
		p.confirmed = j.base.Parallelism()
	}
	s := &j.scaling
	s.mu.Lock()
	st := ScalingState{Parallelism: p.confirmed, Requirements: s.m.ExplicitRequirements(), Autoscaled: s.m.Autoscaled(), Autoscaler: p.autoscaler}
	s.mu.Unlock()
	if p.last != nil && p.last.equal(st) {
		return
	}
	if err := j.cfg.PublishScaling(st); err != nil {
		j.logger.Warn("publish the job's scaling state; a coordinator taking over now resumes at the one before", "parallelism", st.Parallelism, "err", err)
		return
	}
	p.last = &st
}

// resumeScaling reads the scaling state the last leader published, when
// the run resumes from one of the job's own checkpoints (not from a
// snapshot given to start from, whose parallelism is the plan's), and
// makes the job's graph the parallelism it ran at (the graph the first
// attempt deploys); it returns the requirements and decisions for the
// scaling machine. A state that does not fit the job (another graph, a
// checkpoint with in-flight data at another parallelism) is logged and
// left aside.
func (j *Job) resumeScaling(start *startPlan) (ResourceRequirements, map[int]int) {
	restore := start.restore
	if j.cfg.PublishedScaling == nil || restore == nil || !start.resumed {
		return nil, nil
	}
	st, ok, err := j.cfg.PublishedScaling()
	if err != nil {
		j.logger.Warn("read the job's scaling state; the job resumes at the plan's parallelism", "err", err)
		return nil, nil
	}
	if !ok {
		return nil, nil
	}
	par := st.Parallelism
	if !slices.Equal(par, j.base.Parallelism()) {
		if restore.hasChannelState() {
			j.logger.Warn("the checkpoint to resume holds in-flight data, which restores only at its own parallelism: the published scaling state is left aside",
				"checkpoint", restore.id(), "parallelism", par)
			return nil, nil
		}
		g, err := j.base.Rescaled(par)
		if err != nil {
			j.logger.Warn("the published scaling state does not fit the job; it resumes at the plan's parallelism", "parallelism", par, "err", err)
			return nil, nil
		}
		j.graph.Store(g)
	}
	j.logger.Info("resuming the job's scaling as the last leader left it", "parallelism", par, "requirements", st.Requirements, "autoscaled", st.Autoscaled,
		"autoscaler_state_bytes", len(st.Autoscaler))
	p := &j.scaling.pub
	p.mu.Lock()
	p.confirmed, p.last = slices.Clone(par), &st
	// Kept as it is until the autoscaler starts and goes on from it: a
	// write before (the first checkpoint's) must not lose it.
	p.autoscaler, p.resumed = st.Autoscaler, st.Autoscaler
	p.mu.Unlock()
	return st.Requirements, st.Autoscaled
}

// KeepsScalingState reports whether the job keeps its scaling state for
// a coordinator taking it over (Config.PublishScaling: a leader under
// HA), the autoscaler's with it (SetAutoscalerState).
func (j *Job) KeepsScalingState() bool { return j.cfg.PublishScaling != nil }

// SetAutoscalerState makes data (the autoscaler's encoded state, which
// the job does not read) part of the job's scaling state, stored at once
// when the job keeps it (KeepsScalingState); a coordinator taking the
// job over resumes it (ResumedAutoscalerState).
func (j *Job) SetAutoscalerState(data []byte) {
	p := &j.scaling.pub
	p.mu.Lock()
	p.autoscaler = bytes.Clone(data)
	p.mu.Unlock()
	j.publishScaling(nil)
}

// ResumedAutoscalerState is the autoscaler state of the scaling state
// the job resumed with (the last leader's SetAutoscalerState); nil when
// it resumed none.
func (j *Job) ResumedAutoscalerState() []byte {
	p := &j.scaling.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.resumed)
}
