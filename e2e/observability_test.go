package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

type recordingObserver struct {
	mu       sync.Mutex
	jobs     []string
	restores []string
}

func (o *recordingObserver) ObserveCheckpoint(job string, cs checkpoint.Stats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cs.Status == checkpoint.StatusCompleted {
		o.jobs = append(o.jobs, job)
	}
}

func (o *recordingObserver) ObserveRestore(job string, r sluice.RestoreInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.restores = append(o.restores, job)
}

// Observers get the job's checkpoints under its name, even when the name
// is set after them; a savepoint restore reaches the restore observers.
func TestWithObservers(t *testing.T) {
	obs := &recordingObserver{}
	cp, sp := t.TempDir(), t.TempDir()
	build := func(opts ...sluice.Option) *sluice.Environment {
		env := newEnv(append([]sluice.Option{sluice.WithObservers(obs), sluice.WithJobName("observed"),
			sluice.WithCheckpointing(20*time.Millisecond, cp), sluice.WithSavepointDir(sp)}, opts...)...)
		gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenRate(5000))
		sluice.SinkTo(sluice.FromSource(env, gen, sluice.NoWatermarks[int64](), "gen", sluice.UID("gen")),
			sink.NewDiscard[int64](), sluice.UID("out"))
		return env
	}
	job, err := build().ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	await(t, "a completed checkpoint", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.jobs) > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	path, err := job.StopWithSavepoint(ctx, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	job, err = build(sluice.WithRestoreFrom(path)).ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	await(t, "the restore", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.restores) > 0
	})
	job.Cancel()
	_ = job.Wait()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, j := range append(obs.jobs, obs.restores...) {
		if j != "observed" {
			t.Fatalf("observed under the name %q, want %q", j, "observed")
		}
	}
}

type jobRecorder struct{ jobs []*sluice.Job }

func (r *jobRecorder) ObserveJob(j *sluice.Job) { r.jobs = append(r.jobs, j) }

func TestJobObserverGetsTheStartedJob(t *testing.T) {
	rec := &jobRecorder{}
	env := newEnv(sluice.WithObservers(rec))
	s := sluice.FromSource(env, source.FromSlice([]int64{1, 2}), sluice.NoWatermarks[int64](), "s")
	sluice.SinkTo(s, sink.NewDiscard[int64]())
	job, err := env.ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(rec.jobs) != 1 || rec.jobs[0] != job {
		t.Fatalf("observer saw %v, want the started job", rec.jobs)
	}
}
