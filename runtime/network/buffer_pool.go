package network

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrInsufficientNetworkBuffers is returned, wrapped with the figures, by
// BufferPool.Reserve when the process's network memory cannot hold the
// buffers a deployment requires (Flink's "Insufficient number of network
// buffers").
var ErrInsufficientNetworkBuffers = errors.New("insufficient number of network buffers")

// raiseKeys is what the error of Reserve tells the user to raise.
const raiseKeys = "raise taskmanager.memory.network.fraction / .min / .max or taskmanager.memory.process.size"

// BufferPool is the network memory of a process, as Flink's
// NetworkBufferPool: Total buffers of one size that every partition and
// gate of the process's tasks draw from. Buffers reach the tasks in two
// ways:
//
//   - reserved: at deployment, before any task runs, the runtime reserves
//     what the tasks' partitions and gates require (Config.PartitionBuffers,
//     Config.GateBuffers). A reservation that does not fit fails with
//     ErrInsufficientNetworkBuffers, so a job never starts with less than
//     its exchanges need to make progress;
//   - lent: a gate's floating buffers beyond its first are lent by the pool
//     from what no reservation holds, when a channel needs one, and go back
//     to the pool when recycled with no channel waiting for them.
//
// Reserved plus lent never exceeds Total. A nil *BufferPool is unbounded:
// Reserve always succeeds and gates keep all their floating buffers, as
// when no process size is configured. Safe for concurrent use.
type BufferPool struct {
	bufSize int

	mu       sync.Mutex
	total    int
	reserved int
	lent     int
	free     [][]byte // segments of buffers given back, for the next loan
	peak     int      // highest reserved + lent

	lends, refusals atomic.Int64
}

// NewBufferPool returns a pool of total buffers of bufSize bytes
// (0: DefaultBufferSize).
func NewBufferPool(total, bufSize int) *BufferPool {
	if bufSize <= 0 {
		bufSize = DefaultBufferSize
	}
	return &BufferPool{total: max(total, 0), bufSize: bufSize}
}

// BuffersFor is how many buffers of bufSize bytes (0: DefaultBufferSize)
// networkBytes of memory hold: Flink's taskmanager.memory.network.* size
// divided by taskmanager.memory.segment-size, rounded down.
func BuffersFor(networkBytes int64, bufSize int) int {
	if bufSize <= 0 {
		bufSize = DefaultBufferSize
	}
	if networkBytes <= 0 {
		return 0
	}
	return int(networkBytes / int64(bufSize))
}

// BufferSize is the size of the pool's buffers.
func (p *BufferPool) BufferSize() int { return p.bufSize }

// SetTotal changes the number of buffers (the process's budget changed).
// Reservations and loans already made stay; new ones see the new total.
func (p *BufferPool) SetTotal(total int) {
	p.mu.Lock()
	p.total = max(total, 0)
	p.trimLocked()
	p.mu.Unlock()
}

// Reserve sets n buffers aside for a deployment; what names it in the
// error. Unreserve gives them back when the deployment's tasks ended. It
// fails with ErrInsufficientNetworkBuffers when fewer than n are neither
// reserved nor lent.
func (p *BufferPool) Reserve(n int, what string) error {
	if p == nil || n <= 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if avail := p.total - p.reserved - p.lent; n > avail {
		return fmt.Errorf("%s: %w: required %d, but only %d available (%d of %d bytes in the process, %d reserved by other deployments, %d lent as floating buffers); %s",
			what, ErrInsufficientNetworkBuffers, n, avail, p.total, p.bufSize, p.reserved, p.lent, raiseKeys)
	}
	p.reserved += n
	p.peak = max(p.peak, p.reserved+p.lent)
	p.trimLocked()
	return nil
}

// trimLocked drops the kept segments the pool may no longer hold: what is
// neither reserved nor lent. p.mu is held.
func (p *BufferPool) trimLocked() {
	if keep := max(p.total-p.reserved-p.lent, 0); len(p.free) > keep {
		clear(p.free[keep:])
		p.free = p.free[:keep]
	}
}

// Unreserve gives back n buffers Reserve set aside.
func (p *BufferPool) Unreserve(n int) {
	if p == nil || n <= 0 {
		return
	}
	p.mu.Lock()
	p.reserved = max(p.reserved-n, 0)
	p.mu.Unlock()
}

// lend returns the segment of one more floating buffer, or nil when the
// reservations and loans take all the pool.
func (p *BufferPool) lend() []byte {
	p.mu.Lock()
	if p.reserved+p.lent >= p.total {
		p.mu.Unlock()
		p.refusals.Add(1)
		return nil
	}
	p.lent++
	p.peak = max(p.peak, p.reserved+p.lent)
	var seg []byte
	if n := len(p.free); n > 0 {
		seg = p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
	}
	p.mu.Unlock()
	p.lends.Add(1)
	if seg == nil {
		buffersCreated.Add(1)
		seg = make([]byte, p.bufSize)
	}
	return seg
}

// giveBack ends the loan of a segment; seg is kept for the next loan, or
// dropped (nil: the gate was released with the buffer still out).
func (p *BufferPool) giveBack(seg []byte) {
	p.mu.Lock()
	p.lent = max(p.lent-1, 0)
	if seg != nil && len(seg) == p.bufSize && len(p.free) < p.total-p.reserved-p.lent {
		p.free = append(p.free, seg)
	}
	p.mu.Unlock()
}

// BufferPoolStats are a pool's figures.
type BufferPoolStats struct {
	// Total is the pool's size in buffers, BufferSize their size.
	Total, BufferSize int
	// Reserved is what deployments set aside, Lent the floating buffers
	// out on loan, Available the rest.
	Reserved, Lent, Available int
	// Peak is the highest Reserved + Lent so far: never above Total.
	Peak int
	// Lends and Refusals count the loans made and refused.
	Lends, Refusals int64
}

// Stats returns the pool's figures.
func (p *BufferPool) Stats() BufferPoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return BufferPoolStats{
		Total: p.total, BufferSize: p.bufSize,
		Reserved: p.reserved, Lent: p.lent, Available: max(p.total-p.reserved-p.lent, 0),
		Peak: p.peak, Lends: p.lends.Load(), Refusals: p.refusals.Load(),
	}
}

// BuffersAllocated is the number of network buffers this process has
// allocated so far (all pools). Buffers are allocated lazily and kept by
// their pools until released, so over one job in a process it is the
// job's peak of buffers in memory.
func BuffersAllocated() int64 { return buffersCreated.Load() }
