package autoscaler

import (
	"math"
	"time"
)

// window is the snapshots of a full metrics window, oldest first, and
// the topology they are of: Flink's ScalingMetricEvaluator over them.
type window struct {
	cfg   Config
	topo  Topology
	snaps []Snapshot
	// outputs counts each vertex's distinct consumers.
	outputs []int
}

func newWindow(cfg Config, topo Topology, snaps []Snapshot) *window {
	w := &window{cfg: cfg, topo: topo, snaps: snaps, outputs: make([]int, len(topo.Vertices))}
	for _, v := range topo.Vertices {
		for _, from := range distinctInputs(v) {
			w.outputs[from]++
		}
	}
	return w
}

func distinctInputs(v Vertex) []int {
	var out []int
	for _, in := range v.Inputs {
		seen := false
		for _, f := range out {
			seen = seen || f == in.From
		}
		if !seen {
			out = append(out, in.From)
		}
	}
	return out
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// span is the seconds from the first snapshot to the last.
func (w *window) span() float64 {
	return seconds(w.snaps[len(w.snaps)-1].Time.Sub(w.snaps[0].Time))
}

// rate is the per-second growth of a counter over the window.
func (w *window) rate(v int, get func(Figures) int64) float64 {
	first, last := w.snaps[0].Vertices[v], w.snaps[len(w.snaps)-1].Vertices[v]
	return float64(get(last)-get(first)) / w.span()
}

func recordsIn(f Figures) int64  { return f.RecordsIn }
func recordsOut(f Figures) int64 { return f.RecordsOut }

// load is the vertex's busy share over the window: with AVG, its
// subtasks' busy time over their time; with MAX or MIN, the average over
// the window's intervals of the busiest (idlest) subtask's share.
func (w *window) load(v int) float64 {
	if w.cfg.BusyAggregator == AggregateAvg {
		first, last := w.snaps[0].Vertices[v], w.snaps[len(w.snaps)-1].Vertices[v]
		var busy time.Duration
		for i := range last.Busy {
			busy += last.Busy[i] - first.Busy[i]
		}
		return seconds(busy) / w.span() / float64(len(last.Busy))
	}
	sum := 0.0
	for k := 1; k < len(w.snaps); k++ {
		a, b := w.snaps[k-1].Vertices[v], w.snaps[k].Vertices[v]
		dt := seconds(w.snaps[k].Time.Sub(w.snaps[k-1].Time))
		agg := math.NaN()
		for i := range b.Busy {
			share := seconds(b.Busy[i]-a.Busy[i]) / dt
			switch {
			case math.IsNaN(agg):
				agg = share
			case w.cfg.BusyAggregator == AggregateMin:
				agg = min(agg, share)
			default:
				agg = max(agg, share)
			}
		}
		sum += agg
	}
	return sum / float64(len(w.snaps)-1)
}

// backlog reports whether a source has more backlog than it reads in
// job.autoscaler.backlog-processing.lag-threshold.
func (w *window) backlog() bool {
	last := w.snaps[len(w.snaps)-1]
	for i, v := range w.topo.Vertices {
		if !v.Source || last.Vertices[i].Lag <= 0 {
			continue
		}
		if float64(last.Vertices[i].Lag)/w.rate(i, recordsIn) > seconds(w.cfg.BacklogThreshold) {
			return true
		}
	}
	return false
}

// evaluate computes every vertex's figures, inputs first.
func (w *window) evaluate() ([]VertexEvaluation, bool) {
	backlog := w.backlog()
	out := make([]VertexEvaluation, len(w.topo.Vertices))
	last := w.snaps[len(w.snaps)-1]
	catchUp := seconds(w.cfg.CatchUpDuration)
	for i, v := range w.topo.Vertices {
		f := last.Vertices[i]
		e := VertexEvaluation{Vertex: i, Name: v.Name, Parallelism: f.Parallelism, NewParallelism: f.Parallelism, Change: NoChange,
			Lag: -1, Partitions: f.Partitions, LowerBound: f.Lower, UpperBound: f.Upper}
		in := w.rate(i, recordsIn)
		var target, catchUpRate float64
		if v.Source {
			lagRate := 0.0
			if first := w.snaps[0].Vertices[i]; f.Lag >= 0 && first.Lag >= 0 {
				lagRate = float64(f.Lag-first.Lag) / w.span()
			}
			target = max(0, in+lagRate)
			if f.Lag >= 0 {
				e.Lag = f.Lag
				if catchUp > 0 {
					catchUpRate = float64(f.Lag) / catchUp
				}
			}
		} else {
			for _, from := range distinctInputs(v) {
				ratio := w.outputRatio(from, i)
				target += float64(out[from].TargetRate) * ratio
				catchUpRate += float64(out[from].CatchUpRate) * ratio
			}
		}
		load := w.load(i)
		tpr := math.Inf(1) // nothing comes in: it could process anything
		if in != 0 {
			tpr = in / load
		}
		e.InputRate, e.Load, e.TrueProcessingRate = Number(in), Number(load), Number(tpr)
		e.TargetRate, e.CatchUpRate = Number(target), Number(catchUpRate)
		upper, lower := w.cfg.UtilizationMax, w.cfg.UtilizationMin
		if backlog {
			// Backlog: busy up to the full time, and no scale-down that
			// would make more of it.
			upper, lower = 1, 0
		}
		e.TargetCapacity = Number(w.capacity(target, catchUpRate, w.cfg.TargetUtilization, true))
		e.ScaleUpThreshold = Number(w.capacity(target, catchUpRate, upper, false))
		e.ScaleDownThreshold = Number(w.capacity(target, catchUpRate, lower, true))
		out[i] = e
	}
	return out, backlog
}

// capacity is the processing rate that takes target at utilization,
// catches up the backlog and, withRestart, the input a restart leaves
// behind, within the catch-up duration (AutoScalerUtils'
// getTargetProcessingCapacity).
func (w *window) capacity(target, catchUpRate, utilization float64, withRestart bool) float64 {
	utilization = min(max(utilization, 0), 1)
	if utilization == 0 {
		return math.Inf(1)
	}
	restartRate := 0.0
	if catchUp := seconds(w.cfg.CatchUpDuration); withRestart && catchUp > 0 {
		restartRate = target * seconds(w.cfg.RestartTime) / catchUp
	}
	return math.Round(catchUpRate + restartRate + target/utilization)
}

// outputRatio is the records the edge from -> to carries per record from
// takes in.
func (w *window) outputRatio(from, to int) float64 {
	in := w.rate(from, recordsIn)
	if in <= 0 {
		return 0
	}
	if edge := w.edgeRate(from, to); edge > 0 {
		return edge / in
	}
	return 0
}

// edgeRate is the rate of records from -> to: to's input rate when from
// is its only input; else that less its other inputs' output rates when
// they feed only to; else from's output rate.
func (w *window) edgeRate(from, to int) float64 {
	inputs := distinctInputs(w.topo.Vertices[to])
	toIn := w.rate(to, recordsIn)
	if len(inputs) == 1 {
		return toIn
	}
	others := 0.0
	for _, o := range inputs {
		if o == from {
			continue
		}
		if w.outputs[o] != 1 {
			return w.rate(from, recordsOut)
		}
		others += w.rate(o, recordsOut)
	}
	return toIn - others
}
