package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/peerauth"
)

// DefaultRequestTimeout is how long a partition request waits for its
// partition to be published (the idea of Flink's
// taskmanager.network.request-backoff.max).
const DefaultRequestTimeout = 10 * time.Second

// Sentinel errors of remote channels, wrapped with the gate, channel,
// partition and remote address in what InputGate.Err returns.
var (
	// ErrTransportClosed: the transport was closed, or is, when a channel
	// is connected.
	ErrTransportClosed = errors.New("network: transport closed")
	// ErrConnectionLost: the connection to the peer could not be made, or
	// broke (closed by the peer, a read or write error, a dead peer).
	ErrConnectionLost = errors.New("network: connection lost")
	// ErrPartitionNotFound: the producer's transport had no partition
	// published under the requested id within its RequestTimeout.
	ErrPartitionNotFound = errors.New("network: partition not found")
	// ErrProducerFailed: the producer could not go on sending the channel
	// (an event it could not encode).
	ErrProducerFailed = errors.New("network: producer failed")
	// ErrProtocol: a frame that is corrupt, too long, or breaks the
	// protocol (a buffer without credit, a message out of order); the
	// connection is closed.
	ErrProtocol = errors.New("network: protocol error")
	// ErrWiring: a remote channel cannot be wired as asked (index out of
	// range, connected twice, buffer sizes that differ, a bad id), found by
	// ConnectRemote or by the producer's transport.
	ErrWiring = errors.New("network: invalid wiring")
)

// TransportConfig configures a Transport.
type TransportConfig struct {
	// ListenAddr is the TCP address to listen on ("127.0.0.1:0" when
	// empty: a free port on the loopback interface).
	ListenAddr string
	// Auth authenticates every connection, both ways, before its first
	// frame (mutual TLS, a shared secret; see package peerauth); nil is
	// plain TCP, which NewTransport refuses beyond the loopback interface
	// unless Insecure. Both ends of a connection must agree.
	Auth     *peerauth.Authenticator
	Insecure bool
	// Limits bound what peers can make this transport hold; zero fields
	// take their defaults.
	Limits TransportLimits
	// Logger receives connection events and protocol errors (nothing
	// when nil).
	Logger *slog.Logger
	// RequestTimeout is how long a partition request waits for its
	// partition to be published, and the timeout of a dial and of the
	// first frame (TLS handshake included) of an accepted connection.
	// DefaultRequestTimeout when zero.
	RequestTimeout time.Duration
}

// PartitionID names a published result partition. It is opaque to the
// network; the runtime makes one per producing task, edge and attempt. At
// most MaxPartitionIDLen bytes.
type PartitionID string

// Transport is one process's end of the remote exchange: it serves the
// partitions published here to consumers on other transports, and reads
// remote partitions into local gates. Between two transports there is one
// TCP connection per direction, dialled by the consuming side, on which
// every channel between them is multiplexed. All methods are safe from any
// goroutine.
type Transport struct {
	cfg    TransportConfig
	log    *slog.Logger
	ln     net.Listener
	addr   string
	ctx    context.Context // done once Close begins: aborts dials and waits
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	published map[PartitionID]*ResultPartition
	pending   map[PartitionID][]*pendingRequest
	dialled   map[string]*conn // by the address dialled
	accepted  map[*conn]struct{}

	buffersSent     atomic.Int64
	buffersReceived atomic.Int64
	bytesSent       atomic.Int64
	bytesReceived   atomic.Int64
	maxQueued       atomic.Int64
}

// pendingRequest is a partition request that arrived before its partition
// was published. Its fields are guarded by the transport's mu.
type pendingRequest struct {
	c     *conn
	f     frame
	timer *time.Timer // answers "not found" after RequestTimeout
}

