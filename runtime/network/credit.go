package network

import (
	"fmt"

	"github.com/sluicehq/sluice/runtime/network/event"
)

// The credit protocol between a subpartition (the producer's end of a
// channel) and its input channel (the consumer's end), as messages. Each
// end knows the other only through one of the two interfaces below; in
// process each end implements the interface the other one talks to, and a
// remote exchange will put a connection in between that carries the same
// messages (the events in the wire format of package event).
//
// Producer to consumer (downstream), in queue order:
//   - a data buffer, against one credit, with the backlog behind it;
//   - an event, without credit (a priority event was put at the head of
//     the queue), with the backlog;
//   - a backlog announcement, when data is queued, there is no credit for
//     it and the consumer believes nothing is queued, so that it can give
//     floating buffers (the exclusive ones may be 0).
//
// Consumer to producer (upstream):
//   - add credit: n more buffers are ready to receive data: its exclusive
//     buffers when connecting and each time one is recycled, and the
//     floating buffers it takes for the announced backlog;
//   - cancel: the consumer went away; drop what is queued and what comes.
//
// The producer never sends a data buffer without credit, and the consumer
// only announces credit for buffers it has set aside, so a delivered buffer
// always has a place to go and memory stays within the pools.

// downstream is the consumer as a subpartition sees it. Its methods are
// called under the subpartition's lock, so in order; they must not block
// and may send upstream messages.
type downstream interface {
	// deliverBuffer hands over a data buffer's bytes against one credit;
	// data is copied before it returns. backlog is the number of data
	// buffers still queued behind it.
	deliverBuffer(data []byte, backlog int)
	// deliverEvent hands over an event, which needs no credit. A priority
	// event overtakes what the consumer has received and not yet polled.
	deliverEvent(ev event.Event, priority bool, backlog int)
	// announceBacklog tells the consumer that backlog data buffers are
	// queued and the producer has no credit left for them.
	announceBacklog(backlog int)
}

// upstream is the producer as an input channel sees it. Its methods never
// block and may be called from any goroutine, also from within a
// downstream call.
type upstream interface {
	// addCredit announces n more buffers ready to receive data.
	addCredit(n int)
	// cancel tells the producer that nobody will read the channel again.
	cancel()
}

// Connect wires subpartition sub of p to channel ch of g, in process: the
// channel's messages go to the subpartition and the other way round, and
// the channel announces its exclusive buffers as its first credit. It is
// wiring done before the job starts (before any goroutine uses p or g). It
// panics on an index out of range, a channel or subpartition connected
// twice, or buffer sizes that differ between the two sides.
func Connect(p *ResultPartition, sub int, g *InputGate, ch int) {
	if sub < 0 || sub >= len(p.subs) || ch < 0 || ch >= len(g.channels) {
		panic(fmt.Sprintf("network.Connect: %s[%d] -> %s[%d] out of range (%d subpartitions, %d channels)",
			p.name, sub, g.name, ch, len(p.subs), len(g.channels)))
	}
	if p.cfg.BufferSize != g.cfg.BufferSize {
		panic(fmt.Sprintf("network.Connect: %s has buffer size %d but %s has %d",
			p.name, p.cfg.BufferSize, g.name, g.cfg.BufferSize))
	}
	sp, c := p.subs[sub], g.channels[ch]
	if sp.down != nil || c.up != nil {
		panic(fmt.Sprintf("network.Connect: %s[%d] -> %s[%d]: already connected", p.name, sub, g.name, ch))
	}
	// The channel first, so that it can answer what the subpartition sends
	// at once (data and events written before the wiring): its credit
	// waits in the subpartition's inbox until then.
	c.attach(sp)
	sp.local = true
	sp.attach(c)
}

// attach sets where sp's messages go: its channel in process (Connect), a
// connection to it for a remote exchange.
func (sp *subpartition) attach(down downstream) {
	sp.mu.Lock()
	sp.down = down
	sp.transferLocked() // events written before the wiring
	sp.unlock()
}

