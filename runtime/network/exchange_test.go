package network_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/runtime/network"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network/event"
)

// TestFIFOWithSpanningRecordsAndEvents writes many records of random sizes
// (some spanning several buffers, some encoded in the room RecordSpace
// hands out), random flushes and events to two
// subpartitions, and checks each channel delivers exactly that sequence,
// with every event at a record boundary.
func TestFIFOWithSpanningRecordsAndEvents(t *testing.T) {
	// 128-byte buffers make most records span; in 1 KiB ones most rooms
	// hold their record, with one- and two-byte length prefixes.
	for _, size := range []int{128, 1024} {
		t.Run(fmt.Sprintf("buffer=%d", size), func(t *testing.T) { fifoWithSpanningRecordsAndEvents(t, size) })
	}
}

func fifoWithSpanningRecordsAndEvents(t *testing.T, bufferSize int) {
	cfg := network.Config{BufferSize: bufferSize, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 3}
	wake := make(chan struct{}, 1)
	p := network.NewResultPartition("p", 2, cfg, nil)
	g := network.NewInputGate("g", 2, cfg, wake)
	network.Connect(p, 0, g, 1) // crossed on purpose
	network.Connect(p, 1, g, 0)

	rng := rand.New(rand.NewPCG(1, 2))
	want := make([][]elem, 2) // by subpartition
	wctx := testutil.Context(t, 0)
	var ops []func() error
	for i := range 5000 {
		sub := rng.IntN(2)
		switch r := rng.IntN(100); {
		case r < 3:
			ev := marker(i)
			want[sub] = append(want[sub], elem{ev: ev})
			ops = append(ops, func() error { return p.AddEvent(sub, ev) })
		case r < 4:
			ev := marker(i)
			want[0] = append(want[0], elem{ev: ev})
			want[1] = append(want[1], elem{ev: ev})
			ops = append(ops, func() error { return p.BroadcastEvent(ev) })
		case r < 10:
			ops = append(ops, func() error { p.Flush(sub); return nil })
		case r < 12:
			rec := randomRecord(rng, 0, i, 300)
			want[0] = append(want[0], elem{rec: rec})
			want[1] = append(want[1], elem{rec: rec})
			ops = append(ops, func() error { return p.BroadcastRecord(wctx, rec) })
		case r < 50:
			// Encoded into the buffer's room (RecordSpace): with a hint
			// that may be too small, too large, or of another prefix
			// width than the record's.
			rec := randomRecord(rng, sub, i, 300)
			hint := rng.IntN(400)
			want[sub] = append(want[sub], elem{rec: rec})
			ops = append(ops, func() error {
				room, err := p.RecordSpace(wctx, sub, hint)
				if err != nil {
					return err
				}
				if room == nil {
					return p.WriteRecord(wctx, sub, rec)
				}
				return p.WriteRecord(wctx, sub, append(room, rec...))
			})
		case r < 55:
			// A room asked for and not used.
			rec := randomRecord(rng, sub, i, 300)
			hint := rng.IntN(400)
			want[sub] = append(want[sub], elem{rec: rec})
			ops = append(ops, func() error {
				if _, err := p.RecordSpace(wctx, sub, hint); err != nil {
					return err
				}
				return p.WriteRecord(wctx, sub, rec)
			})
		default:
			rec := randomRecord(rng, sub, i, 300)
			want[sub] = append(want[sub], elem{rec: rec})
			ops = append(ops, func() error { return p.WriteRecord(wctx, sub, rec) })
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		for _, op := range ops {
			if err := op(); err != nil {
				errc <- err
				return
			}
		}
		errc <- p.Finish()
	}()
	c := newConsumer(t, g)
	if err := c.runUntilFinished(ctx, wake); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for sub, ch := range []int{1, 0} {
		got := c.got[ch]
		if n := len(got); n == 0 || got[n-1].ev != (event.EndOfPartition{}) {
			t.Fatalf("channel %d does not end with EndOfPartition", ch)
		}
		if err := sameSequence(want[sub], withoutEOP(got)); err != nil {
			t.Fatalf("subpartition %d -> channel %d: %v", sub, ch, err)
		}
	}
	if _, ok := g.Poll(); ok {
		t.Fatal("poll after the end returned something")
	}
	if !g.Finished() {
		t.Fatal("gate not finished")
	}
	s := p.Stats()
	if s.PoolFree != s.PoolSize || s.QueuedBuffers != 0 {
		t.Fatalf("buffers not all back in the output pool: %+v", s)
	}
}

func TestEndOfPartition(t *testing.T) {
	cfg := network.Config{BufferSize: 64}
	g := network.NewInputGate("g", 2, cfg, nil)
	p0 := network.NewResultPartition("p0", 1, cfg, nil)
	p1 := network.NewResultPartition("p1", 1, cfg, nil)
	network.Connect(p0, 0, g, 0)
	network.Connect(p1, 0, g, 1)
	ctx := testutil.Context(t, 0)
	if err := p0.WriteRecord(ctx, 0, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := p0.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := p0.Finish(); err != nil {
		t.Fatalf("second Finish: %v", err)
	}
	if err := p0.WriteRecord(ctx, 0, []byte("x")); !errors.Is(err, network.ErrFinished) {
		t.Fatalf("write after Finish: %v, want ErrFinished", err)
	}
	if err := p0.AddEvent(0, marker(1)); !errors.Is(err, network.ErrFinished) {
		t.Fatalf("event after Finish: %v, want ErrFinished", err)
	}
	c := newConsumer(t, g)
	c.drain()
	if g.Finished() {
		t.Fatal("gate finished with one channel still open")
	}
	if got := c.got[0]; len(got) != 2 || string(got[0].rec) != "last words" || got[1].ev != (event.EndOfPartition{}) {
		t.Fatalf("channel 0 delivered %v", got)
	}
	if st := g.Stats(); !st.Channels[0].Finished || st.Channels[1].Finished {
		t.Fatalf("channel finished flags: %+v", st.Channels)
	}
	if err := p1.Finish(); err != nil {
		t.Fatal(err)
	}
	c.drain()
	if !g.Finished() {
		t.Fatal("gate not finished after both channels ended")
	}
	if len(c.got[1]) != 1 {
		t.Fatalf("channel 1 delivered %v", c.got[1])
	}
}

func TestBlockUnblock(t *testing.T) {
	cfg := network.Config{BufferSize: 32}
	g := network.NewInputGate("g", 2, cfg, nil)
	p0 := network.NewResultPartition("p0", 1, cfg, nil)
	p1 := network.NewResultPartition("p1", 1, cfg, nil)
	network.Connect(p0, 0, g, 0)
	network.Connect(p1, 0, g, 1)
	ctx := testutil.Context(t, 0)
	for i := range 3 {
		for _, p := range []*network.ResultPartition{p0, p1} {
			if err := p.WriteRecord(ctx, 0, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			p.FlushAll()
		}
	}
	g.Block(0)
	c := newConsumer(t, g)
	c.drain()
	if len(c.got[0]) != 0 || len(c.got[1]) != 3 {
		t.Fatalf("with channel 0 blocked: got %d and %d records", len(c.got[0]), len(c.got[1]))
	}
	if st := g.Stats(); !st.Channels[0].Blocked || st.Channels[0].Queued != 3 {
		t.Fatalf("blocked channel stats %+v", st.Channels[0])
	}
	// A priority event on a blocked channel is still delivered, and data
	// arriving on it stays put.
	if _, err := p0.AddPriorityEvent(0, marker(7)); err != nil {
		t.Fatal(err)
	}
	c.drain()
	if len(c.got[0]) != 1 || c.got[0][0].ev != (marker(7)) || !c.got[0][0].prio {
		t.Fatalf("priority event on blocked channel: %v", c.got[0])
	}
	g.Block(1)
	if err := p1.WriteRecord(ctx, 0, []byte{9}); err != nil {
		t.Fatal(err)
	}
	p1.FlushAll()
	c.drain()
	if len(c.got[1]) != 3 {
		t.Fatalf("blocked channel 1 delivered data: %v", c.got[1])
	}
	g.Unblock(0)
	c.drain()
	if len(c.got[0]) != 4 {
		t.Fatalf("after Unblock(0): %v", c.got[0])
	}
	for i, e := range c.got[0][1:] {
		if !bytes.Equal(e.rec, []byte{byte(i)}) {
			t.Fatalf("channel 0 element %d: %v", i+1, e)
		}
	}
	g.UnblockAll()
	c.drain()
	if len(c.got[1]) != 4 || !bytes.Equal(c.got[1][3].rec, []byte{9}) {
		t.Fatalf("after UnblockAll: %v", c.got[1])
	}
}

// TestStressManyProducersOneGate runs several producers into one gate
// concurrently, with small buffers and pools so that credit and
// backpressure are exercised, and checks that every record arrives exactly
// once and in order per channel.
func TestStressManyProducersOneGate(t *testing.T) {
	const producers = 4
	const perProducer = 3000
	cfg := network.Config{BufferSize: 64, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 2}
	wake := make(chan struct{}, 1)
	g := network.NewInputGate("g", producers, cfg, wake)
	ps := make([]*network.ResultPartition, producers)
	want := make([][]elem, producers)
	for i := range ps {
		ps[i] = network.NewResultPartition("p", 1, cfg, make(chan struct{}, 1))
		network.Connect(ps[i], 0, g, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for i, p := range ps {
		rng := rand.New(rand.NewPCG(uint64(i), 99))
		for seq := range perProducer {
			if rng.IntN(50) == 0 {
				want[i] = append(want[i], elem{ev: marker(seq)})
			}
			want[i] = append(want[i], elem{rec: randomRecord(rng, i, seq, 100)})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k, e := range want[i] {
				var err error
				if e.ev != nil {
					err = p.AddEvent(0, e.ev)
				} else {
					err = p.WriteRecord(ctx, 0, e.rec)
				}
				if k%7 == 0 {
					p.FlushAll()
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- p.Finish()
		}()
	}
	c := newConsumer(t, g)
	if err := c.runUntilFinished(ctx, wake); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range ps {
		if err := sameSequence(want[i], withoutEOP(c.got[i])); err != nil {
			t.Fatalf("producer %d: %v", i, err)
		}
		if s := ps[i].Stats(); s.PoolFree != s.PoolSize {
			t.Fatalf("producer %d: output buffers missing: %+v", i, s)
		}
	}
	gs := g.Stats()
	for i, cs := range gs.Channels {
		if cs.Credit != 1+2 || cs.Backlog != 0 || cs.Queued != 0 || !cs.Finished {
			t.Fatalf("channel %d at the end: %+v", i, cs)
		}
	}
}

// TestRecordSpaceEdges writes records into RecordSpace's rooms where the
// hint's length prefix is narrower or wider than the record's, up to the
// last byte of the buffer and one past it, and checks the channel
// delivers exactly those records.
func TestRecordSpaceEdges(t *testing.T) {
	cfg := network.Config{BufferSize: 256, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 3}
	wake := make(chan struct{}, 1)
	p := network.NewResultPartition("p", 1, cfg, nil)
	g := network.NewInputGate("g", 1, cfg, wake)
	network.Connect(p, 0, g, 0)
	rng := rand.New(rand.NewPCG(3, 4))
	type write struct{ hint, size int }
	writes := []write{
		{0, 255},   // one-byte room, two-byte record prefix: one past the end
		{0, 254},   // the same, the buffer exactly full
		{200, 10},  // a two-byte room for a one-byte prefix
		{200, 150}, // a two-byte prefix, as hinted
		{0, 90},    // moved one byte on, fits
		{10, 400},  // outgrows the room
	}
	var want []elem
	ctx := testutil.Context(t, 0)
	errc := make(chan error, 1)
	go func() {
		for i, w := range writes {
			rec := randomRecord(rng, 0, i, 1)[:12]
			for len(rec) < w.size {
				rec = append(rec, byte(rng.Uint32()))
			}
			rec = rec[:w.size]
			want = append(want, elem{rec: rec})
			room, err := p.RecordSpace(ctx, 0, w.hint)
			if err != nil {
				errc <- err
				return
			}
			if room == nil {
				room = []byte{}
			}
			if err := p.WriteRecord(ctx, 0, append(room, rec...)); err != nil {
				errc <- err
				return
			}
		}
		errc <- p.Finish()
	}()
	c := newConsumer(t, g)
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.runUntilFinished(cctx, wake); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := sameSequence(want, withoutEOP(c.got[0])); err != nil {
		t.Fatal(err)
	}
}
