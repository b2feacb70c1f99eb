package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/testjob"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// heldSource emits the indexes 0 to n-1 (subtask i of p: i, i+p, ...),
// then holds its readers open, idle, until release is closed: the job
// keeps running with a known number of records processed, and ends
// (FINISHED) once released.
type heldSource struct {
	n       int64
	release chan struct{}
}

func (s *heldSource) Bounded() bool { return true }

func (s *heldSource) NewReader(ctx source.ReaderContext) (source.Reader[int64], error) {
	return &heldReader{src: s, next: int64(ctx.Subtask), step: int64(ctx.Parallelism)}, nil
}

type heldReader struct {
	src        *heldSource
	next, step int64
}

func (r *heldReader) PollNext(out source.Output[int64]) (source.Status, error) {
	if r.next < r.src.n {
		if err := out.Collect(r.next, source.NoTimestamp); err != nil {
			return source.EndOfInput, fmt.Errorf("held source: %w", err)
		}
		r.next += r.step
		return source.MoreAvailable, nil
	}
	select {
	case <-r.src.release:
		if err := out.EmitWatermark(source.MaxWatermark); err != nil {
			return source.EndOfInput, fmt.Errorf("held source: %w", err)
		}
		return source.EndOfInput, nil
	default:
		return source.NothingAvailable, nil
	}
}

func (r *heldReader) Available() <-chan struct{} { return r.src.release }
func (r *heldReader) Close() error               { return nil }

// measuringMap registers one metric of each kind, as a Flink
// RichMapFunction would in open(): a counter of records, a gauge of the
// last value, a histogram of the values and a meter of the records.
type measuringMap struct {
	records *sluice.Counter
	values  *sluice.Histogram
	rate    *sluice.Meter
	last    *atomic.Int64
	mapped  *atomic.Int64 // shared by the subtasks: the records mapped in all
}

func (m *measuringMap) Open(ctx *sluice.OperatorContext) error {
	m.records = ctx.Metrics.Counter("records")
	m.values = ctx.Metrics.Histogram("values")
	m.rate = ctx.Metrics.Meter("rate")
	m.last = new(atomic.Int64)
	m.last.Store(-1)
	ctx.Metrics.Gauge("last", func() float64 { return float64(m.last.Load()) })
	return nil
}

func (m *measuringMap) Map(v int64) (int64, error) {
	m.records.Inc()
	m.values.Update(float64(v))
	m.rate.MarkEvent()
	m.last.Store(v)
	m.mapped.Add(1)
	return v, nil
}

// What a subtask of the measuring map saw, by a plain evaluation of the
// input.
type subtaskInput struct {
	records         int64
	min, max, mean  float64
	last            int64
	vertex, subtask string // the Prometheus labels
	idPrefix        string // "<subtask>.<operator>."
}

const userMetricsOperator = "tag"

// The ids a subtask's user metrics have in the REST API (after
// "<subtask>.<operator>."), as api/user_metrics.go documents them: a
// counter, gauge or meter (its rate) under its name, a meter's events as
// "_count" (a Sluice addition), a histogram's figures as Flink's metric
// store names them ("_min" ... "_p999") plus "_count" (a Sluice
// addition).
var (
	histogramSuffixes = []string{"_count", "_min", "_max", "_mean", "_median", "_stddev", "_p75", "_p90", "_p95", "_p98", "_p99", "_p999"}
	// Ordered, each at most the next: min <= median <= p75 ... <= max.
	orderedSuffixes = []string{"_min", "_median", "_p75", "_p90", "_p95", "_p98", "_p99", "_p999", "_max"}
)

func userMetricIDs(prefix string) []string {
	ids := []string{prefix + "records", prefix + "last", prefix + "rate", prefix + "rate_count"}
	for _, s := range histogramSuffixes {
		ids = append(ids, prefix+"values"+s)
	}
	return ids
}