// attachRemote sets down as where sp's messages go, unless sp has a
// channel already (in process or remote): a subpartition is read once.
// Unlike attach it may run while the producer writes.
func (sp *subpartition) attachRemote(down downstream) bool {
	sp.mu.Lock()
	if sp.down != nil {
		sp.unlock()
		return false
	}
	sp.down = down
	sp.transferLocked()
	sp.unlock()
	return true
}

// attach sets where c's messages go, its subpartition in process (Connect)
// or a connection to it, and announces the exclusive buffers as the first
// credit.
func (c *inputChannel) attach(up upstream) {
	c.up = up
	if n := c.g.cfg.ExclusiveBuffersPerChannel; n > 0 {
		up.addCredit(n)
	}
}

// The producer's end: its upstream methods, and sending.

// addCredit is the consumer's add-credit message. It is put in the inbox;
// if data is waiting for it, it is applied at once unless another
// goroutine holds the lock, which then applies it before letting go.
// Otherwise it stays there until the producer needs it.
func (sp *subpartition) addCredit(n int) {
	sp.pendingCredit.Add(int64(n))
	if sp.stalled.Load() {
		sp.poke()
	}
}

// cancel is the consumer's cancel message, delivered like addCredit.
func (sp *subpartition) cancel() {
	sp.cancelReq.Store(true)
	sp.poke()
}

func (sp *subpartition) poke() {
	if sp.mu.TryLock() {
		sp.transferLocked()
		sp.unlock()
	}
}

// unlock releases sp.mu after applying the inbox: a message that arrived
// while the lock was held (its sender's TryLock failed or, stalled being
// false, was not tried) is applied by the holder, here, so no data waits
// for credit that has come.
func (sp *subpartition) unlock() {
	for {
		sp.mu.Unlock()
		if !(sp.stalled.Load() && sp.pendingCredit.Load() != 0) && !sp.cancelReq.Load() {
			return
		}
		if !sp.mu.TryLock() {
			return // the new holder applies it
		}
		sp.transferLocked()
	}
}

// transferLocked applies the inbox and sends what it can from the head of
// the queue: events at once, data buffers while there is credit, each
// buffer going back to the output pool once its bytes are delivered. With
// data left and no credit it announces the backlog, unless the last message
// told the consumer of a backlog already: a consumer that knows of data it
// has no credit for is waiting for a buffer, and every buffer sent tells it
// the backlog anew, so one announcement per stall is enough. sp.mu is held.
func (sp *subpartition) transferLocked() {
	d := sp.down
	if d == nil {
		return
	}
	if sp.cancelReq.Load() && sp.cancelReq.Swap(false) {
		sp.cancelled = true
	}
	p := sp.p
	sentEvent := false
	if sp.cancelled { // nobody will read it: drop it so the producer is not stuck
		for {
			e, ok := sp.queue.popFront()
			if !ok {
				break
			}
			if e.buf != nil {
				p.pool.put(e.buf)
			} else if !e.prio {
				sentEvent = true
			}
		}
		sp.backlog = 0
	}
	for sp.queue.len() > 0 {
		if sp.queue.front().buf == nil {
			e, _ := sp.queue.popFront()
			sentEvent = sentEvent || !e.prio
			sp.told = sp.backlog
			d.deliverEvent(e.ev, e.prio, sp.backlog)
			continue
		}
		if sp.credit == 0 {
			// Credit waits in the inbox until it is needed.
			if sp.pendingCredit.Load() != 0 {
				sp.credit = int(sp.pendingCredit.Swap(0))
			}
			if sp.credit == 0 {
				if sp.told != 0 {
					break // the consumer knows there is data and is getting credit for it
				}
				sp.told = sp.backlog
				d.announceBacklog(sp.backlog)
				continue // the answer may be credit
			}
		}
		e, _ := sp.queue.popFront()
		sp.backlog--
		sp.credit--
		sp.told = sp.backlog
		d.deliverBuffer(e.buf.Bytes(), sp.backlog)
		p.pool.put(e.buf)
	}
	if stalled := sp.queue.len() > 0; stalled != sp.isStalled { // the loop only stops at data without credit
		sp.isStalled = stalled
		sp.stalled.Store(stalled)
	}
	if fn := p.eventSent.Load(); sentEvent && fn != nil {
		(*fn)()
	}
}

