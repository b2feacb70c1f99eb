package runtime

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/runtime/network"
)

// outputFlusher is a task's buffer timeout (Flink's
// execution.buffer-timeout, its RecordWriter's OutputFlusher): every
// period the partly filled buffers of the task's partitions are sent, so
// that a record waits in its buffer at most about that long.
//
// The period is kept by a timer of its own, not by the task goroutine:
// each tick marks a flush due and puts one mail that flushes, for a task
// that waits or runs record after record; and the task's writers flush
// at the next record they write while one is due, for a task that stays
// in one call for long, such as a source reader's poll that emits a
// batch through a slow chained operator (a flush only between polls
// held the batch's first records for the whole batch: after a restart,
// hundreds of milliseconds before the first record reached the next
// task).
type outputFlusher struct {
	period     time.Duration
	partitions []*network.ResultPartition
	mailbox    *Mailbox

	// due is set by a tick, cleared by the flush that follows it.
	due atomic.Bool
	// queued is set while a tick's flush mail waits in the mailbox: a
	// task busy in one long call gets one mail, not one per tick.
	queued atomic.Bool

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// startFlusher gives the task and its writers their flusher, once its
// partitions are made, and starts it (on the task goroutine, before the
// first record; close stops it).
func (t *Task) startFlusher() {
	t.flusher = newOutputFlusher(t.job.cfg.BufferTimeout, t.mailbox, t.partitions)
	for _, w := range t.writers {
		w.flusher = t.flusher
	}
	t.flusher.start()
}

// newOutputFlusher returns the flusher of a task's partitions, or nil
// when the buffer timeout does not flush by time (0: every record is
// flushed as it is written; negative: only full buffers are sent).
func newOutputFlusher(period time.Duration, mb *Mailbox, partitions []*network.ResultPartition) *outputFlusher {
	if period <= 0 || len(partitions) == 0 {
		return nil
	}
	return &outputFlusher{period: period, partitions: partitions, mailbox: mb}
}

// start arms the first tick (nil: none).
func (f *outputFlusher) start() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped || f.timer != nil {
		return
	}
	f.timer = time.AfterFunc(f.period, f.tick)
}

// tick marks a flush due, puts its mail unless one waits, and arms the
// next tick.
func (f *outputFlusher) tick() {
	f.due.Store(true)
	if !f.queued.Swap(true) {
		_ = f.mailbox.Put(func() error {
			f.queued.Store(false)
			f.flush()
			return nil
		})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.timer.Reset(f.period)
	}
}

// flushIfDue flushes when a tick asked for it (nil: never): the writers
// call it after each record, on the task goroutine.
func (f *outputFlusher) flushIfDue() {
	if f != nil && f.due.Load() {
		f.flush()
	}
}

// flush sends the partly filled buffers of every partition (on the task
// goroutine).
func (f *outputFlusher) flush() {
	f.due.Store(false)
	for _, p := range f.partitions {
		p.FlushAll()
	}
}

// flushIdle sends the partly filled buffers a task about to wait for
// input holds for channels in this process (nil: never, the buffer
// timeout is 0 or negative). The timeout bounds how long a record waits
// in a busy task's buffer; a task with nothing to read holds its buffers
// for no gain: downstream, the records of the last timeout's buffers
// would come in one burst, with the checkpoint's barrier behind them, and
// an exactly-once sink would write them all in its pre-commit (bench/kafka
// at 20 K records/s with 50-100 ms checkpoints and the 100 ms default: the
// barrier's way and the sink's flush took 15-124 ms at the median on a
// loaded machine, 3.5-7.4 ms with this). A busy task does not go idle, so
// its buffers still fill before they are sent. Buffers for channels in
// other processes wait for the timeout, as in Flink: a frame on a TCP
// connection per few records costs far more than an in-process hand-over
// (ResultPartition.FlushInProcess).
func (f *outputFlusher) flushIdle() {
	if f == nil {
		return
	}
	for _, p := range f.partitions {
		p.FlushInProcess()
	}
}

// stop ends the ticks (nil: none).
func (f *outputFlusher) stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.timer != nil {
		f.timer.Stop()
	}
}
