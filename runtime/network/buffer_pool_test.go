package network_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/runtime/network"
)

// The pool's size is the network memory over the segment size, and a
// reservation past what is left fails with the sentinel naming the keys.
func TestBufferPoolArithmeticAndReserve(t *testing.T) {
	for _, c := range []struct {
		bytes      int64
		size, want int
	}{{22 << 20, 0, 22 << 20 / network.DefaultBufferSize}, {4 << 20, 32 << 10, 128}, {1<<20 + 100, 64 << 10, 16}, {0, 0, 0}, {-5, 0, 0}} {
		if got := network.BuffersFor(c.bytes, c.size); got != c.want {
			t.Errorf("BuffersFor(%d, %d) = %d, want %d", c.bytes, c.size, got, c.want)
		}
	}
	cfg := network.DefaultConfig()
	if got, want := cfg.PartitionBuffers(4), 4*network.DefaultExclusiveBuffersPerChannel+network.DefaultFloatingBuffersPerGate; got != want {
		t.Errorf("PartitionBuffers(4) = %d, want %d", got, want)
	}
	if got, want := cfg.GateBuffers(4), 4*network.DefaultExclusiveBuffersPerChannel+network.DefaultFloatingBuffersPerGate; got != want {
		t.Errorf("GateBuffers(4) without a pool = %d, want %d", got, want)
	}
	p := network.NewBufferPool(10, 0)
	cfg.Pool = p
	if got, want := cfg.GateBuffers(4), 4*network.DefaultExclusiveBuffersPerChannel+1; got != want {
		t.Errorf("GateBuffers(4) with a pool = %d, want %d", got, want)
	}
	if err := p.Reserve(6, "a"); err != nil {
		t.Fatal(err)
	}
	err := p.Reserve(5, "b")
	if !errors.Is(err, network.ErrInsufficientNetworkBuffers) || !strings.Contains(err.Error(), "required 5, but only 4 available") ||
		!strings.Contains(err.Error(), "taskmanager.memory.network.fraction") {
		t.Fatalf("over-reservation: %v", err)
	}
	p.Unreserve(6)
	if err := p.Reserve(10, "c"); err != nil {
		t.Fatalf("after the first reservation was given back: %v", err)
	}
	if s := p.Stats(); s.Reserved != 10 || s.Available != 0 || s.Peak != 10 {
		t.Errorf("stats %+v", s)
	}
	var nilPool *network.BufferPool
	if err := nilPool.Reserve(1<<30, "unbounded"); err != nil {
		t.Errorf("a nil pool is unbounded: %v", err)
	}
}

// Two gates share a pool too small for all their floating buffers: each
// still gets its exchange through (its own floating and exclusive
// buffers), what they borrow never takes the pool past its size, and
// every loan is back once the gates are released.
func TestGatesBorrowFloatingBuffersWithinPool(t *testing.T) {
	const bufSize, floating = 64, 6
	pool := network.NewBufferPool(0, bufSize)
	cfg := network.Config{BufferSize: bufSize, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: floating, Pool: pool}
	const gates, channels = 2, 3
	reserve := gates * (cfg.GateBuffers(channels) + cfg.PartitionBuffers(1)*channels)
	pool.SetTotal(reserve + 3) // 3 to lend: less than the 2*5 the gates could borrow
	if err := pool.Reserve(reserve, "test"); err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t, 0)
	type side struct {
		g    *network.InputGate
		wake chan struct{}
	}
	var sides []side
	done := make(chan error, gates*channels)
	const records = 3000
	for range gates {
		wake := make(chan struct{}, 1)
		g := network.NewInputGate("g", channels, cfg, wake)
		sides = append(sides, side{g, wake})
		for c := range channels {
			p := network.NewResultPartition("p", 1, cfg, nil)
			network.Connect(p, 0, g, c)
			go func() {
				rec := make([]byte, 40)
				for i := range records {
					rec[0] = byte(i)
					if err := p.WriteRecord(ctx, 0, rec); err != nil {
						done <- err
						return
					}
				}
				done <- p.Finish()
			}()
		}
	}
	// The consumers drain slowly, alternating, so producers queue backlog
	// and the channels ask for floating buffers.
	cons := []*consumer{newConsumer(t, sides[0].g), newConsumer(t, sides[1].g)}
	for !sides[0].g.Finished() || !sides[1].g.Finished() {
		progressed := false
		for _, c := range cons {
			if c.pollOne() {
				progressed = true
			}
		}
		if s := pool.Stats(); s.Reserved+s.Lent > s.Total || s.Peak > s.Total {
			t.Fatalf("pool over its size: %+v", s)
		}
		if !progressed {
			select {
			case <-sides[0].wake:
			case <-sides[1].wake:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
	for range gates * channels {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for gi, c := range cons {
		for ch := range channels {
			if n := len(withoutEOP(c.got[ch])); n != records {
				t.Errorf("gate %d channel %d: %d records, want %d", gi, ch, n, records)
			}
		}
	}
	s := pool.Stats()
	if s.Lends == 0 || s.Peak != s.Total {
		t.Errorf("the gates never borrowed up to the pool's size: %+v", s)
	}
	for _, sd := range sides {
		sd.g.Release()
	}
	if s := pool.Stats(); s.Lent != 0 {
		t.Errorf("loans left after the gates were released: %+v", s)
	}
}