// The consumer's end: its downstream methods, and credit.

func (c *inputChannel) deliverBuffer(data []byte, backlog int) {
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return
	}
	b := c.takeCreditedLocked()
	if b == nil {
		c.mu.Unlock()
		panic(fmt.Sprintf("network: gate %s channel %d: a data buffer arrived without credit", c.g.name, c.index))
	}
	b.n = copy(b.data, data)
	b.inUse.Store(true)
	c.received.pushBack(entry{buf: b})
	c.queuedData++
	c.buffersIn++
	c.bytesIn += int64(b.n)
	c.backlog.Store(int64(backlog))
	grant := c.requestFloatingLocked()
	c.mu.Unlock()
	c.g.notifyData(c) // after the push: a Poll that misses it is woken
	if grant > 0 {
		c.up.addCredit(grant)
	}
}

func (c *inputChannel) deliverEvent(ev event.Event, priority bool, backlog int) {
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return
	}
	c.backlog.Store(int64(backlog))
	var overtaken [][]byte
	if priority {
		overtaken = c.addPriorityLocked(entry{ev: ev, prio: true}, true)
		c.g.notifyPriority(c)
	} else {
		c.received.pushBack(entry{ev: ev})
		c.g.notifyData(c)
	}
	grant := c.requestFloatingLocked()
	c.mu.Unlock()
	if fn := c.g.onPriority.Load(); priority && fn != nil {
		(*fn)(c.index, ev, overtaken)
	}
	if grant > 0 {
		c.up.addCredit(grant)
	}
}

func (c *inputChannel) announceBacklog(backlog int) {
	c.backlog.Store(int64(backlog))
	if c.waitingFloat.Load() {
		// Queued for the next floating buffer recycled, which will see
		// this backlog: nothing to ask for now (requestFloatingLocked).
		return
	}
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return
	}
	grant := c.requestFloatingLocked()
	c.mu.Unlock()
	if grant > 0 {
		c.up.addCredit(grant)
	}
}

// addPriorityLocked queues a priority event. fromProducer tells whether it
// arrived over the exchange (then it overtakes the received, unpolled data
// buffers, whose copies it carries) or was promoted on this side.
// It returns the copies.
func (c *inputChannel) addPriorityLocked(e entry, fromProducer bool) [][]byte {
	e.overtaken = nil
	if fromProducer {
		for i := 0; i < c.received.len(); i++ {
			if b := c.received.at(i).buf; b != nil {
				e.overtaken = append(e.overtaken, append([]byte(nil), b.Bytes()...))
			}
		}
	}
	c.prio.pushBack(e)
	return e.overtaken
}

// creditLocked is the number of buffers the channel has set aside and
// announced: its free exclusive buffers (allocated or not) and the floating
// buffers it took for the backlog. c.mu is held.
func (c *inputChannel) creditLocked() int {
	return len(c.exclFree) + c.g.cfg.ExclusiveBuffersPerChannel - c.exclAllocated + len(c.floating)
}

// required is how many buffers the channel wants announced, as Flink's
// credit-based channels do: the producer's backlog plus as many as it has
// exclusive buffers, so that data queued after the backlog was told finds
// credit waiting instead of a round trip.
func (c *inputChannel) required() int {
	return int(c.backlog.Load()) + c.g.cfg.ExclusiveBuffersPerChannel
}

// takeCreditedLocked returns a buffer the channel announced as credit: an
// exclusive one first, else a floating one; nil if it announced none.
// c.mu is held.
func (c *inputChannel) takeCreditedLocked() *Buffer {
	if n := len(c.exclFree); n > 0 {
		b := c.exclFree[n-1]
		c.exclFree[n-1] = nil
		c.exclFree = c.exclFree[:n-1]
		return b
	}
	if c.exclAllocated < c.g.cfg.ExclusiveBuffersPerChannel {
		c.exclAllocated++
		return newBuffer(c.g.cfg.BufferSize, kindExclusive, c)
	}
	if n := len(c.floating); n > 0 {
		b := c.floating[n-1]
		c.floating[n-1] = nil
		c.floating = c.floating[:n-1]
		return b
	}
	return nil
}

