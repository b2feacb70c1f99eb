package runtime

import (
	"sync"
	"time"
)

// processingTime is a task's ProcessingTimeService: callbacks become mails.
type processingTime struct {
	mailbox *Mailbox
	mu      sync.Mutex
	timers  map[*time.Timer]struct{}
	stopped bool
}

func (p *processingTime) Now() int64 { return time.Now().UnixMilli() }

func (p *processingTime) At(ts int64, fn func() error) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return func() {}
	}
	var tm *time.Timer
	var canceled bool // guarded by p.mu
	tm = time.AfterFunc(time.Until(time.UnixMilli(ts)), func() {
		p.mu.Lock()
		delete(p.timers, tm)
		p.mu.Unlock()
		_ = p.mailbox.Put(func() error {
			p.mu.Lock()
			c := canceled
			p.mu.Unlock()
			if c {
				return nil
			}
			return fn()
		})
	})
	p.timers[tm] = struct{}{}
	return func() {
		p.mu.Lock()
		canceled = true
		if tm.Stop() {
			delete(p.timers, tm)
		}
		p.mu.Unlock()
	}
}

func (p *processingTime) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	for tm := range p.timers {
		tm.Stop()
	}
	p.timers = nil
}
