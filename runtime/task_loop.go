package runtime

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/operators"
	"github.com/sluicehq/sluice/source"
)

// run is the task goroutine.
func (t *Task) run() (err error) {
	t.counters.start.Store(time.Now().UnixNano())
	t.counters.status.Store(int32(TaskRunning))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("task %s: panic: %v\n%s", t.name, r, debug.Stack())
		}
		if cerr := t.close(); err == nil {
			err = cerr
		}
		t.counters.end.Store(time.Now().UnixNano())
		switch {
		case err == nil:
			t.counters.status.Store(int32(TaskFinished))
		case t.ctx.Err() != nil:
			t.counters.status.Store(int32(TaskCanceled))
		default:
			t.counters.status.Store(int32(TaskFailed))
		}
	}()
	for i := len(t.ops) - 1; i >= 0; i-- {
		if err := t.ops[i].Open(t.opCtxs[i]); err != nil {
			return operators.Wrap(t.opCtxs[i], err)
		}
		t.opened = append(t.opened, t.ops[i])
	}
	if err := t.replayChannelState(); err != nil {
		return err
	}
	t.startFlusher()
	for !t.finished {
		if t.mailbox.HasMail() {
			if err := t.runMails(); err != nil {
				return err
			}
			continue
		}
		if err := t.ctx.Err(); err != nil {
			return err
		}
		if !t.outputsAvailable() {
			t.wait(nil, &t.counters.bpNanos)
			continue
		}
		if t.src != nil {
			if t.srcDone || t.stoppedAt != 0 {
				// Input ended: wait for the coordinator to allow finishing;
				// or stopped at a savepoint: wait for the stop, or its abort.
				t.wait(nil, &t.counters.idleNanos)
				continue
			}
			if err := t.pollSource(); err != nil {
				return err
			}
			continue
		}
		progress, err := t.processInput()
		if err != nil {
			return err
		}
		if !progress && !t.finished {
			t.flusher.flushIdle()
			t.wait(nil, &t.counters.idleNanos)
		}
	}
	return nil
}

func (t *Task) runMails() error {
	mails := t.mailbox.take()
	defer t.mailbox.recycle(mails)
	for _, m := range mails {
		if err := m(); err != nil {
			if errors.Is(err, errStopTask) {
				t.finished = true // stop-with-savepoint: exit without ending the partitions
				return nil
			}
			return err
		}
		if t.finished {
			return nil
		}
	}
	return nil
}

// wait blocks until something may have changed: a mail, input, a free
// output buffer, a source's data, or cancellation. It adds the time spent
// to counter (readable by metrics while the wait lasts).
func (t *Task) wait(extra <-chan struct{}, counter *atomic.Int64) {
	t.counters.beginWait(counter, time.Now())
	select {
	case <-t.wake:
	case <-extra:
	case <-t.ctx.Done():
	}
	t.counters.endWait(time.Now())
}

// outputsAvailable reports whether the chain can take a record: every
// output has a buffer and no operator refuses input (an async operator at
// capacity). A task that cannot waits for a mail or a buffer.
func (t *Task) outputsAvailable() bool {
	for _, p := range t.partitions {
		if !p.Available() {
			return false
		}
	}
	for _, g := range t.gated {
		if !g.InputAvailable() {
			return false
		}
	}
	return true
}

// pollSource polls the source reader until it has nothing, a mail is
// waiting, or an output runs out of buffers.
func (t *Task) pollSource() error {
	for i := 0; i < 4096; i++ {
		st, err := t.src.PollNext()
		if err != nil {
			return operators.Wrap(t.opCtxs0(), err)
		}
		switch st {
		case source.MoreAvailable:
			if t.mailbox.HasMail() || !t.outputsAvailable() {
				return nil
			}
		case source.NothingAvailable:
			t.flusher.flushIdle()
			t.wait(t.src.Available(), &t.counters.idleNanos)
			return nil
		case source.EndOfInput:
			t.srcDone = true
			return t.endOfInput()
		}
	}
	return nil
}

