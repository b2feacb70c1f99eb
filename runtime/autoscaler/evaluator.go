package autoscaler

import (
	"math"
	"time"
)

// window is the samples of a full metrics window, oldest first, and the
// topology they are of: Flink's ScalingMetricEvaluator over them. The
// samples fall into segments, runs the job's counters grew through: a
// new leader's restart of the job starts another (Sample.Fresh), and
// the time between two segments is not measured.
type window struct {
	cfg   Config
	topo  Topology
	snaps []Sample
	// segs are the segments of more than one sample, the indices of
	// their first and last.
	segs [][2]int
	// outputs counts each vertex's distinct consumers.
	outputs []int
}

func newWindow(cfg Config, topo Topology, snaps []Sample) *window {
	w := &window{cfg: cfg, topo: topo, snaps: snaps, segs: segments(snaps), outputs: make([]int, len(topo.Vertices))}
	for _, v := range topo.Vertices {
		for _, from := range distinctInputs(v) {
			w.outputs[from]++
		}
	}
	return w
}

// segments are the runs of snaps without a fresh start inside, the
// indices of their first and last sample, those of one sample left out.
func segments(snaps []Sample) [][2]int {
	var out [][2]int
	start := 0
	for k := 1; k <= len(snaps); k++ {
		if k < len(snaps) && !snaps[k].Fresh {
			continue
		}
		if k-1 > start {
			out = append(out, [2]int{start, k - 1})
		}
		start = k
	}
	return out
}

// measured is the time the samples' segments cover.
func measured(snaps []Sample) time.Duration {
	var d time.Duration
	for _, g := range segments(snaps) {
		d += snaps[g[1]].Time.Sub(snaps[g[0]].Time)
	}
	return d
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

// span is the seconds the window's segments cover.
func (w *window) span() float64 { return seconds(measured(w.snaps)) }

// growth is the sum over the segments of a figure's growth from a
// segment's first sample to its last.
func (w *window) growth(get func(first, last Figures) int64, v int) int64 {
	var sum int64
	for _, g := range w.segs {
		sum += get(w.snaps[g[0]].Vertices[v], w.snaps[g[1]].Vertices[v])
	}
	return sum
}

// rate is the per-second growth of a counter over the window.
func (w *window) rate(v int, get func(Figures) int64) float64 {
	return float64(w.growth(func(first, last Figures) int64 { return get(last) - get(first) }, v)) / w.span()
}

// lagRate is the per-second growth of a source's lag over the window's
// segments where it is known at both ends; ok is false when it is known
// in none.
func (w *window) lagRate(v int) (rate float64, ok bool) {
	var sum int64
	for _, g := range w.segs {
		if a, b := w.snaps[g[0]].Vertices[v].Lag, w.snaps[g[1]].Vertices[v].Lag; a >= 0 && b >= 0 {
			sum += b - a
			ok = true
		}
	}
	if !ok {
		return 0, false
	}
	return float64(sum) / w.span(), true
}

func recordsIn(f Figures) int64  { return f.RecordsIn }
func recordsOut(f Figures) int64 { return f.RecordsOut }

// load is the vertex's busy share over the window: with AVG, its
// subtasks' busy time over their time; with MAX or MIN, the average over
// the window's intervals of the busiest (idlest) subtask's share.
func (w *window) load(v int) float64 {
	if w.cfg.BusyAggregator == AggregateAvg {
		busy := time.Duration(w.growth(func(first, last Figures) int64 {
			var b time.Duration
			for i := range last.Busy {
				b += last.Busy[i] - first.Busy[i]
			}
			return int64(b)
		}, v))
		return seconds(busy) / w.span() / float64(len(w.snaps[len(w.snaps)-1].Vertices[v].Busy))
	}
	sum, n := 0.0, 0
	for _, g := range w.segs {
		for k := g[0] + 1; k <= g[1]; k++ {
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
			n++
		}
	}
	return sum / float64(n)
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
			if f.Lag >= 0 {
				lagRate, _ = w.lagRate(i)
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
