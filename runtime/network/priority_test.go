package network_test

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network"
	"github.com/sluicehq/sluice/runtime/network/event"
)

// framed returns the bytes of one buffer holding a single record of n
// copies of tag (n < 128, so a one-byte length prefix).
func framed(tag byte, n int) []byte {
	return append([]byte{byte(n)}, bytes.Repeat([]byte{tag}, n)...)
}

func equalBuffers(want, got [][]byte) error {
	if len(want) != len(got) {
		return fmt.Errorf("want %d buffers, got %d: %q", len(want), len(got), got)
	}
	for i := range want {
		if !bytes.Equal(want[i], got[i]) {
			return fmt.Errorf("buffer %d: want %q, got %q", i, want[i], got[i])
		}
	}
	return nil
}

// smallExchange returns one partition with one subpartition wired to a
// one-channel gate, with 16-byte buffers: a 15-byte record fills one.
func smallExchange(exclusive, floating int) (*network.ResultPartition, *network.InputGate) {
	cfg := network.Config{BufferSize: 16, ExclusiveBuffersPerChannel: exclusive, FloatingBuffersPerGate: floating}
	p := network.NewResultPartition("p", 1, cfg, nil)
	g := network.NewInputGate("g", 1, cfg, nil)
	network.Connect(p, 0, g, 0)
	return p, g
}

func mustWrite(t *testing.T, p *network.ResultPartition, tag byte, n int) {
	t.Helper()
	if err := p.WriteRecord(testutil.Context(t, 0), 0, bytes.Repeat([]byte{tag}, n)); err != nil {
		t.Fatal(err)
	}
}

// pollBuffer polls and expects a data buffer with exactly want.
func pollBuffer(t *testing.T, g *network.InputGate, want []byte) *network.Buffer {
	t.Helper()
	boe, ok := g.Poll()
	if !ok || boe.Buffer == nil {
		t.Fatalf("want buffer %q, got %+v (ok=%v)", want, boe, ok)
	}
	if !bytes.Equal(boe.Buffer.Bytes(), want) {
		t.Fatalf("want buffer %q, got %q", want, boe.Buffer.Bytes())
	}
	return boe.Buffer
}

func pollEvent(t *testing.T, g *network.InputGate, want event.Event, prio bool) network.BufferOrEvent {
	t.Helper()
	boe, ok := g.Poll()
	if !ok || boe.Buffer != nil || boe.Event != want || boe.Priority != prio {
		t.Fatalf("want event %v (priority %v), got %+v (ok=%v)", want, prio, boe, ok)
	}
	return boe
}

func TestPriorityEventOvertakesOnBothEnds(t *testing.T) {
	p, g := smallExchange(1, 1) // consumer credit 2, output pool 2
	mustWrite(t, p, 'A', 15)    // transferred (exclusive)
	mustWrite(t, p, 'B', 15)    // transferred (floating)
	mustWrite(t, p, 'C', 15)    // backlog
	mustWrite(t, p, 'D', 5)     // partial buffer
	a := pollBuffer(t, g, framed('A', 15))

	overtaken, err := p.AddPriorityEvent(0, marker(1))
	if err != nil {
		t.Fatal(err)
	}
	// Producer side: the backlog and the partial buffer, finished first.
	if err := equalBuffers([][]byte{framed('C', 15), framed('D', 5)}, overtaken); err != nil {
		t.Fatalf("producer overtaken: %v", err)
	}
	// Consumer side: B was received and not yet polled; A was polled.
	boe := pollEvent(t, g, marker(1), true)
	if err := equalBuffers([][]byte{framed('B', 15)}, boe.Overtaken); err != nil {
		t.Fatalf("consumer overtaken: %v", err)
	}
	// Everything overtaken is still delivered, in order.
	b := pollBuffer(t, g, framed('B', 15))
	a.Recycle()
	b.Recycle()
	pollBuffer(t, g, framed('C', 15)).Recycle()
	pollBuffer(t, g, framed('D', 5)).Recycle()
	if _, ok := g.Poll(); ok {
		t.Fatal("unexpected extra element")
	}
	// The overtaken bytes are copies: reusing every buffer does not change
	// them.
	for range 4 {
		mustWrite(t, p, 'Z', 15)
		pollBuffer(t, g, framed('Z', 15)).Recycle()
	}
	if err := equalBuffers([][]byte{framed('C', 15), framed('D', 5)}, overtaken); err != nil {
		t.Fatalf("producer overtaken after buffer reuse: %v", err)
	}
	if err := equalBuffers([][]byte{framed('B', 15)}, boe.Overtaken); err != nil {
		t.Fatalf("consumer overtaken after buffer reuse: %v", err)
	}

	// With nothing queued anywhere, nothing is overtaken.
	overtaken, err = p.AddPriorityEvent(0, marker(2))
	if err != nil || overtaken != nil {
		t.Fatalf("idle priority event: overtaken %q, err %v", overtaken, err)
	}
	if boe := pollEvent(t, g, marker(2), true); boe.Overtaken != nil {
		t.Fatalf("idle priority event overtook %q", boe.Overtaken)
	}
}

