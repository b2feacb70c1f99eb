// Command windowresume shows a job that survives its own end: event-time
// windows over sensor readings, window state in RocksDB, output written
// exactly once to files, and a second run that resumes from the first
// run's latest checkpoint.
//
//	go run ./examples/windowresume
//
// The source generates 6000 readings of 4 sensors, 5 ms of event time
// apart (30 s of event time, at 2000 readings per second of wall time).
// Each sensor's readings are summed in tumbling 1-second event-time
// windows (a ProcessWindowFunction over the window's elements, kept in
// RocksDB). The first run checkpoints every 100 ms and is cut short
// (its context cancelled: the job is suspended, its checkpoints stay)
// after a few checkpoints. The second run, with the same job name, resumes
// from the latest of them: the source continues from the position the
// checkpoint recorded, the windows from their state in RocksDB. It ends
// with the input, and the example checks the committed output against a
// plain computation of the windows: every window of every sensor once,
// with the right count and sum.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/codec"
	"github.com/sluicehq/sluice/sink/filesink"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state/rocksdb"
)

// The input: readings of sensors, stepMs of event time apart.
const (
	readings = 6000
	sensors  = 4
	stepMs   = 5
	window   = time.Second
	// rate is the readings generated per second of wall time.
	rate = 2000
)

// Reading is one input record.
type Reading struct {
	Sensor string
	At     int64 // event time, unix milliseconds
	Value  int64
}

// reading returns the i-th reading: a function of i alone, so the
// expected output can be computed without the job.
func reading(i int64) Reading {
	return Reading{Sensor: fmt.Sprintf("sensor-%d", i%sensors), At: i * stepMs, Value: (i * 7) % 101}
}

// WindowSum is one output record: a sensor's readings in one window.
type WindowSum struct {
	Sensor     string
	Start, End int64
	Count, Sum int64
}

func (w WindowSum) String() string {
	return fmt.Sprintf("%s [%d, %d) count %d sum %d", w.Sensor, w.Start, w.End, w.Count, w.Sum)
}

func main() {
	cut := flag.Int("cut-after", 8, "checkpoints the first run completes before it is cut short")
	flag.Parse()
	if err := run(*cut, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "windowresume: %v\n", err)
		os.Exit(1)
	}
}

// printer serialises what the jobs' goroutines print.
type printer struct {
	mu  sync.Mutex
	out interface{ Write([]byte) (int, error) }
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format, args...)
}

func run(cutAfter int, w interface{ Write([]byte) (int, error) }) error {
	out := &printer{out: w}
	dir, err := os.MkdirTemp("", "sluice-windowresume-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	outDir := filepath.Join(dir, "output")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	out.printf("Sluice window resume: %d readings of %d sensors -> 1 s event-time windows in RocksDB -> files, exactly once.\n",
		readings, sensors)

	// Run 1: cut short after cutAfter checkpoints. Its input comes at a
	// tenth of the rate, so that it outlasts them however slow the
	// checkpoints of a loaded machine are (30 s of input against the
	// second or so they take); the rate changes neither the records nor
	// their windows.
	completed := make(chan int64, 64)
	ctx, suspend := context.WithCancel(context.Background())
	defer suspend()
	env1 := environment(dir, outDir, log, rate/10, completed, nil)
	job, err := env1.ExecuteAsync(ctx)
	if err != nil {
		return fmt.Errorf("start run 1: %w", err)
	}
	var last int64
	for n := 0; n < cutAfter; n++ {
		select {
		case last = <-completed:
			out.printf("run 1: checkpoint %d completed\n", last)
		case <-job.Done():
			return fmt.Errorf("run 1 ended before %d checkpoints completed: %v", cutAfter, job.Wait())
		}
	}
	suspend()
	if err := job.Wait(); !errors.Is(err, sluice.ErrJobSuspended) {
		return fmt.Errorf("run 1: %v, want it suspended (the input outlasts %d checkpoints at this rate)", err, cutAfter)
	}
	early, err := filesink.ReadCommitted[WindowSum](outDir, codec.Default[WindowSum]())
	if err != nil {
		return err
	}
	out.printf("run 1 suspended after checkpoint %d; %d windows committed so far\n\n", last, len(early))

	// Run 2: the same job resumes from its latest checkpoint and runs to
	// the end of the input.
	var restored sluice.RestoreInfo
	var restoredOnce sync.Once
	env2 := environment(dir, outDir, log, rate, nil, func(r sluice.RestoreInfo) {
		restoredOnce.Do(func() { restored = r })
	})
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if err := env2.Execute(ctx2); err != nil {
		return fmt.Errorf("run 2: %w", err)
	}
	if restored.CheckpointID == 0 {
		return errors.New("run 2 did not restore from a checkpoint")
	}
	out.printf("run 2 resumed from checkpoint %d (%s) and finished\n", restored.CheckpointID, restored.Path)

	got, err := filesink.ReadCommitted[WindowSum](outDir, codec.Default[WindowSum]())
	if err != nil {
		return err
	}
	return check(got, out)
}

