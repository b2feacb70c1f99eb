package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// richMap tags every record with the runtime context it saw at Open and
// counts, meters and measures what it maps.
type richMap struct {
	mu      *sync.Mutex
	opened  *[]string
	closed  *int
	rt      *sluice.OperatorContext
	records *sluice.Counter
	sizes   *sluice.Histogram
	rate    *sluice.Meter
}

func (m *richMap) Open(ctx *sluice.OperatorContext) error {
	m.rt = ctx
	m.records = ctx.Metrics.Counter("records")
	m.sizes = ctx.Metrics.Histogram("values")
	m.rate = ctx.Metrics.Meter("rate")
	ctx.Metrics.Gauge("constant", func() float64 { return 42 })
	m.mu.Lock()
	*m.opened = append(*m.opened, fmt.Sprintf("%d/%d/%d/%s/%d", ctx.Subtask, ctx.Parallelism, ctx.MaxParallelism, ctx.TaskName, ctx.Attempt))
	m.mu.Unlock()
	return nil
}

func (m *richMap) Map(v int64) (string, error) {
	m.records.Inc()
	m.sizes.Update(float64(v))
	m.rate.MarkEvent()
	if v%10 == 0 {
		sluice.EmitSide(m.rt, tens, v)
	}
	return fmt.Sprintf("%d@%d", v, m.rt.Subtask), nil
}

func (m *richMap) Close() error {
	m.mu.Lock()
	*m.closed++
	m.mu.Unlock()
	return nil
}

var tens = sluice.NewOutputTag[int64]("tens")

type oddFilter struct{ rt *sluice.OperatorContext }

func (f *oddFilter) Open(ctx *sluice.OperatorContext) error { f.rt = ctx; return nil }
func (f *oddFilter) Filter(v int64) (bool, error) {
	if v%2 == 0 {
		sluice.EmitSide(f.rt, evens, v)
	}
	return v%2 == 1, nil
}

var evens = sluice.NewOutputTag[int64]("evens")

type twice struct{}

func (twice) FlatMap(v int64, out sluice.Collector[int64]) error {
	out.Collect(v)
	out.Collect(-v)
	return nil
}

func TestRichFunctionsAndUserMetrics(t *testing.T) {
	const n, par = 200, 2
	env := newEnv(sluice.WithParallelism(par))
	var mu sync.Mutex
	var opened []string
	closed := 0
	s := sluice.FromSource(env, source.FromSlice(ints(0, n)), sluice.ForMonotonousTimestamps[int64](), "nums")
	mapped := sluice.RichMap(s, sluice.MapFunction[int64, string](&richMap{mu: &mu, opened: &opened, closed: &closed}), sluice.Name("tag"))
	odd := sluice.RichFilter(s, sluice.FilterFunction[int64](&oddFilter{}), sluice.Name("odd"))
	doubled := sluice.RichFlatMap(odd, sluice.FlatMapFunction[int64, int64](twice{}))
	late := sluice.NewOutputTag[int64]("late")
	proc := sluice.ProcessStream(doubled, sluice.ProcessFunctionFunc[int64, int64](func(ctx *sluice.ProcessContext, v int64, out sluice.Collector[int64]) error {
		if ctx.Timestamp() != source.NoTimestamp && ctx.Timestamp() < ctx.CurrentWatermark() {
			sluice.EmitSide(ctx, late, v)
		}
		out.Collect(v * 100)
		return nil
	}))
	mappedOut, tensOut, evensOut, procOut, lateOut := sink.NewCollect[string](), sink.NewCollect[int64](), sink.NewCollect[int64](), sink.NewCollect[int64](), sink.NewCollect[int64]()
	sluice.SinkTo(mapped, mappedOut)
	sluice.SinkTo(sluice.SideOutput(mapped, tens), tensOut)
	sluice.SinkTo(sluice.SideOutput(odd, evens), evensOut)
	sluice.SinkTo(proc, procOut)
	sluice.SinkTo(sluice.SideOutput(proc, late), lateOut)
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	// The plain evaluation.
	var wantTens, wantEvens, wantProc []int64
	for v := range int64(n) {
		if v%10 == 0 {
			wantTens = append(wantTens, v)
		}
		if v%2 == 0 {
			wantEvens = append(wantEvens, v)
		} else {
			wantProc = append(wantProc, v*100, -v*100)
		}
	}
	for name, c := range map[string][2][]int64{"tens": {tensOut.Values(), wantTens}, "evens": {evensOut.Values(), wantEvens}, "process": {procOut.Values(), wantProc}} {
		if d := sameMultiset(c[0], c[1]); d != "" {
			t.Errorf("%s: %s", name, d)
		}
	}
	if l := lateOut.Values(); len(l) != 0 {
		t.Errorf("process function saw records behind its watermark: %v", l)
	}
	got := mappedOut.Values()
	if len(got) != n {
		t.Fatalf("%d mapped records, want %d", len(got), n)
	}
	subtasks := map[string]bool{}
	for _, g := range got {
		subtasks[g[strings.Index(g, "@"):]] = true
	}
	slices.Sort(opened)
	if len(opened) != par || closed != par || !strings.HasPrefix(opened[0], "0/2/128/") || !strings.HasPrefix(opened[1], "1/2/128/") ||
		!strings.HasSuffix(opened[0], "/0") || !strings.Contains(opened[0], "tag") {
		t.Fatalf("opened %v, closed %d times", opened, closed)
	}
	// The user metrics, as the job reports them and as Prometheus does.
	var records, meterCount, histCount float64
	for _, tm := range job.Metrics() {
		for _, u := range tm.User {
			if u.Operator != "tag" {
				continue
			}
			switch u.Name {
			case "records":
				records += u.Value
			case "rate":
				meterCount += float64(u.Count)
			case "values":
				histCount += float64(u.Count)
			case "constant":
				if u.Value != 42 {
					t.Errorf("gauge %v", u.Value)
				}
			}
		}
	}
	if records != n || meterCount != n || histCount != n {
		t.Fatalf("user metrics: records %v, meter %v, histogram %v; want %d each", records, meterCount, histCount, n)
	}
	reg := prometheus.NewRegistry()
	c := metrics.NewCollector()
	c.AddJob(job)
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "sluice_user_counter" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	if total != n {
		t.Fatalf("sluice_user_counter sums to %v, want %d", total, n)
	}
}
