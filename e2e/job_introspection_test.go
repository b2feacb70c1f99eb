package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// metricsOf returns the task metrics of vertex name's subtasks.
func metricsOf(job *sluice.Job, name string) []runtime.TaskMetrics {
	var out []runtime.TaskMetrics
	for _, m := range job.Metrics() {
		if strings.Contains(m.Vertex, name) {
			out = append(out, m)
		}
	}
	return out
}

// TestWatermarkMetrics: every subtask reports its input and output
// watermark. Two sources emit watermarks 100 and 40 and wait; the keyed
// task that reads both sees their minimum, and, with nothing downstream
// of its chain, outputs what it reads.
func TestWatermarkMetrics(t *testing.T) {
	release := newOnce()
	defer release.close()
	wms := map[string]int64{"a": 100, "b": 40}
	env := newEnv(sluice.WithParallelism(1))
	sa := sluice.FromSource[int64](env, newScriptSource([]step{rec(1, 1), wmark(wms["a"]), waitFor(release.C())}), sluice.NoWatermarks[int64](), "a")
	sb := sluice.FromSource[int64](env, newScriptSource([]step{rec(2, 2), wmark(wms["b"]), waitFor(release.C())}), sluice.NoWatermarks[int64](), "b")
	keyed := sluice.KeyBy(sluice.Union(sa, sb), func(v int64) int64 { return v })
	p := sluice.Process[int64, int64, fired](keyed, &eventTimerProbe{key: func(v int64) int64 { return v }}, sluice.Name("timers"))
	sluice.SinkTo(p, sink.NewDiscard[fired]())
	job := mustStart(t, env)

	// No task reports a watermark above what the sources emit (source a
	// may have emitted its 100 already).
	for _, m := range job.Metrics() {
		if m.InputWatermark > max(wms["a"], wms["b"]) || m.OutputWatermark > max(wms["a"], wms["b"]) {
			t.Fatalf("task %s/%d reports watermarks %d/%d above any emitted", m.Vertex, m.Subtask, m.InputWatermark, m.OutputWatermark)
		}
	}
	want := min(wms["a"], wms["b"])
	await(t, "the keyed task's input watermark reaches the minimum of its inputs", func() bool {
		ms := metricsOf(job, "timers")
		return len(ms) == 1 && ms[0].InputWatermark == want
	})
	ms := metricsOf(job, "timers")
	if ms[0].OutputWatermark != want {
		t.Fatalf("keyed task: output watermark %d, want its input %d (nothing downstream)", ms[0].OutputWatermark, want)
	}
	for name, wm := range wms {
		var ms []runtime.TaskMetrics
		for _, m := range job.Metrics() {
			if m.Vertex == name {
				ms = append(ms, m)
			}
		}
		if len(ms) != 1 {
			t.Fatalf("source %s: tasks %+v", name, job.Metrics())
		}
		if ms[0].InputWatermark != wm || ms[0].OutputWatermark != wm {
			t.Fatalf("source %s: watermarks in %d out %d, want %d (what it emitted)", name, ms[0].InputWatermark, ms[0].OutputWatermark, wm)
		}
	}
	release.close()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	// At the end of input every source emits the maximum watermark.
	for _, m := range job.Metrics() {
		if m.InputWatermark != operators.MaxWatermark {
			t.Fatalf("finished task %s: input watermark %d, want the maximum", m.Vertex, m.InputWatermark)
		}
	}
}

// TestExceptionHistory: the failure that ended an attempt is kept with the
// task it came from, newest first, after the job restarted.
func TestExceptionHistory(t *testing.T) {
	cr := &crashes{thresholds: []int64{50}}
	env := newEnv(sluice.WithParallelism(1), sluice.WithRestartStrategy(sluice.FixedDelayRestart(2, time.Millisecond)))
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(100))
	s := sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen")
	s = sluice.Map(s, func(v int64) (int64, error) {
		if cr.hit() {
			return 0, errInjectedCrash
		}
		return v, nil
	}, sluice.Name("crashing map"))
	sluice.SinkTo(s, sink.NewDiscard[int64]())
	job := mustStart(t, env)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if job.Restarts() != 1 {
		t.Fatalf("%d restarts, want 1", job.Restarts())
	}
	exs, truncated := job.Exceptions()
	if len(exs) != 1 || truncated {
		t.Fatalf("exception history %+v (truncated %v), want the one crash", exs, truncated)
	}
	e := exs[0]
	if !errors.Is(e.Err, errInjectedCrash) || !strings.Contains(e.Task, "crashing map") || e.Attempt != 0 || e.Time.IsZero() {
		t.Fatalf("exception %+v: want the injected crash of the map's task in attempt 0", e)
	}
}

// TestTriggerCheckpoint: a checkpoint taken on request completes although
// the periodic interval is an hour away, and its metadata is on disk.
func TestTriggerCheckpoint(t *testing.T) {
	dir := t.TempDir()
	release := newOnce()
	defer release.close()
	env := newEnv(sluice.WithParallelism(1), sluice.WithCheckpointing(time.Hour, dir))
	s := sluice.FromSource[int64](env, newScriptSource([]step{rec(1, 1), rec(2, 2), waitFor(release.C())}), sluice.NoWatermarks[int64](), "src")
	sluice.SinkTo(s, sink.NewDiscard[int64]())
	job := mustStart(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	var res runtime.CheckpointResult
	await(t, "a requested checkpoint completes", func() bool {
		var err error
		res, err = job.TriggerCheckpoint(ctx, false)
		return err == nil // refused until the tasks run
	})
	st, ok := job.CheckpointStats()
	if !ok || st.LatestCompleted == nil || st.LatestCompleted.ID != res.ID {
		t.Fatalf("checkpoint %d taken, but the latest completed is %+v", res.ID, st.LatestCompleted)
	}
	if filepath.Base(res.Path) != "_metadata" {
		t.Fatalf("path %q: want the checkpoint's _metadata", res.Path)
	}
	if _, err := os.Stat(res.Path); err != nil {
		t.Fatalf("checkpoint %d: %v", res.ID, err)
	}
	full, err := job.TriggerCheckpoint(ctx, true)
	if err != nil || full.ID <= res.ID {
		t.Fatalf("full checkpoint: %+v, %v; want one after %d", full, err, res.ID)
	}
	release.close()
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := job.TriggerCheckpoint(ctx, false); err == nil {
		t.Fatal("a checkpoint of a finished job was taken")
	}
}
