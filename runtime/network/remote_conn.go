package network

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/runtime/network/event"
)

// readBufferSize is the read buffer of a connection: a frame that fits is
// decoded in place.
const readBufferSize = 64 << 10

// maxHeldEvents bounds the priority events a channel holds until the
// messages sent before them arrive: a producer has at most one per
// concurrent checkpoint in flight (unaligned barriers, the markers that
// cancel them).
const maxHeldEvents = 64

// closeFlushTimeout bounds the write of the error frame that tells a peer
// why its connection is closed.
const closeFlushTimeout = time.Second

// conn is one TCP connection between two transports, dialled by the
// consuming side. On the dialler's end it carries the remote channels of
// local gates (consumers); on the acceptor's end the subpartitions it
// serves (producers).
//
// Sending never blocks: a message is encoded into the send queue under
// wmu and the writer goroutine writes the queue out, priority frames
// first. A reader goroutine reads and applies the peer's frames.
type conn struct {
	t       *Transport
	addr    string // the peer's address (as dialled, or as accepted)
	dialler bool
	ctx     context.Context // aborts the dial
	cancel  context.CancelFunc
	done    chan struct{} // closed by close
	kick    chan struct{} // wakes the writer; capacity 1
	once    sync.Once

	mu        sync.Mutex
	nc        net.Conn // nil while dialling
	closed    bool
	consumers map[uint64]*remoteChannel // dialler: by channel id
	nextID    uint64                    // dialler: the next channel id
	producers map[uint64]*serverChannel // acceptor: by channel id
	maxData   atomic.Int64              // dialler: the largest buffer size of its channels

	// Guarded by the transport's mu.
	pending map[uint64]*pendingRequest

	// lastBusy is when a channel or request was last added or removed
	// (unix nanoseconds): the idle timeout counts from it.
	lastBusy atomic.Int64

	wmu         sync.Mutex
	prio        []byte // frames to write before normal
	normal      []byte
	wclosed     bool
	inflight    int   // bytes queued or being written
	maxInflight int   // the most inflight ever was
	closeAfter  error // close with it once the queue is written
}

func newConn(t *Transport, addr string, dialler bool) *conn {
	ctx, cancel := context.WithCancel(t.ctx)
	c := &conn{
		t: t, addr: addr, dialler: dialler,
		ctx: ctx, cancel: cancel,
		done:    make(chan struct{}),
		kick:    make(chan struct{}, 1),
		pending: map[uint64]*pendingRequest{},
	}
	c.touch()
	if dialler {
		c.consumers = map[uint64]*remoteChannel{}
		c.nextID = 1
		c.normal = appendHello(nil)
		c.inflight = len(c.normal)
		c.kick <- struct{}{}
	} else {
		c.producers = map[uint64]*serverChannel{}
	}
	return c
}

func (c *conn) String() string {
	if c.dialler {
		return "connection to " + c.addr
	}
	return "connection from " + c.addr
}

// touch notes that a channel or request came or went.
func (c *conn) touch() { c.lastBusy.Store(time.Now().UnixNano()) }

// idleSince is when the connection last carried a channel or a pending
// request; the zero Time while it carries one.
func (c *conn) idleSince() time.Time {
	c.t.mu.Lock()
	pending := len(c.pending)
	c.t.mu.Unlock()
	c.mu.Lock()
	busy := pending+len(c.consumers)+len(c.producers) > 0 || c.closed
	c.mu.Unlock()
	if busy {
		return time.Time{}
	}
	return time.Unix(0, c.lastBusy.Load())
}

// dial connects to the peer and authenticates it, then runs the writer
// and the reader.
func (c *conn) dial() {
	defer c.t.wg.Done()
	d := &net.Dialer{Timeout: c.t.cfg.RequestTimeout}
	nc, err := d.DialContext(c.ctx, "tcp", c.addr)
	if err != nil {
		c.close(fmt.Errorf("%w: dial %s: %w", ErrConnectionLost, c.addr, err))
		return
	}
	nc, id, err := c.t.cfg.Auth.Client(c.ctx, nc)
	if err != nil {
		c.close(fmt.Errorf("%w: %s: %w", ErrConnectionLost, c.addr, err))
		return
	}
	c.t.log.Debug("connected", "peer", c.addr, "identity", id)
	c.run(nc)
}

// run attaches the authenticated connection nc and runs the writer and,
// on this goroutine, the reader; it closes nc when c was closed
// meanwhile.
func (c *conn) run(nc net.Conn) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = nc.Close()
		return
	}
	c.nc = nc
	c.t.wg.Add(1)
	c.mu.Unlock()
	go c.writeLoop(nc)
	c.readLoop(nc)
}

