package e2e

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/runtime"
	"github.com/sluicehq/sluice/sink"
	"github.com/sluicehq/sluice/source"
)

// slowSink sleeps for every record it writes.
type slowSink struct {
	per   time.Duration
	count *sink.Discard[int64]
}

func (s slowSink) NewWriter(ctx sink.WriterContext) (sink.Writer[int64], error) {
	w, err := s.count.NewWriter(ctx)
	if err != nil {
		return nil, err
	}
	return slowWriter{Writer: w, per: s.per}, nil
}

type slowWriter struct {
	sink.Writer[int64]
	per time.Duration
}

func (w slowWriter) Write(v int64, ts int64) error {
	time.Sleep(w.per)
	return w.Writer.Write(v, ts)
}

// TestBackpressureMetrics: a source feeding a slow sink is backpressured:
// its BackPressuredTime grows while the sink is busy. The metrics are read
// concurrently with the running job (the race detector checks them).
func TestBackpressureMetrics(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv(sluice.WithBufferSize(256))
	src := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }), sluice.NoWatermarks[int64](), "gen")
	count := sink.NewDiscard[int64]()
	sluice.SinkTo(src.Rebalance(), slowSink{per: 100 * time.Microsecond, count: count}, sluice.Name("slow"))
	job, err := env.ExecuteAsync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 { // readers racing with the tasks
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, m := range job.Metrics() {
					if m.BusyRatio() < 0 || m.BusyRatio() > 1.0001 || m.IdleRatio() < 0 || m.BackPressuredRatio() < 0 {
						t.Errorf("ratios out of range: %+v", m)
					}
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	var src0, sink0 runtime.TaskMetrics
	await(t, "backpressure on the source and a busy sink", func() bool {
		for _, m := range job.Metrics() {
			switch {
			case strings.HasPrefix(m.Vertex, "gen"):
				src0 = m
			case strings.HasPrefix(m.Vertex, "slow"):
				sink0 = m
			}
		}
		return src0.BackPressuredTime > 0 && sink0.BusyTime > 0 && sink0.RecordsIn > 0
	})
	close(stop)
	readers.Wait()
	if src0.Status != runtime.TaskRunning || sink0.Status != runtime.TaskRunning {
		t.Errorf("tasks not RUNNING while the job runs: %v, %v", src0.Status, sink0.Status)
	}
	if src0.RecordsOut == 0 || src0.BytesOut == 0 || sink0.BytesIn == 0 {
		t.Errorf("no throughput figures: source %+v sink %+v", src0, sink0)
	}
	if src0.Elapsed <= 0 || src0.BusyTime+src0.IdleTime+src0.BackPressuredTime > src0.Elapsed+time.Millisecond {
		t.Errorf("source times do not add up: %+v", src0)
	}
	job.Cancel()
	if err := job.Wait(); !errors.Is(err, sluice.ErrJobCanceled) {
		t.Fatal(err)
	}
	// The figures stay readable after the end.
	for _, m := range job.Metrics() {
		if m.Status != runtime.TaskCanceled {
			t.Errorf("%s: %v after cancel", m.Vertex, m.Status)
		}
	}
}

// TestSmallBuffersAndFlushEveryRecord: tiny network buffers (records span
// several of them), minimal credit, and a buffer timeout of 0 (a flush per
// record) still give exact results, through keyBy, rebalance and
// broadcast exchanges.
func TestSmallBuffersAndFlushEveryRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []sluice.Option
	}{
		{"timeout=0", []sluice.Option{sluice.WithBufferTimeout(0)}},
		{"buffer=64B", []sluice.Option{sluice.WithBufferSize(64)}},
		{"buffer=64B,timeout=0,exclusive=1,floating=0", []sluice.Option{sluice.WithBufferSize(64), sluice.WithBufferTimeout(0),
			sluice.WithExclusiveBuffers(1), sluice.WithFloatingBuffers(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(append(tc.opts, sluice.WithParallelism(3))...)
			// Records of 50 to 1000 bytes: most span several 64-byte buffers.
			strs := make([]string, 400)
			for i := range strs {
				strs[i] = fmt.Sprintf("%04d:%s", i, strings.Repeat(string(rune('a'+i%26)), 50+(i*37)%950))
			}
			s := sluice.FromSource(env, source.FromSlice(strs), sluice.NoWatermarks[string](), "strings", sluice.Parallelism(2))
			// FIFO per channel: the keyed subtasks check that each source
			// subtask's records (indexes i%2 == subtask) come in order.
			keyed := sluice.KeyBy(s, func(v string) int { return len(v) % 13 })
			upper := sluice.Process[int, string, string](keyed, &fifoCheck{}, sluice.Name("upper"))
			out := sink.NewCollect[string]()
			sluice.SinkTo(upper.Rebalance(), out, sluice.Name("out"), sluice.Parallelism(2))
			bc := sink.NewCollect[string]()
			sluice.SinkTo(upper.Broadcast(), bc, sluice.Name("everywhere"), sluice.Parallelism(2))
			mustExecute(t, env)
			var want []string
			for _, v := range strs {
				want = append(want, strings.ToUpper(v))
			}
			if d := sameMultiset(out.Values(), want); d != "" {
				t.Fatal(d)
			}
			if d := sameMultiset(bc.Values(), append(want, want...)); d != "" {
				t.Fatal("broadcast:", d)
			}
		})
	}
}