// NewTransport listens on cfg.ListenAddr and starts accepting connections.
func NewTransport(cfg TransportConfig) (*Transport, error) {
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	cfg.Limits = cfg.Limits.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.ListenAddr)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("network: transport: listen on %s: %w", cfg.ListenAddr, err)
	}
	if err := peerauth.CheckListen("the data plane", ln.Addr().String(), cfg.Auth, cfg.Insecure); err != nil {
		cancel()
		_ = ln.Close()
		return nil, fmt.Errorf("network: transport: %w", err)
	}
	t := &Transport{
		cfg:       cfg,
		ln:        ln,
		addr:      ln.Addr().String(),
		ctx:       ctx,
		cancel:    cancel,
		published: map[PartitionID]*ResultPartition{},
		pending:   map[PartitionID][]*pendingRequest{},
		dialled:   map[string]*conn{},
		accepted:  map[*conn]struct{}{},
	}
	t.log = log.With("transport", t.addr)
	t.ln = peerauth.LimitPerPeer(ln, cfg.Limits.MaxConnectionsPerPeer, func(remote string) {
		t.log.Warn("connection refused: too many from one address", "peer", remote, "limit", cfg.Limits.MaxConnectionsPerPeer,
			"key", KeyMaxConnectionsPerPeer.Name())
	})
	t.wg.Add(2)
	go t.acceptLoop()
	go t.closeIdle()
	return t, nil
}

// Addr returns the address the transport listens on, for its peers to
// dial.
func (t *Transport) Addr() string { return t.addr }

// Close closes the listener and every connection and waits for the
// transport's goroutines to end. Every remote channel of a local gate that
// has not delivered EndOfPartition fails with ErrTransportClosed, and every
// subpartition served to a remote consumer is cancelled (it drops its data,
// so its producer is not stuck). Closing twice is a no-op.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	conns := t.connsLocked()
	for _, reqs := range t.pending {
		for _, req := range reqs {
			req.timer.Stop()
		}
	}
	t.mu.Unlock()
	t.cancel()
	err := t.ln.Close()
	for _, c := range conns {
		c.close(ErrTransportClosed)
	}
	t.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("network: transport %s: close listener: %w", t.addr, err)
	}
	return nil
}

// Publish makes the subpartitions of p requestable under id by remote
// consumers; requests that arrived for id before are served now. Each
// subpartition is read by one channel, remote or in process (Connect).
// When p is released, its remote consumers that have not had
// EndOfPartition yet fail with ErrReleased. Publishing an id again
// replaces the partition for later requests.
func (t *Transport) Publish(id PartitionID, p *ResultPartition) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	if old := t.published[id]; old != nil && old != p {
		t.log.Warn("partition published again under the same id", "partition", string(id))
	}
	t.published[id] = p
	reqs := t.pending[id]
	delete(t.pending, id)
	admitted := make([]admission, 0, len(reqs))
	for _, req := range reqs {
		delete(req.c.pending, req.f.ch)
		req.timer.Stop()
		admitted = append(admitted, t.admitLocked(req.c, req.f, p))
	}
	t.mu.Unlock()
	for _, a := range admitted {
		a.start()
	}
}

// Unpublish withdraws id: later requests for it wait for a new Publish or
// time out. Channels being served go on until the partition ends or is
// released.
func (t *Transport) Unpublish(id PartitionID) {
	t.mu.Lock()
	delete(t.published, id)
	t.mu.Unlock()
}

