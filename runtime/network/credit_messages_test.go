package network

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network/event"
)

// These tests drive each end of a channel only through the messages of the
// credit protocol (credit.go), as a remote exchange will: a fake consumer
// for a real subpartition, a fake producer for a real input channel, and a
// tap between a real pair that checks the protocol while they run.

// msg is one message a fake end received.
type msg struct {
	kind    string // "buffer", "event", "backlog", "credit", "cancel"
	data    []byte
	ev      event.Event
	prio    bool
	backlog int
	credit  int
}

func (m msg) String() string {
	switch m.kind {
	case "buffer":
		return fmt.Sprintf("buffer %q backlog %d", m.data, m.backlog)
	case "event":
		return fmt.Sprintf("event %v prio %v backlog %d", m.ev, m.prio, m.backlog)
	case "backlog":
		return fmt.Sprintf("backlog %d", m.backlog)
	case "credit":
		return fmt.Sprintf("credit %d", m.credit)
	}
	return m.kind
}

// fakeConsumer is a downstream that records what a subpartition sends and
// fails the test when a data buffer comes without credit.
type fakeConsumer struct {
	t      *testing.T
	credit int // granted by the test, not yet used
	got    []msg
}

func (f *fakeConsumer) deliverBuffer(data []byte, backlog int) {
	if f.credit == 0 {
		f.t.Errorf("producer sent buffer %q without credit", data)
	}
	f.credit--
	f.got = append(f.got, msg{kind: "buffer", data: bytes.Clone(data), backlog: backlog})
}

func (f *fakeConsumer) deliverEvent(ev event.Event, prio bool, backlog int) {
	f.got = append(f.got, msg{kind: "event", ev: ev, prio: prio, backlog: backlog})
}

func (f *fakeConsumer) announceBacklog(backlog int) {
	f.got = append(f.got, msg{kind: "backlog", backlog: backlog})
}

// grant is the consumer's add-credit message.
func (f *fakeConsumer) grant(sp *subpartition, n int) {
	f.credit += n
	sp.addCredit(n)
}

// take returns and forgets what arrived so far.
func (f *fakeConsumer) take() []msg {
	got := f.got
	f.got = nil
	return got
}

func expectMsgs(t *testing.T, step string, got []msg, want ...msg) {
	t.Helper()
	same := len(got) == len(want)
	for i := 0; same && i < len(want); i++ {
		g, w := got[i], want[i]
		same = g.kind == w.kind && bytes.Equal(g.data, w.data) && g.ev == w.ev && g.prio == w.prio && g.backlog == w.backlog && g.credit == w.credit
	}
	if !same {
		t.Fatalf("%s: got %v, want %v", step, got, want)
	}
}

