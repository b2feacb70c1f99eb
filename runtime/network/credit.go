package network

import "fmt"

// Connect wires subpartition sub of p to channel ch of g. It is wiring
// done before the job starts (before any goroutine uses p or g). It panics
// on an index out of range, a channel or subpartition connected twice, or
// buffer sizes that differ between the two sides.
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
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.ch != nil || c.sp != nil {
		panic(fmt.Sprintf("network.Connect: %s[%d] -> %s[%d]: already connected", p.name, sub, g.name, ch))
	}
	sp.ch, c.sp = c, sp
	sp.transferLocked(nil)
}

// transferLocked moves what it can from the head of sp's queue into the
// connected channel: events at once (they need no credit), data buffers
// while the channel has credit, each copied into a consumer buffer while
// the producer's buffer goes back to the output pool. extra, if not nil, is
// a floating buffer handed to the channel; it is used first and returned if
// unused. sp.mu is held.
func (sp *subpartition) transferLocked(extra *Buffer) (unused *Buffer) {
	c := sp.ch
	if c == nil {
		return extra
	}
	g := c.g
	var gotData, gotPrio, sentEvent bool
	for sp.queue.len() > 0 {
		head := sp.queue.front()
		if head.buf == nil { // an event
			e, _ := sp.queue.popFront()
			switch {
			case c.released:
				sentEvent = !e.prio
			case e.prio:
				c.addPriorityLocked(e, true)
				gotPrio = true
			default:
				c.received.pushBack(e)
				gotData, sentEvent = true, true
			}
			continue
		}
		if c.released { // nobody will read it: drop it so the producer is not stuck
			e, _ := sp.queue.popFront()
			sp.backlog--
			sp.p.pool.put(e.buf)
			continue
		}
		dst := extra
		if dst != nil {
			extra = nil
		} else if dst = c.takeBufferLocked(); dst == nil {
			break // no credit: wait for a recycled buffer
		}
		e, _ := sp.queue.popFront()
		sp.backlog--
		dst.n = copy(dst.data, e.buf.Bytes())
		dst.inUse.Store(true)
		sp.p.pool.put(e.buf)
		c.received.pushBack(entry{buf: dst})
		c.queuedData++
		g.buffersIn.Add(1)
		g.bytesIn.Add(int64(dst.n))
		gotData = true
	}
	if gotPrio {
		g.notifyPriority(c)
	}
	if gotData {
		g.notifyData(c)
	}
	if fn := sp.p.eventSent.Load(); sentEvent && fn != nil {
		(*fn)()
	}
	return extra
}

// addPriorityLocked queues a priority event. fromProducer tells whether it
// arrived over the exchange (then it overtakes the received, unpolled data
// buffers, whose copies it carries) or was promoted on this side.
func (c *inputChannel) addPriorityLocked(e entry, fromProducer bool) {
	e.overtaken = nil
	if fromProducer {
		for i := 0; i < c.received.len(); i++ {
			if b := c.received.at(i).buf; b != nil {
				e.overtaken = append(e.overtaken, append([]byte(nil), b.Bytes()...))
			}
		}
	}
	c.prio.pushBack(e)
}

// takeBufferLocked returns a free buffer of the channel's credit: an
// exclusive one first, else a floating one from the gate. It returns nil
// when there is no credit; the channel then waits in the gate's queue for a
// floating buffer. sp.mu is held.
func (c *inputChannel) takeBufferLocked() *Buffer {
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
	return c.g.takeFloating(c)
}

// takeFloating returns a floating buffer for c, or nil after queueing c to
// get the next one recycled.
func (g *InputGate) takeFloating(c *inputChannel) *Buffer {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.floatFree); n > 0 {
		b := g.floatFree[n-1]
		g.floatFree[n-1] = nil
		g.floatFree = g.floatFree[:n-1]
		return b
	}
	if g.floatAllocated < g.cfg.FloatingBuffersPerGate {
		g.floatAllocated++
		return newBuffer(g.cfg.BufferSize, kindFloating, g)
	}
	if !c.waitingFloat && !g.released {
		c.waitingFloat = true
		g.floatWaiters.pushBack(c.index)
	}
	return nil
}

// recycleExclusive takes back one of c's exclusive buffers, which is new
// credit: data waiting in the subpartition moves now.
func (c *inputChannel) recycleExclusive(b *Buffer) {
	sp := c.sp
	sp.mu.Lock()
	c.exclFree = append(c.exclFree, b)
	sp.transferLocked(nil)
	sp.mu.Unlock()
}

// recycleFloating takes back a floating buffer and hands it to the channel
// that has waited longest for credit; if that channel no longer needs it,
// to the next one, and to the free list when nobody waits.
func (g *InputGate) recycleFloating(b *Buffer) {
	for b != nil {
		g.mu.Lock()
		var c *inputChannel
		if i, ok := g.floatWaiters.popFront(); ok {
			c = g.channels[i]
			c.waitingFloat = false
		} else {
			g.floatFree = append(g.floatFree, b)
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		c.sp.mu.Lock()
		b = c.sp.transferLocked(b)
		c.sp.mu.Unlock()
	}
}
