package autoscaler

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Outcome is what an evaluation came to.
type Outcome string

const (
	// NotRunning: a task of the job is not running; nothing is measured.
	NotRunning Outcome = "not-running"
	// Stabilizing: the job started or rescaled less than
	// job.autoscaler.stabilization.interval ago.
	Stabilizing Outcome = "stabilizing"
	// Collecting: the metrics window is not full yet.
	Collecting Outcome = "collecting"
	// Rescaling: a rescale was requested and the job does not run at its
	// parallelism yet.
	Rescaling Outcome = "rescaling"
	// Steady: no vertex changes now (a scale-down may be waiting for the
	// scale-down interval: the vertex's Reason says so).
	Steady Outcome = "steady"
	// WithinTarget: some vertex's parallelism would change, but every such
	// vertex is busy within the utilization boundary: no rescale.
	WithinTarget Outcome = "within-target"
	// Recommend: the job should rescale to Parallelism, but
	// job.autoscaler.scaling.enabled is false.
	Recommend Outcome = "recommend"
	// Scale: the job rescales to Parallelism.
	Scale Outcome = "scale"
)

// Change is what a vertex's evaluation asks of its parallelism.
type Change string

const (
	NoChange  Change = "none"
	ScaleUp   Change = "up"
	ScaleDown Change = "down"
)

// Evaluation is what the machine made of one snapshot: the outcome and,
// once a full metrics window is collected, every vertex's figures and
// decision. It is what the log line, the REST API and the metrics show.
type Evaluation struct {
	Time    time.Time `json:"time"`
	Outcome Outcome   `json:"outcome"`
	// Until is when stabilizing ends or the metrics window fills.
	Until time.Time `json:"until,omitzero"`
	// Backlog is true when a source processes backlog: vertices may then
	// be busy up to 100% and none scales down.
	Backlog  bool               `json:"backlog,omitempty"`
	Vertices []VertexEvaluation `json:"vertices,omitempty"`
	// Parallelism is the new parallelism of every vertex that changes,
	// by vertex index, for Scale and Recommend.
	Parallelism map[int]int `json:"parallelism,omitempty"`
}

// VertexEvaluation is one vertex's figures over the metrics window and
// the parallelism they call for. Rates are records per second.
type VertexEvaluation struct {
	Vertex         int    `json:"vertex"`
	Name           string `json:"name"`
	Parallelism    int    `json:"parallelism"`
	NewParallelism int    `json:"newParallelism"`
	Change         Change `json:"change"`
	// Reason says why the parallelism does not change, or what limited
	// the change.
	Reason string `json:"reason,omitempty"`
	// InputRate is the rate the vertex takes in (a source: reads).
	InputRate Number `json:"inputRate"`
	// Load is the busy share of the vertex's subtasks (aggregated as
	// job.autoscaler.metrics.busy-time.aggregator says).
	Load Number `json:"load"`
	// TrueProcessingRate is the rate the vertex would process at when
	// always busy: InputRate over Load.
	TrueProcessingRate Number `json:"trueProcessingRate"`
	// TargetRate is the rate the vertex should take in: a source's input
	// rate plus the growth of its backlog; downstream, its inputs' target
	// rates through the edges.
	TargetRate Number `json:"targetRate"`
	// Lag is a source's backlog, in records (-1: unknown), and
	// CatchUpRate the rate that processes the backlog within
	// job.autoscaler.catch-up.duration.
	Lag         int64  `json:"lag"`
	CatchUpRate Number `json:"catchUpRate"`
	// TargetCapacity is the processing rate the vertex should have: the
	// target rate at the target utilization, the catch-up rate and what a
	// restart adds to the backlog.
	TargetCapacity Number `json:"targetCapacity"`
	// Below ScaleUpThreshold the vertex scales up; above
	// ScaleDownThreshold it scales down.
	ScaleUpThreshold   Number `json:"scaleUpThreshold"`
	ScaleDownThreshold Number `json:"scaleDownThreshold"`
	// ScaleFactor is TargetCapacity over TrueProcessingRate, within the
	// scale-up and scale-down factors.
	ScaleFactor Number `json:"scaleFactor"`
	// MaxParallelism is the largest parallelism the vertex may get: its
	// max parallelism, a source's partitions, the configured bound.
	MaxParallelism int `json:"maxParallelism"`
	Partitions     int `json:"partitions,omitempty"`
	// LowerBound and UpperBound are the bounds the job's resource
	// requirements set for the vertex (0: none), which the decision keeps
	// within.
	LowerBound int `json:"lowerBound,omitempty"`
	UpperBound int `json:"upperBound,omitempty"`
}