// TestProducerSendsOnlyAgainstCredit drives a real subpartition through a
// fake consumer's messages: no data without credit, one backlog
// announcement per stall, events in order with the data, a priority event
// at once, a cancel drops everything.
func TestProducerSendsOnlyAgainstCredit(t *testing.T) {
	cfg := Config{BufferSize: 16, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 8}
	p := NewResultPartition("p", 1, cfg, nil)
	sp := p.subs[0]
	fc := &fakeConsumer{t: t}
	sp.attach(fc)
	ctx := testutil.Context(t, 0)
	buf := func(tag byte) []byte { return append([]byte{15}, fullRecord(16, tag)[:15]...) }
	write := func(tags ...byte) {
		for _, tag := range tags {
			if err := p.WriteRecord(ctx, 0, fullRecord(16, tag)); err != nil {
				t.Fatal(err)
			}
		}
	}

	write('a', 'b', 'c')
	expectMsgs(t, "three buffers, no credit", fc.take(), msg{kind: "backlog", backlog: 1})
	if s := p.Stats(); s.Backlog[0] != 3 || s.Credit[0] != 0 {
		t.Fatalf("stats %+v", s)
	}

	fc.grant(sp, 2)
	expectMsgs(t, "credit 2", fc.take(),
		msg{kind: "buffer", data: buf('a'), backlog: 2},
		msg{kind: "buffer", data: buf('b'), backlog: 1})

	if err := p.AddEvent(0, mark(1)); err != nil {
		t.Fatal(err)
	}
	expectMsgs(t, "an aligned event behind data without credit waits", fc.take())

	overtaken, err := p.AddPriorityEvent(0, prioMark)
	if err != nil {
		t.Fatal(err)
	}
	expectMsgs(t, "a priority event goes at once", fc.take(), msg{kind: "event", ev: prioMark, prio: true, backlog: 1})
	if len(overtaken) != 1 || !bytes.Equal(overtaken[0], buf('c')) {
		t.Fatalf("priority event overtook %q, want the queued buffer c", overtaken)
	}

	fc.grant(sp, 1)
	expectMsgs(t, "credit 1", fc.take(),
		msg{kind: "buffer", data: buf('c'), backlog: 0},
		msg{kind: "event", ev: mark(1), backlog: 0})

	fc.grant(sp, 1)
	write('d', 'e')
	expectMsgs(t, "one credit left, two buffers", fc.take(),
		msg{kind: "buffer", data: buf('d'), backlog: 0},
		msg{kind: "backlog", backlog: 1})
	if s := p.Stats(); s.Backlog[0] != 1 || s.Credit[0] != 0 || s.PoolFree != s.PoolSize-1 {
		t.Fatalf("stats %+v", s)
	}

	sp.cancel()
	write('f')
	if err := p.AddEvent(0, mark(2)); err != nil {
		t.Fatal(err)
	}
	expectMsgs(t, "after cancel", fc.take())
	if s := p.Stats(); s.Backlog[0] != 0 || s.PoolFree != s.PoolSize {
		t.Fatalf("cancelled subpartition holds buffers: %+v", s)
	}
}

// fakeProducer is an upstream that records a channel's messages.
type fakeProducer struct {
	mu  sync.Mutex
	got []msg
}

func (f *fakeProducer) addCredit(n int) {
	f.mu.Lock()
	f.got = append(f.got, msg{kind: "credit", credit: n})
	f.mu.Unlock()
}

func (f *fakeProducer) cancel() {
	f.mu.Lock()
	f.got = append(f.got, msg{kind: "cancel"})
	f.mu.Unlock()
}

func (f *fakeProducer) take() []msg {
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.got
	f.got = nil
	return got
}

