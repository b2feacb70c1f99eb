package network

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/runtime/network/event"
)

// InputGate is the consuming side of a network exchange: one input channel
// per producing subtask. Each channel owns ExclusiveBuffersPerChannel
// buffers; the gate shares FloatingBuffersPerGate floating buffers among
// them. Poll, Block, Unblock, UnblockAll and PromoteEvent belong to the
// consuming Task and must be called from one goroutine at a time;
// Buffer.Recycle, Finished, Stats and Release may be called from any
// goroutine. Connect must happen before any of them.
type InputGate struct {
	name     string
	cfg      Config
	wake     chan struct{}
	channels []*inputChannel
	finished atomic.Int32 // channels that delivered EndOfPartition

	mu             sync.Mutex
	ready          deque[int]   // channels with data, round-robin order
	prioReady      deque[int]   // channels with a priority event
	prioPending    atomic.Int32 // entries in prioReady, for HasPriority
	floatFree      []*Buffer
	floatAllocated int
	lentOut        int        // of floatAllocated, borrowed from cfg.Pool
	floatWaiters   deque[int] // channels with backlog and no credit, FIFO
	released       bool
	failed         bool                  // a channel failed: Poll returns nothing
	err            atomic.Pointer[error] // why, set once with failed

	onPriority atomic.Pointer[func(ch int, ev event.Event, overtaken [][]byte)]
}

// OnPriorityEvent sets fn to run each time a priority event arrives over
// the exchange in channel ch, on the goroutine that delivers it (a
// producer's, or a connection's), with the copies of the data buffers it
// overtook there (which Poll will return with it, as Overtaken, and then
// the buffers themselves). From that moment, Poll returns the event before
// any data the channel still holds or receives. fn must not block or call
// into the network; it may run before the event can be polled.
func (g *InputGate) OnPriorityEvent(fn func(ch int, ev event.Event, overtaken [][]byte)) {
	if fn == nil {
		g.onPriority.Store(nil)
		return
	}
	g.onPriority.Store(&fn)
}

// inputChannel is one channel of a gate: the consuming end of one
// subpartition. It knows its producer only as an upstream, the messages it
// sends it (credit.go), and hears from it only through its downstream
// methods, so the producer may be in this process or, later, on another
// host.
type inputChannel struct {
	g     *InputGate
	index int
	up    upstream // set once by Connect, before the job runs

	mu            sync.Mutex
	received      deque[entry] // delivered, not yet polled
	prio          deque[entry] // priority events, FIFO among themselves
	queuedData    int          // data buffers in received
	exclFree      []*Buffer
	exclAllocated int
	floating      []*Buffer    // taken for the backlog and announced, not yet filled
	backlog       atomic.Int64 // the producer's backlog, as its last message said; written by its messages only
	released      bool
	buffersIn     int64 // data buffers delivered, and their bytes
	bytesIn       int64

	// Guarded by g.mu.
	inReady      atomic.Bool // written under g.mu; read without it by notifyData
	inPrio       bool
	blocked      bool
	waitingFloat atomic.Bool // written under g.mu; read without it by requestFloatingLocked

	finished atomic.Bool // EndOfPartition polled
}

// NewInputGate returns a gate with numChannels channels. wake (may be nil)
// gets a non-blocking send when a channel with nothing to poll gets data or
// a priority event arrives. It panics on an invalid cfg or a negative
// numChannels.
func NewInputGate(name string, numChannels int, cfg Config, wake chan struct{}) *InputGate {
	cfg = mustConfig(cfg, "network.NewInputGate "+name)
	if numChannels < 0 {
		panic(fmt.Sprintf("network.NewInputGate %s: %d channels", name, numChannels))
	}
	g := &InputGate{
		name:      name,
		cfg:       cfg,
		wake:      wake,
		channels:  make([]*inputChannel, numChannels),
		floatFree: make([]*Buffer, 0, cfg.FloatingBuffersPerGate),
	}
	for i := range g.channels {
		g.channels[i] = &inputChannel{
			g:        g,
			index:    i,
			exclFree: make([]*Buffer, 0, cfg.ExclusiveBuffersPerChannel),
		}
	}
	return g
}

