package sluicetest_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/source"
	"github.com/sluicehq/sluice/state"
)

// event is one step of a script: a record of key with val at ts, or a
// watermark at ts.
type event struct {
	Key string
	Val int
	TS  int64
	WM  bool
}

// rec is what the functions under test read.
type rec struct {
	Key string
	Val int
}

// randomScript makes n events over a few keys: records around a moving
// event time, some of them late, and watermarks that only advance.
func randomScript(rng *rand.Rand, n int) []event {
	keys := []string{"a", "b", "c", "d", "e", "f", "g"}
	now, wm := int64(30), int64(0)
	var evs []event
	for range n {
		if rng.IntN(6) == 0 {
			wm = max(wm, now-int64(rng.IntN(10)))
			evs = append(evs, event{TS: wm, WM: true})
			continue
		}
		now += int64(rng.IntN(4))
		evs = append(evs, event{Key: keys[rng.IntN(len(keys))], Val: rng.IntN(100), TS: now - int64(rng.IntN(15))})
	}
	return evs
}

// scriptSource emits a script's events in order from one subtask, its
// position checkpointed; with a pause it stops there (and signals
// paused) without ending, else it ends with the maximum watermark.
type scriptSource struct {
	events  []event
	pauseAt int // -1: no pause
	paused  chan struct{}
}

func (s *scriptSource) Bounded() bool { return s.pauseAt < 0 }

func (s *scriptSource) NewReader(ctx source.ReaderContext) (source.Reader[rec], error) {
	r := &scriptReader{src: s}
	if ctx.Restored {
		if len(ctx.RestoredState) != 1 || len(ctx.RestoredState[0]) != 8 {
			return nil, fmt.Errorf("script source: restored state %v", ctx.RestoredState)
		}
		r.next = int(binary.BigEndian.Uint64(ctx.RestoredState[0]))
	}
	return r, nil
}

type scriptReader struct {
	src    *scriptSource
	next   int
	ended  bool
	paused bool
}

func (r *scriptReader) PollNext(out source.Output[rec]) (source.Status, error) {
	s := r.src
	if r.next == s.pauseAt {
		if !r.paused {
			r.paused = true
			close(s.paused)
		}
		return source.NothingAvailable, nil
	}
	if r.next >= len(s.events) {
		if !r.ended {
			r.ended = true
			if err := out.EmitWatermark(source.MaxWatermark); err != nil {
				return source.EndOfInput, err
			}
		}
		return source.EndOfInput, nil
	}
	e := s.events[r.next]
	r.next++
	if e.WM {
		return source.MoreAvailable, out.EmitWatermark(e.TS)
	}
	return source.MoreAvailable, out.Collect(rec{e.Key, e.Val}, e.TS)
}

func (r *scriptReader) Available() <-chan struct{} { return nil } // never: paused for good
func (r *scriptReader) Close() error               { return nil }
func (r *scriptReader) SnapshotState(int64) ([][]byte, error) {
	return [][]byte{binary.BigEndian.AppendUint64(nil, uint64(r.next))}, nil
}

// feed drives a harness with events.
func feed(h *sluicetest.Harness[rec, string], evs []event) {
	for _, e := range evs {
		if e.WM {
			h.ProcessWatermark(e.TS)
		} else {
			h.ProcessElement(rec{e.Key, e.Val}, e.TS)
		}
	}
}

// emitted is a record as compared: value and timestamp, by subtask.
type emitted struct {
	V  string
	TS int64
}

func bySubtask[T any](rs []T, of func(T) (int, emitted)) map[int][]emitted {
	m := map[int][]emitted{}
	for _, r := range rs {
		sub, e := of(r)
		m[sub] = append(m[sub], e)
	}
	return m
}

func harnessOutput[T any](rs []sluicetest.Record[T]) map[int][]emitted {
	return bySubtask(rs, func(r sluicetest.Record[T]) (int, emitted) {
		return r.Subtask, emitted{fmt.Sprint(r.Value), r.Timestamp}
	})
}

func jobOutput[T any](rs []sink.Collected[T]) map[int][]emitted {
	return bySubtask(rs, func(r sink.Collected[T]) (int, emitted) { return r.Subtask, emitted{fmt.Sprint(r.Value), r.Timestamp} })
}

func equalOutputs(a, b map[int][]emitted) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// jobRun is what a real run of the script gave: each subtask's main and
// late output, and the savepoint taken at the pause.
type jobRun struct {
	out, late map[int][]emitted
	savepoint string
}