// TestConsumerCreditMessages drives a real input channel through a fake
// producer's messages: exclusive credit first, then floating credit until
// the channel's credit covers the backlog plus its exclusive buffers
// (Flink's required buffers), a wait for the next recycled floating buffer
// when the gate has none, credit back for each recycled buffer, a priority
// event ahead of received data, cancel on release.
func TestConsumerCreditMessages(t *testing.T) {
	cfg := Config{BufferSize: 16, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 2}
	g := NewInputGate("g", 1, cfg, nil)
	c := g.channels[0]
	fp := &fakeProducer{}
	c.attach(fp)
	credit := func(n int) msg { return msg{kind: "credit", credit: n} }
	expectMsgs(t, "connect", fp.take(), credit(2))

	c.deliverBuffer([]byte("A"), 0)
	expectMsgs(t, "one exclusive buffer used, none queued", fp.take(), credit(1))
	c.deliverBuffer([]byte("B"), 3)
	expectMsgs(t, "backlog 3", fp.take(), credit(1))
	c.deliverBuffer([]byte("C"), 2)
	c.deliverBuffer([]byte("D"), 1)
	expectMsgs(t, "floating buffers all given", fp.take())
	cs := g.Stats().Channels[0]
	if !cs.WaitingForFloating || cs.Credit != 0 || cs.Backlog != 1 || cs.Queued != 4 {
		t.Fatalf("channel %+v, want waiting for a floating buffer with no credit", cs)
	}

	c.deliverEvent(prioMark, true, 1)
	boe, ok := g.Poll()
	if !ok || boe.Event != prioMark || !boe.Priority || len(boe.Overtaken) != 4 || string(boe.Overtaken[3]) != "D" {
		t.Fatalf("first poll %+v, want the priority event carrying the four received buffers", boe)
	}

	a, _ := g.Poll()
	if a.Buffer == nil || string(a.Buffer.Bytes()) != "A" || a.Buffer.kind != kindExclusive {
		t.Fatalf("second poll %+v, want exclusive buffer A", a)
	}
	a.Buffer.Recycle()
	expectMsgs(t, "exclusive buffer recycled", fp.take(), credit(1))
	b, _ := g.Poll()
	cc, _ := g.Poll()
	if cc.Buffer.kind != kindFloating {
		t.Fatalf("C came in a %d buffer, want floating", cc.Buffer.kind)
	}
	cc.Buffer.Recycle()
	expectMsgs(t, "the waiting channel gets the floating buffer back", fp.take(), credit(1))
	if gs := g.Stats(); gs.FloatingFree != 0 || gs.Channels[0].FloatingHeld != 1 || gs.Channels[0].WaitingForFloating {
		t.Fatalf("gate %+v", gs)
	}

	c.announceBacklog(3)
	expectMsgs(t, "backlog 3 against credit 2, no floating buffer left", fp.take())
	if cs := g.Stats().Channels[0]; !cs.WaitingForFloating || cs.FloatingHeld != 1 || cs.Credit != 2 {
		t.Fatalf("channel %+v", cs)
	}
	b.Buffer.Recycle() // exclusive: announced, the channel requires 5
	expectMsgs(t, "exclusive recycled with backlog", fp.take(), credit(1))

	// A buffer beyond the announced credit is a protocol violation.
	c.deliverBuffer([]byte("E"), 2) // exclusive
	c.deliverBuffer([]byte("F"), 1) // exclusive
	c.deliverBuffer([]byte("G"), 0) // the held floating buffer
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "without credit") {
				t.Fatalf("a buffer without credit: recovered %v", r)
			}
		}()
		c.deliverBuffer([]byte("H"), 0)
	}()

	g.Release()
	expectMsgs(t, "release", fp.take(), msg{kind: "cancel"})
}

// tap sits between a real subpartition and a real channel, forwards every
// message and checks the protocol on the way: the producer never has more
// buffers in flight than the consumer announced.
type tap struct {
	t        *testing.T
	sp       *subpartition
	c        *inputChannel
	granted  atomic.Int64 // credit announced by the consumer
	sent     atomic.Int64 // data buffers sent by the producer
	floating atomic.Int64 // credit beyond the exclusive buffers
	backlogs atomic.Int64 // backlog announcements
	prio     atomic.Int64 // priority events
	excl     int64
}

func (tp *tap) deliverBuffer(data []byte, backlog int) {
	if n := tp.sent.Add(1); n > tp.granted.Load() {
		tp.t.Errorf("producer sent buffer %d with only %d credit announced", n, tp.granted.Load())
	}
	tp.c.deliverBuffer(data, backlog)
}

func (tp *tap) deliverEvent(ev event.Event, prio bool, backlog int) {
	if prio {
		tp.prio.Add(1)
	}
	tp.c.deliverEvent(ev, prio, backlog)
}

func (tp *tap) announceBacklog(backlog int) {
	if backlog <= 0 {
		tp.t.Errorf("backlog announcement of %d", backlog)
	}
	tp.backlogs.Add(1)
	tp.c.announceBacklog(backlog)
}

func (tp *tap) addCredit(n int) {
	if n <= 0 {
		tp.t.Errorf("credit announcement of %d", n)
	}
	if tp.granted.Add(int64(n)) > tp.excl {
		tp.floating.Store(1)
	}
	tp.sp.addCredit(n)
}

func (tp *tap) cancel() { tp.sp.cancel() }