// Name returns the name given to NewInputGate.
func (g *InputGate) Name() string { return g.name }

// NumChannels returns the number of input channels.
func (g *InputGate) NumChannels() int { return len(g.channels) }

// notifyData puts c in the round-robin queue of channels with data, unless
// it is there already or blocked, and wakes the task.
func (g *InputGate) notifyData(c *inputChannel) {
	if c.inReady.Load() {
		return // a Poll to come will find what was queued before this call
	}
	g.mu.Lock()
	push := g.readyLocked(c)
	g.mu.Unlock()
	if push {
		notify(g.wake)
	}
}

// readyLocked is notifyData's part under g.mu; it reports whether c was
// queued (then the task must be woken).
func (g *InputGate) readyLocked(c *inputChannel) bool {
	if c.inReady.Load() || c.blocked || g.released || g.failed {
		return false
	}
	c.inReady.Store(true)
	g.ready.pushBack(c.index)
	return true
}

// notifyPriority puts c in the queue of channels with a priority event and
// wakes the task.
func (g *InputGate) notifyPriority(c *inputChannel) {
	g.mu.Lock()
	push := g.prioLocked(c)
	g.mu.Unlock()
	if push {
		notify(g.wake)
	}
}

// prioLocked is notifyPriority's part under g.mu.
func (g *InputGate) prioLocked(c *inputChannel) bool {
	if c.inPrio || g.released || g.failed {
		return false
	}
	c.inPrio = true
	g.prioReady.pushBack(c.index)
	g.prioPending.Add(1)
	return true
}

// testHookPicked, set by tests only, runs after Poll picked a channel and
// before it takes the channel's lock: where a producer may race it.
var testHookPicked func()

// HasPriority reports, cheaply, whether a priority event may be waiting:
// a task checks it between records so that an unaligned barrier does not
// wait for the rest of the buffer being read.
func (g *InputGate) HasPriority() bool { return g.prioPending.Load() > 0 }

// PollPriority returns the next priority event, or false when there is
// none; unlike Poll it never returns data.
func (g *InputGate) PollPriority() (BufferOrEvent, bool) {
	for {
		g.mu.Lock()
		i, ok := g.prioReady.popFront()
		if !ok || g.released || g.failed {
			g.mu.Unlock()
			return BufferOrEvent{}, false
		}
		g.prioPending.Add(-1)
		c := g.channels[i]
		c.inPrio = false
		g.mu.Unlock()
		c.mu.Lock()
		e, ok := c.prio.popFront()
		if ok && c.prio.len() > 0 {
			g.notifyPriority(c)
		}
		c.mu.Unlock()
		if ok {
			return BufferOrEvent{Event: e.ev, Channel: c.index, Priority: true, Overtaken: e.overtaken}, true
		}
	}
}