// close closes the connection for err, once: it fails every channel of
// a local gate on it that has not ended, and cancels every subpartition it
// serves.
func (c *conn) close(err error) {
	c.once.Do(func() {
		c.wmu.Lock()
		c.wclosed = true
		c.prio, c.normal = nil, nil
		c.inflight = 0
		c.wmu.Unlock()
		c.mu.Lock()
		c.closed = true
		nc := c.nc
		consumers, producers := c.consumers, c.producers
		c.consumers, c.producers = nil, nil
		c.mu.Unlock()
		c.cancel()
		if nc != nil {
			_ = nc.Close()
		}
		close(c.done)
		c.t.forget(c)
		// A connection that carried channels and was lost (its peer's
		// process went, the network broke) is an expected event of a
		// failover: INFO, once; anything else that ends one is WARN.
		level := slog.LevelDebug
		switch {
		case len(consumers) == 0 && len(producers) == 0, errors.Is(err, ErrTransportClosed):
		case errors.Is(err, ErrConnectionLost):
			level = slog.LevelInfo
		default:
			level = slog.LevelWarn
		}
		c.t.log.Log(context.Background(), level, "connection closed", "connection", c.String(),
			"channels", len(consumers), "served", len(producers), "err", err)
		for _, r := range consumers {
			r.fail(err)
		}
		for _, s := range producers {
			s.done.Store(true)
			s.sp.cancel()
		}
	})
}

// closeAfterFlush sends the peer a connection-level error frame saying
// why, then closes the connection for err.
func (c *conn) closeAfterFlush(code errCode, err error) {
	c.wmu.Lock()
	if c.wclosed || c.closeAfter != nil {
		c.wmu.Unlock()
		return
	}
	// Nothing else is sent: what is queued is for a peer that broke the
	// protocol, or that this side can no longer understand.
	n := len(c.prio) + len(c.normal)
	c.normal = c.normal[:0]
	c.prio = appendError(c.prio, 0, code, err.Error())
	c.closeAfter = err
	c.unlockQueue(len(c.prio) - n)
	c.mu.Lock()
	if c.nc != nil {
		_ = c.nc.SetWriteDeadline(time.Now().Add(closeFlushTimeout))
	}
	c.mu.Unlock()
}

// Sending. Each send encodes its frame into the queue; after a close it
// is dropped.

func (c *conn) lockQueue(prio bool) *[]byte {
	c.wmu.Lock()
	if c.wclosed || c.closeAfter != nil {
		c.wmu.Unlock()
		return nil
	}
	if prio {
		return &c.prio
	}
	return &c.normal
}

// unlockQueue accounts added bytes, releases wmu and wakes the writer.
func (c *conn) unlockQueue(added int) {
	c.inflight += added
	if c.inflight > c.maxInflight {
		c.maxInflight = c.inflight
		c.t.noteQueued(c.inflight)
	}
	c.wmu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *conn) sendRequest(ch uint64, sub, credit, bufSize int, id PartitionID) {
	if q := c.lockQueue(false); q != nil {
		n := len(*q)
		*q = appendRequest(*q, ch, sub, credit, bufSize, id)
		c.unlockQueue(len(*q) - n)
	}
}

func (c *conn) sendCredit(ch uint64, credit int) {
	if q := c.lockQueue(false); q != nil {
		n := len(*q)
		*q = appendCredit(*q, ch, credit)
		c.unlockQueue(len(*q) - n)
	}
}

func (c *conn) sendCancel(ch uint64) {
	if q := c.lockQueue(false); q != nil {
		n := len(*q)
		*q = appendCancel(*q, ch)
		c.unlockQueue(len(*q) - n)
	}
}

func (c *conn) sendBuffer(ch, seq uint64, backlog int, data []byte) {
	if q := c.lockQueue(false); q != nil {
		n := len(*q)
		*q = appendBuffer(*q, ch, seq, backlog, data)
		c.unlockQueue(len(*q) - n)
	}
}

func (c *conn) sendEvent(ch, seq uint64, backlog int, prio bool, ev event.Event) error {
	q := c.lockQueue(prio)
	if q == nil {
		return nil
	}
	n := len(*q)
	var err error
	*q, err = appendEvent(*q, ch, seq, backlog, prio, ev)
	c.unlockQueue(len(*q) - n)
	return err
}