// ConnectRemote wires channel ch of g to subpartition sub of the partition
// published as id on the transport at addr. Like Connect it is wiring done
// before the consuming task starts; the connection is made (or reused)
// asynchronously, and the channel announces its exclusive buffers as the
// initial credit of its request. If the connection cannot be made or
// breaks, or the producer refuses the request or does not publish id
// within its RequestTimeout, the channel fails: g.Err says why. Release
// of g cancels the channel on the producer's side.
func (t *Transport) ConnectRemote(g *InputGate, ch int, addr string, id PartitionID, sub int) error {
	if ch < 0 || ch >= len(g.channels) {
		return fmt.Errorf("%w: gate %s has %d channels, channel %d asked for", ErrWiring, g.name, len(g.channels), ch)
	}
	c := g.channels[ch]
	switch {
	case c.up != nil:
		return fmt.Errorf("%w: gate %s channel %d: already connected", ErrWiring, g.name, ch)
	case id == "" || len(id) > MaxPartitionIDLen:
		return fmt.Errorf("%w: gate %s channel %d: partition id of %d bytes (1 to %d)", ErrWiring, g.name, ch, len(id), MaxPartitionIDLen)
	case sub < 0 || sub > maxWireInt:
		return fmt.Errorf("%w: gate %s channel %d: subpartition %d", ErrWiring, g.name, ch, sub)
	case addr == "":
		return fmt.Errorf("%w: gate %s channel %d: no address", ErrWiring, g.name, ch)
	}
	credit := g.cfg.ExclusiveBuffersPerChannel
	r := &remoteChannel{ch: c, pid: id, sub: sub}
	r.credit.Store(int64(credit))
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return fmt.Errorf("gate %s channel %d: connect to %s: %w", g.name, ch, addr, ErrTransportClosed)
	}
	c.up = r // before the channel can get a message: deliveries use it
	for {
		cn := t.dialled[addr]
		if cn == nil {
			cn = t.dialLocked(addr)
		}
		if cn.addConsumer(r, g.cfg.BufferSize) {
			break
		}
		delete(t.dialled, addr) // closed meanwhile: dial anew
	}
	t.mu.Unlock()
	r.conn.sendRequest(r.id, sub, credit, g.cfg.BufferSize, id)
	return nil
}

// TransportStats is a snapshot of a transport's figures.
type TransportStats struct {
	// DialledConnections are the connections this transport made (to
	// read remote partitions), AcceptedConnections those it accepted (to
	// serve its published partitions).
	DialledConnections  int
	AcceptedConnections int
	// RemoteChannels counts local channels reading a remote subpartition
	// that have neither ended nor failed; ServedChannels the subpartitions
	// served to remote consumers; PendingRequests the requests waiting for
	// their partition to be published.
	RemoteChannels  int
	ServedChannels  int
	PendingRequests int
	// BuffersSent and BuffersReceived count data buffers, BytesSent and
	// BytesReceived every frame's bytes.
	BuffersSent     int64
	BuffersReceived int64
	BytesSent       int64
	BytesReceived   int64
	// QueuedBytes is what is queued to send now, or being written, over
	// every connection; MaxQueuedBytes the most one connection ever had.
	// Data is sent only against credit, so the frames queued hold at most
	// the consumers' credit (their buffers) in data, and the batch being
	// written at most as much again (the consumer may have used and
	// recycled some of it before the write returns): twice the credit,
	// plus small control frames.
	QueuedBytes    int
	MaxQueuedBytes int
}

// Stats returns a snapshot of the transport's figures.
func (t *Transport) Stats() TransportStats {
	s := TransportStats{
		BuffersSent:     t.buffersSent.Load(),
		BuffersReceived: t.buffersReceived.Load(),
		BytesSent:       t.bytesSent.Load(),
		BytesReceived:   t.bytesReceived.Load(),
		MaxQueuedBytes:  int(t.maxQueued.Load()),
	}
	t.mu.Lock()
	conns := t.connsLocked()
	s.DialledConnections, s.AcceptedConnections = len(t.dialled), len(t.accepted)
	for _, reqs := range t.pending {
		s.PendingRequests += len(reqs)
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		s.RemoteChannels += len(c.consumers)
		s.ServedChannels += len(c.producers)
		c.mu.Unlock()
		c.wmu.Lock()
		s.QueuedBytes += c.inflight
		c.wmu.Unlock()
	}
	return s
}