// shouldYield tells a source reader emitting a batch in one poll to
// return after the record it emitted (source.Yielder): the task has mail
// or an output without a free buffer, as pollSource checks between polls.
func (t *Task) shouldYield() bool {
	return t.mailbox.HasMail() || !t.outputsAvailable()
}

// opCtxs0 is the context of the source node, for naming its errors.
func (t *Task) opCtxs0() *operators.Context {
	return t.operatorContext(t.vertex.Head())
}

// processInput reads records of the current buffer, or polls the gates for
// the next buffer or event. It reports whether it made progress.
func (t *Task) processInput() (bool, error) {
	if t.cp != nil && t.cur != nil {
		// An unaligned barrier does not wait for the rest of the buffer.
		if ok, err := t.pollPriority(); ok || err != nil {
			return true, err
		}
	}
	if ci := t.cur; ci != nil {
		n := int64(0)
		for {
			rec, ok := ci.reader.Next()
			if !ok {
				t.cur = nil
				if rerr := ci.reader.Err(); rerr != nil {
					t.recsIn += n
					return true, fmt.Errorf("%w on edge %q -> %q, subtask %d, channel %d, after record #%d of that channel: %w",
						ErrDecode, ci.gate.edge.From.Name, ci.gate.edge.To.Name, t.subtask, ci.index, ci.position, rerr)
				}
				break
			}
			ci.position++
			n++
			derr, err := ci.decoder.decode(rec)
			if derr != nil {
				t.recsIn += n
				return true, fmt.Errorf("%w on edge %q -> %q, subtask %d, channel %d, record #%d of that channel: %w",
					ErrDecode, ci.gate.edge.From.Name, ci.gate.edge.To.Name, t.subtask, ci.index, ci.position, derr)
			}
			if err != nil {
				return true, err
			}
			if t.mailbox.HasMail() || !t.outputsAvailable() || t.priorityPending() {
				break
			}
		}
		t.recsIn += n
		t.counters.recordsIn.Store(t.recsIn)
		return true, nil
	}
	for range t.gates {
		gi := t.gates[t.nextGate]
		if t.nextGate++; t.nextGate == len(t.gates) {
			t.nextGate = 0
		}
		if t.cp != nil {
			// Polling a buffer and recording it in a live unaligned
			// snapshot's channel state are one step for finishEarly.
			t.cp.recMu.Lock()
		}
		boe, ok := gi.gate.Poll()
		if t.cp != nil && (!ok || boe.Buffer == nil) {
			t.cp.recMu.Unlock()
		}
		if !ok {
			if err := gi.gate.Err(); err != nil {
				// A remote channel failed (its connection broke): the
				// task fails, the attempt restarts.
				return true, fmt.Errorf("input %s: %w", gi.edge.From.Name, err)
			}
			continue
		}
		ci := gi.channels[boe.Channel]
		if boe.Buffer != nil {
			data := boe.Buffer.Bytes()
			t.counters.bytesIn.Add(int64(len(data)))
			if t.cp != nil {
				err := t.cp.onBuffer(gi.offset+boe.Channel, data)
				t.cp.recMu.Unlock()
				if err != nil {
					return true, err
				}
			}
			ci.reader.Feed(boe.Buffer)
			t.cur = ci
			return true, nil
		}
		return true, t.handleEvent(ci, &boe)
	}
	return false, nil
}

// priorityPending reports whether a gate may hold a priority event.
func (t *Task) priorityPending() bool {
	if t.cp == nil {
		return false
	}
	for _, gi := range t.gates {
		if gi.gate.HasPriority() {
			return true
		}
	}
	return false
}

// pollPriority handles the next priority event of any gate, in the middle
// of a buffer: the reader of the current channel keeps its place.
func (t *Task) pollPriority() (bool, error) {
	for _, gi := range t.gates {
		if !gi.gate.HasPriority() {
			continue
		}
		if boe, ok := gi.gate.PollPriority(); ok {
			return true, t.handleEvent(gi.channels[boe.Channel], &boe)
		}
	}
	return false, nil
}
