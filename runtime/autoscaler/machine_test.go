package autoscaler

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/datadriven"
)

// TestScenarios runs testdata/*: a simulated job (one source, a pipeline
// of vertices each processing up to cap records per second per subtask)
// fed by producers at a rate, its figures given to the machine every
// tick, its decisions applied at once.
//
//	job [window= stabilization= scale-down= catch-up= restart= target= boundary=
//	    min= max= up-factor= down-factor= aggregator= scaling= backlog= mode=]
//	<name> [source] p= max= cap= [partitions=] [in=(from:ship,...)] [ratio=]
//	       [lower= upper=]     one line per vertex; lower/upper: its resource requirements' bounds
//	----
//	rate r=<records/s> | r=(a,b,...) a rate per tick, in turn [lag=<records>]
//	bounds <name>=(lower,upper) ...   sets vertices' resource requirements (0,0: none)
//	run for= every= [downtime=]    prints each evaluation that differs from the one before
//	failover [downtime=] [resume=false]
//	    a new leader takes the job over: its tasks restart (their counters
//	    from 0) after the downtime, whose input waits in the backlog; its
//	    machine resumes the state the last one kept, encoded as the driver
//	    keeps it, or with resume=false starts afresh
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &sim{}
		datadriven.RunTest(t, path, s.run)
	})
}

var shortKeys = map[string]string{
	"window": "job.autoscaler.metrics.window", "stabilization": "job.autoscaler.stabilization.interval",
	"scale-down": "job.autoscaler.scale-down.interval", "catch-up": "job.autoscaler.catch-up.duration",
	"restart": "job.autoscaler.restart.time", "target": "job.autoscaler.utilization.target",
	"boundary": "job.autoscaler.target.utilization.boundary", "min": "job.autoscaler.vertex.min-parallelism",
	"max": "job.autoscaler.vertex.max-parallelism", "up-factor": "job.autoscaler.scale-up.max-factor",
	"down-factor": "job.autoscaler.scale-down.max-factor", "aggregator": "job.autoscaler.metrics.busy-time.aggregator",
	"scaling": "job.autoscaler.scaling.enabled", "backlog": "job.autoscaler.backlog-processing.lag-threshold",
	"mode": "job.autoscaler.scaling.key-group.partitions.adjust.mode",
}

// simVertex is a vertex of the simulated job.
type simVertex struct {
	p          int
	cap        float64 // records per second one subtask processes
	ratio      float64 // records out per record in
	partitions int
	// lower and upper are the resource requirements' bounds (0: none).
	lower, upper int
	in, out      float64
	busy         []float64 // seconds
}

type sim struct {
	m     *Machine
	topo  Topology
	vs    []*simVertex
	now   time.Duration
	rates []float64
	tick  int
	lag   float64
	last  string
}

func (s *sim) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "job":
		return s.job(t, d)
	case "rate":
		s.rates = nil
		for _, v := range d.Vals("r") {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil {
				d.Fatalf(t, "rate %q: %v", v, err)
			}
			s.rates = append(s.rates, r)
		}
		s.tick = 0
		if d.Has("lag") {
			s.lag = float64(d.Int(t, "lag", 0))
		}
		return s.state()
	case "run":
		return s.advance(t, d)
	case "failover":
		return s.failover(t, d)
	case "bounds":
		for _, a := range d.Args {
			i := slices.IndexFunc(s.topo.Vertices, func(v Vertex) bool { return v.Name == a.Key })
			if i < 0 || len(a.Vals) != 2 {
				d.Fatalf(t, "bounds %s: want <vertex>=(lower,upper)", a.Key)
			}
			v := s.vs[i]
			v.lower, v.upper = atoi(t, d, a.Vals[0]), atoi(t, d, a.Vals[1])
			if p := v.p; v.lower > 0 && (p < v.lower || p > v.upper) {
				// The runtime rescales the job into the new bounds.
				s.apply(map[int]int{i: min(max(p, v.lower), v.upper)}, 0)
			}
		}
		return s.state()
	}
	d.Fatalf(t, "unknown command")
	return ""
}

