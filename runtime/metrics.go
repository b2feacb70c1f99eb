package runtime

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/metrics/report"
	"github.com/sluicehq/sluice/operators"
)

// TaskMetrics are the figures of one subtask, read from the job handle
// while it runs. Times are cumulative since the task started; the ratios
// are over that span, as Flink's busy / idle / backpressured time.
type TaskMetrics struct {
	Vertex  string
	Subtask int
	Status  TaskStatus
	// Worker is the worker that runs the task in a job on several hosts
	// ("" in one process).
	Worker string `json:",omitempty"`
	// Started is when the task started running (zero before), Ended when
	// it stopped (zero while it runs).
	Started, Ended time.Time

	Elapsed           time.Duration
	BusyTime          time.Duration
	IdleTime          time.Duration
	BackPressuredTime time.Duration

	RecordsIn  int64
	RecordsOut int64
	BytesIn    int64
	BytesOut   int64

	// User are the user-defined metrics of the task's operators (their
	// Context.Metrics groups).
	User []operators.UserMetric `json:",omitempty"`

	// Connectors are the figures of the task's connectors: every source
	// reader, sink writer and committer that implements report.Reporter
	// (the Kafka source's lag and offsets, the Kafka sink's
	// transactions), read with the rest.
	Connectors []report.Figure `json:",omitempty"`

	// InputWatermark is the task's current input watermark (Flink's
	// currentInputWatermark): the minimum over its input channels that are
	// not idle, or for a source task the watermark its watermark strategy
	// generated. OutputWatermark (currentOutputWatermark) is the latest
	// watermark the task sent downstream; a task with no downstream edge
	// reports its input watermark. Both are unix milliseconds, and
	// math.MinInt64 (operators.MinWatermark) until the first watermark.
	InputWatermark  int64
	OutputWatermark int64
}

// BusyRatio is the share of time the task was processing.
func (m TaskMetrics) BusyRatio() float64 { return ratio(m.BusyTime, m.Elapsed) }

// IdleRatio is the share of time the task waited for input.
func (m TaskMetrics) IdleRatio() float64 { return ratio(m.IdleTime, m.Elapsed) }

// BackPressuredRatio is the share of time the task waited for an output
// buffer.
func (m TaskMetrics) BackPressuredRatio() float64 { return ratio(m.BackPressuredTime, m.Elapsed) }

func ratio(d, total time.Duration) float64 {
	if total <= 0 {
		return 0
	}
	return float64(d) / float64(total)
}

// TaskStatus is the lifecycle state of a task.
type TaskStatus int32

const (
	TaskCreated TaskStatus = iota
	TaskRunning
	TaskFinished
	TaskFailed
	TaskCanceled
)

func (s TaskStatus) String() string {
	return [...]string{"CREATED", "RUNNING", "FINISHED", "FAILED", "CANCELED"}[s]
}

// taskCounters are written by the task goroutine and read by anyone.
type taskCounters struct {
	status     atomic.Int32
	start      atomic.Int64 // unix nanos
	end        atomic.Int64 // unix nanos, 0 while running
	idleNanos  atomic.Int64
	bpNanos    atomic.Int64 // waits for output availability in the loop
	recordsIn  atomic.Int64
	recordsOut atomic.Int64 // records emitted by a source
	bytesIn    atomic.Int64
	inputWM    atomic.Int64 // written by the task goroutine
	outputWM   atomic.Int64 // written by the task goroutine (netOutput)

	// The wait in progress, so that a task blocked for long (a stuck
	// consumer) reports that time while it waits, not only afterwards.
	waitMu    sync.Mutex
	waiting   *atomic.Int64 // idleNanos or bpNanos; nil when not waiting
	waitStart time.Time
}

// beginWait records that the task starts waiting; the time goes to counter.
func (c *taskCounters) beginWait(counter *atomic.Int64, start time.Time) {
	c.waitMu.Lock()
	c.waiting, c.waitStart = counter, start
	c.waitMu.Unlock()
}

// endWait adds the wait that began at start to its counter.
func (c *taskCounters) endWait(end time.Time) {
	c.waitMu.Lock()
	if c.waiting != nil {
		c.waiting.Add(int64(end.Sub(c.waitStart)))
		c.waiting = nil
	}
	c.waitMu.Unlock()
}

// waits returns the idle and backpressured nanoseconds up to now,
// including a wait in progress.
func (c *taskCounters) waits(now time.Time) (idle, bp int64) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	idle, bp = c.idleNanos.Load(), c.bpNanos.Load()
	if c.waiting != nil {
		d := int64(now.Sub(c.waitStart))
		if c.waiting == &c.idleNanos {
			idle += d
		} else {
			bp += d
		}
	}
	return idle, bp
}