func (c *conn) sendBacklog(ch, seq uint64, backlog int) {
	if q := c.lockQueue(false); q != nil {
		n := len(*q)
		*q = appendBacklog(*q, ch, seq, backlog)
		c.unlockQueue(len(*q) - n)
	}
}

func (c *conn) sendError(ch uint64, code errCode, msg string) {
	if q := c.lockQueue(false); q != nil {
		n := len(*q)
		*q = appendError(*q, ch, code, msg)
		c.unlockQueue(len(*q) - n)
	}
}

// writeLoop writes the send queue out: what is queued when it wakes,
// priority frames first, so that a priority event overtakes the frames
// queued before it that are not being written yet.
func (c *conn) writeLoop(nc net.Conn) {
	defer c.t.wg.Done()
	var spareP, spareN []byte // the batches written last, reused
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		for {
			c.wmu.Lock()
			if c.wclosed {
				c.wmu.Unlock()
				return
			}
			prio, normal, closeAfter := c.prio, c.normal, c.closeAfter
			c.prio, c.normal = spareP[:0], spareN[:0]
			c.wmu.Unlock()
			if len(prio)+len(normal) == 0 {
				spareP, spareN = prio, normal
				if closeAfter != nil {
					c.close(closeAfter)
					return
				}
				break
			}
			for _, b := range [2][]byte{prio, normal} {
				if len(b) == 0 {
					continue
				}
				if _, err := nc.Write(b); err != nil {
					if closeAfter == nil {
						closeAfter = fmt.Errorf("%w: write: %w", ErrConnectionLost, err)
					}
					c.close(closeAfter)
					return
				}
			}
			written := len(prio) + len(normal)
			c.t.bytesSent.Add(int64(written))
			c.wmu.Lock()
			if !c.wclosed { // close has dropped the count
				c.inflight -= written
			}
			c.wmu.Unlock()
			spareP, spareN = prio[:0], normal[:0]
		}
	}
}

// readLoop reads and applies the peer's frames until the connection
// fails or closes.
func (c *conn) readLoop(nc net.Conn) {
	br := bufio.NewReaderSize(nc, readBufferSize)
	var scratch []byte
	hello := !c.dialler // the acceptor waits for the dialler's hello
	if hello {
		_ = nc.SetReadDeadline(time.Now().Add(c.t.cfg.RequestTimeout))
	}
	for {
		// Wait for the next frame's header before reading the limit: a
		// channel added meanwhile may have raised it (its request is sent
		// after it is registered, so its frames come after).
		_, _ = br.Peek(6) // an error comes again from readFrame
		maxData := 0
		if c.dialler {
			maxData = int(c.maxData.Load())
		}
		body, n, err := readFrame(br, &scratch, maxData)
		if err != nil {
			c.readFailed(err)
			return
		}
		c.t.bytesReceived.Add(int64(n))
		f, err := decodeFrame(body, maxData)
		if err == nil && hello {
			if f.typ != frameHello {
				err = fmt.Errorf("%w: the first frame is a %s frame, not hello", ErrProtocol, f.typ)
			} else {
				hello = false
				_ = nc.SetReadDeadline(time.Time{})
				continue
			}
		}
		if err == nil {
			err = c.apply(&f)
		}
		if err != nil {
			if errors.Is(err, errPeerClosed) {
				return
			}
			c.protocolError(err)
			return
		}
	}
}

// errPeerClosed stops the reader after the peer's connection-level
// error frame closed the connection.
var errPeerClosed = errors.New("closed by the peer's error frame")

func (c *conn) readFailed(err error) {
	select {
	case <-c.done:
		return // closed on this side
	default:
	}
	switch {
	case errors.Is(err, ErrProtocol):
		c.protocolError(err)
		return
	case errors.Is(err, io.EOF):
		err = fmt.Errorf("%w: closed by the peer", ErrConnectionLost)
	default:
		err = fmt.Errorf("%w: read: %w", ErrConnectionLost, err)
	}
	c.close(err)
}

func (c *conn) protocolError(err error) {
	c.t.log.Warn("protocol error; closing the connection", "connection", c.String(), "err", err)
	c.closeAfterFlush(codeProtocol, err)
}

// apply applies one frame read from the peer.
func (c *conn) apply(f *frame) error {
	if f.typ == frameError && f.ch == 0 {
		c.close(fmt.Errorf("%w: the peer closed the connection: %s", f.code.sentinel(), f.data))
		return errPeerClosed
	}
	if c.dialler {
		return c.applyDownstream(f)
	}
	return c.applyUpstream(f)
}

