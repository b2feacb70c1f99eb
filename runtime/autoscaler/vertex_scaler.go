package autoscaler

import (
	"fmt"
	"math"
	"time"
)

// scaleVertex sets e's new parallelism from its figures (Flink's
// JobVertexScaler): the capacity over the true processing rate, within
// the scale factors, the parallelism bounds and the alignment to key
// groups or partitions, and the bounds of the job's resource
// requirements, which are hard: a vertex outside them is brought within.
// It does not apply the scale-down delay.
func scaleVertex(cfg Config, v Vertex, e *VertexEvaluation) {
	cur := e.Parallelism
	maxP := v.MaxParallelism
	if v.Source && e.Partitions > 0 {
		maxP = min(maxP, e.Partitions)
	}
	lower, upper := min(cur, cfg.MinParallelism), max(cur, cfg.MaxParallelism)
	bound := min(maxP, upper)
	required := ""
	if e.UpperBound > 0 && e.UpperBound < bound {
		bound, required = e.UpperBound, fmt.Sprintf("at the upper bound %d of its resource requirements", e.UpperBound)
	}
	if e.LowerBound > 0 {
		lower = max(lower, e.LowerBound)
	}
	lower = min(lower, bound)
	e.MaxParallelism = bound
	tpr, capacity := float64(e.TrueProcessingRate), float64(e.TargetCapacity)
	if math.IsNaN(tpr) || math.IsNaN(capacity) {
		e.Reason = "no processing rate"
		e.ScaleFactor = Number(math.NaN())
		return
	}
	factor := capacity / tpr
	if math.IsNaN(factor) { // both infinite
		factor = 1
	}
	factor = min(max(factor, 1-cfg.ScaleDownMaxFactor), 1+cfg.ScaleUpMaxFactor)
	e.ScaleFactor = Number(factor)
	p := int(min(math.Ceil(factor*float64(cur)), math.MaxInt32))
	p = min(max(p, lower), bound)
	if v.Source && e.Partitions > 0 || v.keyed() {
		groups := maxP
		if v.Source && e.Partitions > 0 {
			groups = e.Partitions
		}
		var why string
		p, why = align(cfg.AdjustMode, cur, p, groups, lower, bound)
		e.Reason = why
	}
	if p == cur && e.Reason == "" && factor > 1 && cur >= bound {
		e.Reason = fmt.Sprintf("at max parallelism %d", bound)
		if required != "" {
			e.Reason = required
		}
	}
	if p == cur && e.Reason == "" && factor < 1 && cur <= lower && e.LowerBound > 0 && cur <= e.LowerBound {
		e.Reason = fmt.Sprintf("at the lower bound %d of its resource requirements", e.LowerBound)
	}
	e.NewParallelism = p
	switch {
	case p > cur:
		e.Change = ScaleUp
	case p < cur:
		e.Change = ScaleDown
	}
}

// align moves p to one where the key groups or partitions spread over
// the subtasks as the mode wants: up from p to a divisor of groups (at
// most cur for a scale-down), else down to the least parallelism at
// which no subtask has more of them than at p; never across cur. why
// says what limited p.
func align(mode AdjustMode, cur, p, groups, lower, upper int) (int, string) {
	if p == cur {
		return p, ""
	}
	up := p > cur
	limit := min(groups, upper)
	if !up {
		limit = min(cur, limit)
	}
	for q := p; q <= limit; q++ {
		if groups%q == 0 || mode == MaximizeUtilisation && groups/q < groups/p {
			return q, ""
		}
	}
	q := p
	for ; q > 0; q-- {
		if groups/q > groups/p {
			if groups%q != 0 {
				q++
			}
			break
		}
	}
	q = max(q, lower)
	if up && q <= cur || !up && q >= cur {
		return cur, fmt.Sprintf("no parallelism toward %d spreads %d key groups or partitions evenly", p, groups)
	}
	if q != p {
		return q, fmt.Sprintf("aligned %d to %d for %d key groups or partitions", p, q, groups)
	}
	return q, ""
}

// delayedScaleDown is a vertex's scale-down waiting for
// job.autoscaler.scale-down.interval: when it was first recommended,
// and the recommendations since that may still be the largest.
type delayedScaleDown struct {
	first time.Time
	recs  []recommendation
}

type recommendation struct {
	at          time.Time
	parallelism int
}

// delay applies the scale-down interval to e's scale-down: none until it
// has been recommended for the interval, then the largest parallelism
// recommended over the last interval.
func (m *Machine) delay(now time.Time, e *VertexEvaluation) {
	interval := m.cfg.ScaleDownInterval
	if interval <= 0 {
		return
	}
	d := m.delayed[e.Vertex]
	if d == nil {
		d = &delayedScaleDown{first: now}
		m.delayed[e.Vertex] = d
	}
	// A recommendation no larger than this one, and older, can no longer
	// be the largest over the interval: the ones kept fall in
	// parallelism, as many as there are parallelisms below the vertex's.
	for n := len(d.recs); n > 0 && d.recs[n-1].parallelism <= e.NewParallelism; n-- {
		d.recs = d.recs[:n-1]
	}
	d.recs = append(d.recs, recommendation{at: now, parallelism: e.NewParallelism})
	start := now.Add(-interval)
	if start.Before(d.first) {
		e.Reason = fmt.Sprintf("scale-down to %d delayed until %s", e.NewParallelism, d.first.Add(interval).UTC().Format(time.TimeOnly))
		e.NewParallelism, e.Change = e.Parallelism, NoChange
		return
	}
	best := recommendation{parallelism: -1}
	kept := d.recs[:0]
	for _, r := range d.recs {
		if r.at.Before(start) {
			continue
		}
		kept = append(kept, r)
		if r.parallelism > best.parallelism {
			best = r
		}
	}
	d.recs = kept
	if best.parallelism != e.NewParallelism {
		e.Reason = fmt.Sprintf("the largest scale-down recommended since %s", start.UTC().Format(time.TimeOnly))
	}
	e.NewParallelism = best.parallelism
}

// outside reports whether e's true processing rate is outside the
// utilization boundary.
func outside(e VertexEvaluation) bool {
	tpr := float64(e.TrueProcessingRate)
	return tpr < float64(e.ScaleUpThreshold) || tpr > float64(e.ScaleDownThreshold)
}