// noteQueued records n bytes queued on one connection for MaxQueuedBytes.
func (t *Transport) noteQueued(n int) {
	for {
		old := t.maxQueued.Load()
		if int64(n) <= old || t.maxQueued.CompareAndSwap(old, int64(n)) {
			return
		}
	}
}

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	backoff := time.Duration(0)
	for {
		nc, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait a little, as
			// net/http does, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t.log.Warn("accept failed; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-t.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		t.serveConn(nc)
	}
}

// serveConn starts an accepted connection.
func (t *Transport) serveConn(nc net.Conn) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = nc.Close()
		return
	}
	c := newConn(t, nc.RemoteAddr().String(), false)
	t.accepted[c] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	t.log.Debug("connection accepted", "peer", c.addr)
	go func() {
		defer t.wg.Done()
		// Authenticated before its first frame is read; a peer that is
		// not gets nothing from this side.
		ac, id, err := t.cfg.Auth.Server(c.ctx, nc)
		if err != nil {
			t.log.Warn("connection refused: the peer is not authenticated", "peer", c.addr, "err", err)
			c.close(fmt.Errorf("%w: %w", ErrConnectionLost, err))
			return
		}
		t.log.Debug("connection authenticated", "peer", c.addr, "identity", id)
		c.run(ac)
	}()
}

// dialLocked makes the connection to addr and starts dialling it. t.mu is
// held.
func (t *Transport) dialLocked(addr string) *conn {
	c := newConn(t, addr, true)
	t.dialled[addr] = c
	t.wg.Add(1)
	go c.dial()
	return c
}

// admission is what admitLocked decided for a request: a channel to start
// or an error to answer.
type admission struct {
	c    *conn
	f    frame
	p    *ResultPartition
	s    *serverChannel // nil: answer code and msg
	code errCode
	msg  string
}

// admitLocked checks a request for the published partition p and
// registers its channel on c, so that a cancel arriving from now on finds
// it. t.mu is held.
func (t *Transport) admitLocked(c *conn, f frame, p *ResultPartition) admission {
	a := admission{c: c, f: f, p: p, code: codeInvalid}
	switch {
	case f.sub >= len(p.subs):
		a.msg = fmt.Sprintf("partition %q (%s) has %d subpartitions, subpartition %d requested", f.id, p.name, len(p.subs), f.sub)
	case f.bufSize != p.cfg.BufferSize:
		a.msg = fmt.Sprintf("partition %q (%s) has buffer size %d, the consumer %d", f.id, p.name, p.cfg.BufferSize, f.bufSize)
	default:
		s := &serverChannel{c: c, id: f.ch, sp: p.subs[f.sub], pid: f.id}
		if c.addProducer(s) {
			a.s = s
		} else {
			a.code = 0 // the connection is closed: nobody to answer
		}
	}
	return a
}

// start attaches an admitted channel to its subpartition and gives it the
// request's credit, or answers the error. No lock is held.
func (a admission) start() {
	if a.s == nil {
		if a.code != 0 {
			a.c.sendError(a.f.ch, a.code, a.msg)
		}
		return
	}
	s := a.s
	if !s.sp.attachRemote(s) {
		s.stop(codeInvalid, fmt.Sprintf("subpartition %d of partition %q (%s) is read by another channel already", a.f.sub, a.f.id, a.p.name))
		return
	}
	if !a.p.onRelease(s.released) {
		s.released()
		return
	}
	if a.f.credit > 0 {
		s.sp.addCredit(a.f.credit)
	}
}

