package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// inbox hands items to one goroutine (run) in the order they were put.
// It never blocks the putter.
type inbox struct {
	mu     sync.Mutex
	items  []func()
	wake   chan struct{}
	closed bool
}

func newInbox() *inbox { return &inbox{wake: make(chan struct{}, 1)} }

func (b *inbox) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// put queues f; false once the inbox is closed.
func (b *inbox) put(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.items = append(b.items, f)
	b.signal()
	return true
}

// close queues last (when not nil) as the final item: run returns after it.
func (b *inbox) close(last func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if last != nil {
		b.items = append(b.items, last)
	}
	b.closed = true
	b.signal()
}

// run calls the items in order until the inbox is closed and drained.
func (b *inbox) run() {
	for range b.wake {
		for {
			b.mu.Lock()
			items, closed := b.items, b.closed
			b.items = nil
			b.mu.Unlock()
			if len(items) == 0 {
				if closed {
					return
				}
				break
			}
			for i, f := range items {
				f()
				items[i] = nil
			}
		}
	}
}

// stream is what a link needs of a session's connection, either end.
type stream interface {
	SendMsg(m any) error
	RecvMsg(m any) error
}

// link is one side of a session: the queue of encoded frames to send and
// its sender, the receiver that hands frames on in order, and the
// heartbeats. It ends once, with a cause; onEnd runs then, under the same
// lock as the hand-over of received frames, so the report of the end
// comes after every frame handed on.
type link struct {
	log      *slog.Logger
	peer     string // "worker w1", "coordinator 10.0.0.1:6123"
	epoch    int64  // the session's leader epoch
	interval time.Duration
	timeout  time.Duration
	paused   *atomic.Bool // test hook: send no heartbeats
	in       *inbox       // where received frames go
	onEnd    func(cause error)

	mu    sync.Mutex
	queue []encoded
	wake  chan struct{}
	ended bool
	cause error
	done  chan struct{}

	lastRecv atomic.Int64 // unix nanoseconds
	beats    atomic.Int64 // heartbeats received
}

func newLink(log *slog.Logger, peer string, epoch int64, interval, timeout time.Duration, paused *atomic.Bool, in *inbox, onEnd func(error)) *link {
	l := &link{
		log: log, peer: peer, epoch: epoch, interval: interval, timeout: timeout,
		paused: paused, in: in, onEnd: onEnd,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	l.lastRecv.Store(time.Now().UnixNano())
	return l
}

// send encodes f, with the session's epoch, on the caller's goroutine and
// queues its chunks.
func (l *link) send(f *frame) error {
	f.Epoch = l.epoch
	b, err := encode(f)
	if err != nil {
		return err
	}
	if len(b) > maxFrame {
		return fmt.Errorf("control: %s frame to %s: %w: %d bytes, the limit is %d", f.kind(), l.peer, errFrameTooLarge, len(b), maxFrame)
	}
	return l.enqueue(chunks(b)...)
}

func (l *link) enqueue(bs ...encoded) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return fmt.Errorf("control: session with %s ended: %w", l.peer, l.cause)
	}
	l.queue = append(l.queue, bs...)
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return nil
}

// push hands a received frame's work to the inbox, unless the link ended.
func (l *link) push(f func()) { l.locked(func() { l.in.put(f) }) }

// locked runs f under the link's lock, unless the link ended: what f
// queues comes before the report of the end.
func (l *link) locked(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	f()
	return true
}

// end ends the link with cause; false when it had ended already.
func (l *link) end(cause error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	l.ended, l.cause, l.queue = true, cause, nil
	close(l.done)
	if l.onEnd != nil {
		l.onEnd(cause)
	}
	return true
}

// err is the cause the link ended with, nil while it runs.
func (l *link) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

// runSender sends the queue until the link ends. Frames still queued then
// are dropped.
func (l *link) runSender(s stream) {
	for {
		select {
		case <-l.done:
			return
		case <-l.wake:
		}
		l.mu.Lock()
		batch := l.queue
		l.queue = nil
		l.mu.Unlock()
		for _, b := range batch {
			select {
			case <-l.done:
				return
			default:
			}
			if err := s.SendMsg(b); err != nil {
				l.end(&endCause{kind: ErrDisconnected, peer: l.peer, words: inWords(err)})
				return
			}
		}
	}
}

// runReceiver reads frames until the stream fails: heartbeats (and every
// frame) renew the peer's liveness; frames of another epoch and
// inconsistent ones are dropped; the rest go to handle, in order.
func (l *link) runReceiver(s stream, handle func(*frame)) {
	for {
		f, err := readFrame(s, maxFrame)
		if err != nil {
			l.end(&endCause{kind: ErrDisconnected, peer: l.peer, words: inWords(err)})
			return
		}
		l.lastRecv.Store(time.Now().UnixNano())
		switch {
		case f.End != "":
			l.end(&endCause{kind: ErrDisconnected, peer: l.peer, words: f.End})
			return
		case f.Heartbeat:
			l.beats.Add(1)
		case f.Epoch != l.epoch:
			l.log.Debug("control: stale message dropped: another leader epoch",
				"from", l.peer, "message", f.kind(), "epoch", f.Epoch, "session_epoch", l.epoch, "job", f.JobID, "attempt", f.Attempt)
		case !f.consistent():
			job, attempt, _ := f.payloadRef()
			l.log.Warn("control: malformed message dropped: its job or attempt is not its header's",
				"from", l.peer, "message", f.kind(), "job", job, "attempt", attempt, "header_job", f.JobID, "header_attempt", f.Attempt)
		default:
			handle(f)
		}
	}
}

// endCause is why a session ended: its kind (ErrDisconnected,
// ErrHeartbeatTimeout, ErrReplaced, ErrClosed), the peer, and the cause
// in words.
type endCause struct {
	kind        error
	peer, words string
}

func (e *endCause) Error() string { return e.kind.Error() + ": " + e.peer + ": " + e.words }
func (e *endCause) Unwrap() error { return e.kind }

// Reason is why a session ended, in the words an operator reads in a log
// line ("connection closed", "nothing from worker w2 for 2.1s
// (heartbeat.timeout 2s)"): the cause of WorkerLost and Client.Lost
// without its kind and peer.
func Reason(err error) string {
	var e *endCause
	if errors.As(err, &e) {
		return e.words
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// inWords says why a connection ended as an operator reads it:
// "connection closed" for a peer that went away (its process died, it
// closed the connection, the connection broke).
func inWords(err error) string {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.Canceled),
		errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection closed"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, errMessageTooLarge), errors.Is(err, errFrameTooLarge), errors.Is(err, errMalformed):
		return err.Error()
	}
	return err.Error()
}

// runMonitor sends a heartbeat every interval and ends the link when
// nothing arrived for the timeout.
func (l *link) runMonitor(heartbeat func() *frame) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		if silent := time.Since(time.Unix(0, l.lastRecv.Load())); silent > l.timeout {
			l.end(&endCause{kind: ErrHeartbeatTimeout, peer: l.peer,
				words: fmt.Sprintf("nothing from %s for %s (heartbeat.timeout %s)", l.peer, silent.Round(time.Millisecond), l.timeout)})
			return
		}
		if !l.paused.Load() {
			_ = l.send(heartbeat()) // fails only once the link ended
		}
	}
}
