package network

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/runtime/network/event"
)

// Partition states.
const (
	stateOpen int32 = iota
	stateFinished
	stateReleased
)

// ResultPartition is the producing side of a network exchange: one
// subpartition (a queue of finished buffers and events) per consuming
// subtask, all drawing buffers from one bounded output pool.
//
// The writing methods (WriteRecord, BroadcastRecord, WriteRaw, Flush,
// FlushAll, AddEvent, BroadcastEvent, AddPriorityEvent, PromoteEvent,
// Finish) belong to the producing Task and must be called from one
// goroutine at a time. Available, Stats and Release may be called from any
// goroutine.
type ResultPartition struct {
	name       string
	cfg        Config
	subs       []*subpartition
	pool       *outputPool
	state      atomic.Int32
	released   chan struct{} // closed by Release
	releaseOne sync.Once

	// eventSent, if set, runs when queued events leave a subpartition.
	eventSent atomic.Pointer[func()]

	// releaseHooks run once Release has dropped the queues: how the remote
	// consumers of a published partition learn that it is gone.
	hookMu       sync.Mutex
	releaseHooks []func()
	hooksRun     bool

	recordsOut  atomic.Int64
	blockedNano atomic.Int64

	spill []byte // a record moved out of its room's way (WriteRecord)
}

// subpartition is one outgoing queue of a partition: the producing end of
// one input channel. It knows its channel only as a downstream, the
// messages it sends it, and hears from it only through its upstream
// methods (addCredit, cancel; credit.go), so the channel may be in this
// process or, later, on another host.
type subpartition struct {
	p     *ResultPartition
	index int
	cur   *Buffer // the partially filled buffer; producer goroutine only
	// spaceAt is where the room RecordSpace last handed out starts in cur
	// (after the room left for the length prefix); 0: none handed out.
	spaceAt int

	mu         sync.Mutex   // released with unlock, never mu.Unlock
	queue      deque[entry] // finished buffers and events not yet sent
	backlog    int          // data buffers in queue
	credit     int          // buffers the consumer has announced and not yet received
	told       int          // the backlog as last sent to the consumer
	cancelled  bool         // the consumer went away: drop everything
	buffersOut int64        // data buffers queued, and their bytes
	bytesOut   int64
	down       downstream // set once by Connect
	// local: the channel is in this process (Connect, wiring done before
	// the producer writes); a remote consumer attaches later
	// (attachRemote) and leaves it false.
	local bool

	// The inbox of the consumer's messages, which must never block: the
	// goroutine holding mu applies them before it lets go (unlock).
	// Credit that arrives while the subpartition is not stalled waits there
	// until it is needed, so a recycle costs the consumer no lock.
	pendingCredit atomic.Int64
	cancelReq     atomic.Bool
	stalled       atomic.Bool // data at the head of the queue and no credit; written under mu
	isStalled     bool        // stalled as last stored, to write it only on a change
}

// entry is one element of a subpartition queue or a channel queue: a data
// buffer (buf != nil) or an event.
type entry struct {
	buf       *Buffer
	ev        event.Event
	prio      bool
	overtaken [][]byte // consumer-side copies for a priority event
}

// NewResultPartition returns a partition with numSubpartitions
// subpartitions and an output pool of
// numSubpartitions*ExclusiveBuffersPerChannel + FloatingBuffersPerGate
// buffers. wake (may be nil) gets a non-blocking send whenever the pool
// turns from dry to having a free buffer. It panics on an invalid cfg or a
// non-positive numSubpartitions (wiring bugs; see Config.Validate).
func NewResultPartition(name string, numSubpartitions int, cfg Config, wake chan struct{}) *ResultPartition {
	cfg = mustConfig(cfg, "network.NewResultPartition "+name)
	if numSubpartitions <= 0 {
		panic(fmt.Sprintf("network.NewResultPartition %s: %d subpartitions", name, numSubpartitions))
	}
	p := &ResultPartition{
		name:     name,
		cfg:      cfg,
		subs:     make([]*subpartition, numSubpartitions),
		released: make(chan struct{}),
	}
	size := numSubpartitions*cfg.ExclusiveBuffersPerChannel + cfg.FloatingBuffersPerGate
	p.pool = newOutputPool(size, cfg.BufferSize, wake)
	for i := range p.subs {
		p.subs[i] = &subpartition{p: p, index: i}
	}
	return p
}