// requestFloatingLocked takes floating buffers from the gate while the
// channel's credit is less than it requires and returns how many it took:
// credit to announce once c.mu is released. When the gate has none left,
// the channel queues for the next one recycled. c.mu is held.
func (c *inputChannel) requestFloatingLocked() int {
	n := 0
	// A waiting channel gets the next buffer recycled; until then the
	// gate has none free (a recycled buffer goes to the free list only
	// when nobody waits), so there is no need to ask.
	for c.required() > c.creditLocked() && !c.waitingFloat.Load() {
		b := c.g.takeFloating(c)
		if b == nil {
			break
		}
		c.floating = append(c.floating, b)
		n++
	}
	return n
}

// takeFloating returns a free floating buffer for c, or nil after queueing
// c to get the next one recycled.
func (g *InputGate) takeFloating(c *inputChannel) *Buffer {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.floatFree); n > 0 {
		b := g.floatFree[n-1]
		g.floatFree[n-1] = nil
		g.floatFree = g.floatFree[:n-1]
		return b
	}
	if g.floatAllocated < g.cfg.ownedFloating() {
		g.floatAllocated++
		return newBuffer(g.cfg.BufferSize, kindFloating, g)
	}
	if g.floatAllocated < g.cfg.FloatingBuffersPerGate && !g.released {
		// The others are borrowed from the process's pool (g.mu, then the
		// pool's lock: the pool never calls back).
		if seg := g.cfg.Pool.lend(); seg != nil {
			g.floatAllocated++
			g.lentOut++
			return &Buffer{data: seg, kind: kindFloating, owner: g, lent: true}
		}
	}
	if !c.waitingFloat.Load() && !g.released {
		c.waitingFloat.Store(true)
		g.floatWaiters.pushBack(c.index)
	}
	return nil
}

// recycleExclusive takes back one of c's exclusive buffers and announces it
// as credit. If the channel holds floating buffers beyond what it
// requires, the exclusive buffer takes the place of one of them instead
// (the producer already counts it), which goes back to the gate.
func (c *inputChannel) recycleExclusive(b *Buffer) {
	c.mu.Lock()
	c.exclFree = append(c.exclFree, b)
	released := c.released
	var spare *Buffer
	if n := len(c.floating); n > 0 && !released && c.creditLocked() > c.required() {
		spare = c.floating[n-1]
		c.floating[n-1] = nil
		c.floating = c.floating[:n-1]
	}
	c.mu.Unlock()
	switch {
	case spare != nil:
		c.g.recycleFloating(spare)
	case !released:
		c.up.addCredit(1)
	}
}

// recycleFloating takes back a floating buffer and hands it to the channel
// that has waited longest for credit, which announces it; if that channel
// no longer needs it, to the next one, and to the free list when nobody
// waits.
func (g *InputGate) recycleFloating(b *Buffer) {
	for {
		g.mu.Lock()
		i, ok := g.floatWaiters.popFront()
		if !ok {
			if !b.lent {
				g.floatFree = append(g.floatFree, b)
				g.mu.Unlock()
				return
			}
			// Nobody here needs it: the loan ends, for another gate to
			// have it. Release ended the loans of a released gate.
			released := g.released
			if !released {
				g.floatAllocated--
				g.lentOut--
			}
			g.mu.Unlock()
			if !released {
				g.cfg.Pool.giveBack(b.data)
			}
			b.data = nil
			return
		}
		c := g.channels[i]
		c.waitingFloat.Store(false)
		g.mu.Unlock()
		c.mu.Lock()
		take := !c.released && c.required() > c.creditLocked()
		if take {
			c.floating = append(c.floating, b)
		}
		c.mu.Unlock()
		if take {
			c.up.addCredit(1)
			return
		}
	}
}
