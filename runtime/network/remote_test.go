package network_test

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/checkpoint"
	"github.com/sluicehq/sluice/internal/testcerts"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/peerauth"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/network/event"
)

// checkRecords checks that channel ch delivered the n records produce
// wrote to subpartition sub, in order, then EndOfPartition.
func checkRecords(t *testing.T, c *consumer, ch, sub, n int) {
	t.Helper()
	got := c.got[ch]
	if len(got) != n+1 || !got[n].isEOP() {
		t.Fatalf("channel %d: %d elements, want %d records and end of partition", ch, len(got), n)
	}
	for i, e := range got[:n] {
		if e.ev != nil || e.rec[0] != byte(i) || e.rec[1] != byte(sub) {
			t.Fatalf("channel %d element %d: %v, want record %d of subpartition %d", ch, i, e, i, sub)
		}
	}
}

func (e elem) isEOP() bool { return e.ev != nil && e.ev.Kind() == event.KindEndOfPartition }

// TestRemoteChannelsMultiplexedBothWays: two transports, each producing a
// partition read by two gates of the other; every channel between them in
// a direction shares one connection, and every channel delivers its
// records in order.
func TestRemoteChannelsMultiplexedBothWays(t *testing.T) {
	a := newTransport(t, network.TransportConfig{})
	b := newTransport(t, network.TransportConfig{})
	cfg := network.Config{BufferSize: 128, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 2}
	ctx := testutil.Context(t, 0)
	const records = 400
	type side struct {
		p     *network.ResultPartition
		gates []*network.InputGate
		wakes []chan struct{}
	}
	var sides []side
	for _, dir := range []struct{ prod, cons *network.Transport }{{a, b}, {b, a}} {
		s := side{p: network.NewResultPartition("p", 4, cfg, nil)}
		wire := overTCP(dir.prod, dir.cons, "")
		for k := range 2 {
			wake := make(chan struct{}, 1)
			g := network.NewInputGate("g", 2, cfg, wake)
			for ch := range 2 {
				wire(t, s.p, 2*k+ch, g, ch)
			}
			s.gates, s.wakes = append(s.gates, g), append(s.wakes, wake)
		}
		sides = append(sides, s)
	}
	var dones []<-chan error
	for _, s := range sides {
		dones = append(dones, produce(ctx, s.p, records, 50))
	}
	var wg sync.WaitGroup
	consumers := make([][]*consumer, len(sides))
	for i, s := range sides {
		for k, g := range s.gates {
			c := newConsumer(t, g)
			consumers[i] = append(consumers[i], c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.runUntilFinished(ctx, s.wakes[k]); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	for _, done := range dones {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for i := range sides {
		for k, c := range consumers[i] {
			for ch := range 2 {
				checkRecords(t, c, ch, 2*k+ch, records)
			}
		}
	}
	sa, sb := a.Stats(), b.Stats()
	for _, s := range []network.TransportStats{sa, sb} {
		if s.DialledConnections != 1 || s.AcceptedConnections != 1 {
			t.Fatalf("want one connection each way, got %+v", s)
		}
		if s.RemoteChannels != 0 || s.ServedChannels != 0 {
			t.Fatalf("channels left after the end: %+v", s)
		}
	}
	if sa.BuffersSent != sb.BuffersReceived || sb.BuffersSent != sa.BuffersReceived || sa.BuffersSent == 0 || sb.BuffersSent == 0 {
		t.Fatalf("buffers sent and received differ: %+v, %+v", sa, sb)
	}
}

// TestRemoteMemoryBoundedUnderSlowConsumer: a fast producer, a consumer
// that takes one buffer at a time and only once the producer is blocked.
// Memory stays within the configuration: the pools on both sides never
// allocate more than they hold, the buffers sent and not yet recycled never
// exceed the consumer's credit, and the producer's send queue never holds
// more than that credit's worth of frames.
func TestRemoteMemoryBoundedUnderSlowConsumer(t *testing.T) {
	prod := newTransport(t, network.TransportConfig{})
	cons := newTransport(t, network.TransportConfig{})
	const subs, excl, float, bufSize = 3, 2, 3, 256
	cfg := network.Config{BufferSize: bufSize, ExclusiveBuffersPerChannel: excl, FloatingBuffersPerGate: float}
	credit := subs*excl + float
	wake := make(chan struct{}, 1)
	p := network.NewResultPartition("p", subs, cfg, nil)
	g := network.NewInputGate("g", subs, cfg, wake)
	wire := overTCP(prod, cons, "")
	for i := range subs {
		wire(t, p, i, g, i)
	}
	ctx := testutil.Context(t, 0)
	const records, size = 150, 700 // each spans buffers
	done := produce(ctx, p, records, size)
	var produced error
	finished := false
	streams := make([][]byte, subs)
	recycled := int64(0)
	check := func() {
		t.Helper()
		ps := p.Stats()
		if ps.PoolAllocated > ps.PoolSize || ps.PoolSize != subs*excl+float {
			t.Fatalf("output pool allocated %d of %d", ps.PoolAllocated, ps.PoolSize)
		}
		gs := g.Stats()
		if gs.FloatingAllocated > float {
			t.Fatalf("gate allocated %d floating buffers of %d", gs.FloatingAllocated, float)
		}
		for i, cs := range gs.Channels {
			if cs.ExclusiveAllocated > excl {
				t.Fatalf("channel %d allocated %d exclusive buffers of %d", i, cs.ExclusiveAllocated, excl)
			}
		}
		// This goroutine is the only one recycling: sent - recycled is
		// exact, whatever is on the wire.
		if out := prod.Stats().BuffersSent - recycled; out > int64(credit) {
			t.Fatalf("%d buffers sent and not recycled, the consumer's credit is %d", out, credit)
		}
	}
	for !g.Finished() {
		check()
		boe, ok := g.Poll()
		if !ok {
			select {
			case <-wake:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			continue
		}
		if boe.Buffer != nil {
			streams[boe.Channel] = append(streams[boe.Channel], boe.Buffer.Bytes()...)
			boe.Buffer.Recycle()
			recycled++
		}
		if !finished {
			await(t, "the producer to block or end", func() bool {
				select {
				case produced = <-done:
					finished = true
				default:
				}
				return finished || p.Stats().BlockedWriters > 0
			})
		}
	}
	if !finished {
		produced = <-done
	}
	if produced != nil {
		t.Fatal(produced)
	}
	check()
	for i, stream := range streams {
		r := network.NewRecordReader()
		r.FeedRaw(stream)
		n := 0
		for {
			rec, ok := r.Next()
			if !ok {
				break
			}
			if len(rec) != size || rec[0] != byte(n) || rec[1] != byte(i) {
				t.Fatalf("channel %d record %d: %d bytes %v", i, n, len(rec), rec[:2])
			}
			n++
		}
		if n != records || r.Err() != nil {
			t.Fatalf("channel %d: %d records (%v), want %d", i, n, r.Err(), records)
		}
	}
	ps, cs := prod.Stats(), cons.Stats()
	if ps.BuffersSent < int64(10*credit) || p.Stats().BackPressuredNanos == 0 {
		t.Fatalf("the producer was not held back: %+v", ps)
	}
	// The batch being filled and the one being written hold at most the
	// credit each; a buffer frame adds at most 36 bytes to the buffer;
	// events and backlog frames are small, and there are few of them.
	if limit := 2*credit*(bufSize+36) + 512; ps.MaxQueuedBytes > limit {
		t.Fatalf("producer's send queue held %d bytes, the credit allows %d", ps.MaxQueuedBytes, limit)
	}
	if cs.MaxQueuedBytes > 4096 {
		t.Fatalf("consumer's send queue (credit frames) held %d bytes", cs.MaxQueuedBytes)
	}
}

// brokenSetup is a producer on one transport read through a proxy by a
// gate on another, with the producer writing until it blocks.
type brokenSetup struct {
	prod, cons *network.Transport
	px         *proxy
	p          *network.ResultPartition
	g          *network.InputGate
	wake       chan struct{}
	id         network.PartitionID
	done       <-chan error
}

func newBrokenSetup(t *testing.T) *brokenSetup {
	s := &brokenSetup{
		prod: newTransport(t, network.TransportConfig{}),
		cons: newTransport(t, network.TransportConfig{}),
		wake: make(chan struct{}, 1),
	}
	s.px = newProxy(t, s.prod.Addr())
	cfg := network.Config{BufferSize: 64, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
	s.p = network.NewResultPartition("p", 2, cfg, nil)
	s.g = network.NewInputGate("g", 2, cfg, s.wake)
	s.id = newPartitionID(t)
	s.prod.Publish(s.id, s.p)
	for i := range 2 {
		if err := s.cons.ConnectRemote(s.g, i, s.px.addr(), s.id, i); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.p.Release)
	t.Cleanup(s.g.Release)
	s.done = produce(testutil.Context(t, 0), s.p, 5000, 40)
	// Some data arrives, then the producer is stuck on the consumer's
	// credit.
	await(t, "data at the consumer", func() bool { return s.g.Stats().QueuedBuffers > 0 })
	await(t, "the producer to block", func() bool { return s.p.Stats().BlockedWriters > 0 })
	await(t, "both requests served", func() bool { return s.prod.Stats().ServedChannels == 2 })
	return s
}

// checkConsumerFailed checks the gate's error and that it delivers
// nothing more.
func (s *brokenSetup) checkConsumerFailed(t *testing.T, want error, addr string) {
	t.Helper()
	err := awaitGateErr(t, s.g, s.wake)
	if !errors.Is(err, want) {
		t.Fatalf("gate error %v, want %v", err, want)
	}
	for _, part := range []string{"gate g", "partition " + `"` + string(s.id) + `"`, addr} {
		if !strings.Contains(err.Error(), part) {
			t.Fatalf("gate error %q does not name %q", err, part)
		}
	}
	if _, ok := s.g.Poll(); ok {
		t.Fatal("a failed gate delivered something")
	}
	if _, ok := s.g.PollPriority(); ok || s.g.HasPriority() {
		t.Fatal("a failed gate has a priority event")
	}
}

// checkProducerReleased checks that the producer's subpartitions were
// cancelled: the producer is not stuck, everything it wrote is dropped.
func (s *brokenSetup) checkProducerReleased(t *testing.T) {
	t.Helper()
	if err := <-s.done; err != nil {
		t.Fatalf("producer: %v", err)
	}
	if st := s.p.Stats(); st.QueuedBuffers != 0 || st.PoolFree != st.PoolSize {
		t.Fatalf("the producer's subpartitions still hold buffers: %+v", st)
	}
	await(t, "the producer transport to forget the channels", func() bool { return s.prod.Stats().ServedChannels == 0 })
}

// TestRemoteBrokenConnection: a connection that breaks (cut in the
// network, the producer's or the consumer's transport closed) fails the
// consumer's gate with an error naming the gate, the partition and the
// address, and cancels the subpartitions it was reading, so that the
// producer is not stuck.
func TestRemoteBrokenConnection(t *testing.T) {
	t.Run("cut", func(t *testing.T) {
		s := newBrokenSetup(t)
		s.px.cut()
		s.checkConsumerFailed(t, network.ErrConnectionLost, s.px.addr())
		s.checkProducerReleased(t)
		if st := s.cons.Stats(); st.DialledConnections != 0 || st.RemoteChannels != 0 {
			t.Fatalf("consumer transport after the break: %+v", st)
		}
	})
	t.Run("producer transport closed", func(t *testing.T) {
		s := newBrokenSetup(t)
		if err := s.prod.Close(); err != nil {
			t.Fatal(err)
		}
		s.checkConsumerFailed(t, network.ErrConnectionLost, s.px.addr())
		s.checkProducerReleased(t)
	})
	t.Run("consumer transport closed", func(t *testing.T) {
		s := newBrokenSetup(t)
		if err := s.cons.Close(); err != nil {
			t.Fatal(err)
		}
		s.checkConsumerFailed(t, network.ErrTransportClosed, s.px.addr())
		s.checkProducerReleased(t)
		var wiringErr error
		if wiringErr = s.cons.ConnectRemote(network.NewInputGate("late", 1, network.Config{}, nil), 0, s.px.addr(), s.id, 0); !errors.Is(wiringErr, network.ErrTransportClosed) {
			t.Fatalf("ConnectRemote on a closed transport: %v", wiringErr)
		}
	})
}

// TestRemoteReleaseReachesTheOtherEnd: releasing the consumer's gate
// cancels the remote subpartitions (the producer drops its data and is not
// stuck); releasing the producer's partition fails the remote consumer.
func TestRemoteReleaseReachesTheOtherEnd(t *testing.T) {
	t.Run("gate", func(t *testing.T) {
		s := newBrokenSetup(t)
		s.g.Release()
		s.checkProducerReleased(t)
		if err := s.g.Err(); err != nil {
			t.Fatalf("a released gate reports %v", err)
		}
		await(t, "the consumer transport to forget the channels", func() bool { return s.cons.Stats().RemoteChannels == 0 })
	})
	t.Run("partition", func(t *testing.T) {
		s := newBrokenSetup(t)
		s.p.Release()
		if err := <-s.done; !errors.Is(err, network.ErrReleased) {
			t.Fatalf("producer after Release: %v", err)
		}
		s.checkConsumerFailed(t, network.ErrReleased, s.px.addr())
		await(t, "the producer transport to forget the channels", func() bool { return s.prod.Stats().ServedChannels == 0 })
	})
}

// TestRemoteEndedChannelSurvivesTheConnection: a channel that delivered
// EndOfPartition is done with its connection; closing the producer's
// transport afterwards fails nothing.
func TestRemoteEndedChannelSurvivesTheConnection(t *testing.T) {
	prod := newTransport(t, network.TransportConfig{})
	cons := newTransport(t, network.TransportConfig{})
	cfg := network.Config{BufferSize: 64}
	wake := make(chan struct{}, 1)
	p := network.NewResultPartition("p", 1, cfg, nil)
	g := network.NewInputGate("g", 1, cfg, wake)
	overTCP(prod, cons, "")(t, p, 0, g, 0)
	ctx := testutil.Context(t, 0)
	if err := <-produce(ctx, p, 3, 10); err != nil {
		t.Fatal(err)
	}
	await(t, "end of partition at the consumer", func() bool { return cons.Stats().RemoteChannels == 0 })
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}
	await(t, "the consumer transport to see the connection go", func() bool { return cons.Stats().DialledConnections == 0 })
	c := newConsumer(t, g)
	if err := c.runUntilFinished(ctx, wake); err != nil {
		t.Fatal(err)
	}
	if err := g.Err(); err != nil {
		t.Fatalf("an ended channel failed: %v", err)
	}
	checkRecords(t, c, 0, 0, 3)
}

// TestRemoteRequestBeforePublish: a request that arrives before its
// partition is published waits, and is served once it is; data the
// producer wrote meanwhile is delivered.
func TestRemoteRequestBeforePublish(t *testing.T) {
	prod := newTransport(t, network.TransportConfig{})
	cons := newTransport(t, network.TransportConfig{})
	cfg := network.Config{BufferSize: 64, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
	wake := make(chan struct{}, 1)
	p := network.NewResultPartition("p", 2, cfg, nil)
	g := network.NewInputGate("g", 2, cfg, wake)
	id := newPartitionID(t)
	for i := range 2 {
		if err := cons.ConnectRemote(g, i, prod.Addr(), id, 1-i); err != nil {
			t.Fatal(err)
		}
	}
	await(t, "both requests to wait at the producer", func() bool { return prod.Stats().PendingRequests == 2 })
	ctx := testutil.Context(t, 0)
	done := produce(ctx, p, 300, 30)
	await(t, "the unpublished producer to block", func() bool { return p.Stats().BlockedWriters > 0 })
	prod.Publish(id, p)
	c := newConsumer(t, g)
	if err := c.runUntilFinished(ctx, wake); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkRecords(t, c, 0, 1, 300)
	checkRecords(t, c, 1, 0, 300)
	if st := prod.Stats(); st.PendingRequests != 0 {
		t.Fatalf("producer transport: %+v", st)
	}
	prod.Unpublish(id)
}

// TestRemoteRequestTimesOut: a partition never published fails the
// consumer's channel after the producer's RequestTimeout, naming the
// partition; publishing it later does not revive the channel.
func TestRemoteRequestTimesOut(t *testing.T) {
	prod := newTransport(t, network.TransportConfig{RequestTimeout: 20 * time.Millisecond})
	cons := newTransport(t, network.TransportConfig{})
	wake := make(chan struct{}, 1)
	g := network.NewInputGate("g", 1, network.Config{}, wake)
	id := newPartitionID(t)
	if err := cons.ConnectRemote(g, 0, prod.Addr(), id, 0); err != nil {
		t.Fatal(err)
	}
	err := awaitGateErr(t, g, wake)
	if !errors.Is(err, network.ErrPartitionNotFound) || !strings.Contains(err.Error(), string(id)) || !strings.Contains(err.Error(), prod.Addr()) {
		t.Fatalf("gate error %v, want ErrPartitionNotFound naming %q at %s", err, id, prod.Addr())
	}
	if st := prod.Stats(); st.PendingRequests != 0 || st.ServedChannels != 0 {
		t.Fatalf("producer transport after the timeout: %+v", st)
	}
	p := network.NewResultPartition("p", 1, network.Config{}, nil)
	prod.Publish(id, p)
	if st := prod.Stats(); st.ServedChannels != 0 {
		t.Fatalf("a timed-out request was served: %+v", st)
	}
	if _, ok := g.Poll(); ok {
		t.Fatal("a failed channel delivered something")
	}
	g.Release()
	p.Release()
}

// TestRemoteCancelWhileWaitingForPublish: a gate released while its
// request waits for the partition withdraws the request, so that a later
// Publish does not serve a channel nobody reads.
func TestRemoteCancelWhileWaitingForPublish(t *testing.T) {
	prod := newTransport(t, network.TransportConfig{})
	cons := newTransport(t, network.TransportConfig{})
	g := network.NewInputGate("g", 1, network.Config{}, nil)
	id := newPartitionID(t)
	if err := cons.ConnectRemote(g, 0, prod.Addr(), id, 0); err != nil {
		t.Fatal(err)
	}
	await(t, "the request to wait", func() bool { return prod.Stats().PendingRequests == 1 })
	g.Release()
	await(t, "the request to be withdrawn", func() bool { return prod.Stats().PendingRequests == 0 })
	p := network.NewResultPartition("p", 1, network.Config{}, nil)
	defer p.Release()
	prod.Publish(id, p)
	if st := prod.Stats(); st.ServedChannels != 0 {
		t.Fatalf("a withdrawn request was served: %+v", st)
	}
}

// TestRemoteUnencodableEventFailsTheChannel: an event the wire cannot
// carry (a barrier with options the checkpoint package does not define)
// fails the remote channel with ErrProducerFailed instead of being lost.
func TestRemoteUnencodableEventFailsTheChannel(t *testing.T) {
	prod := newTransport(t, network.TransportConfig{})
	cons := newTransport(t, network.TransportConfig{})
	wake := make(chan struct{}, 1)
	p := network.NewResultPartition("p", 1, network.Config{}, nil)
	g := network.NewInputGate("g", 1, network.Config{}, wake)
	defer p.Release()
	defer g.Release()
	overTCP(prod, cons, "")(t, p, 0, g, 0)
	bad := event.Barrier{Barrier: checkpoint.Barrier{ID: 3, Options: checkpoint.Options{Kind: 99}}}
	if err := p.AddEvent(0, bad); err != nil {
		t.Fatal(err)
	}
	err := awaitGateErr(t, g, wake)
	if !errors.Is(err, network.ErrProducerFailed) || !strings.Contains(err.Error(), "checkpoint kind 99") {
		t.Fatalf("gate error %v, want ErrProducerFailed naming the bad field", err)
	}
	await(t, "the producer to drop the channel", func() bool { return prod.Stats().ServedChannels == 0 })
}

// TestRemoteWiringRefused: ConnectRemote refuses bad wiring, and the
// producer's transport refuses requests it cannot serve; both name the
// cause with ErrWiring.
func TestRemoteWiringRefused(t *testing.T) {
	prod := newTransport(t, network.TransportConfig{})
	cons := newTransport(t, network.TransportConfig{})
	cfg := network.Config{BufferSize: 64}
	p := network.NewResultPartition("p", 2, cfg, nil)
	defer p.Release()
	id := newPartitionID(t)
	prod.Publish(id, p)
	g := network.NewInputGate("g", 1, cfg, nil)
	defer g.Release()
	for name, err := range map[string]error{
		"channel out of range":  cons.ConnectRemote(g, 1, prod.Addr(), id, 0),
		"empty id":              cons.ConnectRemote(g, 0, prod.Addr(), "", 0),
		"id too long":           cons.ConnectRemote(g, 0, prod.Addr(), network.PartitionID(strings.Repeat("x", network.MaxPartitionIDLen+1)), 0),
		"no address":            cons.ConnectRemote(g, 0, "", id, 0),
		"negative subpartition": cons.ConnectRemote(g, 0, prod.Addr(), id, -1),
	} {
		if !errors.Is(err, network.ErrWiring) {
			t.Errorf("%s: %v, want ErrWiring", name, err)
		}
	}
	local := network.NewInputGate("local", 1, cfg, nil)
	network.Connect(p, 1, local, 0)
	defer local.Release()
	if err := cons.ConnectRemote(local, 0, prod.Addr(), id, 1); !errors.Is(err, network.ErrWiring) {
		t.Errorf("connecting a connected channel: %v", err)
	}

	for _, tc := range []struct {
		name string
		cfg  network.Config
		sub  int
		want string
	}{
		{"subpartition out of range", cfg, 2, "has 2 subpartitions"},
		{"buffer sizes differ", network.Config{BufferSize: 128}, 0, "buffer size 64"},
		{"subpartition read in process", cfg, 1, "read by another channel"},
	} {
		wake := make(chan struct{}, 1)
		g := network.NewInputGate(tc.name, 1, tc.cfg, wake)
		if err := cons.ConnectRemote(g, 0, prod.Addr(), id, tc.sub); err != nil {
			t.Fatal(err)
		}
		err := awaitGateErr(t, g, wake)
		if !errors.Is(err, network.ErrWiring) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: gate error %v, want ErrWiring saying %q", tc.name, err, tc.want)
		}
		g.Release()
	}
}

// deploymentAuth makes authenticators of one deployment: mutual TLS with
// certificates of one CA.
func deploymentAuth(t *testing.T, ca *testcerts.CA, cn string) *peerauth.Authenticator {
	t.Helper()
	cert, key := ca.MustIssue(t, cn).Files(t)
	a, err := peerauth.New(peerauth.Config{TLS: true, CertFile: cert, KeyFile: key, TrustFile: ca.File(t)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRemoteAuth: with mutual TLS (or a shared secret) on both ends the
// exchange works; a consumer with no certificate, one of another CA, a
// wrong secret or no authentication at all fails its channel, and the
// real consumer then still reads the subpartition.
func TestRemoteAuth(t *testing.T) {
	ca := testcerts.NewTestCA(t, "deployment CA")
	secret := func(s string) *peerauth.Authenticator {
		a, err := peerauth.New(peerauth.Config{Secret: []byte(s)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, mode := range []struct {
		name       string
		prod, cons *peerauth.Authenticator
	}{
		{"mutual TLS", deploymentAuth(t, ca, "producer"), deploymentAuth(t, ca, "consumer")},
		{"shared secret", secret("the deployment's secret"), secret("the deployment's secret")},
	} {
		t.Run(mode.name, func(t *testing.T) {
			prod := newTransport(t, network.TransportConfig{Auth: mode.prod})
			cons := newTransport(t, network.TransportConfig{Auth: mode.cons})
			cfg := network.Config{BufferSize: 256, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
			p := network.NewResultPartition("p", 2, cfg, nil)
			id := newPartitionID(t)
			prod.Publish(id, p)

			// Strangers first: each asks for subpartition 0 and is refused.
			for _, tc := range []struct {
				name string
				auth *peerauth.Authenticator
			}{
				{"no authentication", nil},
				{"no certificate", secret("a secret of someone else")},
				{"another CA", deploymentAuth(t, testcerts.NewTestCA(t, "another CA"), "consumer")},
			} {
				other := newTransport(t, network.TransportConfig{Auth: tc.auth})
				wake := make(chan struct{}, 1)
				g := network.NewInputGate(tc.name, 1, cfg, wake)
				if err := other.ConnectRemote(g, 0, prod.Addr(), id, 0); err != nil {
					t.Fatal(err)
				}
				if err := awaitGateErr(t, g, wake); !isOneOf(err, network.ErrConnectionLost, network.ErrProtocol) {
					t.Errorf("%s: gate error %v, want the connection refused", tc.name, err)
				}
				g.Release()
			}
			if st := prod.Stats(); st.ServedChannels != 0 {
				t.Fatalf("the producer serves a stranger: %+v", st)
			}

			wake := make(chan struct{}, 1)
			g := network.NewInputGate("g", 2, cfg, wake)
			for sub := range 2 {
				if err := cons.ConnectRemote(g, sub, prod.Addr(), id, sub); err != nil {
					t.Fatal(err)
				}
			}
			ctx := testutil.Context(t, 0)
			done := produce(ctx, p, 500, 100)
			c := newConsumer(t, g)
			if err := c.runUntilFinished(ctx, wake); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			checkRecords(t, c, 0, 0, 500)
			checkRecords(t, c, 1, 1, 500)
		})
	}
}

// TestRemoteCloseIsIdempotentAndEndsEverything: Close twice, with
// channels in every state, leaves no goroutine (goleak checks at the end)
// and fails the channels still reading.
func TestRemoteCloseIsIdempotentAndEndsEverything(t *testing.T) {
	tr, err := network.NewTransport(network.TransportConfig{RequestTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	wake := make(chan struct{}, 1)
	g := network.NewInputGate("g", 2, network.Config{}, wake)
	// A request waiting for a partition never published, on itself, and a
	// dial to an address nobody listens on (or that is slow to refuse).
	if err := tr.ConnectRemote(g, 0, tr.Addr(), "never", 0); err != nil {
		t.Fatal(err)
	}
	await(t, "the request to wait", func() bool { return tr.Stats().PendingRequests == 1 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	if err := tr.ConnectRemote(g, 1, dead, "x", 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	err = awaitGateErr(t, g, wake)
	if !isOneOf(err, network.ErrTransportClosed, network.ErrConnectionLost) {
		t.Fatalf("gate error %v", err)
	}
	if st := tr.Stats(); st.DialledConnections+st.AcceptedConnections+st.PendingRequests != 0 {
		t.Fatalf("after Close: %+v", st)
	}
	g.Release()
}
