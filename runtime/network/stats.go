package network

import "time"

// PartitionStats is a snapshot of a result partition's figures.
type PartitionStats struct {
	// BuffersOut and BytesOut count the data buffers finished and queued
	// to subpartitions, and their bytes (framing included).
	BuffersOut int64
	BytesOut   int64
	// RecordsOut counts records written (a broadcast record counts once per
	// subpartition).
	RecordsOut int64
	// BackPressuredNanos is the total time writers spent blocked waiting
	// for a buffer of the output pool, including a wait in progress.
	BackPressuredNanos int64
	// QueuedBuffers is the number of finished data buffers waiting in the
	// subpartitions for credit (the backlog).
	QueuedBuffers int
	// PoolSize is the output pool's capacity in buffers, PoolFree how many
	// of them are free now (allocated or not), PoolAllocated how many have
	// been allocated so far (never more than PoolSize).
	PoolSize      int
	PoolFree      int
	PoolAllocated int
	// BlockedWriters is the number of goroutines blocked now waiting for a
	// buffer.
	BlockedWriters int
	// Backlog is the number of queued data buffers per subpartition.
	Backlog []int
	// Credit is, per subpartition, the number of buffers its consumer has
	// announced and not yet received: what it may send without waiting.
	Credit []int
}

// Stats returns a snapshot of the partition's figures. It takes each
// subpartition's lock briefly; it is not for the per-record path.
func (p *ResultPartition) Stats() PartitionStats {
	s := PartitionStats{
		RecordsOut:         p.recordsOut.Load(),
		BackPressuredNanos: p.blockedNano.Load(),
		PoolSize:           p.pool.size,
		BlockedWriters:     int(p.pool.waiters.Load()),
		Backlog:            make([]int, len(p.subs)),
		Credit:             make([]int, len(p.subs)),
	}
	if since := p.pool.waitingSince.Load(); since != 0 {
		s.BackPressuredNanos += max(0, time.Now().UnixNano()-since)
	}
	for i, sp := range p.subs {
		sp.mu.Lock()
		s.Backlog[i] = sp.backlog
		s.Credit[i] = sp.credit + int(sp.pendingCredit.Load())
		s.BuffersOut += sp.buffersOut
		s.BytesOut += sp.bytesOut
		sp.unlock()
		s.QueuedBuffers += s.Backlog[i]
	}
	p.pool.mu.Lock()
	s.PoolFree = p.pool.size - int(p.pool.inUse.Load())
	s.PoolAllocated = p.pool.allocated
	p.pool.mu.Unlock()
	return s
}

// ChannelStats is a snapshot of one input channel.
type ChannelStats struct {
	// Credit is the number of buffers the channel can receive into now: its
	// free exclusive buffers, the floating buffers it holds for its backlog,
	// and the gate's free floating buffers.
	Credit int
	// ExclusiveFree is the number of its exclusive buffers that are free
	// (allocated or not); ExclusiveAllocated how many have been allocated.
	ExclusiveFree      int
	ExclusiveAllocated int
	// FloatingHeld is the number of floating buffers the channel took for
	// its backlog and announced as credit, not yet filled.
	FloatingHeld int
	// Backlog is the number of data buffers queued in the producer's
	// subpartition, as its last message said.
	Backlog int
	// Queued is the number of data buffers received and not yet polled.
	Queued int
	// WaitingForFloating is true while the channel is queued at the gate
	// for the next recycled floating buffer.
	WaitingForFloating bool
	Blocked            bool
	Finished           bool
}

// GateStats is a snapshot of an input gate's figures.
type GateStats struct {
	// BuffersIn and BytesIn count the data buffers transferred into the
	// gate's channels and their bytes.
	BuffersIn int64
	BytesIn   int64
	// QueuedBuffers is the number of data buffers received and not yet
	// polled, over all channels.
	QueuedBuffers int
	// FloatingSize is the number of floating buffers, FloatingFree how many
	// are free now (allocated or not), FloatingAllocated how many have been
	// allocated so far.
	FloatingSize      int
	FloatingFree      int
	FloatingAllocated int
	// Channels has one entry per input channel.
	Channels []ChannelStats
}

// Stats returns a snapshot of the gate's figures. It takes each channel's
// lock briefly; it is not for the per-record path.
func (g *InputGate) Stats() GateStats {
	s := GateStats{
		FloatingSize: g.cfg.FloatingBuffersPerGate,
		Channels:     make([]ChannelStats, len(g.channels)),
	}
	g.mu.Lock()
	s.FloatingAllocated = g.floatAllocated
	s.FloatingFree = len(g.floatFree) + g.cfg.FloatingBuffersPerGate - g.floatAllocated
	for i, c := range g.channels {
		s.Channels[i].WaitingForFloating = c.waitingFloat.Load()
		s.Channels[i].Blocked = c.blocked
	}
	g.mu.Unlock()
	for i, c := range g.channels {
		cs := &s.Channels[i]
		cs.Finished = c.finished.Load()
		c.mu.Lock()
		cs.ExclusiveAllocated = c.exclAllocated
		cs.ExclusiveFree = len(c.exclFree) + g.cfg.ExclusiveBuffersPerChannel - c.exclAllocated
		cs.FloatingHeld = len(c.floating)
		cs.Backlog = int(c.backlog.Load())
		cs.Queued = c.queuedData
		s.BuffersIn += c.buffersIn
		s.BytesIn += c.bytesIn
		c.mu.Unlock()
		cs.Credit = cs.ExclusiveFree + cs.FloatingHeld + s.FloatingFree
		s.QueuedBuffers += cs.Queued
	}
	return s
}