// runJob runs the function under test in a real job: the script source
// (parallelism 1), the operator at parallelism p, its output and late
// output into collect sinks. With a pause it takes a savepoint there and
// suspends; restore starts it from a savepoint.
func runJob(t *testing.T, build func(*sluice.Stream[rec]) *sluice.Stream[string], evs []event, pauseAt, p int, restore string) jobRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sluicetest.SafetyNet)
	defer cancel()
	opts := []sluice.Option{sluice.WithParallelism(p), sluice.WithLogger(slog.New(slog.DiscardHandler)),
		sluice.WithCheckpointing(time.Hour, t.TempDir()), sluice.WithSavepointDir(t.TempDir())}
	if restore != "" {
		opts = append(opts, sluice.WithRestoreFrom(restore))
	}
	env := sluice.NewEnvironment(opts...)
	src := &scriptSource{events: evs, pauseAt: pauseAt, paused: make(chan struct{})}
	in := sluice.FromSource(env, src, sluice.NoWatermarks[rec](), "script", sluice.UID("script"), sluice.Parallelism(1))
	out := build(in)
	main, late := sink.NewCollect[string](), sink.NewCollect[rec]()
	sluice.SinkTo(out, main, sluice.UID("out"))
	sluice.SinkTo(sluice.SideOutput(out, lateRecs), late, sluice.UID("late"))
	job, err := env.ExecuteAsync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var run jobRun
	if pauseAt >= 0 {
		select {
		case <-src.paused:
		case <-job.Done():
			t.Fatalf("the job ended before the pause: %v", job.Wait())
		}
		if run.savepoint, err = job.TriggerSavepoint(ctx, ""); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := job.Wait(); !errors.Is(err, sluice.ErrJobSuspended) {
			t.Fatalf("the paused job: %v", err)
		}
	} else if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	run.out, run.late = jobOutput(main.Records()), jobOutput(late.Records())
	return run
}

var lateRecs = sluice.NewOutputTag[rec]("late")

// The functions under test, each adding one operator, with a late side
// output (the process function sends records behind the watermark).
var functions = map[string]func(in *sluice.Stream[rec]) *sluice.Stream[string]{
	"sliding window with lateness": func(in *sluice.Stream[rec]) *sluice.Stream[string] {
		ws := sluice.Window(sluice.KeyBy(in, func(r rec) string { return r.Key }), sluice.SlidingEventTimeWindows(20*time.Millisecond, 10*time.Millisecond)).
			AllowedLateness(5 * time.Millisecond).SideOutputLateData(lateRecs)
		return sluice.AggregateProcessWindow(ws, sumRecs{}, sluice.ProcessWindowFunc[string, int, string](
			func(ctx *sluice.WindowContext[string], sums []int, out sluice.Collector[string]) error {
				w := ctx.Window()
				out.Collect(fmt.Sprintf("%s[%d,%d)=%d", ctx.Key(), w.Start, w.End, sums[0]))
				return nil
			}), sluice.UID("under-test"))
	},
	"session window": func(in *sluice.Stream[rec]) *sluice.Stream[string] {
		ws := sluice.Window(sluice.KeyBy(in, func(r rec) string { return r.Key }), sluice.EventTimeSessionWindows(6*time.Millisecond)).
			SideOutputLateData(lateRecs)
		return sluice.ProcessWindow(ws, sluice.ProcessWindowFunc[string, rec, string](
			func(ctx *sluice.WindowContext[string], rs []rec, out sluice.Collector[string]) error {
				w := ctx.Window()
				out.Collect(fmt.Sprintf("%s[%d,%d) %d records", ctx.Key(), w.Start, w.End, len(rs)))
				return nil
			}), sluice.UID("under-test"))
	},
	"process function with timers": func(in *sluice.Stream[rec]) *sluice.Stream[string] {
		return sluice.Process(sluice.KeyBy(in, func(r rec) string { return r.Key }), &sumWithTimers{}, sluice.UID("under-test"))
	},
}

type sumRecs struct{}

func (sumRecs) CreateAccumulator() int { return 0 }
func (sumRecs) Add(r rec, acc int) int { return acc + r.Val }
func (sumRecs) GetResult(acc int) int  { return acc }
func (sumRecs) Merge(a, b int) int     { return a + b }

var sumDesc = state.ValueStateDescriptor[int]{Name: "sum"}

// sumWithTimers keeps a running sum per key, emits it 7 ms of event time
// after each record, and sends records behind the watermark to the late
// output.
type sumWithTimers struct{ sum state.ValueState[int] }

func (f *sumWithTimers) Open(ctx *sluice.OperatorContext) (err error) {
	f.sum, err = state.GetValueState(ctx.KeyedState, sumDesc)
	return err
}

func (f *sumWithTimers) ProcessElement(ctx *sluice.KeyedContext[string], r rec, out sluice.Collector[string]) error {
	if ctx.Timestamp() <= ctx.Timers().CurrentWatermark() {
		sluice.EmitSide(ctx, lateRecs, r)
		return nil
	}
	s, _, err := f.sum.Value()
	if err != nil {
		return err
	}
	if err := f.sum.Update(s + r.Val); err != nil {
		return err
	}
	ctx.Timers().RegisterEventTimeTimer(ctx.Timestamp() + 7)
	out.Collect(fmt.Sprintf("%s+%d", r.Key, r.Val))
	return nil
}

