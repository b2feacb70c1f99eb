package network_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network"
)

// TestDryPoolBlocksProducerThenResumes: with nobody polling, the producer
// fills the consumer's credit and its own pool, then blocks; polling frees
// buffers and it completes. Memory stays within the pools throughout.
func TestDryPoolBlocksProducerThenResumes(t *testing.T) {
	cfg := network.Config{BufferSize: 64, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 2}
	wakeP := make(chan struct{}, 1)
	wakeG := make(chan struct{}, 1)
	p := network.NewResultPartition("p", 1, cfg, wakeP)
	g := network.NewInputGate("g", 1, cfg, wakeG)
	network.Connect(p, 0, g, 0)

	const records = 2000
	rec := make([]byte, 40)
	done := make(chan error, 1)
	wctx := testutil.Context(t, 0)
	go func() {
		for i := range records {
			rec[0] = byte(i)
			if err := p.WriteRecord(wctx, 0, rec); err != nil {
				done <- err
				return
			}
		}
		done <- p.Finish()
	}()

	await(t, "the producer to block on a dry pool", func() bool { return p.Stats().BlockedWriters == 1 })
	await(t, "the back-pressured time to include the wait in progress", func() bool { return p.Stats().BackPressuredNanos > 0 })
	s := p.Stats()
	if p.Available() || s.PoolFree != 0 || s.QueuedBuffers != s.PoolSize {
		t.Fatalf("blocked producer but pool not dry: available=%v %+v", p.Available(), s)
	}
	gs := g.Stats()
	if gs.QueuedBuffers != 4 || gs.Channels[0].Credit != 0 {
		t.Fatalf("consumer side should hold exactly its 4 buffers: %+v", gs)
	}
	select {
	case err := <-done:
		t.Fatalf("producer finished while it should be blocked: %v", err)
	default:
	}

	// Now consume everything; the producer must run to the end.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newConsumer(t, g)
	if err := c.runUntilFinished(ctx, wakeG); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(withoutEOP(c.got[0])); n != records {
		t.Fatalf("got %d records, want %d", n, records)
	}
	s = p.Stats()
	if s.BackPressuredNanos <= 0 {
		t.Fatal("no back-pressured time recorded although the producer blocked")
	}
	if s.RecordsOut != records || s.PoolAllocated > s.PoolSize {
		t.Fatalf("partition stats %+v", s)
	}
}

