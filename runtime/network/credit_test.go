package network

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// fullRecord returns a record that, framed, fills exactly one buffer of
// size bufSize (a one-byte length prefix), filled with tag.
func fullRecord(bufSize int, tag byte) []byte {
	return bytes.Repeat([]byte{tag}, bufSize-1)
}

// checkAccounting asserts the credit and pool invariants of a gate and the
// partitions that feed it.
func checkAccounting(t *testing.T, g *InputGate, ps ...*ResultPartition) {
	t.Helper()
	gs := g.Stats()
	if gs.FloatingFree < 0 || gs.FloatingFree > gs.FloatingSize {
		t.Fatalf("floating free %d outside [0,%d]", gs.FloatingFree, gs.FloatingSize)
	}
	if gs.FloatingAllocated > gs.FloatingSize {
		t.Fatalf("floating allocated %d > %d", gs.FloatingAllocated, gs.FloatingSize)
	}
	for i, cs := range gs.Channels {
		if cs.Credit < 0 || cs.ExclusiveFree < 0 || cs.Backlog < 0 || cs.Queued < 0 {
			t.Fatalf("channel %d: negative figure %+v", i, cs)
		}
		if cs.ExclusiveFree > g.cfg.ExclusiveBuffersPerChannel || cs.ExclusiveAllocated > g.cfg.ExclusiveBuffersPerChannel {
			t.Fatalf("channel %d: exclusive figures beyond %d: %+v", i, g.cfg.ExclusiveBuffersPerChannel, cs)
		}
		if cs.Credit != cs.ExclusiveFree+cs.FloatingHeld+gs.FloatingFree {
			t.Fatalf("channel %d: credit %d != exclusive free %d + floating held %d + floating free %d", i, cs.Credit, cs.ExclusiveFree, cs.FloatingHeld, gs.FloatingFree)
		}
		if cs.Backlog > 0 && cs.Credit > 0 {
			t.Fatalf("channel %d: backlog %d left waiting with credit %d", i, cs.Backlog, cs.Credit)
		}
	}
	for _, p := range ps {
		s := p.Stats()
		if s.PoolFree < 0 || s.PoolFree > s.PoolSize || s.PoolAllocated > s.PoolSize {
			t.Fatalf("partition %s: pool figures out of range: %+v", p.name, s)
		}
	}
}

func TestCreditExclusiveThenFloatingThenBacklog(t *testing.T) {
	cfg := Config{BufferSize: 16, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 3}
	wakeP := make(chan struct{}, 1)
	wakeG := make(chan struct{}, 1)
	p := NewResultPartition("p", 1, cfg, wakeP)
	g := NewInputGate("g", 1, cfg, wakeG)
	Connect(p, 0, g, 0)
	ctx := testutil.Context(t, 0)

	// Pool: 1*2 + 3 = 5 buffers. Buffers 1-2 go to exclusive credit, 3-5 to
	// floating credit; 6-10 stay in the backlog and hold the whole pool.
	for i := range 10 {
		if err := p.WriteRecord(ctx, 0, fullRecord(16, byte(i))); err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, g, p)
	}
	ps, gs := p.Stats(), g.Stats()
	cs := gs.Channels[0]
	if cs.Credit != 0 || cs.ExclusiveFree != 0 || gs.FloatingFree != 0 {
		t.Fatalf("credit left: %+v floating free %d", cs, gs.FloatingFree)
	}
	// The consumer learnt of the backlog when it began (one announcement
	// per stall); the producer has 5 buffers queued without credit.
	if cs.Queued != 5 || cs.Backlog < 1 || ps.Backlog[0] != 5 || ps.Credit[0] != 0 || ps.QueuedBuffers != 5 || gs.QueuedBuffers != 5 {
		t.Fatalf("queued %d, consumer knows of backlog %d, producer has %d (credit %d; partition %d, gate %d), want 5, >0, 5, 0",
			cs.Queued, cs.Backlog, ps.Backlog[0], ps.Credit[0], ps.QueuedBuffers, gs.QueuedBuffers)
	}
	if !cs.WaitingForFloating {
		t.Fatal("channel with backlog and no credit is not waiting for a floating buffer")
	}
	if p.Available() || ps.PoolFree != 0 || ps.PoolAllocated != 5 {
		t.Fatalf("pool should be dry: available=%v %+v", p.Available(), ps)
	}
	select {
	case <-wakeG:
	default:
		t.Fatal("gate did not wake its task when data arrived")
	}
	select {
	case <-wakeP: // drain a possible earlier signal
	default:
	}

	// Buffer 1 was exclusive: recycling it is one credit, which moves
	// buffer 6 at once and frees one output buffer.
	boe, ok := g.Poll()
	if !ok || boe.Buffer == nil || boe.Buffer.kind != kindExclusive || boe.Buffer.Bytes()[1] != 0 {
		t.Fatalf("first poll: %+v %v", boe, ok)
	}
	boe.Buffer.Recycle()
	checkAccounting(t, g, p)
	cs = g.Stats().Channels[0]
	if cs.Backlog != 4 || cs.Queued != 5 || cs.Credit != 0 || p.Stats().Backlog[0] != 4 {
		t.Fatalf("after exclusive recycle: %+v", cs)
	}
	if !p.Available() {
		t.Fatal("output buffer not returned after transfer")
	}
	select {
	case <-wakeP:
	default:
		t.Fatal("partition did not wake its task when the dry pool got a buffer")
	}

	// Poll the rest in order; each recycle is credit for the next buffer.
	for i := 1; i < 10; i++ {
		boe, ok := g.Poll()
		if !ok || boe.Buffer == nil {
			t.Fatalf("poll %d: nothing", i)
		}
		if got := boe.Buffer.Bytes()[1]; got != byte(i) {
			t.Fatalf("poll %d: buffer of record %d", i, got)
		}
		boe.Buffer.Recycle()
		checkAccounting(t, g, p)
	}
	if _, ok := g.Poll(); ok {
		t.Fatal("poll after draining returned something")
	}
	gs = g.Stats()
	cs = gs.Channels[0]
	if cs.Credit != 5 || cs.ExclusiveFree != 2 || gs.FloatingFree != 3 || cs.WaitingForFloating {
		t.Fatalf("credit not fully back: %+v floating free %d", cs, gs.FloatingFree)
	}
	if gs.BuffersIn != 10 || gs.BytesIn != 160 {
		t.Fatalf("gate counted %d buffers / %d bytes in, want 10 / 160", gs.BuffersIn, gs.BytesIn)
	}
	if ps := p.Stats(); ps.BuffersOut != 10 || ps.BytesOut != 160 || ps.RecordsOut != 10 || ps.PoolFree != 5 {
		t.Fatalf("partition stats %+v", ps)
	}
}

