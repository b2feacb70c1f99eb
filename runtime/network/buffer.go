package network

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// bufferKind tells which pool a buffer goes back to.
type bufferKind uint8

const (
	kindOutput    bufferKind = iota // a partition's output pool
	kindExclusive                   // one input channel's exclusive buffers
	kindFloating                    // an input gate's floating buffers
)

// Buffer is one fixed-size network buffer. The consumer gets buffers from
// InputGate.Poll and must Recycle each exactly once when done with its
// bytes (a RecordReader does this itself).
type Buffer struct {
	data  []byte // full capacity, len == Config.BufferSize
	n     int    // bytes used
	kind  bufferKind
	owner any         // *outputPool, *inputChannel or *InputGate, by kind
	inUse atomic.Bool // handed out and not yet recycled
	lent  bool        // a floating buffer lent by the process's BufferPool
}

// buffersCreated counts every buffer ever allocated in this process, so
// tests can check that memory stays within the configured pools.
var buffersCreated atomic.Int64

func newBuffer(size int, kind bufferKind, owner any) *Buffer {
	buffersCreated.Add(1)
	return &Buffer{data: make([]byte, size), kind: kind, owner: owner}
}

// Bytes returns the used bytes of the buffer. They stay valid until Recycle.
func (b *Buffer) Bytes() []byte { return b.data[:b.n] }

// Len returns the number of used bytes.
func (b *Buffer) Len() int { return b.n }

// Recycle returns the buffer to its pool: an exclusive buffer back to its
// input channel, a floating one to its gate (which hands it to a channel
// that has data waiting for credit). Data waiting upstream is transferred
// at once, on the calling goroutine. Recycling a buffer twice panics.
func (b *Buffer) Recycle() {
	if !b.inUse.CompareAndSwap(true, false) {
		panic("network: buffer recycled twice")
	}
	switch b.kind {
	case kindExclusive:
		b.owner.(*inputChannel).recycleExclusive(b)
	case kindFloating:
		b.owner.(*InputGate).recycleFloating(b)
	default:
		b.owner.(*outputPool).put(b)
	}
}

// outputPool is the bounded buffer pool of one result partition. Buffers
// are allocated lazily, never more than size of them.
type outputPool struct {
	size    int
	bufSize int
	wake    chan struct{} // the producing task's notification channel

	inUse   atomic.Int64 // buffers handed out (allocated and not free)
	waiters atomic.Int32 // goroutines blocked in get
	// waitingSince is when the current wait began (Unix nanoseconds), 0
	// when no writer is blocked; Stats adds the wait in progress.
	waitingSince atomic.Int64
	signal       chan struct{} // wakes a blocked get; capacity 1

	mu        sync.Mutex
	free      []*Buffer
	allocated int
}

func newOutputPool(size, bufSize int, wake chan struct{}) *outputPool {
	return &outputPool{
		size:    size,
		bufSize: bufSize,
		wake:    wake,
		signal:  make(chan struct{}, 1),
		free:    make([]*Buffer, 0, size),
	}
}

// available reports whether a buffer can be had without blocking.
func (p *outputPool) available() bool { return p.inUse.Load() < int64(p.size) }

// tryGet returns a free buffer, or nil if the pool is exhausted.
func (p *outputPool) tryGet() *Buffer {
	p.mu.Lock()
	var b *Buffer
	if n := len(p.free); n > 0 {
		b = p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
	} else if p.allocated < p.size {
		p.allocated++
		p.mu.Unlock()
		b = newBuffer(p.bufSize, kindOutput, p)
		p.mu.Lock()
	} else {
		p.mu.Unlock()
		return nil
	}
	p.inUse.Add(1)
	p.mu.Unlock()
	b.n = 0
	b.inUse.Store(true)
	return b
}

// get returns a buffer, blocking while the pool is exhausted (this is
// backpressure) until one is recycled, ctx is done or released is closed.
// blocked accumulates the nanoseconds spent waiting.
func (p *outputPool) get(ctx context.Context, released <-chan struct{}, blocked *atomic.Int64) (*Buffer, error) {
	if b := p.tryGet(); b != nil {
		return b, nil
	}
	start := time.Now()
	p.waitingSince.CompareAndSwap(0, start.UnixNano())
	p.waiters.Add(1)
	defer func() {
		p.waiters.Add(-1)
		p.waitingSince.CompareAndSwap(start.UnixNano(), 0)
		blocked.Add(int64(time.Since(start)))
	}()
	for {
		if b := p.tryGet(); b != nil {
			if p.waiters.Load() > 1 && p.available() {
				p.notifyWaiter() // pass the wake-up on to another waiter
			}
			return b, nil
		}
		select {
		case <-p.signal:
		case <-released:
			return nil, ErrReleased
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// put returns a buffer to the pool and wakes a blocked writer and the task.
func (p *outputPool) put(b *Buffer) {
	b.inUse.Store(false)
	p.mu.Lock()
	p.free = append(p.free, b)
	left := p.inUse.Add(-1)
	p.mu.Unlock()
	if p.waiters.Load() > 0 {
		p.notifyWaiter()
	}
	if left == int64(p.size)-1 { // the pool was dry and is not any more
		notify(p.wake)
	}
}

func (p *outputPool) notifyWaiter() {
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// notify does a non-blocking send on a task's wake channel.
func notify(wake chan struct{}) {
	if wake == nil {
		return
	}
	select {
	case wake <- struct{}{}:
	default:
	}
}
