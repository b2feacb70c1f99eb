package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/runtime/autoscaler"
)

// The autoscaler runs with the job when job.autoscaler.enabled is true:
// a keyed count whose records cost 1 ms each, fed 1000 records/s, is
// busy all the time at parallelism 1 and scales up; once its records
// cost nothing it is nearly idle and scales back down to 1. Each rescale
// is the autoscaler's decision carried out in place; the output, up to
// the stop, is exact: every key's counts 1..n once each.
func TestAutoscalerScalesKeyedJobUpAndDown(t *testing.T) {
	const keys = 40
	heavy := &atomic.Bool{}
	heavy.Store(true)
	conf := sluice.NewConfiguration()
	for k, v := range map[string]string{
		"job.autoscaler.enabled":                      "true",
		"autoscaler.standalone.control-loop.interval": "200 ms",
		"job.autoscaler.metrics.window":               "2 s",
		"job.autoscaler.stabilization.interval":       "1 s",
		"job.autoscaler.scale-down.interval":          "500 ms",
		"job.autoscaler.utilization.target":           "0.5",
		"job.autoscaler.target.utilization.boundary":  "0.2",
		"job.autoscaler.vertex.max-parallelism":       "4",
	} {
		if err := conf.Set(k, v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	j := countRun(t.TempDir(), 1<<40, keys, 1000, sluice.WithConfiguration(conf), sluice.WithParallelism(1),
		sluice.WithCheckpointing(100*time.Millisecond, t.TempDir()))
	j.build = counting(keys, func(*job[KeyCount]) sluice.KeyedProcessFunction[int64, int64, KeyCount] {
		return &runningCount{heavy: heavy}
	})
	job := j.start(t)
	const count = 1 // the count and files vertex (gen and maybe-crash are vertex 0)
	if d := autoscaler.Of(job); d == nil {
		t.Fatal("no autoscaler runs with the job")
	}
	await(t, "the autoscaler to scale the count up", func() bool { return job.Graph().Parallelism()[count] > 1 })
	up := job.Graph().Parallelism()
	t.Logf("scaled up to %v: %s", up, autoscaler.Of(job).LastDecision())
	checkAutoscalerShown(t, job, up[count])
	if up[0] != 1 {
		t.Fatalf("the source runs at %d; datagen does not rescale and the autoscaler should keep it at 1", up[0])
	}
	heavy.Store(false)
	var last autoscaler.Evaluation // the decision last seen, logged if the scale-down never comes
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the autoscaler's last decision seen: %s; rescales %+v", last, job.RescaleHistory())
		}
	})
	await(t, "the autoscaler to scale the count down", func() bool {
		if d := autoscaler.Of(job); d != nil {
			last = d.LastDecision()
		}
		return job.Graph().Parallelism()[count] == 1
	})
	await(t, "the scale-down to end", func() bool {
		h := job.RescaleHistory()
		return len(h) > 0 && h[len(h)-1].Outcome != ""
	})
	t.Logf("scaled down: %s", autoscaler.Of(job).LastDecision())
	d := autoscaler.Of(job)
	if n := d.Rescales(); n < 2 {
		t.Errorf("the driver counts %d rescales, want at least 2", n)
	}
	h := job.RescaleHistory()
	if len(h) < 2 {
		t.Fatalf("rescale history %+v, want the scale-up and the scale-down", h)
	}
	for _, r := range h {
		if r.Outcome != "rescaled" || r.Cause != "autoscaler" {
			t.Errorf("rescale %+v did not end rescaled", r)
		}
	}
	stopWithSavepoint(t, job)
	await(t, "the autoscaler to stop with the job", func() bool { return autoscaler.Of(job) == nil })
	got := j.output(t)
	n := int64(len(got))
	if n == 0 {
		t.Fatal("nothing committed")
	}
	checkExactCounts(t, got, expectedCounts(n, keys))
	if job.Restarts() != 0 {
		t.Errorf("the job restarted %d times; a rescale is no failure", job.Restarts())
	}
}

// A job.autoscaler.* value the autoscaler refuses, and the autoscaler of
// a job without checkpoints, are refused at start naming the key.
func TestAutoscalerConfigurationRefused(t *testing.T) {
	conf := sluice.NewConfiguration()
	for k, v := range map[string]string{"job.autoscaler.enabled": "true", "job.autoscaler.vertex.min-parallelism": "8", "job.autoscaler.vertex.max-parallelism": "4"} {
		if err := conf.Set(k, v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	env, _ := countJob(t.TempDir(), 100, 4, 0, sluice.WithConfiguration(conf), sluice.WithCheckpointing(time.Second, t.TempDir()))
	if _, err := env.ExecuteAsync(context.Background()); err == nil || !strings.Contains(err.Error(), "job.autoscaler.vertex.max-parallelism") {
		t.Errorf("max-parallelism below min-parallelism: %v, want an error naming the key", err)
	}
	env, _ = countJob(t.TempDir(), 100, 4, 0, sluice.WithAutoscaler(func(c *sluice.AutoscalerConfig) { c.Enabled = true }))
	if _, err := env.ExecuteAsync(context.Background()); err == nil || !strings.Contains(err.Error(), "job.autoscaler.enabled") ||
		!strings.Contains(err.Error(), "execution.checkpointing.interval") {
		t.Errorf("autoscaler without checkpoints: %v, want an error naming the keys", err)
	}
}

// checkAutoscalerShown checks that GET /jobs/:jobid/autoscaler and the
// Prometheus metrics show the autoscaler's decision to scale the count
// (vertex 1) up to par.
func checkAutoscalerShown(t *testing.T, job *sluice.Job, par int) {
	t.Helper()
	srv := api.New(api.Options{})
	id := srv.AddJob(job)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/jobs/"+id+"/autoscaler", nil))
	var info api.AutoscalerInfo
	if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET /jobs/%s/autoscaler: %d %v %s", id, rec.Code, err, rec.Body)
	}
	if dec := info.LastDecision; !info.Enabled || info.Rescales < 1 || dec == nil || dec.Outcome != autoscaler.Scale ||
		dec.Parallelism[1] != par || len(dec.Vertices) != 2 || dec.Vertices[1].Change != autoscaler.ScaleUp {
		t.Errorf("GET /jobs/%s/autoscaler: %s, want the scale-up of vertex 1 to %d", id, rec.Body, par)
	}

	reg := prometheus.NewRegistry()
	c := metrics.NewCollector()
	c.AddJob(job)
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "vertex" {
					key += "{" + l.GetValue() + "}"
				}
			}
			switch {
			case m.GetGauge() != nil:
				found[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				found[key] = m.GetCounter().GetValue()
			}
		}
	}
	count := job.Graph().Vertices[1].Name
	if n := found["sluice_job_autoscalerRescales"]; n < 1 {
		t.Errorf("sluice_job_autoscalerRescales %v, want at least 1", n)
	}
	for _, name := range []string{"sluice_job_autoscalerRecommendedParallelism", "sluice_job_autoscalerTrueProcessingRate",
		"sluice_job_autoscalerTargetDataRate", "sluice_job_autoscalerLag"} {
		if _, ok := found[name+"{"+count+"}"]; !ok {
			t.Errorf("no %s{vertex=%q}", name, count)
		}
	}
	if r := found["sluice_job_autoscalerTrueProcessingRate{"+count+"}"]; r <= 0 {
		t.Errorf("true processing rate of %s: %v", count, r)
	}
}