// Number is a figure that may be infinite (a vertex with no input can
// process anything) or unknown (NaN); JSON has null for those.
type Number float64

// MarshalJSON writes null for a number that is not finite.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads null as NaN: a number that was not finite.
func (n *Number) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*n = Number(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	*n = Number(f)
	return nil
}

func (n Number) String() string {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return "?"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', 4, 64)
}

// String is the evaluation in one line and, when vertices were
// evaluated, a line per vertex.
func (e Evaluation) String() string {
	var b strings.Builder
	b.WriteString(string(e.Outcome))
	if !e.Until.IsZero() {
		fmt.Fprintf(&b, " until=%s", e.Until.UTC().Format(time.TimeOnly))
	}
	if e.Backlog {
		b.WriteString(" backlog")
	}
	if len(e.Parallelism) > 0 {
		b.WriteString(" parallelism=" + formatParallelism(e.Parallelism))
	}
	for _, v := range e.Vertices {
		b.WriteString("\n  " + v.String())
	}
	return b.String()
}

func formatParallelism(p map[int]int) string {
	keys := make([]int, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d:%d", k, p[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func (v VertexEvaluation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s p=%d", v.Name, v.Parallelism)
	if v.NewParallelism != v.Parallelism {
		fmt.Fprintf(&b, "->%d", v.NewParallelism)
	}
	fmt.Fprintf(&b, " %s in=%s load=%s tpr=%s target=%s", v.Change, v.InputRate, v.Load, v.TrueProcessingRate, v.TargetRate)
	if v.Lag >= 0 {
		fmt.Fprintf(&b, " lag=%d catchup=%s", v.Lag, v.CatchUpRate)
	}
	fmt.Fprintf(&b, " capacity=%s bounds=[%s,%s] factor=%s max=%d", v.TargetCapacity, v.ScaleUpThreshold, v.ScaleDownThreshold,
		v.ScaleFactor, v.MaxParallelism)
	if v.LowerBound > 0 || v.UpperBound > 0 {
		fmt.Fprintf(&b, " required=[%d,%d]", v.LowerBound, v.UpperBound)
	}
	if v.Reason != "" {
		fmt.Fprintf(&b, " (%s)", v.Reason)
	}
	return b.String()
}

// LogAttrs are the evaluation's figures as slog attributes: the outcome,
// and per vertex a group named after its index.
func (e Evaluation) LogAttrs() []slog.Attr {
	attrs := []slog.Attr{slog.String("outcome", string(e.Outcome))}
	if !e.Until.IsZero() {
		attrs = append(attrs, slog.Time("until", e.Until))
	}
	if e.Backlog {
		attrs = append(attrs, slog.Bool("backlog", true))
	}
	if len(e.Parallelism) > 0 {
		attrs = append(attrs, slog.String("parallelism", formatParallelism(e.Parallelism)))
	}
	for _, v := range e.Vertices {
		attrs = append(attrs, slog.Group(strconv.Itoa(v.Vertex),
			slog.String("name", v.Name), slog.Int("parallelism", v.Parallelism), slog.Int("new", v.NewParallelism),
			slog.String("change", string(v.Change)), slog.String("reason", v.Reason),
			slog.String("inputRate", v.InputRate.String()), slog.String("load", v.Load.String()),
			slog.String("trueProcessingRate", v.TrueProcessingRate.String()), slog.String("targetRate", v.TargetRate.String()),
			slog.Int64("lag", v.Lag), slog.String("catchUpRate", v.CatchUpRate.String()),
			slog.String("targetCapacity", v.TargetCapacity.String()),
			slog.String("scaleUpThreshold", v.ScaleUpThreshold.String()), slog.String("scaleDownThreshold", v.ScaleDownThreshold.String()),
			slog.Int("maxParallelism", v.MaxParallelism), slog.Int("lowerBound", v.LowerBound), slog.Int("upperBound", v.UpperBound)))
	}
	return attrs
}
