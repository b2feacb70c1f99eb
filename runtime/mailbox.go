package runtime

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ErrMailboxClosed is returned by Put once the task has exited.
var ErrMailboxClosed = errors.New("runtime: mailbox closed")

// Mail is an action run on the task goroutine. An error fails the task.
type Mail func() error

// Mailbox is a Task's queue of actions from other goroutines: urgent mails
// (unaligned checkpoint triggers) run before normal ones. Putting a mail
// wakes the task.
type Mailbox struct {
	mu      sync.Mutex
	urgent  []Mail
	normal  []Mail
	spare   []Mail
	closed  bool
	pending atomic.Bool
	wake    chan struct{}
}

func newMailbox(wake chan struct{}) *Mailbox {
	return &Mailbox{wake: wake}
}

// Put queues a normal mail.
func (m *Mailbox) Put(mail Mail) error { return m.put(mail, false) }

// PutUrgent queues a mail ahead of every normal mail.
func (m *Mailbox) PutUrgent(mail Mail) error { return m.put(mail, true) }

func (m *Mailbox) put(mail Mail, urgent bool) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrMailboxClosed
	}
	if urgent {
		m.urgent = append(m.urgent, mail)
	} else {
		m.normal = append(m.normal, mail)
	}
	m.pending.Store(true)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
	return nil
}

// HasMail is a cheap check the task makes between records.
func (m *Mailbox) HasMail() bool { return m.pending.Load() }

// take removes and returns the queued mails, urgent first.
func (m *Mailbox) take() []Mail {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := append(m.spare[:0], m.urgent...)
	out = append(out, m.normal...)
	clear(m.urgent)
	clear(m.normal)
	m.urgent, m.normal = m.urgent[:0], m.normal[:0]
	m.pending.Store(false)
	m.spare = nil
	return out
}

// recycle hands the slice returned by take back for reuse.
func (m *Mailbox) recycle(s []Mail) {
	clear(s)
	m.mu.Lock()
	m.spare = s[:0]
	m.mu.Unlock()
}

func (m *Mailbox) close() {
	m.mu.Lock()
	m.closed = true
	m.urgent, m.normal = nil, nil
	m.mu.Unlock()
}