func (s *sim) job(t *testing.T, d *datadriven.TestData) string {
	conf := config.New()
	for _, a := range d.Args {
		key, ok := shortKeys[a.Key]
		if !ok || len(a.Vals) != 1 {
			d.Fatalf(t, "argument %s: not a setting", a.Key)
		}
		if err := conf.Set(key, a.Vals[0]); err != nil {
			return "error: " + err.Error()
		}
	}
	cfg, err := FromConfiguration(conf)
	if err != nil {
		return "error: " + err.Error()
	}
	s.topo, s.vs, s.now, s.lag, s.last = Topology{}, nil, 0, 0, ""
	names := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		fields := strings.Fields(line)
		v := Vertex{Name: fields[0], MaxParallelism: 128}
		sv := &simVertex{p: 1, cap: math.Inf(1), ratio: 1}
		for _, f := range fields[1:] {
			k, val, _ := strings.Cut(f, "=")
			num := func() float64 {
				x, err := strconv.ParseFloat(val, 64)
				if err != nil {
					d.Fatalf(t, "%s: %v", f, err)
				}
				return x
			}
			switch k {
			case "source":
				v.Source = true
			case "p":
				sv.p = int(num())
			case "max":
				v.MaxParallelism = int(num())
			case "cap":
				sv.cap = num()
			case "ratio":
				sv.ratio = num()
			case "partitions":
				sv.partitions = int(num())
			case "lower":
				sv.lower = int(num())
			case "upper":
				sv.upper = int(num())
			case "in":
				for _, e := range strings.Split(strings.Trim(val, "()"), ",") {
					from, ship, _ := strings.Cut(e, ":")
					idx, ok := names[from]
					if !ok {
						d.Fatalf(t, "%s: no vertex %q before", line, from)
					}
					in := Input{From: idx}
					switch ship {
					case "hash":
						in.Ship = Hash
					case "forward":
						in.Ship = Forward
					}
					v.Inputs = append(v.Inputs, in)
				}
			default:
				d.Fatalf(t, "%s: unknown %s", line, k)
			}
		}
		names[v.Name] = len(s.topo.Vertices)
		s.topo.Vertices = append(s.topo.Vertices, v)
		sv.busy = make([]float64, sv.p)
		s.vs = append(s.vs, sv)
	}
	if s.m, err = New(cfg, s.topo); err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("window=%s stabilization=%s scale-down=%s catch-up=%s restart=%s utilization=%.3g [%.3g,%.3g]",
		cfg.MetricsWindow, cfg.Stabilization, cfg.ScaleDownInterval, cfg.CatchUpDuration, cfg.RestartTime,
		cfg.TargetUtilization, cfg.UtilizationMin, cfg.UtilizationMax)
}

// flow is the records each vertex takes in per record the source reads.
func (s *sim) flow() []float64 {
	f := make([]float64, len(s.vs))
	for i, v := range s.topo.Vertices {
		if v.Source {
			f[i] = 1
			continue
		}
		for _, in := range v.Inputs {
			f[i] += f[in.From] * s.vs[in.From].ratio
		}
	}
	return f
}

func (s *sim) step(dt time.Duration) {
	rate := 0.0
	if len(s.rates) > 0 {
		rate = s.rates[s.tick%len(s.rates)]
	}
	s.tick++
	sec := dt.Seconds()
	f := s.flow()
	limit := math.Inf(1) // records per second the source may read
	for i, v := range s.vs {
		if f[i] > 0 {
			limit = min(limit, float64(v.p)*v.cap/f[i])
		}
	}
	available := s.lag + rate*sec
	read := min(available, limit*sec)
	s.lag = available - read
	for i, v := range s.vs {
		in := read * f[i]
		v.in += in
		v.out += in * v.ratio
		for k := range v.busy {
			v.busy[k] += in / float64(v.p) / v.cap
		}
	}
	s.now += dt
}