// applyDownstream applies a producer's frame to its channel.
func (c *conn) applyDownstream(f *frame) error {
	switch f.typ {
	case frameBuffer, frameEvent, frameBacklog, frameError:
	default:
		return fmt.Errorf("%w: a %s frame from the producer", ErrProtocol, f.typ)
	}
	c.mu.Lock()
	r := c.consumers[f.ch]
	unknown := r == nil && f.ch >= c.nextID
	c.mu.Unlock()
	if unknown {
		return fmt.Errorf("%w: a %s frame for channel %d, never requested", ErrProtocol, f.typ, f.ch)
	}
	if r == nil || r.state.Load() != rcActive {
		return nil // cancelled or ended: what was on its way is dropped
	}
	switch f.typ {
	case frameBuffer:
		return r.onBuffer(f)
	case frameEvent:
		return r.onEvent(f)
	case frameBacklog:
		return r.onBacklog(f)
	}
	c.removeConsumer(r.id)
	r.fail(fmt.Errorf("%w: %s", f.code.sentinel(), f.data))
	return nil
}

// applyUpstream applies a consumer's frame to its subpartition.
func (c *conn) applyUpstream(f *frame) error {
	switch f.typ {
	case frameRequest:
		return c.t.request(c, *f)
	case frameCredit:
		if s := c.producer(f.ch); s != nil {
			s.sp.addCredit(f.credit)
		}
		return nil
	case frameCancel:
		c.t.cancelPending(c, f.ch)
		if s := c.removeProducer(f.ch); s != nil {
			s.done.Store(true)
			s.sp.cancel()
		}
		return nil
	}
	return fmt.Errorf("%w: a %s frame from the consumer", ErrProtocol, f.typ)
}

// The channel registry.

// addConsumer gives r a channel id on c; false if c is closed.
func (c *conn) addConsumer(r *remoteChannel, bufSize int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	r.conn, r.id = c, c.nextID
	c.nextID++
	c.consumers[r.id] = r
	c.touch()
	if int64(bufSize) > c.maxData.Load() {
		c.maxData.Store(int64(bufSize))
	}
	return true
}

func (c *conn) removeConsumer(id uint64) {
	c.mu.Lock()
	delete(c.consumers, id)
	c.mu.Unlock()
	c.touch()
}

// addProducer registers s; false if c is closed.
func (c *conn) addProducer(s *serverChannel) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.producers[s.id] = s
	c.touch()
	return true
}

func (c *conn) producer(id uint64) *serverChannel {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.producers[id]
}

func (c *conn) hasProducer(id uint64) bool { return c.producer(id) != nil }

func (c *conn) removeProducer(id uint64) *serverChannel {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.producers[id]
	delete(c.producers, id)
	c.touch()
	return s
}

// serverChannel is the consumer as a subpartition served to a remote
// transport sees it: a downstream whose messages become frames. Its
// downstream methods run under the subpartition's lock, so in order.
type serverChannel struct {
	c    *conn
	id   uint64
	sp   *subpartition
	pid  PartitionID
	seq  uint64      // messages sent; under the subpartition's lock
	done atomic.Bool // ended, cancelled, released or its connection closed
}

func (s *serverChannel) deliverBuffer(data []byte, backlog int) {
	if s.done.Load() {
		return
	}
	s.c.sendBuffer(s.id, s.seq, backlog, data)
	s.seq++
	s.c.t.buffersSent.Add(1)
}

func (s *serverChannel) deliverEvent(ev event.Event, priority bool, backlog int) {
	if s.done.Load() {
		return
	}
	if err := s.c.sendEvent(s.id, s.seq, backlog, priority, ev); err != nil {
		s.stop(codeFailed, fmt.Sprintf("partition %q: cannot send %v: %v", s.pid, ev, err))
		s.sp.cancel() // applied by the goroutine holding the lock, when it lets go
		return
	}
	s.seq++
	if _, eop := ev.(event.EndOfPartition); eop && !s.done.Swap(true) {
		s.c.removeProducer(s.id) // the channel has ended
	}
}

func (s *serverChannel) announceBacklog(backlog int) {
	if s.done.Load() {
		return
	}
	s.c.sendBacklog(s.id, s.seq, backlog)
	s.seq++
}

// stop ends the channel with an error frame, unless it has ended.
func (s *serverChannel) stop(code errCode, msg string) {
	if s.done.Swap(true) {
		return
	}
	s.c.removeProducer(s.id)
	s.c.sendError(s.id, code, msg)
}

