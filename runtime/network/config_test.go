package network_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/runtime/network"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	want := network.Config{BufferSize: 32768, ExclusiveBuffersPerChannel: 2, FloatingBuffersPerGate: 8}
	if got := network.DefaultConfig(); got != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", got, want)
	}
	if err := (network.Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	for _, c := range []network.Config{
		{BufferSize: 8},
		{ExclusiveBuffersPerChannel: -1},
		{FloatingBuffersPerGate: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	// Zero fields take the defaults: the output pool of 3 subpartitions.
	p := network.NewResultPartition("p", 3, network.Config{}, nil)
	if s := p.Stats(); s.PoolSize != 3*2+8 || s.PoolFree != s.PoolSize || s.PoolAllocated != 0 {
		t.Fatalf("default pool: %+v", s)
	}
	g := network.NewInputGate("g", 2, network.Config{}, nil)
	if s := g.Stats(); s.FloatingSize != 8 || s.Channels[0].Credit != 2+8 {
		t.Fatalf("default gate: %+v", s)
	}
}

func TestConnectRefusesBadWiring(t *testing.T) {
	expectPanic := func(what, contains string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			r := recover()
			if r == nil {
				t.Fatalf("%s: no panic", what)
			}
			if msg, _ := r.(string); !strings.Contains(msg, contains) {
				t.Fatalf("%s: panic %v does not mention %q", what, r, contains)
			}
		}()
		f()
	}
	p := network.NewResultPartition("p", 1, network.Config{BufferSize: 64}, nil)
	g := network.NewInputGate("g", 2, network.Config{BufferSize: 128}, nil)
	expectPanic("size mismatch", "buffer size", func() { network.Connect(p, 0, g, 0) })
	g2 := network.NewInputGate("g2", 2, network.Config{BufferSize: 64}, nil)
	expectPanic("out of range", "out of range", func() { network.Connect(p, 1, g2, 0) })
	network.Connect(p, 0, g2, 0)
	expectPanic("twice", "already connected", func() { network.Connect(p, 0, g2, 1) })
	expectPanic("bad config", "too small", func() { network.NewInputGate("g3", 1, network.Config{BufferSize: 4}, nil) })
}