// Poll returns the next buffer or event without blocking, and false when
// there is nothing to poll. Priority events come before anything else;
// otherwise the channels that have data and are not blocked take turns.
// EndOfPartition is delivered once per channel.
func (g *InputGate) Poll() (BufferOrEvent, bool) {
	for {
		g.mu.Lock()
		if g.released || g.failed {
			g.mu.Unlock()
			return BufferOrEvent{}, false
		}
		var c *inputChannel
		prio := false
		if i, ok := g.prioReady.popFront(); ok {
			g.prioPending.Add(-1)
			c, prio = g.channels[i], true
			c.inPrio = false
		} else {
			for {
				i, ok := g.ready.popFront()
				if !ok {
					break
				}
				cand := g.channels[i]
				cand.inReady.Store(false)
				if !cand.blocked {
					c = cand
					break
				}
			}
		}
		if c == nil {
			g.mu.Unlock()
			return BufferOrEvent{}, false
		}
		var e entry
		var ok, moreData, morePrio bool
		if testHookPicked == nil && c.mu.TryLock() {
			// Both locks at once (TryLock never waits, so the order
			// c.mu before g.mu elsewhere is kept): the channel is queued
			// again in this critical section.
			e, ok, prio, moreData, morePrio = c.popLocked(prio)
			wake := moreData && g.readyLocked(c)
			wake = morePrio && g.prioLocked(c) || wake
			c.mu.Unlock()
			g.mu.Unlock()
			if wake {
				notify(g.wake)
			}
		} else {
			g.mu.Unlock()
			if testHookPicked != nil {
				testHookPicked()
			}
			c.mu.Lock()
			e, ok, prio, moreData, morePrio = c.popLocked(prio)
			if moreData {
				g.notifyData(c)
			}
			if morePrio {
				g.notifyPriority(c)
			}
			c.mu.Unlock()
		}
		if !ok {
			continue // a stale entry: the queue was drained meanwhile
		}
		boe := BufferOrEvent{Buffer: e.buf, Event: e.ev, Channel: c.index, Priority: prio, Overtaken: e.overtaken}
		if _, eop := e.ev.(event.EndOfPartition); eop && c.finished.CompareAndSwap(false, true) {
			g.finished.Add(1)
		}
		return boe, true
	}
}

// popLocked takes the next entry of c for Poll, which picked c for a
// priority event (prio) or for data. A priority event that arrived after c
// was picked for data goes first, since the data it overtook (and carries
// copies of) must not be delivered ahead of it. It reports whether c must
// be queued again for data (it was picked for data and has more) or for a
// priority event. c.mu is held.
func (c *inputChannel) popLocked(prio bool) (e entry, ok, isPrio, moreData, morePrio bool) {
	pickedForData := !prio
	if prio || c.prio.len() > 0 {
		e, ok = c.prio.popFront()
		return e, ok, true, pickedForData && c.received.len() > 0, c.prio.len() > 0
	}
	if e, ok = c.received.popFront(); ok && e.buf != nil {
		c.queuedData--
	}
	return e, ok, false, c.received.len() > 0, false
}

// Block makes Poll skip channel ch (for aligned checkpoints) until it is
// unblocked. Priority events on ch are still delivered.
func (g *InputGate) Block(ch int) {
	g.mu.Lock()
	g.channels[ch].blocked = true
	g.mu.Unlock()
}

// Unblock lets Poll deliver channel ch again.
func (g *InputGate) Unblock(ch int) {
	g.mu.Lock()
	g.unblockLocked(g.channels[ch])
	g.mu.Unlock()
}

// UnblockAll unblocks every channel.
func (g *InputGate) UnblockAll() {
	g.mu.Lock()
	for _, c := range g.channels {
		g.unblockLocked(c)
	}
	g.mu.Unlock()
}

// unblockLocked clears c's block and queues it for Poll; Poll skips it if
// it turns out to have nothing. g.mu is held.
func (g *InputGate) unblockLocked(c *inputChannel) {
	if !c.blocked {
		return
	}
	c.blocked = false
	if !c.inReady.Load() && c.up != nil {
		c.inReady.Store(true)
		g.ready.pushBack(c.index)
	}
}

// PromoteEvent finds the first event received on channel ch but not yet
// polled for which match returns true, and moves it ahead of everything
// else as a priority event: the next Poll delivers it, with Priority set
// and Overtaken nil. It returns copies of the data buffers the event
// overtook, in order (they are still delivered after it), or found=false.
// match runs under the channel's lock and must not call into the network.
func (g *InputGate) PromoteEvent(ch int, match func(ev event.Event) bool) (overtaken [][]byte, found bool) {
	c := g.channels[ch]
	if c.up == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil, false
	}
	for i := 0; i < c.received.len(); i++ {
		e := c.received.at(i)
		if e.buf != nil || !match(e.ev) {
			continue
		}
		for j := 0; j < i; j++ {
			if b := c.received.at(j).buf; b != nil {
				overtaken = append(overtaken, append([]byte(nil), b.Bytes()...))
			}
		}
		moved := c.received.removeAt(i)
		moved.prio = true
		c.addPriorityLocked(moved, false)
		g.notifyPriority(c)
		return overtaken, true
	}
	return nil, false
}