func (f *sumWithTimers) OnTimer(ctx *sluice.KeyedContext[string], ts int64, out sluice.Collector[string]) error {
	s, _, err := f.sum.Value()
	out.Collect(fmt.Sprintf("%s@%d=%d", ctx.Key(), ts, s))
	return err
}

// A harness and the real runtime give the same output, per subtask and
// in order, and the same state, for the same random sequence of records
// and watermarks: the harness runs the operator the job runs. The script
// is cut in two: the job takes a savepoint at the cut; a harness restored
// from that savepoint holds the state (keys, values, timers) of the
// harness that read the first part, and carries on as a job restored
// from it (at another parallelism), as does a harness restored from the
// harness's own snapshot. This fails when the harness routes, times or
// restores a record otherwise than the runtime does.
func TestHarnessEqualsRuntime(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	names := make([]string, 0, len(functions))
	for name := range functions {
		names = append(names, name)
	}
	slices.Sort(names)
	for fi, name := range names {
		f := functions[name]
		build := func(in *sluice.Stream[rec]) *sluice.Stream[string] {
			out := f(in)
			sluice.SideOutput(out, lateRecs)
			return out
		}
		t.Run(name, func(t *testing.T) {
			for round := range 2 {
				rng := rand.New(rand.NewPCG(seed, uint64(fi*10+round)))
				evs := randomScript(rng, 120+rng.IntN(80))
				cut := len(evs) / 2
				p1, p2 := 1+rng.IntN(3), 1+rng.IntN(3)
				t.Logf("round %d: %d events, cut at %d, parallelism %d then %d", round, len(evs), cut, p1, p2)

				job1 := runJob(t, build, evs, cut, p1, "")
				h1 := sluicetest.New(t, build, sluicetest.WithParallelism(p1))
				feed(h1, evs[:cut])
				if got := harnessOutput(h1.Output()); !equalOutputs(got, job1.out) {
					t.Fatalf("round %d: before the cut, the harness gave\n%v\nthe job\n%v", round, got, job1.out)
				}
				if got := harnessOutput(sluicetest.SideOutput(h1, lateRecs)); !equalOutputs(got, job1.late) {
					t.Fatalf("round %d: late records: the harness gave %v, the job %v", round, got, job1.late)
				}
				fromJob := sluicetest.New(t, build, sluicetest.WithParallelism(p1), sluicetest.RestoreFrom(job1.savepoint))
				compareState(t, name, h1, fromJob)

				job2 := runJob(t, build, evs, -1, p2, job1.savepoint)
				for what, h := range map[string]*sluicetest.Harness[rec, string]{
					"the job's savepoint":    sluicetest.New(t, build, sluicetest.WithParallelism(p2), sluicetest.RestoreFrom(job1.savepoint)),
					"the harness's snapshot": sluicetest.New(t, build, sluicetest.WithParallelism(p2), sluicetest.RestoreFrom(h1.Snapshot().Path)),
				} {
					feed(h, evs[cut:])
					h.ProcessWatermark(sluicetest.MaxWatermark)
					if got := harnessOutput(h.Output()); !equalOutputs(got, job2.out) {
						t.Fatalf("round %d: after the cut, the harness restored from %s gave\n%v\nthe restored job\n%v", round, what, got, job2.out)
					}
					if got := harnessOutput(sluicetest.SideOutput(h, lateRecs)); !equalOutputs(got, job2.late) {
						t.Fatalf("round %d: late records after the cut (%s): the harness gave %v, the job %v", round, what, got, job2.late)
					}
				}
			}
		})
	}
}

// compareState holds a harness's state to that of a harness restored from
// the job's savepoint: timers, and for the process function its sums.
func compareState(t *testing.T, name string, h, fromJob *sluicetest.Harness[rec, string]) {
	t.Helper()
	if a, b := sluicetest.Timers[string](h), sluicetest.Timers[string](fromJob); !slices.Equal(a, b) {
		t.Fatalf("%s: timers of the harness %v, of the job's savepoint %v", name, a, b)
	}
	if name != "process function with timers" {
		return
	}
	keys := sluicetest.Keys[string](h, sumDesc.Name)
	if jk := sluicetest.Keys[string](fromJob, sumDesc.Name); !slices.Equal(keys, jk) {
		t.Fatalf("keys with a sum: harness %v, job %v", keys, jk)
	}
	for _, k := range keys {
		a, _ := sluicetest.Value(h, k, sumDesc)
		b, _ := sluicetest.Value(fromJob, k, sumDesc)
		if a != b {
			t.Fatalf("sum of %s: harness %d, job %d", k, a, b)
		}
	}
}