func (s *sim) snapshot() Snapshot {
	snap := Snapshot{Time: time.Unix(0, 0).Add(s.now), Running: true}
	for i, v := range s.vs {
		f := Figures{Parallelism: v.p, RecordsIn: int64(v.in), RecordsOut: int64(v.out), Lag: -1, Partitions: v.partitions,
			Lower: v.lower, Upper: v.upper}
		for _, b := range v.busy {
			f.Busy = append(f.Busy, time.Duration(b*float64(time.Second)))
		}
		if s.topo.Vertices[i].Source {
			f.Lag = int64(s.lag)
		}
		snap.Vertices = append(snap.Vertices, f)
	}
	return snap
}

func (s *sim) advance(t *testing.T, d *datadriven.TestData) string {
	end := s.now + d.Duration(t, "for", time.Minute)
	every := d.Duration(t, "every", 10*time.Second)
	downtime := d.Duration(t, "downtime", 0)
	var out []string
	for s.now < end {
		s.step(every)
		ev, err := s.m.Observe(s.snapshot())
		if err != nil {
			if errors.Is(err, ErrTopology) {
				return "error: " + err.Error()
			}
			d.Fatalf(t, "%v", err)
		}
		key := summary(ev)
		if key != s.last || ev.Outcome == Scale || ev.Outcome == Recommend {
			out = append(out, fmt.Sprintf("%s %s", clock(s.now), ev))
		}
		s.last = key
		if ev.Outcome == Scale {
			s.apply(ev.Parallelism, downtime)
			out = append(out, fmt.Sprintf("%s rescaled, %s", clock(s.now), s.state()))
		}
	}
	return strings.Join(append(out, s.state()), "\n")
}

// apply rescales the simulated job: new tasks, the input of the downtime
// in the backlog.
func (s *sim) apply(p map[int]int, downtime time.Duration) {
	for i, v := range s.vs {
		if np, ok := p[i]; ok {
			v.p = np
		}
		v.in, v.out, v.busy = 0, 0, make([]float64, v.p)
	}
	if len(s.rates) > 0 {
		s.lag += s.rates[s.tick%len(s.rates)] * downtime.Seconds()
	}
	s.now += downtime
}

func (s *sim) failover(t *testing.T, d *datadriven.TestData) string {
	st := s.m.State().Thinned(maxKeptSamples)
	m, err := New(s.m.Config(), s.topo)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	out := "new machine, nothing resumed"
	if d.Bool(t, "resume", true) {
		data, err := json.Marshal(st)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		var back State
		if err := json.Unmarshal(data, &back); err != nil {
			d.Fatalf(t, "%v", err)
		}
		if err := m.Resume(back); err != nil {
			return "error: " + err.Error()
		}
		out = fmt.Sprintf("resumed: parallelism %v since %s, %d samples, %d delayed scale-downs", back.Parallelism,
			clock(back.Since.Sub(time.Unix(0, 0))), len(back.Samples), len(back.Delayed))
		if back.Pending != nil {
			out += fmt.Sprintf(", waiting for %v", back.Pending)
		}
	}
	s.m, s.last = m, ""
	s.apply(nil, d.Duration(t, "downtime", 0))
	return out + "\n" + s.state()
}

func summary(ev Evaluation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v %v", ev.Outcome, ev.Until, ev.Backlog)
	for _, v := range ev.Vertices {
		fmt.Fprintf(&b, "|%s %d %s", v.Change, v.NewParallelism, v.Reason)
	}
	return b.String()
}

func atoi(t *testing.T, d *datadriven.TestData, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		d.Fatalf(t, "%q: %v", s, err)
	}
	return n
}

func clock(d time.Duration) string { return "t=" + time.Unix(0, 0).Add(d).UTC().Format(time.TimeOnly) }

func (s *sim) state() string {
	parts := make([]string, len(s.vs))
	for i, v := range s.vs {
		parts[i] = fmt.Sprintf("%s p=%d", s.topo.Vertices[i].Name, v.p)
		if v.lower > 0 {
			parts[i] += fmt.Sprintf(" required=[%d,%d]", v.lower, v.upper)
		}
	}
	return fmt.Sprintf("job: %s lag=%d", strings.Join(parts, " "), int64(s.lag))
}