// Err returns why the gate failed, or nil: a remote channel's connection
// broke or could not be made, its producer reported an error (partition
// not found, released, a refused request), or the transport was closed.
// The error names the gate, the channel, the partition and the remote
// address, and wraps one of ErrConnectionLost, ErrTransportClosed,
// ErrPartitionNotFound, ErrReleased, ErrWiring, ErrProducerFailed or
// ErrProtocol. Once it is set, Poll and PollPriority return nothing and
// the gate's wake channel has been signalled: the consuming task must fail
// with it. A channel never resumes after a failure. In-process channels
// never fail. Safe from any goroutine.
func (g *InputGate) Err() error {
	if p := g.err.Load(); p != nil {
		return *p
	}
	return nil
}

// fail fails the gate because channel c failed with err (the first failure
// wins), and wakes the task. Data still queued is not delivered.
func (g *InputGate) fail(c *inputChannel, err error) {
	err = fmt.Errorf("gate %s channel %d: %w", g.name, c.index, err)
	g.mu.Lock()
	if g.released || g.failed {
		g.mu.Unlock()
		return
	}
	g.failed = true
	g.err.Store(&err)
	g.ready.clear()
	g.prioReady.clear()
	g.prioPending.Store(0)
	for _, ch := range g.channels {
		ch.inReady.Store(false)
		ch.inPrio = false
	}
	g.mu.Unlock()
	notify(g.wake)
}

// Finished reports whether every channel has delivered EndOfPartition.
func (g *InputGate) Finished() bool { return int(g.finished.Load()) == len(g.channels) }

// Release fails the gate: queued buffers and events are dropped, Poll
// returns nothing, and each producer is told to cancel: it drops what it
// has queued and sends from now on, so that it is never stuck waiting for
// credit. Buffers the task still
// holds may be recycled afterwards. It may be called from any goroutine.
func (g *InputGate) Release() {
	g.mu.Lock()
	if g.released {
		g.mu.Unlock()
		return
	}
	g.released = true
	g.ready.clear()
	g.prioReady.clear()
	g.prioPending.Store(0)
	for g.floatWaiters.len() > 0 {
		i, _ := g.floatWaiters.popFront()
		g.channels[i].waitingFloat.Store(false)
	}
	g.mu.Unlock()
	for _, c := range g.channels {
		if c.up == nil {
			continue
		}
		c.mu.Lock()
		c.released = true
		c.received.clear()
		c.prio.clear()
		c.queuedData = 0
		spare := c.floating
		c.floating = nil
		c.mu.Unlock()
		g.mu.Lock()
		g.floatFree = append(g.floatFree, spare...)
		g.mu.Unlock()
		c.up.cancel()
	}
	g.endLoans()
}

// endLoans gives the buffers the gate borrowed back to the process's
// pool once it is released: the free ones with their memory, those still
// out (polled and not recycled, or dropped with the channels' queues)
// without, for the pool to allocate anew; their recycling after this is a
// no-op (recycleFloating).
func (g *InputGate) endLoans() {
	g.mu.Lock()
	var segs [][]byte
	kept := g.floatFree[:0]
	for _, b := range g.floatFree {
		if b.lent {
			segs = append(segs, b.data)
			b.data = nil
			continue
		}
		kept = append(kept, b)
	}
	clear(g.floatFree[len(kept):])
	g.floatFree = kept
	out := g.lentOut - len(segs)
	g.floatAllocated -= g.lentOut
	g.lentOut = 0
	g.mu.Unlock()
	for _, seg := range segs {
		g.cfg.Pool.giveBack(seg)
	}
	for range out {
		g.cfg.Pool.giveBack(nil)
	}
}