// TestMemoryBoundedWhateverIsWritten pushes much more data than the pools
// hold through a slow consumer and samples the allocation figures.
func TestMemoryBoundedWhateverIsWritten(t *testing.T) {
	cfg := network.Config{BufferSize: 256, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 4}
	const subs = 3
	wake := make(chan struct{}, 1)
	p := network.NewResultPartition("p", subs, cfg, nil)
	gates := make([]*network.InputGate, subs)
	for i := range gates {
		gates[i] = network.NewInputGate("g", 1, cfg, wake)
		network.Connect(p, i, gates[i], 0)
	}
	done := make(chan error, 1)
	wctx := testutil.Context(t, 0)
	go func() {
		rec := make([]byte, 1000) // spans buffers
		for i := range 3000 {
			if err := p.WriteRecord(wctx, i%subs, rec); err != nil {
				done <- err
				return
			}
		}
		done <- p.Finish()
	}()
	consumers := make([]*consumer, subs)
	for i := range consumers {
		consumers[i] = newConsumer(t, gates[i])
	}
	check := func() {
		s := p.Stats()
		if s.PoolAllocated > subs*2+4 || s.PoolSize != subs*2+4 {
			t.Fatalf("output pool allocated %d of %d", s.PoolAllocated, s.PoolSize)
		}
		for _, g := range gates {
			gs := g.Stats()
			if gs.FloatingAllocated > 4 || gs.Channels[0].ExclusiveAllocated > 2 || gs.QueuedBuffers > 6 {
				t.Fatalf("gate over its pools: %+v", gs)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		// Slow consumer: one poll per gate per round.
		progressed := false
		for _, c := range consumers {
			progressed = c.pollOne() || progressed
		}
		check()
		finished := true
		for _, g := range gates {
			finished = finished && g.Finished()
		}
		if finished {
			break
		}
		if !progressed {
			select {
			case <-wake:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, c := range consumers {
		if n := len(withoutEOP(c.got[0])); n != 1000 {
			t.Fatalf("consumer %d got %d records", i, n)
		}
	}
}

func TestReleaseUnblocksBlockedWriter(t *testing.T) {
	cfg := network.Config{BufferSize: 32, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
	p := network.NewResultPartition("p", 1, cfg, nil)
	g := network.NewInputGate("g", 1, cfg, nil)
	network.Connect(p, 0, g, 0)
	done := make(chan error, 1)
	wctx := testutil.Context(t, 0)
	go func() {
		for {
			if err := p.WriteRecord(wctx, 0, make([]byte, 100)); err != nil {
				done <- err
				return
			}
		}
	}()
	await(t, "the producer to block", func() bool { return p.Stats().BlockedWriters == 1 })
	p.Release()
	if err := <-done; !errors.Is(err, network.ErrReleased) {
		t.Fatalf("blocked writer returned %v, want ErrReleased", err)
	}
	if s := p.Stats(); s.QueuedBuffers != 0 || s.BlockedWriters != 0 {
		t.Fatalf("after Release: %+v", s)
	}
	if err := p.AddEvent(0, marker(1)); !errors.Is(err, network.ErrReleased) {
		t.Fatalf("AddEvent after Release: %v", err)
	}
	if err := p.Finish(); !errors.Is(err, network.ErrReleased) {
		t.Fatalf("Finish after Release: %v", err)
	}
	p.Release() // twice is fine
	g.Release()
}

func TestContextCancelUnblocksBlockedWriter(t *testing.T) {
	cfg := network.Config{BufferSize: 32, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
	p := network.NewResultPartition("p", 1, cfg, nil)
	g := network.NewInputGate("g", 1, cfg, nil)
	network.Connect(p, 0, g, 0)
	ctx, cancel := context.WithCancel(testutil.Context(t, 0))
	done := make(chan error, 1)
	go func() {
		for {
			if err := p.WriteRecord(ctx, 0, make([]byte, 100)); err != nil {
				done <- err
				return
			}
		}
	}()
	await(t, "the producer to block", func() bool { return p.Stats().BlockedWriters == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked writer returned %v, want context.Canceled", err)
	}
	p.Release()
	g.Release()
}

// TestGateReleaseUnblocksProducer: once the consumer is gone its data is
// dropped, so the producer cannot hang on credit that never comes back.
func TestGateReleaseUnblocksProducer(t *testing.T) {
	cfg := network.Config{BufferSize: 32, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
	p := network.NewResultPartition("p", 1, cfg, nil)
	g := network.NewInputGate("g", 1, cfg, nil)
	network.Connect(p, 0, g, 0)
	done := make(chan error, 1)
	wctx := testutil.Context(t, 0)
	go func() {
		for range 1000 {
			if err := p.WriteRecord(wctx, 0, make([]byte, 100)); err != nil {
				done <- err
				return
			}
		}
		done <- p.Finish()
	}()
	await(t, "the producer to block", func() bool { return p.Stats().BlockedWriters == 1 })
	g.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Poll(); ok {
		t.Fatal("released gate delivered something")
	}
	if s := p.Stats(); s.PoolFree != s.PoolSize {
		t.Fatalf("output buffers not returned: %+v", s)
	}
}

// TestAvailableAndWake: Available turns false when the pool is dry and the
// partition's wake channel fires when a buffer comes back.
func TestAvailableAndWake(t *testing.T) {
	cfg := network.Config{BufferSize: 16, ExclusiveBuffersPerChannel: 1, FloatingBuffersPerGate: 1}
	wakeP := make(chan struct{}, 1)
	p := network.NewResultPartition("p", 1, cfg, wakeP)
	g := network.NewInputGate("g", 1, cfg, nil)
	network.Connect(p, 0, g, 0)
	ctx := testutil.Context(t, 0)
	full := make([]byte, 15)
	for p.Available() {
		if err := p.WriteRecord(ctx, 0, full); err != nil {
			t.Fatal(err)
		}
	}
	if s := p.Stats(); s.QueuedBuffers != 2 {
		t.Fatalf("pool dry with %d queued buffers, want 2", s.QueuedBuffers)
	}
	select {
	case <-wakeP:
	default:
	}
	boe, ok := g.Poll()
	if !ok {
		t.Fatal("nothing to poll")
	}
	boe.Buffer.Recycle()
	if !p.Available() {
		t.Fatal("pool still dry after the consumer freed credit")
	}
	select {
	case <-wakeP:
	default:
		t.Fatal("no wake when the pool got a buffer back")
	}
	p.Release()
	g.Release()
}

func TestWriteRawAndErrors(t *testing.T) {
	cfg := network.Config{BufferSize: 16}
	p := network.NewResultPartition("p", 1, cfg, nil)
	g := network.NewInputGate("g", 1, cfg, nil)
	network.Connect(p, 0, g, 0)
	ctx := testutil.Context(t, 0)
	// A persisted buffer of output channel state: two framed records.
	raw := []byte{2, 'h', 'i', 3, 'y', 'o', 'u'}
	if err := p.WriteRaw(ctx, 0, raw); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteRecord(ctx, 0, nil); err != nil { // an empty record
		t.Fatal(err)
	}
	if err := p.WriteRecord(ctx, 0, []byte("!")); err != nil {
		t.Fatal(err)
	}
	p.FlushAll()
	if err := p.WriteRaw(ctx, 0, make([]byte, 17)); !errors.Is(err, network.ErrRecordTooLarge) {
		t.Fatalf("oversized raw buffer: %v", err)
	}
	if err := p.AddEvent(0, nil); !errors.Is(err, network.ErrNilEvent) {
		t.Fatalf("nil event: %v", err)
	}
	boe, ok := g.Poll()
	if !ok || string(boe.Buffer.Bytes()) != string(raw) {
		t.Fatalf("raw buffer not delivered as one buffer: %+v", boe)
	}
	r := network.NewRecordReader()
	r.Feed(boe.Buffer)
	var got []string
	for {
		rec, ok := r.Next()
		if !ok {
			if boe, ok = g.Poll(); !ok {
				break
			}
			r.Feed(boe.Buffer)
			continue
		}
		got = append(got, string(rec))
	}
	if len(got) != 4 || got[0] != "hi" || got[1] != "you" || got[2] != "" || got[3] != "!" {
		t.Fatalf("records %q", got)
	}
}