// fifoCheck upper-cases "NNNN:..." strings and fails if the indexes NNNN
// from one slice-source subtask (NNNN % 2) do not increase.
type fifoCheck struct{ last map[int]int }

func (f *fifoCheck) ProcessElement(_ *sluice.KeyedContext[int], v string, out sluice.Collector[string]) error {
	if f.last == nil {
		f.last = map[int]int{0: -1, 1: -1}
	}
	var i int
	if _, err := fmt.Sscanf(v, "%04d:", &i); err != nil {
		return fmt.Errorf("record %.20q...: %w", v, err)
	}
	if i <= f.last[i%2] {
		return fmt.Errorf("record %d after record %d from the same producer: not FIFO", i, f.last[i%2])
	}
	f.last[i%2] = i
	out.Collect(strings.ToUpper(v))
	return nil
}

// TestAlignedBarrierQueuedBehindBackpressure: with an aligned checkpoint
// timeout that never fires, a barrier queued behind backpressured data in
// the source's output completes the checkpoint, aligned, as soon as the
// consumer drains it: the source learns from the network that the barrier
// left its queue (no timeout, no promotion).
func TestAlignedBarrierQueuedBehindBackpressure(t *testing.T) {
	defer goleak.VerifyNone(t)
	env := newEnv(sluice.WithBufferSize(256), sluice.WithParallelism(1),
		sluice.WithCheckpointing(20*time.Millisecond, t.TempDir()),
		sluice.WithUnalignedCheckpoints(time.Hour))
	release := make(chan struct{})
	src := sluice.FromSource(env, source.NewDatagen(func(i int64) int64 { return i }), sluice.NoWatermarks[int64](), "gen")
	held := sluice.Map(src.Rebalance(), func(v int64) (int64, error) {
		<-release
		return v, nil
	}, sluice.Name("held"))
	sluice.SinkTo(held, sink.NewDiscard[int64](), sluice.Name("out"))
	job, err := env.ExecuteAsync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		job.Cancel()
		_ = job.Wait()
	}()
	await(t, "a checkpoint in progress while the source is backpressured", func() bool {
		st, _ := job.CheckpointStats()
		for _, m := range job.Metrics() {
			if strings.HasPrefix(m.Vertex, "gen") && m.BackPressuredTime > 0 && st.InProgress > 0 {
				return true
			}
		}
		return false
	})
	st, _ := job.CheckpointStats()
	before := st.Completed // one may have completed before the first record
	close(release)
	await(t, "a completed checkpoint once the consumer drains", func() bool {
		st, _ := job.CheckpointStats()
		return st.Completed > before
	})
	st, _ = job.CheckpointStats()
	if c := st.LatestCompleted; c.Unaligned || c.PersistedData != 0 {
		t.Fatalf("checkpoint %d: unaligned=%v, persisted %d bytes; want aligned (the timeout never fires)", c.ID, c.Unaligned, c.PersistedData)
	}
}