// request handles a partition request read from c: served at once if its
// partition is published, else kept until it is or RequestTimeout passes.
func (t *Transport) request(c *conn, f frame) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	if _, dup := c.pending[f.ch]; dup || c.hasProducer(f.ch) {
		t.mu.Unlock()
		return fmt.Errorf("%w: a second request for channel %d", ErrProtocol, f.ch)
	}
	p := t.published[f.id]
	if p == nil {
		if len(c.pending) >= t.cfg.Limits.MaxPendingRequests {
			t.mu.Unlock()
			c.sendError(f.ch, codeInvalid, fmt.Sprintf("%d partition requests of this connection wait for their partition already (%s)",
				len(c.pending), KeyMaxPendingRequests.Name()))
			return nil
		}
		req := &pendingRequest{c: c, f: f}
		t.pending[f.id] = append(t.pending[f.id], req)
		c.pending[f.ch] = req
		// No goroutine waits: a timer answers "not found" if it fires.
		req.timer = time.AfterFunc(t.cfg.RequestTimeout, func() { t.requestTimedOut(req) })
		c.touch()
		t.mu.Unlock()
		return nil
	}
	a := t.admitLocked(c, f, p)
	t.mu.Unlock()
	a.start()
	return nil
}

// requestTimedOut answers req with "not found": RequestTimeout passed
// without its partition being published.
func (t *Transport) requestTimedOut(req *pendingRequest) {
	t.mu.Lock()
	dropped := !t.closed && t.dropPendingLocked(req)
	t.mu.Unlock()
	if dropped {
		t.log.Warn("partition request timed out", "partition", string(req.f.id), "peer", req.c.addr, "after", t.cfg.RequestTimeout)
		req.c.sendError(req.f.ch, codeNotFound, fmt.Sprintf("partition %q was not published at %s within %v", req.f.id, t.addr, t.cfg.RequestTimeout))
	}
}

// dropPendingLocked forgets req; false if it was not pending any more.
// t.mu is held.
func (t *Transport) dropPendingLocked(req *pendingRequest) bool {
	reqs := t.pending[req.f.id]
	for i, r := range reqs {
		if r != req {
			continue
		}
		reqs = append(reqs[:i:i], reqs[i+1:]...)
		if len(reqs) == 0 {
			delete(t.pending, req.f.id)
		} else {
			t.pending[req.f.id] = reqs
		}
		delete(req.c.pending, req.f.ch)
		req.timer.Stop()
		req.c.touch()
		return true
	}
	return false
}

// cancelPending drops the pending request of channel ch of c, if any.
func (t *Transport) cancelPending(c *conn, ch uint64) {
	t.mu.Lock()
	if req := c.pending[ch]; req != nil {
		t.dropPendingLocked(req)
	}
	t.mu.Unlock()
}

// forget removes a closed connection and its pending requests.
func (t *Transport) forget(c *conn) {
	t.mu.Lock()
	if t.dialled[c.addr] == c {
		delete(t.dialled, c.addr)
	}
	delete(t.accepted, c)
	for _, req := range c.pending {
		t.dropPendingLocked(req)
	}
	t.mu.Unlock()
}

// connsLocked lists every connection, dialled and accepted. t.mu is held.
func (t *Transport) connsLocked() []*conn {
	conns := make([]*conn, 0, len(t.dialled)+len(t.accepted))
	for _, c := range t.dialled {
		conns = append(conns, c)
	}
	for c := range t.accepted {
		conns = append(conns, c)
	}
	return conns
}

// closeIdle closes the connections that carried no channel (and no
// pending request) for the idle timeout: a peer cannot hold a connection
// open doing nothing, and a cached connection nobody uses is let go.
func (t *Transport) closeIdle() {
	defer t.wg.Done()
	idle := t.cfg.Limits.IdleTimeout
	tick := time.NewTicker(max(idle/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		t.mu.Lock()
		conns := t.connsLocked()
		t.mu.Unlock()
		now := time.Now()
		for _, c := range conns {
			if since := c.idleSince(); !since.IsZero() && now.Sub(since) >= idle {
				t.log.Debug("closing an idle connection", "connection", c.String(), "idle", now.Sub(since).Round(time.Millisecond))
				c.close(fmt.Errorf("%w: idle for %v (%s)", ErrConnectionLost, idle, KeyIdleTimeout.Name()))
			}
		}
	}
}