// TestFloatingGoesToWaitingChannelsFairly checks that a recycled floating
// buffer goes to the channel that has waited longest for credit, and that
// channels take turns.
func TestFloatingGoesToWaitingChannelsFairly(t *testing.T) {
	cfg := Config{BufferSize: 16, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
	g := NewInputGate("g", 3, cfg, nil)
	ps := make([]*ResultPartition, 3)
	for i := range ps {
		ps[i] = NewResultPartition("p", 1, cfg, nil)
		Connect(ps[i], 0, g, i)
	}
	ctx := testutil.Context(t, 0)
	write := func(ch int, tags ...byte) {
		for _, tag := range tags {
			if err := ps[ch].WriteRecord(ctx, 0, fullRecord(16, tag)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// ch0: a1 exclusive, a2 the only floating buffer, a3 a4 backlog.
	write(0, 'a', 'A', 'b', 'B')
	// ch1 and ch2: one exclusive each, one buffer of backlog each.
	write(1, 'c', 'C')
	write(2, 'd', 'D')
	checkAccounting(t, g, ps...)
	g.mu.Lock()
	var waiters []int
	for i := 0; i < g.floatWaiters.len(); i++ {
		waiters = append(waiters, *g.floatWaiters.at(i))
	}
	g.mu.Unlock()
	if len(waiters) != 3 || waiters[0] != 0 || waiters[1] != 1 || waiters[2] != 2 {
		t.Fatalf("floating waiters %v, want [0 1 2]", waiters)
	}

	poll := func(wantCh int, wantTag byte, wantKind bufferKind) *Buffer {
		t.Helper()
		boe, ok := g.Poll()
		if !ok || boe.Buffer == nil {
			t.Fatalf("want buffer %q from channel %d, got nothing", wantTag, wantCh)
		}
		if boe.Channel != wantCh || boe.Buffer.Bytes()[1] != wantTag || boe.Buffer.kind != wantKind {
			t.Fatalf("want %q (kind %d) from channel %d, got %q (kind %d) from channel %d",
				wantTag, wantKind, wantCh, boe.Buffer.Bytes()[1], boe.Buffer.kind, boe.Channel)
		}
		return boe.Buffer
	}
	// Round robin over the channels with data; hold the exclusive buffers
	// so only the floating one circulates.
	held := []*Buffer{poll(0, 'a', kindExclusive), poll(1, 'c', kindExclusive), poll(2, 'd', kindExclusive)}
	f := poll(0, 'A', kindFloating)
	f.Recycle() // to ch0, the longest waiter: 'b' moves; ch0 queues again behind ch1, ch2
	checkAccounting(t, g, ps...)
	f = poll(0, 'b', kindFloating)
	f.Recycle() // to ch1
	f = poll(1, 'C', kindFloating)
	f.Recycle() // to ch2
	f = poll(2, 'D', kindFloating)
	f.Recycle() // to ch0 again
	f = poll(0, 'B', kindFloating)
	// ch1 waits still: with its exclusive buffer held it requires one more
	// (the backlog, 0, plus its exclusive buffers, as in Flink).
	f.Recycle()
	checkAccounting(t, g, ps...)
	if gs := g.Stats(); gs.FloatingFree != 0 || gs.Channels[1].FloatingHeld != 1 {
		t.Fatalf("floating buffer not with ch1: %+v", gs)
	}
	// Each exclusive buffer recycled while its channel holds the floating
	// one replaces it; the floating buffer moves on, to the gate at last.
	for _, b := range held {
		b.Recycle()
		checkAccounting(t, g, ps...)
	}
	if gs := g.Stats(); gs.FloatingFree != 1 {
		t.Fatalf("floating buffer not back in the gate: %+v", gs)
	}
	if gs := g.Stats(); gs.QueuedBuffers != 0 {
		t.Fatalf("queued buffers left: %+v", gs)
	}
	for i, cs := range g.Stats().Channels {
		if cs.Credit != 2 || cs.Backlog != 0 {
			t.Fatalf("channel %d at the end: %+v", i, cs)
		}
	}
}

// TestFloatingSkipsChannelThatNoLongerNeedsIt: a waiting channel that got
// the credit it requires from an exclusive buffer meanwhile passes the
// floating buffer on.
func TestFloatingSkipsChannelThatNoLongerNeedsIt(t *testing.T) {
	cfg := Config{BufferSize: 16, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
	g := NewInputGate("g", 2, cfg, nil)
	p0 := NewResultPartition("p0", 1, cfg, nil)
	p1 := NewResultPartition("p1", 1, cfg, nil)
	Connect(p0, 0, g, 0)
	Connect(p1, 0, g, 1)
	ctx := testutil.Context(t, 0)
	for _, tag := range []byte{'a', 'b', 'c'} { // a: exclusive, b: floating, c: backlog
		if err := p0.WriteRecord(ctx, 0, fullRecord(16, tag)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tag := range []byte{'x', 'y'} { // x: exclusive, y: backlog
		if err := p1.WriteRecord(ctx, 0, fullRecord(16, tag)); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := g.Poll()
	a.Buffer.Recycle() // ch0's exclusive credit moves 'c'; ch0 stays queued for floating
	x, _ := g.Poll()   // ch1: 'x', held
	b, _ := g.Poll()   // ch0: 'b' (floating)
	c, _ := g.Poll()   // ch0: 'c' (exclusive)
	if b.Buffer.Bytes()[1] != 'b' || x.Buffer.Bytes()[1] != 'x' || c.Buffer.Bytes()[1] != 'c' {
		t.Fatalf("unexpected order: %q %q %q", b.Buffer.Bytes()[1], x.Buffer.Bytes()[1], c.Buffer.Bytes()[1])
	}
	c.Buffer.Recycle() // ch0: no backlog, its exclusive buffer free: nothing more required
	b.Buffer.Recycle() // so the floating buffer must reach ch1
	if cs := g.Stats().Channels[1]; cs.Backlog != 0 || cs.Queued != 1 {
		t.Fatalf("ch1 did not get the floating buffer: %+v", cs)
	}
	checkAccounting(t, g, p0, p1)
	x.Buffer.Recycle()
	for {
		boe, ok := g.Poll()
		if !ok {
			break
		}
		boe.Buffer.Recycle()
	}
	checkAccounting(t, g, p0, p1)
}

func TestRecycleTwicePanics(t *testing.T) {
	cfg := Config{BufferSize: 16}
	p := NewResultPartition("p", 1, cfg, nil)
	g := NewInputGate("g", 1, cfg, nil)
	Connect(p, 0, g, 0)
	if err := p.WriteRecord(testutil.Context(t, 0), 0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	p.FlushAll()
	boe, ok := g.Poll()
	if !ok {
		t.Fatal("nothing polled")
	}
	boe.Buffer.Recycle()
	defer func() {
		if recover() == nil {
			t.Fatal("second Recycle did not panic")
		}
	}()
	boe.Buffer.Recycle()
}

// TestBufferFlushedWhenFull: a buffer that a record fills exactly goes to
// the consumer at once, without waiting for a flush or the next record.
func TestBufferFlushedWhenFull(t *testing.T) {
	cfg := Config{BufferSize: 16}
	p := NewResultPartition("p", 1, cfg, nil)
	g := NewInputGate("g", 1, cfg, nil)
	Connect(p, 0, g, 0)
	ctx := testutil.Context(t, 0)
	if err := p.WriteRecord(ctx, 0, make([]byte, 5)); err != nil { // 6 bytes framed
		t.Fatal(err)
	}
	if _, ok := g.Poll(); ok {
		t.Fatal("a partial buffer reached the consumer without a flush")
	}
	if err := p.WriteRecord(ctx, 0, make([]byte, 9)); err != nil { // 10 more: exactly full
		t.Fatal(err)
	}
	boe, ok := g.Poll()
	if !ok || boe.Buffer.Len() != 16 {
		t.Fatalf("full buffer not delivered: %+v %v", boe, ok)
	}
	boe.Buffer.Recycle()
}