// OnEventSent sets fn to run each time one or more queued (non-priority)
// events leave a subpartition for its channel, or are dropped because the
// channel was released: the way to learn, without polling, that an event
// HasQueuedEvent reported is no longer queued. fn runs under the
// subpartition's lock on whichever goroutine moved the events, so it must
// be quick, not block, and not call into the network. Safe from any
// goroutine; nil removes it.
func (p *ResultPartition) OnEventSent(fn func()) {
	if fn == nil {
		p.eventSent.Store(nil)
		return
	}
	p.eventSent.Store(&fn)
}

// Name returns the name given to NewResultPartition.
func (p *ResultPartition) Name() string { return p.name }

// NumSubpartitions returns the number of subpartitions.
func (p *ResultPartition) NumSubpartitions() int { return len(p.subs) }

// Available reports whether the output pool has a buffer free now. The task
// checks it before processing its next input so that it does not block in
// the middle of a record while mail is waiting.
func (p *ResultPartition) Available() bool { return p.pool.available() }

// checkOpen returns an error unless the partition accepts new data.
func (p *ResultPartition) checkOpen() error {
	switch p.state.Load() {
	case stateOpen:
		return nil
	case stateFinished:
		return fmt.Errorf("partition %s: %w", p.name, ErrFinished)
	default:
		return fmt.Errorf("partition %s: %w", p.name, ErrReleased)
	}
}

func (p *ResultPartition) wrap(err error) error {
	return fmt.Errorf("partition %s: %w", p.name, err)
}

// WriteRecord frames rec (uvarint length, then the bytes) and appends it to
// subpartition sub, spanning buffers as needed. It blocks while the output
// pool is dry (backpressure) and returns ctx's error if ctx is done first,
// or ErrReleased (wrapped) once the partition is released. After an error
// the subpartition may hold part of the record: the partition must then be
// released, not written to further.
func (p *ResultPartition) WriteRecord(ctx context.Context, sub int, rec []byte) error {
	if err := p.checkOpen(); err != nil {
		return err
	}
	if len(rec) > MaxRecordSize {
		return p.wrap(fmt.Errorf("record of %d bytes: %w", len(rec), ErrRecordTooLarge))
	}
	sp := p.subs[sub]
	if sp.spaceAt > 0 {
		switch p.commitInPlace(sp, rec) {
		case committed:
			p.recordsOut.Add(1)
			return nil
		case inRoom:
			// rec lies where its own prefix and the buffers it spans
			// are about to be written: take it out of the way first.
			p.spill = append(p.spill[:0], rec...)
			rec = p.spill
		}
	}
	var hdr [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], uint64(len(rec)))
	if err := p.writeFramed(ctx, sp, hdr[:n], rec); err != nil {
		return err
	}
	p.recordsOut.Add(1)
	return nil
}

// RecordSpace returns an empty slice whose capacity is the free room of
// subpartition sub's current buffer after room for the length prefix of a
// record of sizeHint bytes, taking a buffer from the pool when sub has none
// (so it may block like WriteRecord). It returns nil when the room is
// smaller than sizeHint. A record appended to the slice and passed, as the
// slice append returned, to the next WriteRecord of sub is framed where it
// lies: the encoding is the copy into the buffer. Anything else written to
// sub in between (another record, an event, a flush) forgets the room, and
// WriteRecord of a record that no longer lies in it copies as usual.
func (p *ResultPartition) RecordSpace(ctx context.Context, sub int, sizeHint int) ([]byte, error) {
	if err := p.checkOpen(); err != nil {
		return nil, err
	}
	sp := p.subs[sub]
	sp.spaceAt = 0
	b := sp.cur
	if b == nil {
		var err error
		b, err = p.pool.get(ctx, p.released, &p.blockedNano)
		if err != nil {
			return nil, p.wrap(fmt.Errorf("waiting for a buffer for subpartition %d: %w", sp.index, err))
		}
		sp.cur = b
	}
	at := b.n + uvarintLen(uint64(max(sizeHint, 0)))
	if len(b.data)-at < max(sizeHint, 1) {
		return nil, nil
	}
	sp.spaceAt = at
	return b.data[at:at], nil
}