// released is the partition's release hook.
func (s *serverChannel) released() {
	s.stop(codeReleased, fmt.Sprintf("partition %q was released by its producer", s.pid))
}

// States of a remoteChannel.
const (
	rcActive int32 = iota
	rcFinished
	rcCancelled
	rcFailed
)

// remoteChannel is the producer as a channel of a local gate reading a
// remote subpartition sees it: an upstream whose messages become frames.
// The reader goroutine of its connection applies the producer's frames to
// the channel, in the order the producer sent them.
type remoteChannel struct {
	conn   *conn
	id     uint64
	ch     *inputChannel
	pid    PartitionID
	sub    int
	state  atomic.Int32
	credit atomic.Int64 // announced and not yet used; never more than the channel has set aside

	// The reader goroutine's.
	applied uint64           // the producer's messages applied to the channel
	held    deque[heldEvent] // priority events waiting for the messages sent before them
}

// heldEvent is a priority event that overtook, on the wire, messages sent
// before it: it is applied once they are, so that it overtakes them in
// the gate as it would in process (it carries copies of those still
// unpolled, which are still delivered after it).
type heldEvent struct {
	ev      event.Event
	seq     uint64
	backlog int
}

func (r *remoteChannel) addCredit(n int) {
	if r.state.Load() != rcActive {
		return
	}
	r.credit.Add(int64(n))
	r.conn.sendCredit(r.id, n)
}

func (r *remoteChannel) cancel() {
	if !r.state.CompareAndSwap(rcActive, rcCancelled) {
		return
	}
	r.conn.removeConsumer(r.id)
	r.conn.sendCancel(r.id)
}

// fail fails the channel's gate, unless the channel has ended.
func (r *remoteChannel) fail(err error) {
	if !r.state.CompareAndSwap(rcActive, rcFailed) {
		return
	}
	r.ch.g.fail(r.ch, fmt.Errorf("partition %q subpartition %d at %s: %w", r.pid, r.sub, r.conn.addr, err))
}

func (r *remoteChannel) outOfOrder(f *frame) error {
	return fmt.Errorf("%w: channel %d: %s message %d arrived when %d was expected", ErrProtocol, r.id, f.typ, f.seq, r.applied)
}

func (r *remoteChannel) onBuffer(f *frame) error {
	if f.seq != r.applied {
		return r.outOfOrder(f)
	}
	if n := len(f.data); n > r.ch.g.cfg.BufferSize {
		return fmt.Errorf("%w: channel %d: a buffer of %d bytes, its buffer size is %d", ErrProtocol, r.id, n, r.ch.g.cfg.BufferSize)
	}
	if r.credit.Add(-1) < 0 {
		return fmt.Errorf("%w: channel %d: a buffer without credit", ErrProtocol, r.id)
	}
	r.applied++
	r.ch.deliverBuffer(f.data, f.backlog)
	r.conn.t.buffersReceived.Add(1)
	r.releaseHeld()
	return nil
}

func (r *remoteChannel) onEvent(f *frame) error {
	if f.prio {
		if f.seq < r.applied || (r.held.len() > 0 && f.seq <= r.held.at(r.held.len()-1).seq) {
			return r.outOfOrder(f)
		}
		if r.held.len() >= maxHeldEvents {
			return fmt.Errorf("%w: channel %d: more than %d priority events ahead of the messages sent before them", ErrProtocol, r.id, maxHeldEvents)
		}
		r.held.pushBack(heldEvent{ev: f.ev, seq: f.seq, backlog: f.backlog})
		r.releaseHeld()
		return nil
	}
	if f.seq != r.applied {
		return r.outOfOrder(f)
	}
	r.applied++
	r.ch.deliverEvent(f.ev, false, f.backlog)
	if _, eop := f.ev.(event.EndOfPartition); eop && r.state.CompareAndSwap(rcActive, rcFinished) {
		r.conn.removeConsumer(r.id) // ended: a broken connection no longer fails it
		return nil
	}
	r.releaseHeld()
	return nil
}

func (r *remoteChannel) onBacklog(f *frame) error {
	if f.seq != r.applied {
		return r.outOfOrder(f)
	}
	r.applied++
	r.ch.announceBacklog(f.backlog)
	r.releaseHeld()
	return nil
}

// releaseHeld applies the held priority events whose turn has come.
func (r *remoteChannel) releaseHeld() {
	for r.held.len() > 0 && r.held.front().seq == r.applied {
		e, _ := r.held.popFront()
		r.applied++
		r.ch.deliverEvent(e.ev, true, e.backlog)
	}
}