// environment builds the job, its source generating rate readings per
// second; completed gets the id of every completed checkpoint, restored
// the restore.
func environment(dir, outDir string, log *slog.Logger, rate float64, completed chan<- int64, restored func(sluice.RestoreInfo), extra ...sluice.Option) *sluice.Environment {
	opts := []sluice.Option{
		sluice.WithJobName("windowresume"),
		sluice.WithParallelism(2),
		sluice.WithLogger(log),
		sluice.WithStateBackend(rocksdb.Factory(filepath.Join(dir, "rocksdb"), rocksdb.Options{})),
		sluice.WithCheckpointing(100*time.Millisecond, filepath.Join(dir, "checkpoints")),
		sluice.WithCheckpointListener(func(cs checkpoint.Stats) {
			if completed != nil && cs.Status == checkpoint.StatusCompleted {
				select {
				case completed <- cs.ID:
				default:
				}
			}
		}),
	}
	if restored != nil {
		opts = append(opts, sluice.WithRestoreListener(restored))
	}
	env := sluice.NewEnvironment(append(opts, extra...)...)
	gen := source.NewDatagen(reading, source.DatagenCount(readings), source.DatagenRate(rate))
	rs := sluice.FromSource(env, gen, sluice.ForMonotonousTimestamps[Reading]().
		WithTimestampAssigner(func(r Reading, _ int64) int64 { return r.At }), "readings", sluice.UID("readings"))
	sums := sumPerWindow(rs)
	sluice.SinkTo(sums, filesink.New[WindowSum](outDir, nil, filesink.WithLogger(log)), sluice.Name("files"), sluice.UID("files"))
	return env
}

// sumPerWindow sums each sensor's readings in tumbling event-time windows
// (a ProcessWindowFunction over the window's elements).
func sumPerWindow(rs *sluice.Stream[Reading]) *sluice.Stream[WindowSum] {
	windows := sluice.Window(sluice.KeyBy(rs, func(r Reading) string { return r.Sensor }), sluice.TumblingEventTimeWindows(window))
	return sluice.ProcessWindow(windows, sluice.ProcessWindowFunc[string, Reading, WindowSum](
		func(ctx *sluice.WindowContext[string], in []Reading, out sluice.Collector[WindowSum]) error {
			s := WindowSum{Sensor: ctx.Key(), Start: ctx.Window().Start, End: ctx.Window().End}
			for _, r := range in {
				s.Count++
				s.Sum += r.Value
			}
			out.Collect(s)
			return nil
		}), sluice.Name("sum per window"), sluice.UID("sums"))
}

// expected computes the windows of the first n readings without the job.
func expected(n int64) []WindowSum {
	byWindow := map[[2]any]*WindowSum{}
	size := window.Milliseconds()
	for i := range n {
		r := reading(i)
		start := r.At - r.At%size
		k := [2]any{r.Sensor, start}
		s := byWindow[k]
		if s == nil {
			s = &WindowSum{Sensor: r.Sensor, Start: start, End: start + size}
			byWindow[k] = s
		}
		s.Count++
		s.Sum += r.Value
	}
	var out []WindowSum
	for _, s := range byWindow {
		out = append(out, *s)
	}
	return sorted(out)
}

func sorted(ws []WindowSum) []WindowSum {
	ws = slices.Clone(ws)
	slices.SortFunc(ws, func(a, b WindowSum) int {
		if a.Sensor != b.Sensor {
			if a.Sensor < b.Sensor {
				return -1
			}
			return 1
		}
		return int(a.Start - b.Start)
	})
	return ws
}

// check compares the committed output with the plain computation.
func check(got []WindowSum, out *printer) error {
	want := expected(readings)
	got = sorted(got)
	if slices.Equal(got, want) {
		out.printf("output exact: %d windows (%d sensors x %d), each once, with the counts and sums of a plain computation\n",
			len(got), sensors, len(want)/sensors)
		return nil
	}
	seen := map[WindowSum]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, g := range got {
		if seen[g] > 1 {
			return fmt.Errorf("output not exact: %v committed %d times", g, seen[g])
		}
	}
	for _, w := range want {
		if seen[w] == 0 {
			return fmt.Errorf("output not exact: %v missing (%d windows committed, %d expected)", w, len(got), len(want))
		}
	}
	return fmt.Errorf("output not exact: %d windows committed, %d expected", len(got), len(want))
}
