package e2e

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
)

// The restore tests run tumbling, sliding and session windows over a
// rate-limited datagen with event timestamps into the exactly-once file
// sink, with crashes injected (before the windows, in the window
// functions, which run from timers, and in the commits) or a rescale: the
// committed window results must be those of the plain evaluation, each
// exactly once. Window contents, merging-window sets and timers come back
// from the checkpoints, or the results would differ.

// winOut is one committed window result.
type winOut struct {
	Kind string `json:"kind"`
	winFiring
}

func (o winOut) String() string { return o.Kind + ":" + o.winFiring.String() }

const (
	restoreBound = 40 // ms of out-of-orderness the watermarks allow
	restoreGap   = 31 // session gap: odd, timestamps are even
)

var restoreSpecs = []winSpec{
	{kind: "tumbling", size: 100},
	{kind: "sliding", size: 100, slide: 50},
	{kind: "session", gap: restoreGap},
}

// restoreTs is the event timestamp of record i: even, increasing, with up
// to 30 ms of disorder (less than restoreBound), whatever the parallelism.
func restoreTs(i int64) int64 { return 2 * (2*i + int64(uint64(i)*2654435761%16)) }

// restoreWant is the plain evaluation of the job over n records.
func restoreWant(n int64) []string {
	script := make([]step, 0, n)
	for i := range n {
		script = append(script, rec(i, restoreTs(i)))
	}
	var want []string
	for _, spec := range restoreSpecs {
		firings, _ := plainEval(spec, script)
		for _, f := range firings {
			want = append(want, winOut{Kind: spec.kind, winFiring: f}.String())
		}
	}
	return want
}

// crashingWindow sums a window and crashes when its crashes say so.
type crashingWindow struct {
	kind  string
	crash *crashes
}

func (c *crashingWindow) Process(ctx *sluice.WindowContext[int64], els []int64, out sluice.Collector[winOut]) error {
	if c.crash.hit() {
		return fmt.Errorf("window %v of key %d: %w", ctx.Window(), ctx.Key(), errInjectedCrash)
	}
	w := ctx.Window()
	f := winFiring{Key: ctx.Key(), Start: w.Start, End: w.End, N: int64(len(els)), Fire: 1}
	for _, v := range els {
		f.Sum += v
	}
	out.Collect(winOut{Kind: c.kind, winFiring: f})
	return nil
}

// eventTimeOptions are the options of the jobs with event time under
// crashes: crashOptions with watermarks every 5 ms.
func eventTimeOptions(dir string, more ...sluice.Option) []sluice.Option {
	return crashOptions(dir, 15*time.Millisecond, append([]sluice.Option{sluice.WithAutoWatermarkInterval(5 * time.Millisecond)}, more...)...)
}

// windowsJob is the restore tests' job: records records at rate, keyed
// by winKey into a window of every restoreSpecs kind (crashingWindow) at
// the parallelism opPar, their results unioned.
func windowsJob(t *testing.T, records int64, rate float64, opts ...sluice.Option) *job[winOut] {
	return &job[winOut]{opts: eventTimeOptions(t.TempDir(), opts...), records: records, rate: rate, opPar: 2, outDir: t.TempDir(),
		build: func(j *job[winOut], env *sluice.Environment) *sluice.Stream[winOut] {
			s := datagen(j, env, "gen", index, restoreTs, sluice.ForBoundedOutOfOrderness[int64](restoreBound*time.Millisecond))
			ks := sluice.KeyBy(maybeCrash(j, s, "maybe-crash"), winKey)
			var results []*sluice.Stream[winOut]
			for _, spec := range restoreSpecs {
				fn := &crashingWindow{kind: spec.kind, crash: j.opCrash}
				results = append(results, sluice.ProcessWindow(sluice.Window(ks, spec.assigner()),
					sluice.ProcessWindowFunction[int64, int64, winOut](fn), sluice.UID(spec.kind), sluice.Parallelism(j.opPar)))
			}
			return sluice.Union(results[0], results[1:]...)
		}}
}

func TestWindowsExactlyOnceUnderFailures(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	const records = 3000
	want := restoreWant(records)
	r := windowsJob(t, records, 6000)
	job := r.runUnderCrashes(t, rng, records, 20, int64(len(want)), sameAs(want), "window results")
	// Two crashes in one attempt (before it stops) cost one restart.
	if job.Restarts() < 1 || job.Restarts() > r.crashed() {
		t.Errorf("job restarted %d times for %d crashes", job.Restarts(), r.crashed())
	}
}

// TestWindowsRescale takes a checkpoint of a job with windows at
// parallelism 2 midway, cancels it, and finishes the input from that
// checkpoint with the windows at parallelism 3: window contents and timers
// move with their key groups.
func TestWindowsRescale(t *testing.T) {
	const records = 3000
	want := restoreWant(records)
	seen := &atomic.Int64{}
	r := windowsJob(t, records, 3000, sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Retention = checkpoint.RetainOnCancellation }))
	r.seen, r.brakeAfter = seen, records/2
	job := r.start(t)
	var completed int64
	await(t, "a checkpoint a third into the input, with results committed", func() bool {
		st, ok := job.CheckpointStats()
		if ok && st.LatestCompleted != nil && seen.Load() > records/3 && len(r.committed(t)) > 0 {
			completed = st.LatestCompleted.ID
			return true
		}
		return false
	})
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, sluice.ErrJobCanceled) {
		t.Fatalf("cancel: %v", err)
	}
	if n := seen.Load(); n >= records {
		t.Fatalf("the first run read all %d records; the test needs a restore midway", n)
	}
	partial := len(r.committed(t))
	// The latest checkpoint: the one seen above, or a later one taken
	// before the cancel (only the latest is retained).
	restored := &atomic.Int64{}
	r2 := r.rescaled(3, 20000, sluice.WithRestoreListener(func(ri sluice.RestoreInfo) { restored.Store(ri.CheckpointID) }))
	mustExecute(t, r2.env())
	if id := restored.Load(); id < completed {
		t.Fatalf("restored checkpoint %d, want %d or later", id, completed)
	}
	got := r2.committed(t)
	checkBothRunsCommitted(t, "results", partial, len(got))
	if d := sameMultiset(got, want); d != "" {
		t.Fatalf("committed window results differ from the plain evaluation: %s", d)
	}
}