// TestUserMetricsOverHTTP: a RichMap's counter, gauge, histogram
// and meter, read as a Flink user reads them, over HTTP from the REST
// API (GET /jobs/:jobid/vertices/:vertexid/metrics, the ids and ?get=
// their values) and from /metrics (Prometheus), first while the job runs
// with a known number of records processed, then after it has finished:
// the final figures stay readable. (Flink closes a finished task's
// metric group, so what its REST API still shows of it depends on its
// metric store's last fetch; a user checking a bounded job's counts
// after its end expects the final ones, so Sluice keeps them, and this
// test holds it to that.)
func TestUserMetricsOverHTTP(t *testing.T) {
	const n, par = 1000, 2 // at most the histogram's window (1024) per subtask: its figures cover every value
	src := &heldSource{n: n, release: make(chan struct{})}
	var mapped atomic.Int64 // by all subtasks
	env := sluice.NewEnvironment(sluice.WithJobName("user-metrics"), sluice.WithParallelism(par),
		sluice.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	stream := sluice.RichMap(sluice.FromSource(env, src, sluice.NoWatermarks[int64](), "numbers"),
		sluice.MapFunction[int64, int64](&measuringMap{mapped: &mapped}), sluice.Name(userMetricsOperator), sluice.DisableChaining())
	sluice.SinkTo(stream, sink.NewDiscard[int64](), sluice.Name("discard"))
	ctx, cancel := context.WithTimeout(context.Background(), testjob.SafetyNet)
	defer cancel()
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := metrics.NewCollector()
	c.AddJob(job)
	reg.MustRegister(c)
	e := serve(t, job, api.Options{Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})

	// The vertex of the map, found as a Flink user finds it: by name in
	// the job's details.
	var vertexID, vertexName string
	for _, v := range e.raw(t, "GET", "/jobs/"+e.jobID, 200).(object)["vertices"].([]any) {
		if name := v.(object)["name"].(string); strings.Contains(name, userMetricsOperator) {
			vertexID, vertexName = v.(object)["id"].(string), name
		}
	}
	if vertexID == "" {
		t.Fatalf("no vertex named after %q", userMetricsOperator)
	}

	// The plain evaluation: subtask i maps the indexes i, i+par, ...
	var want []subtaskInput
	for s := range par {
		in := subtaskInput{min: math.Inf(1), max: math.Inf(-1), vertex: vertexName, subtask: strconv.Itoa(s),
			idPrefix: strconv.Itoa(s) + "." + userMetricsOperator + "."}
		sum := 0.0
		for v := int64(s); v < n; v += par {
			in.records++
			in.min, in.max, in.last = min(in.min, float64(v)), max(in.max, float64(v)), v
			sum += float64(v)
		}
		in.mean = sum / float64(in.records)
		want = append(want, in)
	}
	if want[0].records+want[1].records != n {
		t.Fatalf("plain evaluation: %d + %d records, want %d", want[0].records, want[1].records, n)
	}

	// Running: await every record mapped (the function says so, after
	// updating its metrics), then read the metrics.
	testjob.Await(t, "the map to map every record", func() bool { return mapped.Load() == n })
	// The task stores its records-in count once it has processed the
	// buffer the records came in: await that too.
	testjob.Await(t, "the map's numRecordsIn to count every record", func() bool {
		var in int64
		for _, m := range job.Metrics() {
			if strings.Contains(m.Vertex, userMetricsOperator) {
				in += m.RecordsIn
			}
		}
		return in == n
	})
	path := "/jobs/" + e.jobID + "/vertices/" + vertexID + "/metrics"
	if st := job.Status(); st.String() != "RUNNING" {
		t.Fatalf("job %v, want it running while its source is held", st)
	}
	t.Run("running", func(t *testing.T) { checkUserMetrics(t, e, path, want) })

	// Finished: the figures are the final ones.
	close(src.release)
	select {
	case <-job.Done():
	case <-ctx.Done():
		t.Fatal("job did not finish within the safety net")
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	testjob.Await(t, "FINISHED in /jobs", func() bool {
		j, err := e.client.Job(context.Background(), e.jobID)
		return err == nil && j.State == "FINISHED"
	})
	t.Run("finished", func(t *testing.T) { checkUserMetrics(t, e, path, want) })
}

// metricValues GETs path?get=ids and returns the values by id, failing
// on an entry without a value or one not asked for.
func metricValues(t *testing.T, e *env, path string, ids []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range e.raw(t, "GET", path+"?get="+strings.Join(ids, ","), 200).([]any) {
		o := checkKeys(t, "metric", m, []string{"id", "value"})
		id, _ := o["id"].(string)
		v, ok := o["value"].(string)
		if !ok || !slices.Contains(ids, id) {
			t.Fatalf("GET %s?get=...: entry %v, want a value as a string of one of %v", path, o, ids)
		}
		out[id] = v
	}
	return out
}

// checkUserMetrics checks the ids the vertex lists, their values and
// the Prometheus series against the plain evaluation.
func checkUserMetrics(t *testing.T, e *env, path string, want []subtaskInput) {
	t.Helper()
	// The list: ids only, as Flink's; the user metrics of every subtask
	// among the built-in ones.
	var listed []string
	for _, m := range e.raw(t, "GET", path, 200).([]any) {
		o := checkKeys(t, "listed metric", m, []string{"id"})
		listed = append(listed, o["id"].(string))
	}
	var all, missing []string
	for _, in := range want {
		ids := append(userMetricIDs(in.idPrefix), in.subtask+".numRecordsIn")
		for _, id := range ids {
			if !slices.Contains(listed, id) {
				missing = append(missing, id)
			}
		}
		all = append(all, ids...)
	}
	if len(missing) > 0 {
		t.Fatalf("GET %s does not list %v; it lists %v", path, missing, listed)
	}
	vals := map[string]float64{}
	for id, v := range metricValues(t, e, path, all) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Errorf("%s = %q: %v", id, v, err)
		}
		vals[id] = f
	}
	if len(vals) != len(all) {
		t.Fatalf("GET %s?get=<%d ids>: %d values: %v", path, len(all), len(vals), vals)
	}
	num := func(id string) float64 { return vals[id] }
	prom := scrape(t, e)
	for _, in := range want {
		p := in.idPrefix
		for id, w := range map[string]float64{
			p + "records": float64(in.records), in.subtask + ".numRecordsIn": float64(in.records),
			p + "rate_count": float64(in.records), p + "last": float64(in.last),
			p + "values_count": float64(in.records), p + "values_min": in.min, p + "values_max": in.max,
			p + "values_mean": in.mean,
		} {
			if got := num(id); got != w {
				t.Errorf("%s = %v, want %v", id, got, w)
			}
		}
		for i := 1; i < len(orderedSuffixes); i++ {
			a, b := p+"values"+orderedSuffixes[i-1], p+"values"+orderedSuffixes[i]
			if num(a) > num(b) {
				t.Errorf("%s = %v > %s = %v", a, num(a), b, num(b))
			}
		}
		if sd := num(p + "values_stddev"); !(sd > 0) || sd > in.max-in.min {
			t.Errorf("%s = %v, want within (0, %v]", p+"values_stddev", sd, in.max-in.min)
		}
		if r := num(p + "rate"); math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
			t.Errorf("%s = %v, want a rate >= 0", p+"rate", r)
		}

		// Prometheus: the same figures, labelled by job, vertex,
		// subtask, operator and metric name.
		labels := map[string]string{"job_name": "user-metrics", "vertex": in.vertex, "subtask": in.subtask,
			"operator": userMetricsOperator}
		for _, c := range []struct {
			family, name string
			value        func(*dto.Metric) float64
			want         float64
		}{
			{"sluice_user_counter", "records", func(m *dto.Metric) float64 { return m.GetCounter().GetValue() }, float64(in.records)},
			{"sluice_user_gauge", "last", func(m *dto.Metric) float64 { return m.GetGauge().GetValue() }, float64(in.last)},
			{"sluice_user_meter_count", "rate", func(m *dto.Metric) float64 { return m.GetCounter().GetValue() }, float64(in.records)},
			{"sluice_user_histogram", "values", func(m *dto.Metric) float64 { return float64(m.GetSummary().GetSampleCount()) }, float64(in.records)},
			{"sluice_user_histogram", "values", func(m *dto.Metric) float64 { return m.GetSummary().GetSampleSum() }, in.mean * float64(in.records)},
			{"sluice_user_histogram", "values", func(m *dto.Metric) float64 { return quantile(m, 0.5) }, num(p + "values_median")},
			{"sluice_user_histogram", "values", func(m *dto.Metric) float64 { return quantile(m, 0.99) }, num(p + "values_p99")},
		} {
			labels["name"] = c.name
			m := series(prom[c.family], labels)
			if m == nil {
				t.Errorf("/metrics: no %s%v", c.family, labels)
				continue
			}
			if got := c.value(m); got != c.want {
				t.Errorf("/metrics: %s%v = %v, want %v", c.family, labels, got, c.want)
			}
		}
	}
}

// scrape GETs /metrics (with the token) and parses the exposition.
func scrape(t *testing.T, e *env) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", e.srv.URL()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return fams
}

// series returns the metric of fam with exactly the labels want.
func series(fam *dto.MetricFamily, want map[string]string) *dto.Metric {
	for _, m := range fam.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if maps.Equal(got, want) {
			return m
		}
	}
	return nil
}

func quantile(m *dto.Metric, q float64) float64 {
	for _, qu := range m.GetSummary().GetQuantile() {
		if qu.GetQuantile() == q {
			return qu.GetValue()
		}
	}
	return math.NaN()
}
