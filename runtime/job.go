package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/runtime/network"
)

// ErrJobCanceled is returned by Wait when the job was cancelled.
var ErrJobCanceled = errors.New("job canceled")

// JobStatus is the lifecycle state of a job, with Flink's names.
type JobStatus int32

const (
	JobCreated JobStatus = iota
	JobRunning
	JobFinished
	JobFailed
	JobCanceled
)

func (s JobStatus) String() string {
	return [...]string{"CREATED", "RUNNING", "FINISHED", "FAILED", "CANCELED"}[s]
}

// Job is a running job: the handle that Execute returns.
type Job struct {
	graph  *JobGraph
	cfg    Config
	logger *slog.Logger
	tasks  []*Task

	ctx    context.Context
	cancel context.CancelFunc

	status   atomic.Int32
	mu       sync.Mutex
	err      error
	canceled bool
	done     chan struct{}
	wg       sync.WaitGroup

	partitions []*network.ResultPartition
	gates      []*network.InputGate
}

// Execute compiles the plan and starts the job. It returns at once; use
// Wait for the outcome. Cancelling ctx cancels the job.
func Execute(ctx context.Context, plan *Plan, cfg Config) (*Job, error) {
	g, err := Compile(plan, cfg)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("job", cfg.JobName)
	j := &Job{graph: g, cfg: cfg, logger: logger, done: make(chan struct{})}
	j.ctx, j.cancel = context.WithCancel(context.Background())
	if err := j.deploy(); err != nil {
		j.cancel()
		return nil, err
	}
	j.status.Store(int32(JobRunning))
	logger.Info("job started", "vertices", len(g.Vertices), "tasks", len(j.tasks))
	for _, t := range j.tasks {
		j.wg.Add(1)
		go func() {
			defer j.wg.Done()
			if err := t.run(); err != nil {
				j.fail(t, err)
			}
		}()
	}
	stop := context.AfterFunc(ctx, j.Cancel)
	go func() {
		j.wg.Wait()
		stop()
		j.finish()
	}()
	return j, nil
}

// deploy makes the tasks, their partitions and gates, wires them, and
// builds every operator chain.
func (j *Job) deploy() error {
	byVertex := map[*JobVertex][]*Task{}
	for _, v := range j.graph.Vertices {
		for i := 0; i < v.Parallelism; i++ {
			wake := make(chan struct{}, 1)
			mb := newMailbox(wake)
			name := fmt.Sprintf("%s (%d/%d)", v.Name, i+1, v.Parallelism)
			t := &Task{
				job: j, vertex: v, subtask: i, name: name, ctx: j.ctx,
				wake: wake, mailbox: mb,
				timers: &processingTime{mailbox: mb, timers: map[*time.Timer]struct{}{}},
				logger: j.logger.With("vertex", v.Name, "subtask", i),
			}
			byVertex[v] = append(byVertex[v], t)
			j.tasks = append(j.tasks, t)
		}
	}
	// One partition per producing task and network edge.
	for _, v := range j.graph.Vertices {
		for _, e := range v.Out {
			cons := j.graph.vertexOf[e.To]
			n := cons.Parallelism
			if e.Partitioner == PartitionForward {
				n = 1
			}
			for _, t := range byVertex[v] {
				name := fmt.Sprintf("%s -> %s [%d]", e.From.Name, e.To.Name, t.subtask)
				p := network.NewResultPartition(name, n, j.cfg.Network, t.wake)
				j.partitions = append(j.partitions, p)
				t.partitions = append(t.partitions, p)
				t.writers = append(t.writers, &netWriter{
					edge: e, name: fmt.Sprintf("edge %q -> %q", e.From.Name, e.To.Name),
					part: p, kind: e.Partitioner, n: n, maxPar: cons.MaxParallelism,
					ctx: j.ctx, flushEach: j.cfg.BufferTimeout == 0,
				})
			}
		}
	}
	// One gate per consuming task and network edge, then connect.
	for _, v := range j.graph.Vertices {
		for _, t := range byVertex[v] {
			channels := 0
			for _, e := range v.In {
				prod := j.graph.vertexOf[e.From]
				n := prod.Parallelism
				if e.Partitioner == PartitionForward {
					n = 1
				}
				name := fmt.Sprintf("%s -> %s [%d]", e.From.Name, e.To.Name, t.subtask)
				gate := network.NewInputGate(name, n, j.cfg.Network, t.wake)
				j.gates = append(j.gates, gate)
				gi := &gateInput{edge: e, gate: gate, offset: channels}
				for c := 0; c < n; c++ {
					gi.channels = append(gi.channels, &channelInput{gate: gi, index: c, reader: network.NewRecordReader()})
				}
				channels += n
				t.gates = append(t.gates, gi)
				// Connect the producers' subpartitions to this gate.
				for pi, pt := range byVertex[prod] {
					w := pt.writerFor(e)
					switch {
					case e.Partitioner == PartitionForward && pi == t.subtask:
						network.Connect(w.part, 0, gate, 0)
					case e.Partitioner != PartitionForward:
						network.Connect(w.part, t.subtask, gate, pi)
					}
				}
			}
			t.valve = newWatermarkValve(channels)
		}
	}
	for _, t := range j.tasks {
		if err := t.build(j.graph); err != nil {
			return err
		}
	}
	return nil
}

// fail records the first failure and cancels every task.
func (j *Job) fail(t *Task, err error) {
	j.mu.Lock()
	first := j.err == nil && !j.canceled
	if first {
		j.err = err
	}
	j.mu.Unlock()
	if first {
		j.logger.Error("task failed; cancelling the job", "task", t.name, "err", err)
	}
	j.stopAll()
}

// Cancel stops the job; Wait then returns ErrJobCanceled.
func (j *Job) Cancel() {
	j.mu.Lock()
	if j.err == nil && j.Status() == JobRunning {
		j.canceled = true
	}
	j.mu.Unlock()
	j.stopAll()
}

func (j *Job) stopAll() {
	j.cancel()
	for _, p := range j.partitions {
		p.Release()
	}
	for _, g := range j.gates {
		g.Release()
	}
}

func (j *Job) finish() {
	j.mu.Lock()
	switch {
	case j.err != nil:
		j.status.Store(int32(JobFailed))
	case j.canceled:
		j.status.Store(int32(JobCanceled))
	default:
		j.status.Store(int32(JobFinished))
	}
	j.mu.Unlock()
	j.cancel()
	j.logger.Info("job ended", "status", j.Status())
	close(j.done)
}

// Wait blocks until the job has ended and every task goroutine has exited.
// It returns nil when the job finished, ErrJobCanceled when it was
// cancelled, and the failing task's error otherwise.
func (j *Job) Wait() error {
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	if j.canceled {
		return fmt.Errorf("%w: %w", ErrJobCanceled, context.Canceled)
	}
	return nil
}

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Status returns the job's current status.
func (j *Job) Status() JobStatus { return JobStatus(j.status.Load()) }

// Metrics returns the figures of every task: throughput and the busy,
// idle and backpressured time that make up backpressure.
func (j *Job) Metrics() []TaskMetrics {
	out := make([]TaskMetrics, len(j.tasks))
	for i, t := range j.tasks {
		out[i] = t.metrics()
	}
	return out
}

// Graph returns the compiled job graph.
func (j *Job) Graph() *JobGraph { return j.graph }