// Outcomes of commitInPlace.
const (
	elsewhere = iota // rec is not in the room: write it as any record
	inRoom           // rec is in the room but does not fit there framed
	committed        // rec is framed in the buffer
)

// commitInPlace frames rec where it lies when it is the record appended to
// the room RecordSpace handed out and it fits with its length prefix.
func (p *ResultPartition) commitInPlace(sp *subpartition, rec []byte) int {
	at := sp.spaceAt
	sp.spaceAt = 0
	b := sp.cur
	if b == nil || len(rec) == 0 || at >= len(b.data) || &rec[0] != &b.data[at] {
		return elsewhere // the append outgrew the room and moved rec
	}
	w := uvarintLen(uint64(len(rec)))
	if b.n+w != at {
		// The hint's prefix width was not the record's: move the record
		// within the buffer to follow its prefix, if it still fits.
		if b.n+w+len(rec) > len(b.data) {
			return inRoom
		}
		copy(b.data[b.n+w:], rec)
	}
	binary.PutUvarint(b.data[b.n:], uint64(len(rec)))
	b.n += w + len(rec)
	if b.n == len(b.data) {
		sp.cur = nil
		sp.enqueueBuffer(b)
	}
	return committed
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// BroadcastRecord writes rec to every subpartition.
func (p *ResultPartition) BroadcastRecord(ctx context.Context, rec []byte) error {
	if err := p.checkOpen(); err != nil {
		return err
	}
	if len(rec) > MaxRecordSize {
		return p.wrap(fmt.Errorf("record of %d bytes: %w", len(rec), ErrRecordTooLarge))
	}
	var hdr [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], uint64(len(rec)))
	for _, sp := range p.subs {
		if err := p.writeFramed(ctx, sp, hdr[:n], rec); err != nil {
			return err
		}
	}
	p.recordsOut.Add(int64(len(p.subs)))
	return nil
}

// writeFramed appends hdr then rec to sp. The common case, both fitting in
// the current buffer, is two copies.
func (p *ResultPartition) writeFramed(ctx context.Context, sp *subpartition, hdr, rec []byte) error {
	sp.spaceAt = 0
	if b := sp.cur; b != nil && len(b.data)-b.n > len(hdr)+len(rec) {
		b.n += copy(b.data[b.n:], hdr)
		b.n += copy(b.data[b.n:], rec)
		return nil
	}
	if err := p.write(ctx, sp, hdr); err != nil {
		return err
	}
	return p.write(ctx, sp, rec)
}

// write appends data to sp's current buffer, finishing each buffer that
// fills up and taking a new one from the pool (possibly blocking).
func (p *ResultPartition) write(ctx context.Context, sp *subpartition, data []byte) error {
	sp.spaceAt = 0
	for len(data) > 0 {
		b := sp.cur
		if b == nil {
			var err error
			b, err = p.pool.get(ctx, p.released, &p.blockedNano)
			if err != nil {
				return p.wrap(fmt.Errorf("waiting for a buffer for subpartition %d: %w", sp.index, err))
			}
			sp.cur = b
		}
		k := copy(b.data[b.n:], data)
		b.n += k
		data = data[k:]
		if b.n == len(b.data) {
			sp.cur = nil
			sp.enqueueBuffer(b)
		}
	}
	return nil
}

// WriteRaw queues data, already framed bytes such as a persisted buffer of
// output channel state, as one buffer of subpartition sub. Call it before
// writing new records to sub. It may block like WriteRecord.
func (p *ResultPartition) WriteRaw(ctx context.Context, sub int, data []byte) error {
	if err := p.checkOpen(); err != nil {
		return err
	}
	if len(data) > p.cfg.BufferSize {
		return p.wrap(fmt.Errorf("raw buffer of %d bytes exceeds the buffer size %d: %w", len(data), p.cfg.BufferSize, ErrRecordTooLarge))
	}
	if len(data) == 0 {
		return nil
	}
	sp := p.subs[sub]
	p.flush(sp)
	b, err := p.pool.get(ctx, p.released, &p.blockedNano)
	if err != nil {
		return p.wrap(fmt.Errorf("waiting for a buffer for subpartition %d: %w", sub, err))
	}
	b.n = copy(b.data, data)
	sp.enqueueBuffer(b)
	return nil
}