// TestPriorityEventBeforeQueuedEvents: a priority event also overtakes
// events still queued, which keep their order after it.
func TestPriorityEventBeforeQueuedEvents(t *testing.T) {
	p, g := smallExchange(1, 1)
	mustWrite(t, p, 'A', 15)
	mustWrite(t, p, 'B', 15)
	mustWrite(t, p, 'C', 15) // backlog
	if err := p.AddEvent(0, marker(1)); err != nil {
		t.Fatal(err)
	}
	overtaken, err := p.AddPriorityEvent(0, marker(9))
	if err != nil {
		t.Fatal(err)
	}
	if err := equalBuffers([][]byte{framed('C', 15)}, overtaken); err != nil {
		t.Fatal(err)
	}
	pollEvent(t, g, marker(9), true)
	pollBuffer(t, g, framed('A', 15)).Recycle()
	pollBuffer(t, g, framed('B', 15)).Recycle()
	pollBuffer(t, g, framed('C', 15)).Recycle()
	pollEvent(t, g, marker(1), false)
}

func TestPromoteEventProducerSide(t *testing.T) {
	p, g := smallExchange(1, 1)
	mustWrite(t, p, 'A', 15) // transferred
	mustWrite(t, p, 'B', 15) // transferred
	mustWrite(t, p, 'C', 15) // backlog
	if err := p.AddEvent(0, marker(1)); err != nil {
		t.Fatal(err)
	}
	if err := p.AddEvent(0, marker(2)); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, p, 'D', 5) // partial, after the events
	isMarker := func(n int) func(event.Event) bool {
		return func(ev event.Event) bool { m, ok := ev.(event.CancelCheckpointMarker); return ok && m.ID == int64(n) }
	}
	if ov, found := p.PromoteEvent(0, isMarker(3)); found || ov != nil {
		t.Fatalf("promoted an event that is not there: %q", ov)
	}
	ov, found := p.PromoteEvent(0, isMarker(2))
	if !found {
		t.Fatal("queued event not found")
	}
	if err := equalBuffers([][]byte{framed('C', 15)}, ov); err != nil {
		t.Fatalf("producer overtaken: %v", err)
	}
	if _, found := p.PromoteEvent(0, isMarker(2)); found {
		t.Fatal("an event already transferred was promoted again")
	}
	boe := pollEvent(t, g, marker(2), true)
	if err := equalBuffers([][]byte{framed('A', 15), framed('B', 15)}, boe.Overtaken); err != nil {
		t.Fatalf("consumer overtaken: %v", err)
	}
	pollBuffer(t, g, framed('A', 15)).Recycle()
	pollBuffer(t, g, framed('B', 15)).Recycle()
	pollBuffer(t, g, framed('C', 15)).Recycle()
	pollEvent(t, g, marker(1), false)
	p.FlushAll()
	pollBuffer(t, g, framed('D', 5)).Recycle()
	if _, ok := g.Poll(); ok {
		t.Fatal("unexpected extra element")
	}
}