// TestCreditProtocolUnderLoad runs a producer and a consumer goroutine
// through a tap with small pools, so that credit runs out, backlogs are
// announced and floating buffers are granted, with priority events among
// the data; every record and event arrives once and in order.
func TestCreditProtocolUnderLoad(t *testing.T) {
	cfg := Config{BufferSize: 32, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 3}
	wake := make(chan struct{}, 1)
	p := NewResultPartition("p", 1, cfg, nil)
	g := NewInputGate("g", 1, cfg, wake)
	tp := &tap{t: t, sp: p.subs[0], c: g.channels[0], excl: 1}
	tp.sp.attach(tp)
	tp.c.attach(tp)

	rng := rand.New(rand.NewPCG(3, 4))
	type item struct {
		rec  []byte
		ev   event.Event
		prio bool
	}
	var items []item
	for i := range 4000 {
		switch r := rng.IntN(100); {
		case r < 3:
			items = append(items, item{ev: mark(i)})
		case r < 5:
			items = append(items, item{ev: event.Watermark{Timestamp: int64(i)}, prio: true})
		default:
			rec := make([]byte, 1+rng.IntN(80)) // up to three buffers
			rec[0] = byte(i)
			items = append(items, item{rec: rec})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		for i, it := range items {
			var err error
			switch {
			case it.prio:
				_, err = p.AddPriorityEvent(0, it.ev)
			case it.ev != nil:
				err = p.AddEvent(0, it.ev)
			default:
				err = p.WriteRecord(ctx, 0, it.rec)
			}
			if err != nil {
				errc <- err
				return
			}
			if i%5 == 0 {
				p.Flush(0)
			}
		}
		errc <- p.Finish()
	}()

	r := NewRecordReader()
	var recs [][]byte
	var evs, prios []event.Event
	for !g.Finished() {
		boe, ok := g.Poll()
		if !ok {
			select {
			case <-wake:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			continue
		}
		switch {
		case boe.Priority:
			prios = append(prios, boe.Event)
		case boe.Buffer == nil:
			if r.Buffered() {
				t.Fatalf("event %v in the middle of a record", boe.Event)
			}
			evs = append(evs, boe.Event)
		default:
			r.Feed(boe.Buffer)
			for {
				rec, ok := r.Next()
				if !ok {
					break
				}
				recs = append(recs, bytes.Clone(rec))
			}
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var wantRecs [][]byte
	var wantEvs, wantPrios []event.Event
	for _, it := range items {
		switch {
		case it.prio:
			wantPrios = append(wantPrios, it.ev)
		case it.ev != nil:
			wantEvs = append(wantEvs, it.ev)
		default:
			wantRecs = append(wantRecs, it.rec)
		}
	}
	wantEvs = append(wantEvs, event.EndOfPartition{})
	if len(recs) != len(wantRecs) || fmt.Sprint(evs) != fmt.Sprint(wantEvs) || fmt.Sprint(prios) != fmt.Sprint(wantPrios) {
		t.Fatalf("got %d records, events %v, priority events %v; want %d, %v, %v", len(recs), evs, prios, len(wantRecs), wantEvs, wantPrios)
	}
	for i := range recs {
		if !bytes.Equal(recs[i], wantRecs[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
	if tp.backlogs.Load() == 0 || tp.floating.Load() == 0 || tp.prio.Load() != int64(len(wantPrios)) {
		t.Fatalf("the run did not exercise the protocol: %d backlog announcements, floating credit %v, %d priority events",
			tp.backlogs.Load(), tp.floating.Load() == 1, tp.prio.Load())
	}
	if s := p.Stats(); s.PoolFree != s.PoolSize {
		t.Fatalf("output buffers not back: %+v", s)
	}
	checkAccounting(t, g, p)
}

// mark returns a test event numbered n.
func mark(n int) event.Event { return event.CancelCheckpointMarker{ID: int64(n)} }

// prioMark is a test event sent as a priority event.
var prioMark event.Event = event.Watermark{Timestamp: -1}