// Flush finishes subpartition sub's partially filled buffer, if any, and
// queues it so that the consumer can have it.
func (p *ResultPartition) Flush(sub int) { p.flush(p.subs[sub]) }

// FlushAll flushes every subpartition.
func (p *ResultPartition) FlushAll() {
	for _, sp := range p.subs {
		p.flush(sp)
	}
}

// FlushInProcess flushes the subpartitions whose channel is in this
// process (Connect), and leaves the partly filled buffers of those read
// over a connection to be sent when they fill, at the buffer timeout or
// before an event. An in-process hand-over is a queue append and a wake;
// a buffer sent to another process is a frame on a TCP connection, and
// sending every few records' buffer tripled the CPU time of a two-worker
// cluster at 2 K and 20 K records/s (bench/cluster -setups 2 -rate R),
// where in one process it made no difference that could be measured.
func (p *ResultPartition) FlushInProcess() {
	for _, sp := range p.subs {
		if sp.local {
			p.flush(sp)
		}
	}
}

func (p *ResultPartition) flush(sp *subpartition) {
	sp.spaceAt = 0
	if b := sp.cur; b != nil {
		sp.cur = nil
		if b.n == 0 {
			p.pool.put(b)
			return
		}
		sp.enqueueBuffer(b)
	}
}

// AddEvent queues ev to subpartition sub, in order with the data: the
// partially filled buffer is finished and queued first, so an event never
// splits a record. An event needs no credit.
func (p *ResultPartition) AddEvent(sub int, ev event.Event) error {
	if err := p.checkOpen(); err != nil {
		return err
	}
	return p.addEvent(p.subs[sub], ev)
}

func (p *ResultPartition) addEvent(sp *subpartition, ev event.Event) error {
	if err := checkEvent(ev); err != nil {
		return p.wrap(err)
	}
	p.flush(sp)
	sp.mu.Lock()
	defer sp.unlock()
	if p.state.Load() == stateReleased {
		return p.wrap(ErrReleased)
	}
	sp.queue.pushBack(entry{ev: ev})
	sp.transferLocked()
	return nil
}

// BroadcastEvent adds ev to every subpartition.
func (p *ResultPartition) BroadcastEvent(ev event.Event) error {
	if err := p.checkOpen(); err != nil {
		return err
	}
	for _, sp := range p.subs {
		if err := p.addEvent(sp, ev); err != nil {
			return err
		}
	}
	return nil
}

// AddPriorityEvent finishes sub's partially filled buffer, then puts ev at
// the head of sub's queue, overtaking every queued buffer and event, and
// transfers it at once. It returns copies of the data of every buffer it
// overtook, in queue order: the output channel state of an unaligned
// checkpoint. The overtaken buffers stay queued and are still sent.
func (p *ResultPartition) AddPriorityEvent(sub int, ev event.Event) (overtaken [][]byte, err error) {
	if err := p.checkOpen(); err != nil {
		return nil, err
	}
	if err := checkEvent(ev); err != nil {
		return nil, p.wrap(err)
	}
	sp := p.subs[sub]
	p.flush(sp)
	sp.mu.Lock()
	defer sp.unlock()
	if p.state.Load() == stateReleased {
		return nil, p.wrap(ErrReleased)
	}
	overtaken = sp.copyDataLocked(sp.queue.len())
	sp.pushPriorityLocked(entry{ev: ev, prio: true})
	sp.transferLocked()
	return overtaken, nil
}

