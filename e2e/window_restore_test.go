package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
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

type winRestoreRun struct {
	records, rate         int64
	windowPar             int
	mapCrash, winCrash    *crashes
	commitCrash           *crashes
	outDir, checkpointDir string
	seen                  *atomic.Int64
	// brakeAfter > 0 slows every record past it by a few milliseconds, so
	// that a test's stop lands midway however loaded the machine is.
	brakeAfter int64
	opts       []sluice.Option
}

func (r *winRestoreRun) env() *sluice.Environment {
	opts := append([]sluice.Option{
		sluice.WithParallelism(2),
		sluice.WithBufferTimeout(2 * time.Millisecond),
		sluice.WithAutoWatermarkInterval(5 * time.Millisecond),
		sluice.WithCheckpointing(15*time.Millisecond, r.checkpointDir),
		sluice.WithRestartStrategy(sluice.FixedDelayRestart(100, 5*time.Millisecond)),
		quietLogger(),
	}, r.opts...)
	env := sluice.NewEnvironment(opts...)
	gen := source.NewDatagen(func(i int64) int64 { return i }, source.DatagenCount(r.records),
		source.DatagenRate(float64(r.rate)), source.DatagenTimestamps(restoreTs))
	s := sluice.FromSource(env, gen, sluice.ForBoundedOutOfOrderness[int64](restoreBound*time.Millisecond), "gen", sluice.UID("gen"))
	mc, seen, brake := r.mapCrash, r.seen, r.brakeAfter
	s = sluice.Map(s, func(v int64) (int64, error) {
		if mc.hit() {
			return 0, fmt.Errorf("map of record %d: %w", v, errInjectedCrash)
		}
		if seen != nil && seen.Add(1) > brake && brake > 0 {
			time.Sleep(3 * time.Millisecond)
		}
		return v, nil
	}, sluice.UID("maybe-crash"))
	ks := sluice.KeyBy(s, winKey)
	var results []*sluice.Stream[winOut]
	for _, spec := range restoreSpecs {
		fn := &crashingWindow{kind: spec.kind, crash: r.winCrash}
		results = append(results, sluice.ProcessWindow(sluice.Window(ks, spec.assigner()),
			sluice.ProcessWindowFunction[int64, int64, winOut](fn), sluice.UID(spec.kind), sluice.Parallelism(r.windowPar)))
	}
	cc := r.commitCrash
	fs := filesink.New[winOut](r.outDir, codec.JSON[winOut]{}, filesink.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		filesink.WithCommitHook(func(id int64) error {
			if cc.hit() {
				return fmt.Errorf("commit of checkpoint %d: %w", id, errInjectedCrash)
			}
			return nil
		}))
	sluice.SinkTo(sluice.Union(results[0], results[1:]...), fs, sluice.UID("files"), sluice.Parallelism(2))
	return env
}

func (r *winRestoreRun) committed(t *testing.T) []string {
	t.Helper()
	got, err := filesink.ReadCommitted(r.outDir, codec.JSON[winOut]{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(got))
	for i, o := range got {
		out[i] = o.String()
	}
	return out
}

func TestWindowsExactlyOnceUnderFailures(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	const records = 3000
	want := restoreWant(records)
	r := &winRestoreRun{
		records: records, rate: 6000, windowPar: 2,
		mapCrash:      newCrashes(rng, 2, records),
		winCrash:      newCrashes(rng, 2, int64(len(want))),
		commitCrash:   newCrashes(rng, 1, 20),
		outDir:        t.TempDir(),
		checkpointDir: t.TempDir(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	job, err := r.env().ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatalf("job failed: %v", err)
	}
	crashes := r.mapCrash.fired.Load() + r.winCrash.fired.Load() + r.commitCrash.fired.Load()
	if r.winCrash.fired.Load() == 0 || crashes < 3 {
		t.Fatalf("%d crashes injected (%d in window functions); the test needs several", crashes, r.winCrash.fired.Load())
	}
	// Two crashes in one attempt (before it stops) cost one restart.
	if job.Restarts() < 1 || job.Restarts() > crashes {
		t.Errorf("job restarted %d times for %d crashes", job.Restarts(), crashes)
	}
	got := r.committed(t)
	if d := sameMultiset(got, want); d != "" {
		t.Fatalf("committed window results differ from the plain evaluation: %s", d)
	}
	t.Logf("%d crashes, %d restarts, %d window results committed", crashes, job.Restarts(), len(got))
}

// TestWindowsRescale takes a checkpoint of a job with windows at
// parallelism 2 midway, cancels it, and finishes the input from that
// checkpoint with the windows at parallelism 3: window contents and timers
// move with their key groups.
func TestWindowsRescale(t *testing.T) {
	const records = 3000
	want := restoreWant(records)
	seen := &atomic.Int64{}
	r := &winRestoreRun{
		records: records, rate: 3000, windowPar: 2, seen: seen, brakeAfter: records / 2,
		outDir: t.TempDir(), checkpointDir: t.TempDir(),
		opts: []sluice.Option{sluice.WithCheckpointConfig(func(c *checkpoint.Config) { c.Retention = checkpoint.RetainOnCancellation })},
	}
	job, err := r.env().ExecuteAsync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
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
	r2 := *r
	r2.windowPar, r2.rate, r2.seen, r2.brakeAfter = 3, 20000, nil, 0
	// The latest checkpoint: the one seen above, or a later one taken
	// before the cancel (only the latest is retained).
	restored := &atomic.Int64{}
	r2.opts = []sluice.Option{sluice.WithRestoreListener(func(ri sluice.RestoreInfo) { restored.Store(ri.CheckpointID) })}
	mustExecute(t, r2.env())
	if id := restored.Load(); id < completed {
		t.Fatalf("restored checkpoint %d, want %d or later", id, completed)
	}
	got := r2.committed(t)
	if partial == 0 || partial >= len(got) {
		t.Fatalf("%d results committed before the rescale, %d in all: the test needs both runs to commit", partial, len(got))
	}
	if d := sameMultiset(got, want); d != "" {
		t.Fatalf("committed window results differ from the plain evaluation: %s", d)
	}
}