func TestPromoteEventConsumerSide(t *testing.T) {
	p, g := smallExchange(2, 2) // enough credit: everything is received
	mustWrite(t, p, 'A', 15)
	if err := p.AddEvent(0, marker(1)); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, p, 'B', 15)
	if err := p.AddEvent(0, marker(2)); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, p, 'C', 15)
	if s := g.Stats(); s.QueuedBuffers != 3 {
		t.Fatalf("want 3 received buffers, got %+v", s)
	}
	isMarker := func(n int) func(event.Event) bool {
		return func(ev event.Event) bool { m, ok := ev.(event.CancelCheckpointMarker); return ok && m.ID == int64(n) }
	}
	if _, found := g.PromoteEvent(0, isMarker(7)); found {
		t.Fatal("promoted an event that is not there")
	}
	ov, found := g.PromoteEvent(0, isMarker(2))
	if !found {
		t.Fatal("received event not found")
	}
	if err := equalBuffers([][]byte{framed('A', 15), framed('B', 15)}, ov); err != nil {
		t.Fatal(err)
	}
	if boe := pollEvent(t, g, marker(2), true); boe.Overtaken != nil {
		t.Fatalf("promoted event carries overtaken buffers already returned: %q", boe.Overtaken)
	}
	if _, found := g.PromoteEvent(0, isMarker(2)); found {
		t.Fatal("a polled event was promoted again")
	}
	pollBuffer(t, g, framed('A', 15)).Recycle()
	pollEvent(t, g, marker(1), false)
	pollBuffer(t, g, framed('B', 15)).Recycle()
	pollBuffer(t, g, framed('C', 15)).Recycle()
	if _, ok := g.Poll(); ok {
		t.Fatal("unexpected extra element")
	}
}

// TestPriorityEventsAreFIFOAmongThemselves: two priority events on one
// channel come out in the order they were added, before the data.
func TestPriorityEventsAreFIFOAmongThemselves(t *testing.T) {
	p, g := smallExchange(2, 2)
	mustWrite(t, p, 'A', 15)
	for i := 1; i <= 2; i++ {
		if _, err := p.AddPriorityEvent(0, marker(i)); err != nil {
			t.Fatal(err)
		}
	}
	pollEvent(t, g, marker(1), true)
	pollEvent(t, g, marker(2), true)
	pollBuffer(t, g, framed('A', 15)).Recycle()
}

// TestOnEventSent: the hook runs when a queued event leaves the
// subpartition, not while it waits behind data without credit, and not
// for priority events; HasQueuedEvent agrees with it.
func TestOnEventSent(t *testing.T) {
	p, g := smallExchange(1, 1)
	var sent atomic.Int32
	p.OnEventSent(func() { sent.Add(1) })
	isMarker := func(ev event.Event) bool { _, ok := ev.(event.CancelCheckpointMarker); return ok }
	mustWrite(t, p, 'A', 15) // transferred
	mustWrite(t, p, 'B', 15) // transferred
	mustWrite(t, p, 'C', 15) // backlog: no credit left
	if err := p.AddEvent(0, marker(1)); err != nil {
		t.Fatal(err)
	}
	if n := sent.Load(); n != 0 || !p.HasQueuedEvent(0, isMarker) {
		t.Fatalf("event behind data without credit: hook ran %d times, queued=%v", n, p.HasQueuedEvent(0, isMarker))
	}
	if _, err := p.AddPriorityEvent(0, prioEvent); err != nil {
		t.Fatal(err)
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("a priority event ran the hook %d times", n)
	}
	pollEvent(t, g, prioEvent, true)
	pollBuffer(t, g, framed('A', 15)).Recycle() // credit: C and the event go
	if n := sent.Load(); n != 1 || p.HasQueuedEvent(0, isMarker) {
		t.Fatalf("after the event left: hook ran %d times, queued=%v", n, p.HasQueuedEvent(0, isMarker))
	}
	p.OnEventSent(nil)
	if err := p.AddEvent(0, marker(2)); err != nil {
		t.Fatal(err)
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("removed hook ran: %d", n)
	}
}

// TestPriorityEventsBeforeWiringKeepTheirOrder: priority events added
// while the subpartition has no channel yet (a remote consumer's request
// has not arrived) stay ahead of the data, in the order they were added.
func TestPriorityEventsBeforeWiringKeepTheirOrder(t *testing.T) {
	cfg := network.Config{BufferSize: 16, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
	p := network.NewResultPartition("p", 1, cfg, nil)
	g := network.NewInputGate("g", 1, cfg, nil)
	mustWrite(t, p, 'A', 15)
	for i := range 3 {
		overtaken, err := p.AddPriorityEvent(0, marker(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := equalBuffers([][]byte{framed('A', 15)}, overtaken); err != nil {
			t.Fatalf("priority event %d: %v", i, err)
		}
	}
	network.Connect(p, 0, g, 0)
	for i := range 3 {
		pollEvent(t, g, marker(i), true)
	}
	pollBuffer(t, g, framed('A', 15)).Recycle()
}