// PromoteEvent finds the first event still queued (not yet transferred) in
// subpartition sub for which match returns true, moves it to the head of
// the queue as a priority event and transfers it at once. It returns copies
// of the data buffers the event overtook, in queue order, and found=false if
// no queued event matches. match runs under the subpartition's lock and
// must not call into the network.
func (p *ResultPartition) PromoteEvent(sub int, match func(ev event.Event) bool) (overtaken [][]byte, found bool) {
	sp := p.subs[sub]
	sp.mu.Lock()
	defer sp.unlock()
	if p.state.Load() == stateReleased {
		return nil, false
	}
	for i := 0; i < sp.queue.len(); i++ {
		e := sp.queue.at(i)
		if e.buf != nil || e.prio || !match(e.ev) {
			continue
		}
		overtaken = sp.copyDataLocked(i)
		moved := sp.queue.removeAt(i)
		moved.prio = true
		sp.pushPriorityLocked(moved)
		sp.transferLocked()
		return overtaken, true
	}
	return nil, false
}

// HasQueuedEvent reports whether an event for which match returns true is
// still queued (unsent) in subpartition sub. Safe from any goroutine.
func (p *ResultPartition) HasQueuedEvent(sub int, match func(ev event.Event) bool) bool {
	sp := p.subs[sub]
	sp.mu.Lock()
	defer sp.unlock()
	for i := 0; i < sp.queue.len(); i++ {
		if e := sp.queue.at(i); e.buf == nil && match(e.ev) {
			return true
		}
	}
	return false
}

// pushPriorityLocked puts a priority event at the head of the queue,
// behind the priority events still there: those stay only while the
// subpartition has no channel yet (a remote consumer's request has not
// arrived), and priority events keep their order among themselves.
func (sp *subpartition) pushPriorityLocked(e entry) {
	k := 0
	for k < sp.queue.len() && sp.queue.at(k).prio {
		k++
	}
	sp.queue.insertAt(k, e)
}

// copyDataLocked returns copies of the data buffers among the first n
// queue entries.
func (sp *subpartition) copyDataLocked(n int) [][]byte {
	var out [][]byte
	for i := 0; i < n; i++ {
		if b := sp.queue.at(i).buf; b != nil {
			out = append(out, append([]byte(nil), b.Bytes()...))
		}
	}
	return out
}

// Finish flushes every subpartition and ends each with EndOfPartition. No
// data or event may be added afterwards. Finishing twice is a no-op.
func (p *ResultPartition) Finish() error {
	switch p.state.Load() {
	case stateFinished:
		return nil
	case stateReleased:
		return p.wrap(ErrReleased)
	}
	for _, sp := range p.subs {
		if err := p.addEvent(sp, event.EndOfPartition{}); err != nil {
			return err
		}
	}
	p.state.CompareAndSwap(stateOpen, stateFinished)
	return nil
}

// Release drops everything queued and fails the partition: blocked and
// later writers return ErrReleased. It is for failure and cancellation,
// may be called from any goroutine and more than once.
func (p *ResultPartition) Release() {
	p.releaseOne.Do(func() {
		p.state.Store(stateReleased)
		close(p.released)
		for _, sp := range p.subs {
			sp.mu.Lock()
			for {
				e, ok := sp.queue.popFront()
				if !ok {
					break
				}
				if e.buf != nil {
					p.pool.put(e.buf)
				}
			}
			sp.backlog = 0
			sp.unlock()
		}
		p.hookMu.Lock()
		hooks := p.releaseHooks
		p.releaseHooks, p.hooksRun = nil, true
		p.hookMu.Unlock()
		for _, fn := range hooks {
			fn()
		}
	})
}

// onRelease makes Release run fn (on Release's goroutine, holding no lock
// of the network). It reports false, without keeping fn, if the partition
// was released already.
func (p *ResultPartition) onRelease(fn func()) bool {
	p.hookMu.Lock()
	defer p.hookMu.Unlock()
	if p.hooksRun {
		return false
	}
	p.releaseHooks = append(p.releaseHooks, fn)
	return true
}

// enqueueBuffer queues a finished data buffer and transfers what credit
// allows.
func (sp *subpartition) enqueueBuffer(b *Buffer) {
	p := sp.p
	sp.mu.Lock()
	sp.buffersOut++
	sp.bytesOut += int64(b.n)
	if p.state.Load() == stateReleased {
		sp.unlock()
		p.pool.put(b)
		return
	}
	sp.queue.pushBack(entry{buf: b})
	sp.backlog++
	sp.transferLocked()
	sp.unlock()
}
