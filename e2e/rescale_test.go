package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/runtime"
)

// A running keyed job rescaled in place, 1 -> 4 -> 2, while records flow:
// each rescale stops the job at a checkpoint of its own and runs on from
// it at the new parallelism, the key groups redistributed. The committed
// output is that of one run without a rescale (every key's count carried
// over, no record lost or repeated).
func TestRescaleInPlace(t *testing.T) {
	const records, keys = 12000, 40
	out, cpDir := t.TempDir(), t.TempDir()
	env, seen := countJobAt(out, records, keys, 3000, 1, sluice.WithCheckpointing(50*time.Millisecond, cpDir))
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const count = 1 // the count and files vertex (gen and seen are vertex 0)
	if v := job.Graph().Vertices[count]; v.Name == "" || v.Parallelism != 1 {
		t.Fatalf("vertex %d: %+v, want the count at parallelism 1", count, v)
	}
	for i, p := range []int{4, 2} {
		await(t, "records to flow", func() bool { return seen.Load() > int64(2000*(i+1)) })
		start := time.Now()
		if err := job.Rescale(ctx, sluice.ResourceRequirements{count: {Lower: p, Upper: p}}); err != nil {
			t.Fatalf("rescale to %d: %v", p, err)
		}
		t.Logf("rescaled to %d in %v", p, time.Since(start))
		if got := job.Graph().Parallelism(); !slices.Equal(got, []int{2, p}) {
			t.Fatalf("after the rescale to %d the job runs at %v", p, got)
		}
		if n := seen.Load(); n >= records {
			t.Fatalf("the job read all %d records before the rescale to %d ended; the test needs it midway", n, p)
		}
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	if h := job.RescaleHistory(); len(h) != 2 || h[0].Outcome != "rescaled" || h[1].Outcome != "rescaled" {
		t.Fatalf("rescale history %+v, want two rescales done", h)
	}
	if n := job.Restarts(); n != 0 {
		t.Errorf("the job restarted %d times; a rescale is no failure", n)
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

// The scheduler's keys go through the configuration: scheduler-mode and
// the adaptive scheduler's timing set the job's SchedulerConfig; a mode
// Flink does not have is refused naming the key; the reactive mode of a
// job wholly in one process (no workers whose slots it could follow) is
// refused by Execute, as is a rescale in place of a job without
// checkpoints.
func TestSchedulerConfiguration(t *testing.T) {
	if err := sluice.NewConfiguration().Set("scheduler-mode", "adaptive"); err == nil ||
		!strings.Contains(err.Error(), "scheduler-mode") || !strings.Contains(err.Error(), "reactive") {
		t.Errorf("scheduler-mode adaptive: %v, want an error naming the key and its values", err)
	}
	c := sluice.NewConfiguration()
	for k, v := range map[string]string{
		"scheduler-mode": "reactive",
		"jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout": "2 s",
		"jobmanager.adaptive-scheduler.scaling-interval.min":                     "5 s", // Flink's earlier name of the cooldown
	} {
		if err := c.Set(k, v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	var got sluice.SchedulerConfig
	out := t.TempDir()
	env, _ := countJobAt(out, 100, 4, 0, 1, sluice.WithConfiguration(c), sluice.WithCheckpointing(time.Second, t.TempDir()),
		sluice.WithScheduler(func(s *sluice.SchedulerConfig) { got = *s }))
	if want := (sluice.SchedulerConfig{Mode: sluice.SchedulerReactive, Stabilization: 2 * time.Second, Cooldown: 5 * time.Second}); got != want {
		t.Errorf("scheduler config %+v, want %+v", got, want)
	}
	if _, err := env.ExecuteAsync(context.Background()); !errors.Is(err, runtime.ErrReactiveNeedsCluster) {
		t.Errorf("reactive mode in one process: %v, want ErrReactiveNeedsCluster", err)
	}

	env, _ = countJobAt(out, 1<<40, 4, 1000, 1)
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { job.Cancel(); <-job.Done() }()
	err = job.SetResourceRequirements(job.Graph().UniformRequirements(2))
	if !errors.Is(err, runtime.ErrRescale) || !errors.Is(err, runtime.ErrNoCheckpointing) {
		t.Errorf("rescale of a job without checkpoints: %v, want ErrRescale and ErrNoCheckpointing", err)
	}
}

// A rescale the job's state cannot follow (datagen restores only at the
// parallelism it was checkpointed with) is reverted: the first attempt
// at the new parallelism fails, Rescale returns ErrRescale saying so,
// and the job restarts at the parallelism it had, from the stop
// checkpoint, and finishes with exact output.
func TestRescaleRevertedWhenStateCannotFollow(t *testing.T) {
	const records, keys = 8000, 20
	out, cpDir := t.TempDir(), t.TempDir()
	env, seen := countJobAt(out, records, keys, 3000, 2, sluice.WithCheckpointing(50*time.Millisecond, cpDir),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(1, 10*time.Millisecond)))
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	await(t, "records to flow", func() bool { return seen.Load() > 1000 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = job.Rescale(ctx, sluice.ResourceRequirements{0: {Lower: 3, Upper: 3}})
	if !errors.Is(err, runtime.ErrRescale) || !strings.Contains(err.Error(), "cannot be restored at 3") {
		t.Fatalf("rescale of the datagen source: %v, want ErrRescale saying why", err)
	}
	if got := job.Graph().Parallelism(); !slices.Equal(got, []int{2, 2}) {
		t.Errorf("after the reverted rescale the job runs at %v, want [2 2]", got)
	}
	if req := job.ResourceRequirements(); req[0] != (sluice.ParallelismBounds{Lower: 2, Upper: 2}) {
		t.Errorf("after the reverted rescale the requirements are %v", req)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	if h := job.RescaleHistory(); len(h) != 1 || !strings.HasPrefix(h[0].Outcome, "reverted: ") {
		t.Errorf("rescale history %+v, want one reverted", h)
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}

// The autoscaler's decisions (Job.Autoscale, what the autoscaler calls)
// run within the bounds a user set in the job's resource requirements
// and never replace them: with the count required within [2,3], a
// decision of 8 runs it at 3 and one of 1 at 2, and the requirements
// read back are still [2,3]; once the user widens them to [1,8], the
// autoscaler's latest decision (1) holds. The output is exact.
func TestAutoscaleWithinRequirements(t *testing.T) {
	const records, keys = 12000, 40
	out, cpDir := t.TempDir(), t.TempDir()
	env, seen := countJobAt(out, records, keys, 2500, 1, sluice.WithCheckpointing(50*time.Millisecond, cpDir))
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const count = 1 // the count and files vertex
	runsAt := func(what string, p int) {
		t.Helper()
		await(t, what, func() bool {
			h := job.RescaleHistory()
			return job.Graph().Parallelism()[count] == p && (len(h) == 0 || h[len(h)-1].Outcome != "")
		})
		if n := seen.Load(); n >= records {
			t.Fatalf("the job read all %d records by %s; the test needs it midway", n, what)
		}
	}
	required := func(want sluice.ParallelismBounds) {
		t.Helper()
		if got := job.ResourceRequirements()[count]; got != want {
			t.Errorf("the count's requirements read back %v, want the user's %v", got, want)
		}
	}
	if err := job.Rescale(ctx, sluice.ResourceRequirements{count: {Lower: 2, Upper: 3}}); err != nil {
		t.Fatal(err)
	}
	runsAt("the user's rescale to 3", 3)
	if err := job.Autoscale(map[int]int{count: 1}); err != nil {
		t.Fatal(err)
	}
	runsAt("the autoscaler's 1 within [2,3]", 2)
	required(sluice.ParallelismBounds{Lower: 2, Upper: 3})
	if err := job.Autoscale(map[int]int{count: 8}); err != nil {
		t.Fatal(err)
	}
	runsAt("the autoscaler's 8 within [2,3]", 3)
	required(sluice.ParallelismBounds{Lower: 2, Upper: 3})
	if err := job.Autoscale(map[int]int{count: 1}); err != nil {
		t.Fatal(err)
	}
	runsAt("the autoscaler's 1 within [2,3] again", 2)
	if err := job.SetResourceRequirements(sluice.ResourceRequirements{count: {Lower: 1, Upper: 8}}); err != nil {
		t.Fatal(err)
	}
	runsAt("the autoscaler's 1 within the user's [1,8]", 1)
	required(sluice.ParallelismBounds{Lower: 1, Upper: 8})
	if err := job.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}
	var causes []string
	for _, h := range job.RescaleHistory() {
		if h.Outcome != "rescaled" {
			t.Errorf("rescale %+v did not end rescaled", h)
		}
		causes = append(causes, h.Cause)
	}
	if want := []string{"resource requirements", "autoscaler", "autoscaler", "autoscaler", "resource requirements"}; !slices.Equal(causes, want) {
		t.Errorf("rescales caused by %q, want %q", causes, want)
	}
	checkExactCounts(t, readCounts(t, out), expectedCounts(records, keys))
}
